"""Compare context policies side by side on every shared session, in one run.

    python bench/policies.py [--data DIR] [--windows 32000,64000,128000,200000] [--json]

Policies, each replayed call by call (``lossless.replay``) with the same cost model
(input with prompt caching: reads 0.1×, writes 1.25×; a summary call's input is
priced the same way and its output at 5×):

- ``none``: no management (the unmanaged history);
- ``teaching``: the teaching pipeline's behaviour — persist the last message's
  results over 200,000 chars, keep the first 3 and last 47 messages once past 50
  (without regard to rounds), replace every tool result but the 3 most recent
  every turn, and one LLM summary of everything when above the threshold;
- ``masking``: observation masking — every tool result older than the 10 most
  recent replaced by a placeholder, every turn, nothing else;
- ``lossless-fallback``: lossless's default pipeline, deterministic summary;
- ``lossless-llm``: lossless's default pipeline with the LLM stages (collapse,
  auto-compact) served by the package's fake summarizer (``FakeProvider``).

Then ``ContextManager.call()`` itself, on every session and ``--call-windows``: each recorded
call sent through the real Anthropic SDK to the package's fake server, which prices the prompt
cache from the request's own ``cache_control`` marks (it reads the longest prefix it has seen
and writes up to the last mark, in its tokens: JSON characters / 4).  ``call`` is the library
as it is (it places the marks, ``lossless.caching``); ``call-unmarked`` sends the same requests
without them (``call()`` before it placed any).  Each runs on a fresh server, so neither reads
what the other wrote.

Reported per policy and window: peak tokens, calls over the window, invalid
requests, cost, cache-read ratio, summary calls — separately for the sessions whose
unmanaged history fits the window on every call (where "none" could have run and
the cost ratio means something) and for those where it does not (there "none"
would have been rejected for size, so its cost and every ratio to it are
fictional).  A ratio is printed in parentheses whenever one of the two runs it
compares could not happen as priced: over the window, or (the teaching policy)
invalid requests a provider rejects with a 400.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from lossless.config import ContextConfig  # noqa: E402
from lossless.dialects.detect import read_any  # noqa: E402
from lossless.manager import ContextManager  # noqa: E402
from lossless.messages import Message, Text, ToolResult  # noqa: E402
from lossless.providers.anthropic import AnthropicProvider  # noqa: E402
from lossless.providers.base import Request, Response  # noqa: E402
from lossless.replay import CACHE_READ, CACHE_WRITE, replay  # noqa: E402
from lossless.stages.base import StageResult  # noqa: E402
from lossless.tokens import default_counter  # noqa: E402

OUTPUT_PRICE = 5.0
PLACEHOLDER = "[Earlier tool result compacted. Re-run if needed.]"


@dataclass
class View:
    neutral: list[Message]
    events: list[StageResult]
    state: Any


@dataclass
class _State:
    tokens: int


@dataclass
class BaselinePolicy:
    """A policy that is not lossless's, shaped like a ContextManager for replay()."""

    kind: str
    window: int
    counter: Any = field(default_factory=default_counter)
    llm_calls: int = 0
    llm_cost: float = 0.0

    def prepare(self, history: list[Message], system: Any = None, now: Any = None) -> View:
        count = self.counter.count_message
        events: list[StageResult] = []
        msgs = list(history)
        tokens = self.counter.count_system(system) + sum(count(m) for m in msgs)
        if self.kind == "masking":
            msgs = _mask_results(msgs, keep=10)
        elif self.kind == "teaching":
            if len(msgs) > 50:
                msgs = msgs[:3] + [Message(role="user", content=(Text(text=f"[snipped {len(msgs) - 50} messages]"),))] + msgs[-47:]
                events.append(_fired("snip", tokens))
            msgs = _mask_results(msgs, keep=3)
            budget = ContextConfig(window=self.window).budget
            total = self.counter.count_system(system) + sum(count(m) for m in msgs)
            if total > budget.threshold:
                self.llm_calls += 1
                self.llm_cost += total * 0.1 + 2_000 * OUTPUT_PRICE
                msgs = [Message(role="user", content=(Text(text="[Compacted]\n\n" + "summary " * 1_500),))]
                events.append(_fired("summary", total))
        after = self.counter.count_system(system) + sum(count(m) for m in msgs)
        return View(neutral=msgs, events=events, state=_State(after))

    def observe(self, usage: Any) -> None:
        pass

    def close(self) -> None:
        pass


def _fired(stage: str, tokens: int) -> StageResult:
    return StageResult(stage=stage, fired=True, tokens_before=tokens, tokens_after=tokens)


