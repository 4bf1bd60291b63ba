"""``lossless top``: a running proxy's conversations as they go — context, stages, recalls, savings.

    lossless top                                      # the proxy on 127.0.0.1:8787, until Ctrl-C
    lossless top --url http://127.0.0.1:9001 --once   # one snapshot, as plain text

What ``/context`` shows inside Claude Code, for every conversation behind the proxy: how
full its window is, what the client sent against what was forwarded, which stages fired,
how often the model recalled what was moved out, and what that saved.  It reads the
proxy's ``GET /stats`` every ``--interval`` seconds; on a terminal the view is redrawn in
place (rich's ``Live``, Ctrl-C leaves), and the calls, stages and recalls each refresh
brought are listed under it.  Piped, or with ``--once``, it prints one snapshot as plain
text and exits.

The proxy answers ``/stats`` for one tenant: ``top`` sees the conversations made with the
API key it sends (``--api-key``, else ``$ANTHROPIC_API_KEY``, else ``$OPENAI_API_KEY``) —
the key the agent uses.  A proxy started with ``--auth-token`` wants the token from ``top``
as from any client (``--auth-token`` or ``$LOSSLESS_PROXY_TOKEN``).  Neither is sent
anywhere but ``--url``: no HTTP proxy from the environment, no redirect followed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, InputError, LosslessError
from ._common import counted

DEFAULT_URL = "http://127.0.0.1:8787"
TOKEN_ENV = "LOSSLESS_PROXY_TOKEN"
"""As ``lossless proxy``'s: one variable holds the token for the proxy and for ``top``."""
KEY_ENVS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
USED, FREE = "█", "·"
"""The gauge's glyphs, as ``inspect``'s bar (free room: ·) and ``replay``'s chart (tokens: █)."""
GAUGE = 12
EVENTS = 8
HEADERS = ("conversation", "api", "calls", "context", "of window", "client sent", "stages fired", "recalls", "saved")


def register(sub: Any) -> None:
    s = sub.add_parser("top", help="a live view of a running proxy: each conversation's context, stages, recalls "
                                   "and savings",
                       description="Show what a running lossless proxy does, conversation by conversation, "
                                   "refreshed as requests go through (GET /stats).")
    s.add_argument("--url", default=DEFAULT_URL, help=f"the proxy's address (default {DEFAULT_URL}; under "
                                                      "`lossless wrap`, give it --port so top knows where)")
    s.add_argument("--auth-token", default=os.environ.get(TOKEN_ENV) or None, metavar="TOKEN",
                   help="the token of a proxy started with --auth-token (sent in x-lossless-token); "
                        f"default ${TOKEN_ENV}")
    s.add_argument("--api-key", metavar="KEY", help="show the conversations made with this API key (the proxy keeps "
                                                    "each key's apart); default $ANTHROPIC_API_KEY, else "
                                                    "$OPENAI_API_KEY")
    s.add_argument("--interval", type=_seconds, default=1.0, metavar="SECONDS",
                   help="seconds between refreshes (default 1)")
    s.add_argument("--once", action="store_true", help="print one snapshot as plain text and exit (what a pipe "
                                                       "gets anyway)")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    key = args.api_key or next((os.environ[k] for k in KEY_ENVS if os.environ.get(k)), None)
    url = args.url.rstrip("/")
    snapshot = fetch(url, token=args.auth_token, key=key)
    if args.once or not sys.stdout.isatty():
        print(plain(url, snapshot))
        return 0
    return live(url, snapshot, token=args.auth_token, key=key, interval=args.interval)


