"""``lossless replay SESSION``: a recorded session through the pipeline, call by call."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Literal

from ..markers import counted
from ._common import Out, int_or_auto, positive, print_json, provider_from, summarizer_options, warn
from .sessions import SESSION_HELP, WINDOW_DEFAULT_HELP, load, pick_window




def register(sub: Any) -> None:
    s = sub.add_parser("replay", help="replay a recorded session through the pipeline, call by call")
    s.add_argument("file", metavar="SESSION", help=SESSION_HELP)
    s.add_argument("--window", type=positive, metavar="N", help=WINDOW_DEFAULT_HELP)
    s.add_argument("--max-output", type=positive, metavar="N",
                   help="the max_tokens asked for each answer (default: min(32,000, window/4))")
    s.add_argument("--unseen-tokens", type=int_or_auto, default=None, metavar="N|auto",
                   help="tokens each request carries that the file does not show (system prompt, tools); "
                        "default 'auto': inferred from the first recorded usage (0 when the file records none)")
    s.add_argument("--per-call", action="store_true",
                   help="print every call (a table; with --json, a per_call list)")
    s.add_argument("--html", type=Path, metavar="OUT",
                   help="also write a self-contained page picturing the replay (tokens, stages, cost) to OUT")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.add_argument("--repair", action="store_true",
                   help="repair an invalid message list and report each change, instead of refusing it")
    summarizer_options(s)
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..replay import replay
    from ..report import per_call_rows, terminal_chart, write_html
    from .compact import check_output

    if args.html is not None:
        check_output(args.html, "--html")
    session = load(args)
    pick_window(args, session)
    if not session.calls:
        # A plain message list: every assistant message is a call (see replay()).  The file
        # is refused, as compact refuses it, unless it is one history the API would take.
        from dataclasses import replace

        from .compact import checked

        dialect: Literal["anthropic", "openai"] = "openai" if session.dialect == "openai" else "anthropic"
        fixed, notes = checked(session.messages, args.file, dialect, fix=args.repair)
        warn(args, notes)
        session = replace(session, messages=tuple(fixed))
    report = replay(session, args.window, args.max_output, unseen_tokens=args.unseen_tokens,
                    provider=provider_from(args))
    notes = _notes(args, report, session)
    if args.html is not None:
        write_html(report, args.html, notes=notes)
    if args.json:
        return print_json(report.to_json(per_call=args.per_call))
    out = Out()
    out.line(f"{args.file}: {counted(report.calls, 'call')} replayed under a "
             f"{args.window:,}-token window ({args.window_source}; auto-compact threshold {report.threshold:,})")
    for note in notes:
        out.line(note)
    rows = [
        ("peak tokens", f"{report.peak_unmanaged_tokens:,}", f"{report.peak_tokens:,}"),
        ("calls over the window", str(report.unmanaged_over_window_calls), str(report.over_window_calls)),
        ("invalid requests", "0", str(report.invalid_requests)),
        ("input cost with caching (base-input-token units)", f"{report.cost['unmanaged']:,}",
         f"{report.cost['managed']:,}"),
        ("cache-read ratio", f"{report.unmanaged_cache_read_ratio:.3f}", f"{report.cache_read_ratio:.3f}"),
    ]
    d = report.dollars
    if d:
        rows.insert(3, (f"cost at {report.model}'s prices", f"${d['unmanaged']:,.2f}", f"${d['managed']:,.2f}"))
    rows.append(("summaries (hitting the window)", str(report.recorded_compactions) + " by the agent",
                 str(report.summaries)))
    out.table("unmanaged vs managed", ("", "unmanaged", "managed"), rows)
    if d:
        out.line(f"cost: input priced with prompt caching (a read of the prefix the previous request shared, a "
                 f"write of the rest) at {report.model}'s prices today, plus the recorded output; the session as "
                 f"recorded cost ${d['recorded']:,.2f}")
    else:
        out.line("cost: input tokens priced with prompt caching, a cache read at 0.1 and a cache write at 1.25 "
                 "base-input-token units" + (f" (no price known for {report.model})" if report.model else ""))
    for line in terminal_chart(report):
        out.line(line)
    out.line("stages fired: " + (", ".join(f"{k} ×{v}" for k, v in report.stages.items()) or "none")
             + f"; summary calls: {report.summary_calls}")
    e = report.estimate_error
    if e.get("calls"):
        out.line(f"calibrated estimate vs recorded usage over {counted(int(e['calls']), 'call')}: "
                 f"mean |error| {e['mean_abs_pct']}%, worst under-estimate {e['max_under_pct']}%")
    if args.per_call:
        headers, table = per_call_rows(report)
        out.table("per call (cumulative cost in base-input-token units)", headers, table)
    if args.html is not None:
        out.line(f"page: {args.html}")
    return 0


def _notes(args: argparse.Namespace, report: Any, session: Any) -> list[str]:
    """What the reader must know to trust the figures: the overhead assumed, the file's own
    compactions, and a window so small that a summary fires on most calls."""
    notes = []
    if session.boundaries:
        n = len(session.boundaries)
        at = ", ".join(str(b.index) for b in session.boundaries)
        notes.append(f"the file records {n} compaction{'' if n == 1 else 's'} of its own (message {at}); the "
                     f"replay runs the whole history across {'it' if n == 1 else 'them'}, without "
                     f"{'its summary' if n == 1 else 'their summaries'}: lossless decides what to remove")
    if report.unseen_inferred:
        if report.unseen_tokens:
            notes.append(f"every request carries ~{report.unseen_tokens:,} tokens the file does not show (system "
                         f"prompt, tools), inferred from the first recorded usage; --unseen-tokens N sets it")
        else:
            notes.append("the file records no usage: nothing added for a system prompt or tools it does not show "
                         "(--unseen-tokens N adds them)")
    elif report.unseen_tokens:
        notes.append(f"every request carries {report.unseen_tokens:,} tokens the file does not show "
                     "(--unseen-tokens)")
    if report.unseen_tokens >= report.threshold:
        notes.append(f"the {report.unseen_tokens:,} unseen tokens alone reach the auto-compact threshold "
                     f"({report.threshold:,}): no request can fit; replay with a larger --window")
    summaries = report.summaries
    if report.calls >= 4 and summaries * 2 > report.calls:
        room = f" above the {report.unseen_tokens:,} unseen tokens" if report.unseen_tokens else ""
        notes.append(f"a summary fired on {summaries} of {report.calls} calls: the {args.window:,}-token window "
                     f"leaves too little room{room} for this session")
    return notes
