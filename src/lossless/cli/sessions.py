"""``lossless sessions``: the Claude Code and Codex CLI sessions on this machine, and lossless's own
(the proxy's conversations and the chat's sessions in the store), newest first."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any, Iterable

from ._common import Out, positive, print_json, warn

SESSION_HELP = ("a session: its id (or a unique start of it) as `lossless sessions` lists it, 'latest' (the most "
                "recently written), or a file — Claude Code JSONL, a Codex CLI rollout, a mini-swe-agent .traj.json, "
                "or a JSON list (or {system, messages} object) of Anthropic or OpenAI messages")


def register(sub: Any) -> None:
    s = sub.add_parser("sessions", help="list the Claude Code and Codex CLI sessions on this machine",
                       description="List the sessions Claude Code (~/.claude/projects) and Codex CLI (~/.codex/sessions) "
                                   "keep, and lossless's own in its store (the proxy's conversations, the chat's "
                                   "sessions): project, when, messages, tokens and what they cost at today's prices.")
    agent_options(s, own=True)
    s.add_argument("--limit", type=positive, default=20, metavar="N", help="list the N most recent (default 20)")
    s.add_argument("--all", action="store_true", help="list every session, not only the most recent")
    s.add_argument("--json", action="store_true", help="print the sessions as JSON")
    s.set_defaults(func=run)


def agent_options(s: argparse.ArgumentParser, *, own: bool = False) -> None:
    """``--agent``, ``--since``, ``--project``; ``own``: lossless's own transcripts are listed too."""
    if own:
        s.add_argument("--agent", choices=("claude-code", "codex", "lossless"),
                       help="only this agent's sessions (lossless: the proxy's conversations and the chat's sessions "
                            "in the store; default: all three)")
    else:
        s.add_argument("--agent", choices=("claude-code", "codex"), help="only this agent's sessions (default: both)")
    s.set_defaults(own=own)
    s.add_argument("--since", type=day, metavar="YYYY-MM-DD", help="only sessions active on or after this day")
    s.add_argument("--project", metavar="TEXT", help="only sessions whose project folder contains TEXT")


def day(value: str) -> datetime:
    try:
        return datetime.strptime(value, "%Y-%m-%d").astimezone()
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a day as YYYY-MM-DD, not {value!r}") from None


def selected(args: argparse.Namespace) -> list[Any]:
    """The sessions the agent options select, newest first; their warnings queued."""
    from ..sessions import AGENTS, find_sessions

    found = find_sessions((args.agent,) if args.agent else (*AGENTS, "lossless") if args.own else AGENTS,
                          since=args.since)
    if args.since is not None:
        found = [s for s in found if s.last is None or s.last >= args.since]
    if args.project:
        found = [s for s in found if args.project.lower() in s.project.lower()]
    warn(args, [w for s in found for w in s.warnings])
    return found


def when(moment: datetime | None) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M") if moment else "?"


def short(project: str) -> str:
    """A project folder by its last part (``~/work/acme`` → ``acme``): the full path is in ``--json``."""
    return project.rstrip("/").rsplit("/", 1)[-1] or project


def money(value: float | None) -> str:
    return "—" if value is None else f"${value:,.2f}"


def unpriced(args: argparse.Namespace, models: Iterable[str]) -> None:
    names = sorted(set(models))
    if names:
        warn(args, [f"no price known for model{'s' if len(names) > 1 else ''} {', '.join(names)}: "
                    "its cost shows as — (install lossless[models] for the price data)"])


def run(args: argparse.Namespace) -> int:
    from ..sessions import priced

    found = selected(args)
    shown = found if args.all else found[: args.limit]
    costs: list[float | None] = []
    unknown: set[str] = set()
    for s in shown:
        total, missing = priced(s.calls)
        costs.append(None if missing or not s.calls else total)  # no call recorded (lossless's own): not $0
        unknown |= missing
    unpriced(args, unknown)
    if args.json:
        return print_json([{
            "agent": s.agent, "id": s.id, "path": str(s.path), "project": s.project, "copy": s.copy,
            "started": s.started.isoformat() if s.started else None, "last": s.last.isoformat() if s.last else None,
            "messages": s.messages, "calls": len(s.calls), "model": s.model, "peak_context": s.peak,
            "compactions": s.compactions, "tokens": {"input": s.usage.input, "output": s.usage.output,
                                                     "cache_read": s.usage.cache_read,
                                                     "cache_write": s.usage.cache_write},
            "cost_usd": None if c is None else round(c, 4),
        } for s, c in zip(shown, costs)])
    out = Out()
    if not found:
        from ..sessions import claude_projects, codex_sessions

        out.line(f"no sessions found under {claude_projects()}, {codex_sessions()} or lossless's store")
        return 0
    rows = [(when(s.last), f"{s.agent} copy" if s.copy else s.agent, s.id[:8], short(s.project), s.model or "?",
             f"{s.messages:,}",
             f"{s.usage.tokens:,}" if s.calls else "—", f"{s.peak:,}" if s.calls else "—", money(c))
            for s, c in zip(shown, costs)]
    title = f"{len(shown)} of {len(found)} sessions, the most recent first" if len(shown) < len(found) \
        else f"{len(found)} session{'' if len(found) == 1 else 's'}, the most recent first"
    out.table(title, ("last active", "agent", "id", "project", "model", "messages", "tokens", "peak context", "cost"),
              rows)
    if any(s.copy for s in shown):
        out.line("copy: a compacted copy `lossless compact --claude-code` wrote; its calls count in the original's cost")
    out.line("cost: the recorded tokens at today's prices (— where none were recorded: lossless's own transcripts "
             "keep the history, not the bills); pass an id (or its start) or 'latest' to inspect, replay or compact"
             if any(not s.calls for s in shown) else
             "cost: the recorded tokens at today's prices; pass an id (or its start) or 'latest' to inspect, "
             "replay or compact")
    return 0


# -- what inspect, replay and compact share -------------------------------------------------
def load(args: argparse.Namespace) -> Any:
    """The ``Session`` that ``args.file`` names (a path, an id, a prefix of one, or 'latest');
    ``args.file`` becomes its path, so every later message names the file."""
    from ..sessions import locate, open_session

    args.file = locate(args.file)
    session = open_session(args.file)
    warn(args, session.warnings)
    return session


def pick_window(args: argparse.Namespace, session: Any) -> int:
    """``--window``, else the session's model's (see ``sessions.session_window``); sets
    ``args.window`` and ``args.window_source``."""
    from ..sessions import session_window

    args.window, args.window_source = session_window(session, override=args.window,
                                                     warn=lambda w: warn(args, [w]))
    return int(args.window)


WINDOW_DEFAULT_HELP = ("the model's context window, in tokens (default: the session's model's, from the models' "
                       "data; 200,000 for Claude Code, as it runs them)")