def fetch(url: str, *, token: str | None, key: str | None, timeout: float = 5.0) -> dict[str, Any]:
    """The proxy's ``/stats`` for ``key``'s tenant; a one-line ``LosslessError`` otherwise."""
    from urllib.error import HTTPError, URLError
    from urllib.request import HTTPRedirectHandler, ProxyHandler, Request, build_opener

    class NoRedirect(HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None  # the token and the key go to --url and nowhere else

    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError as exc:
        raise ConfigError(f"--url {url!r} is not a URL ({exc}): pass the proxy's, e.g. http://127.0.0.1:8080") \
            from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--url {url!r} is not an http:// or https:// URL: pass the proxy's, "
                          "e.g. http://127.0.0.1:8080")
    headers = {"accept": "application/json"}
    if token:
        headers["x-lossless-token"] = token
    if key:
        headers["x-api-key"] = key
    opener = build_opener(ProxyHandler({}), NoRedirect())
    try:
        with opener.open(Request(f"{url}/stats", headers=headers), timeout=timeout) as answer:
            data = json.loads(answer.read())
    except HTTPError as exc:
        if exc.code == 401:
            raise ConfigError(f"the proxy at {url} wants its token: pass --auth-token TOKEN or set {TOKEN_ENV}") \
                from None
        raise InputError(f"{url}/stats answered {exc.code}: is it a lossless proxy?") from None
    except (URLError, OSError) as exc:
        why = getattr(exc, "reason", None) or exc
        raise InputError(f"no proxy at {url} ({why}): start one with `lossless proxy`, or pass --url") from None
    except ValueError:
        raise InputError(f"{url}/stats did not answer JSON: is it a lossless proxy?") from None
    if not isinstance(data, dict) or not isinstance(data.get("conversations"), list):
        raise InputError(f"{url}/stats did not answer a lossless proxy's figures")
    try:  # drawn once here: figures of another shape are this line, not a traceback mid-screen
        plain(url, data)
        Watch().update(data, 0.0)
    except (KeyError, TypeError, AttributeError, ValueError, ZeroDivisionError):
        raise InputError(f"{url}/stats did not answer a lossless proxy's figures (a proxy of another version?)") \
            from None
    return data


# -- what changed between refreshes ---------------------------------------------
@dataclass(slots=True)
class Seen:
    calls: int
    stages: dict[str, int]
    recalls: int
    changed: float | None
    """When its calls last grew (``time.monotonic``); None: not since ``top`` started."""