def _mask_results(msgs: list[Message], keep: int) -> list[Message]:
    """Every tool result but the ``keep`` most recent replaced by a short placeholder
    (the same placeholder object each time, so a masked message is stable)."""
    seen = 0
    out = list(msgs)
    for i in range(len(out) - 1, -1, -1):
        m = out[i]
        results = m.tool_results
        if not results:
            continue
        blocks = []
        changed = False
        for b in m.content:
            if isinstance(b, ToolResult):
                seen += 1
                if seen > keep and b.content != PLACEHOLDER:
                    b = ToolResult(tool_use_id=b.tool_use_id, content=PLACEHOLDER, is_error=b.is_error)
                    changed = True
            blocks.append(b)
        if changed:
            cache = m._memo.setdefault("masked", {})
            key = keep
            if key not in cache:
                cache[key] = m.with_content(blocks)
            out[i] = cache[key]
    return out


def run_policy(name: str, session: Any, window: int, store: str) -> dict[str, Any]:
    if name == "none":
        r = replay(session, window)
        return {"peak": r.peak_unmanaged_tokens, "over": r.unmanaged_over_window_calls, "invalid": 0,
                "cost": r.cost["unmanaged"], "reads": r.cache_tokens["unmanaged_read"],
                "writes": r.cache_tokens["unmanaged_write"], "summary_calls": 0, "calls": r.calls}
    if name in ("teaching", "masking"):
        r = replay(session, window, manager=BaselinePolicy(name, window))  # type: ignore[arg-type]
    elif name == "lossless-fallback":
        r = replay(session, window, store=store)
    elif name == "lossless-llm":
        from lossless.testing import FakeProvider

        cm = ContextManager(config=ContextConfig(window=window), store=store, transcript=False,
                            provider=FakeProvider(), session_id="bench")
        r = replay(session, window, manager=cm)
    else:
        raise ValueError(name)
    return {"peak": r.peak_tokens, "over": r.over_window_calls, "invalid": r.invalid_requests,
            "cost": r.cost["managed"], "reads": r.cache_tokens["read"],
            "writes": r.cache_tokens["write"],
            "summary_calls": r.summary_calls, "calls": r.calls}


POLICIES = ("none", "teaching", "masking", "lossless-fallback", "lossless-llm")


class Unmarked:
    """A provider that sends the agent's requests without their prompt-cache marks: what
    ``call()`` sent before it placed them.  Lossless's own calls (summaries) go as they are."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.retry = getattr(provider, "retry", None)

    def complete(self, request: Request) -> Response:
        if request.purpose == "chat":
            system = request.system if request.system is None or isinstance(request.system, str) else \
                tuple({k: v for k, v in b.items() if k != "cache_control"} for b in request.system)
            request = replace(request, system=system,
                              tools=tuple({k: v for k, v in t.items() if k != "cache_control"} for t in request.tools),
                              messages=tuple(m.with_content([replace(b, cache_control=None)
                                                             if getattr(b, "cache_control", None) else b
                                                             for b in m.content]) for m in request.messages))
        return self.provider.complete(request)


def run_call(sessions: list[Any], window: int, marked: bool) -> dict[str, Any]:
    """Every session's recorded calls sent through ``ContextManager.call()`` to a fresh fake
    server; the agent's requests priced from the usage the server reported."""
    from lossless.testing import FakeServer

    tot = {"requests": 0, "input": 0, "read": 0, "write": 0, "summary_calls": 0}
    with FakeServer() as srv:
        for session in sessions:
            provider: Any = AnthropicProvider("claude-x", api_key="k", base_url=srv.base_url, max_retries=0)
            with tempfile.TemporaryDirectory() as store:
                cm = ContextManager(config=ContextConfig(window=window), store=store, transcript=False,
                                    provider=provider if marked else Unmarked(provider), session_notes=False)
                messages = [m for m in session.messages if not m.meta.get("is_compact_summary")]
                keep = [i for i, m in enumerate(session.messages) if not m.meta.get("is_compact_summary")]
                position = {i: k for k, i in enumerate(keep)}
                stops = sorted({position[c.index] for c in session.calls if position.get(c.index, 0) > 0}
                               or {i for i, m in enumerate(messages) if m.role == "assistant" and i > 0})
                history: list[Message] = []
                taken = 0
                for stop in stops:
                    history = [*history, *messages[taken:stop]]
                    taken = stop
                    response, view = cm.call(history, system=session.system, max_tokens=256)
                    u = response.usage
                    tot["requests"] += 1
                    tot["input"] += u.input_tokens
                    tot["read"] += u.cache_read_tokens
                    tot["write"] += u.cache_write_tokens
                    history = list(view.neutral)
                tot["summary_calls"] += cm.llm_calls
                cm.close()
            provider.close()
    tot["cost"] = round(tot["input"] + tot["read"] * CACHE_READ + tot["write"] * CACHE_WRITE)
    tot["read_share"] = round(tot["read"] / max(tot["input"] + tot["read"] + tot["write"], 1), 3)
    return tot


