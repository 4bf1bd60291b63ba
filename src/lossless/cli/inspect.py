"""``lossless inspect SESSION``: where the context of a session goes, by category of the window."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import Out, count, int_or_auto, positive, print_json, request_tools
from .sessions import SESSION_HELP, WINDOW_DEFAULT_HELP, load, pick_window


def register(sub: Any) -> None:
    s = sub.add_parser("inspect", help="where the context of a session goes")
    s.add_argument("file", metavar="SESSION", help=SESSION_HELP)
    s.add_argument("--window", type=positive, metavar="N", help=WINDOW_DEFAULT_HELP)
    s.add_argument("--max-output", type=positive, metavar="N",
                   help="the max_tokens asked for each answer (default: min(32,000, window/4))")
    s.add_argument("--unseen-tokens", type=int_or_auto, default=None, metavar="N|auto",
                   help="tokens each request carries that the file does not show (system prompt, tools); "
                        "default 'auto': inferred from the first recorded usage, as replay does")
    s.add_argument("--top", type=count, default=10, help="how many of the biggest items to list")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..inspect import inspect_session
    from ..report import window_bar
    from ..markers import counted
    from ..sessions import recorded_by_lossless

    session = load(args)
    pick_window(args, session)
    r = inspect_session(session, window=args.window, max_output=args.max_output, unseen_tokens=args.unseen_tokens,
                        top=args.top, tools=request_tools(args.file, session))
    if args.json:
        return print_json(r)
    out = Out()
    h = r["history"]
    if h["boundaries"]:
        n = len(h["boundaries"])
        which = "its compaction boundary" if n == 1 else f"the last of its {n} compaction boundaries"
        out.line(f"{args.file}: live context {r['messages']} messages, after {which} (message {r['live_start']}); "
                 f"the whole history bridges {'it' if n == 1 else 'them'}: {h['messages']} messages, "
                 f"~{h['tokens']:,} tokens")
    else:
        out.line(f"{args.file}: {counted(r['messages'], 'message')}, no compaction boundary")
    if recorded_by_lossless(session):
        out.line("  a lossless transcript: it records every message that entered the context, so this is the whole "
                 "history; the model was sent views of it, with what lossless moved out behind handles "
                 f"(`lossless replay {args.file} --window N` shows each view)")
    left = f"{r['percent_left']}% left" if r["tokens"] <= args.window else \
        f"over it by {r['tokens'] - args.window:,} tokens"
    out.line(f"~{r['tokens']:,} tokens in use of a {args.window:,}-token window ({args.window_source}; "
             f"{r['percent_of_window']}% used, {left}; auto-compaction at {r['threshold']:,})")
    if r["calibrated"]:
        out.line(f"  by the provider's count of the last recorded request plus lossless's estimate of what followed "
                 f"(the estimate alone: ~{r['estimate']:,}); the categories are scaled to it")
    elif r["usage_distrusted"]:
        d = r["usage_distrusted"]
        out.line(f"  by lossless's own count: the usage recorded for the last request ({d['reported']:,} tokens) is "
                 f"under half of lossless's count of what the file shows of it ({d['counted']:,}), so the requests "
                 "were made smaller on their way (through lossless proxy, for one) and it is not the file's size")
    segments, glyphs = window_bar(r["categories"])
    out.segments([("[", ""), *segments, ("]", "")])
    rows: list[tuple[str, ...]] = [
        (glyphs[c["name"]], c["name"], f"{c['tokens']:,}", f"{100 * c['tokens'] / args.window:.1f}%")
        for c in r["categories"]
    ]
    out.table("the window by category", ("", "category", "tokens", "of window"), rows)
    if r["unseen_tokens"]:
        how = "inferred from the first recorded usage (--unseen-tokens N sets it)" if r["unseen_inferred"] \
            else "as given by --unseen-tokens"
        out.line(f"system prompt and tools the file does not show: ~{r['unseen_tokens']:,} tokens, {how}")
    elif r["unseen_inferred"] and not r["calls"] and not (r["system_tokens"] or r["tool_tokens"]):
        out.line("the file records no usage: a system prompt or tools it does not show are not counted "
                 "(--unseen-tokens N adds them)")
    last = r["last_recorded"]
    if last and not r["usage_distrusted"]:
        off = 100 * (last["estimate"] - last["tokens"]) / last["tokens"]
        out.line(f"last recorded call (message {last['message']}): {last['tokens']:,} tokens by the provider's "
                 f"count; lossless's estimate of it: {last['estimate']:,} ({off:+.0f}%)")
    for key, title in (("by_role", "role"), ("by_type", "block type"), ("by_tool", "tool")):
        # lossless's own counts, so their shares are of its own count of the context (not of a provider's total)
        rows = [(k, f"{v:,}", f"{100 * v / max(r['estimate'], 1):.1f}%") for k, v in r[key].items()]
        out.table(f"live context by {title}", (title, "tokens", "share"), rows)
    rows = [(str(it["message"]), it["type"], it["tool"] or "", f"{it['tokens']:,}", it["preview"][:60])
            for it in r["biggest"]]
    if rows:
        out.table("biggest items", ("msg", "type", "tool", "tokens", "preview"), rows)
    return 0