@dataclass(slots=True)
class Watch:
    """What ``top`` has seen so far: when each conversation last moved, and the latest events."""

    seen: dict[str, Seen] = field(default_factory=dict)
    events: deque[str] = field(default_factory=lambda: deque(maxlen=EVENTS))

    def update(self, snapshot: dict[str, Any], now: float, *, first: bool = False) -> None:
        for c in snapshot["conversations"]:
            before = self.seen.get(c["id"])
            if before is not None and before.calls == c["calls"]:
                continue
            self.seen[c["id"]] = Seen(calls=c["calls"], stages=dict(c["stages"]), recalls=c["recall_round_trips"],
                                      changed=None if first else now)
            if first:
                continue
            fired = {s: n - (before.stages.get(s, 0) if before else 0) for s, n in c["stages"].items()}
            what = [f"{s} ×{n}" for s, n in sorted(fired.items()) if n > 0]
            recalls = c["recall_round_trips"] - (before.recalls if before else 0)
            if recalls:
                what.append(counted(recalls, "recall"))
            stamp = time.strftime("%H:%M:%S")
            start = "new conversation, " if before is None else ""
            self.events.appendleft(f"{stamp}  {c['id']}  {start}call {c['calls']}: {', '.join(what) or 'no stage'}")

    def order(self, conversations: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The most recently moved first; the proxy lists the most recently used last."""
        def moved(c: dict[str, Any]) -> float:
            seen = self.seen.get(c["id"])
            return -seen.changed if seen is not None and seen.changed is not None else 0.0

        return sorted(reversed(conversations), key=moved)


# -- the view ----------------------------------------------------------------------
def cells(c: dict[str, Any]) -> list[str]:
    """One conversation's row, as text (``HEADERS``)."""
    tokens, window = c["tokens"], c.get("window")
    after = tokens["after"]
    share = f"{after / window:.0%}" if window else "?"
    stages = ", ".join(f"{s} ×{n}" for s, n in c["stages"].items()) or "–"
    cost = c["cost"]
    saved = f"{cost['saved'] / cost['unmanaged']:.0%}" if cost["unmanaged"] else "–"
    return [c["id"], c.get("dialect", "?"), str(c["calls"]), f"{gauge(after, window)} {after:,}", share,
            f"{tokens['before']:,}", stages, str(c["recall_round_trips"]), saved]


def gauge(tokens: int, window: int | None) -> str:
    filled = min(GAUGE, round(GAUGE * tokens / window)) if window else 0
    return USED * filled + FREE * (GAUGE - filled)


def headline(url: str, snapshot: dict[str, Any]) -> str:
    t = snapshot.get("totals", {})
    cost = t.get("cost", {})
    saved = f"; input cost {cost['saved'] / cost['unmanaged']:.0%} lower" if cost.get("unmanaged") else ""
    through = t.get("unmanaged", 0)
    passed = f" ({through:,} passed through unmanaged)" if through else ""
    return (f"lossless top — {url}: {counted(len(snapshot['conversations']), 'conversation')}, "
            f"{counted(t.get('requests', 0), 'request')}{passed}{saved}")


LEGEND = (f"context: the last request forwarded, {USED} used, {FREE} free of its window · client sent: that request "
          "as the client sent it (tokens) · saved: input cost with prompt caching, against the requests unmanaged")


def plain(url: str, snapshot: dict[str, Any]) -> str:
    rows = [cells(c) for c in reversed(snapshot["conversations"])]
    lines = [headline(url, snapshot)]
    if not rows:
        lines.append("no conversation yet (for this API key: the proxy keeps each key's apart)")
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in (HEADERS, *rows)) for i in range(len(HEADERS))]
    for r in (HEADERS, *rows):
        lines.append("  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip())
    lines.append(LEGEND)
    return "\n".join(lines)


def live(url: str, snapshot: dict[str, Any], *, token: str | None, key: str | None, interval: float) -> int:
    try:
        from rich.console import Console
        from rich.live import Live
    except ImportError:
        raise ConfigError("lossless top needs rich on a terminal: pip install 'lossless[cli]' (or use --once)") \
            from None
    watch = Watch()
    watch.update(snapshot, time.monotonic(), first=True)
    problem = ""
    try:
        with Live(view(url, snapshot, watch, problem), console=Console(highlight=False), auto_refresh=False) as screen:
            while True:
                time.sleep(interval)
                try:
                    snapshot = fetch(url, token=token, key=key)
                    problem = ""
                except LosslessError as exc:  # the proxy stopped (an agent under wrap exited): keep the last figures
                    problem = str(exc)
                else:
                    watch.update(snapshot, time.monotonic())
                screen.update(view(url, snapshot, watch, problem), refresh=True)
    except KeyboardInterrupt:
        return 0


def view(url: str, snapshot: dict[str, Any], watch: Watch, problem: str) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    now = time.monotonic()
    table = Table(*HEADERS, "last call", box=None, header_style="bold", pad_edge=False)
    for c in watch.order(snapshot["conversations"]):
        row = cells(c)
        window, threshold = c.get("window"), c.get("threshold")
        colour = ("red" if threshold and c["tokens"]["after"] >= threshold else
                  "yellow" if window and c["tokens"]["after"] >= 0.6 * window else "green")
        seen = watch.seen.get(c["id"])
        age = now - seen.changed if seen is not None and seen.changed is not None else None
        style = "bold" if age is not None and age < 2 else ""
        table.add_row(*row[:3], Text(row[3], style=colour), *row[4:], _ago(age), style=style)
    parts: list[Any] = [Text(headline(url, snapshot), style="bold")]
    if problem:
        parts.append(Text(f"{problem} — showing the last figures", style="red"))
    parts.append(table if snapshot["conversations"] else Text("no conversation yet (for this API key: the proxy "
                                                              "keeps each key's apart)", style="dim"))
    parts.append(Text(LEGEND, style="dim"))
    parts.extend(Text(e, style="cyan") for e in watch.events)
    parts.append(Text("Ctrl-C to leave", style="dim"))
    return Group(*parts)


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.0f} s ago"
    return f"{seconds / 60:.0f} min ago"


def _seconds(value: str) -> float:
    try:
        n = float(value)
    except ValueError:
        n = -1.0
    if not 0.05 <= n <= 3600:
        raise argparse.ArgumentTypeError(f"expected seconds between 0.05 and 3600, not {value!r}")
    return n
