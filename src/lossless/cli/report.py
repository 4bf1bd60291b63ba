"""``lossless report``: what the sessions on this machine cost in dollars — per day, session or
model — and, from a replay of each, what they would have cost and how often they would have
hit the window with lossless."""

from __future__ import annotations

import argparse
from typing import Any, Sequence

from ..errors import LosslessError
from ..markers import counted
from ._common import Out, positive, print_json, warn
from .sessions import agent_options, money, selected, short, unpriced, when

HELP = "what your Claude Code and Codex sessions cost per day, session and model, and with lossless"


def register(sub: Any) -> None:
    s = sub.add_parser("report", help=HELP, description=(
        "Price the Claude Code and Codex CLI sessions on this machine at today's prices, per day, session or "
        "model; replay each through lossless under its model's window to say what it would have cost and how "
        "often it would have hit the window."))
    s.add_argument("--by", choices=("day", "session", "model"), default="day",
                   help="one row per day (default), per session or per model")
    agent_options(s)
    s.add_argument("--limit", type=positive, default=20, metavar="N",
                   help="with --by session: the N most recent sessions (default 20)")
    s.add_argument("--no-replay", dest="replay", action="store_false",
                   help="price what was recorded only; replay nothing")
    s.add_argument("--json", action="store_true", help="print days, models, sessions and totals as JSON")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..sessions import priced, tally

    found = selected(args)
    shown = found[: args.limit] if args.by == "session" else found
    days, models = tally(found, "day"), tally(found, "model")
    unpriced(args, {m for t in models for m in t.unpriced})
    replays = _replays(args, shown) if args.replay else {}
    if args.json:
        return print_json(_json(found, shown, days, models, replays))
    out = Out()
    if not found:
        from ..sessions import claude_projects, codex_sessions

        out.line(f"no sessions found under {claude_projects()} or {codex_sessions()}")
        return 0
    rows: list[tuple[str, ...]] = []
    if args.by == "session":
        for s in shown:
            cost, missing = priced(s.calls)
            r = replays.get(s.id)
            d = r.dollars if r is not None else {}
            rows.append((when(s.last), s.agent, s.id[:8], short(s.project), s.model or "?", f"{len(s.calls):,}",
                         money(None if missing else cost), money(d.get("unmanaged")), money(d.get("managed")),
                         str(s.compactions), "—" if r is None else str(r.summaries),
                         "—" if r is None else f"{r.unmanaged_over_window_calls} → {r.over_window_calls}"))
        out.table(f"{len(shown)} session{'' if len(shown) == 1 else 's'}, the most recent first",
                  ("last active", "agent", "id", "project", "model", "calls", "cost", "replayed", "with lossless",
                   "compactions (agent)", "summaries (lossless)", "over the window"), rows)
    else:
        groups = days if args.by == "day" else models
        rows = [(t.key, ", ".join(sorted(t.models)) if args.by == "day" else f"{len(t.sessions):,}",
                 f"{t.calls:,}", f"{t.usage.input:,}", f"{t.usage.output:,}", f"{t.usage.cache_write:,}",
                 f"{t.usage.cache_read:,}", f"{t.usage.tokens:,}", money(None if t.unpriced and not t.dollars
                                                                         else t.dollars)) for t in groups]
        total = sum(t.dollars for t in groups)
        rows.append(("total", "", f"{sum(t.calls for t in groups):,}", f"{sum(t.usage.input for t in groups):,}",
                     f"{sum(t.usage.output for t in groups):,}", f"{sum(t.usage.cache_write for t in groups):,}",
                     f"{sum(t.usage.cache_read for t in groups):,}", f"{sum(t.usage.tokens for t in groups):,}",
                     money(total)))
        out.table(f"cost per {args.by}", (args.by, "models" if args.by == "day" else "sessions", "calls", "input",
                                          "output", "cache write", "cache read", "tokens", "cost"), rows)
    for line in _summary(replays):
        out.line(line)
    out.line("cost: the recorded tokens at each model's prices today (lossless.modelinfo)"
             + ("; replayed: the conversation through lossless's pipeline under its model's window, input "
                "priced with prompt caching plus the recorded output — without lossless, and with it" if replays
                else ""))
    return 0


def _replays(args: argparse.Namespace, sessions: Sequence[Any]) -> dict[str, Any]:
    """Each session's ``ReplayReport`` by id; a session that cannot be replayed is a warning."""
    from ..sessions import replay_session

    out = {}
    for s in sessions:
        if not s.calls or s.copy:  # a copy's history is its original's: replayed there
            continue
        try:
            out[s.id] = replay_session(s, warn=lambda w: warn(args, [w]))
        except LosslessError as exc:
            warn(args, [f"not replayed: {exc}"])
    return out


def _summary(replays: dict[str, Any]) -> list[str]:
    priced = [r for r in replays.values() if r.dollars]
    if not priced:
        return []
    before = sum(r.dollars["unmanaged"] for r in priced)
    after = sum(r.dollars["managed"] for r in priced)
    recorded = sum(r.dollars["recorded"] for r in priced)
    change = f"{100 * (after - before) / before:+.0f}%" if before else "±0%"
    compactions = sum(r.recorded_compactions for r in priced)
    summaries = sum(r.summaries for r in priced)
    acted = sum(1 for r in priced for c in r.per_call if c.stages) - summaries
    over = sum(r.unmanaged_over_window_calls for r in priced)
    still = sum(r.over_window_calls for r in priced)
    return [
        f"replayed {counted(len(priced), 'conversation')} (recorded cost {money(recorded)}): "
        f"{money(before)} without lossless, {money(after)} with it ({change})",
        f"hitting the window: the agents compacted {counted(compactions, 'time')}; lossless summarised "
        f"{counted(summaries, 'time')} and made room without a summary on {counted(acted, 'other call')}; "
        + (f"no call went over the window, where {over} would have without it" if not still else
           f"{counted(still, 'call')} still went over the window (see `lossless replay`)"),
    ]


def _json(found: Sequence[Any], shown: Sequence[Any], days: Sequence[Any], models: Sequence[Any],
          replays: dict[str, Any]) -> dict[str, Any]:
    from ..sessions import priced

    def usage(u: Any) -> dict[str, int]:
        return {"input": u.input, "output": u.output, "cache_read": u.cache_read, "cache_write": u.cache_write}

    def group(t: Any) -> dict[str, Any]:
        return {"key": t.key, "calls": t.calls, "tokens": usage(t.usage), "cost_usd": round(t.dollars, 4),
                "models": sorted(t.models), "sessions": len(t.sessions), "unpriced": sorted(t.unpriced)}

    sessions = []
    for s in shown:
        cost, missing = priced(s.calls)
        r = replays.get(s.id)
        sessions.append({
            "agent": s.agent, "id": s.id, "path": str(s.path), "project": s.project, "copy": s.copy, "model": s.model,
            "last": s.last.isoformat() if s.last else None, "calls": len(s.calls), "tokens": usage(s.usage),
            "cost_usd": None if missing else round(cost, 4), "compactions": s.compactions,
            "replay": None if r is None else {
                "window": r.window, "dollars": r.dollars, "summaries": r.summaries,
                "recorded_compactions": r.recorded_compactions, "over_window_calls": r.over_window_calls,
                "unmanaged_over_window_calls": r.unmanaged_over_window_calls, "stages": r.stages},
        })
    return {"days": [group(t) for t in days], "models": [group(t) for t in models], "sessions": sessions,
            "total": {"sessions": len(found), "calls": sum(t.calls for t in days),
                      "cost_usd": round(sum(t.dollars for t in days), 4)}}