GROUPS = (
    ("fits", "sessions whose unmanaged history fits the window on every call (the cost comparison is meaningful)"),
    ("overflows", "sessions whose unmanaged history exceeds the window (\"none\" could not run: its cost, "
                  "and every ratio to it, is fictional)"),
)


def aggregate(results: list[dict[str, Any]]) -> dict[str, Any]:
    tot = {"sessions": len(results), "peak": 0, "over": 0, "invalid": 0, "cost": 0, "summary_calls": 0,
           "calls": 0, "reads": 0, "writes": 0}
    for r in results:
        tot["peak"] = max(tot["peak"], r["peak"])
        for k in ("over", "invalid", "cost", "summary_calls", "calls", "reads", "writes"):
            tot[k] += r[k]
    tot["read"] = round(tot["reads"] / max(tot["reads"] + tot["writes"], 1), 3)
    return tot


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--windows", default="32000,64000,128000,200000")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--call-windows", default="64000,200000",
                    help="windows for call() with and without its cache marks ('' to skip)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    files = sorted((args.data / "claude-code").glob("*.jsonl")) + sorted((args.data / "mini-swe-agent").glob("*.traj.json"))
    sessions = [read_any(f) for f in files]
    policies = args.policies.split(",")
    rows = []
    for w in (int(x) for x in args.windows.split(",")):
        per: dict[str, list[dict[str, Any]]] = {}
        for name in policies:
            for s in sessions:
                with tempfile.TemporaryDirectory() as store:
                    per.setdefault(name, []).append(run_policy(name, s, w, store))
        # The group of a session is decided by the unmanaged history itself, whichever policies run.
        fits = [replay(s, w).unmanaged_over_window_calls == 0 for s in sessions] if "none" not in per \
            else [r["over"] == 0 for r in per["none"]]
        for group, _ in GROUPS:
            keep = [i for i, f in enumerate(fits) if f == (group == "fits")]
            for name in policies:
                rows.append({"window": w, "group": group, "policy": name,
                             **aggregate([per[name][i] for i in keep])})
    calls = []
    for w in (int(x) for x in args.call_windows.split(",") if x):
        calls += [{"window": w, "policy": "call" if marked else "call-unmarked", **run_call(sessions, w, marked)}
                  for marked in (True, False)]
    if args.json:
        print(json.dumps({"policies": rows, "call": calls}, indent=1))
        return 0
    print(f"{len(sessions)} sessions; cost in base-input-token units (reads 0.1×, writes 1.25×, summary output 5×)")
    for group, title in GROUPS:
        sel = [r for r in rows if r["group"] == group]
        print(f"\n{title}")
        print(f"{'window':>7} {'sessions':>8} {'policy':20} {'peak':>8} {'over':>5} {'invalid':>7} {'cost':>11} "
              f"{'vs none':>7} {'read':>6} {'summaries':>9}")
        base = {r["window"]: r["cost"] for r in sel if r["policy"] == "none"}
        for r in sel:
            if not r["sessions"]:
                continue
            vs = f"{r['cost'] / base[r['window']]:.3f}" if base.get(r["window"]) else "-"
            if group == "overflows" or r["over"] or r["invalid"]:
                vs = f"({vs})"  # one of the two runs compared could not happen
            print(f"{r['window']:>7} {r['sessions']:>8} {r['policy']:20} {r['peak']:>8,} {r['over']:>5} {r['invalid']:>7} "
                  f"{r['cost']:>11,} {vs:>7} {r['read']:>6.3f} {r['summary_calls']:>9}")
    print("\n(ratio): one of the two runs compared could not happen as priced: \"none\" or the policy sends a "
          "request over the window, or the policy sends an invalid request (a provider rejects both)")
    if calls:
        print("\nContextManager.call() on every session through the fake server, the agent's requests priced from its "
              "usage (its tokens: JSON characters / 4; reads 0.1×, writes 1.25×)")
        print(f"{'window':>7} {'policy':14} {'requests':>8} {'uncached':>11} {'cache read':>11} {'cache write':>11} "
              f"{'cost':>11} {'vs unmarked':>11} {'read':>6}")
        unmarked = {r["window"]: r["cost"] for r in calls if r["policy"] == "call-unmarked"}
        for r in calls:
            print(f"{r['window']:>7} {r['policy']:14} {r['requests']:>8} {r['input']:>11,} {r['read']:>11,} "
                  f"{r['write']:>11,} {r['cost']:>11,} {r['cost'] / unmarked[r['window']]:>11.3f} {r['read_share']:>6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
