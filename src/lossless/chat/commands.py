"""The slash commands: what a user types instead of a request.

    handled = run_command(chat_app, "/compact keep the list of files read")

``/compact [instructions]``, ``/context``, ``/memory [list | search WORDS | forget ID]``,
``/recall HANDLE``, ``/cost``, ``/clear``, ``/resume [ID]``, ``/help``, ``/exit``.  Each
prints what it did; a bad argument is one line saying what to type instead.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import LosslessError
from .models import model_price
from .status import notices, plural, status_line

USAGE: dict[str, tuple[str, str]] = {
    "compact": ("[instructions]", "summarise the conversation now, keeping what you say"),
    "context": ("", "where the context window goes, by category"),
    "memory": ("[list|search WORDS|forget ID]", "the project's long-term memories"),
    "recall": ("HANDLE", "show what a placeholder or summary moved out of the context"),
    "cost": ("", "tokens and estimated cost, managed by lossless against unmanaged"),
    "clear": ("", "start a new conversation (this one stays resumable)"),
    "resume": ("[ID]", "continue an earlier session of this directory (no ID: list them)"),
    "help": ("", "these lines"),
    "exit": ("", "leave (Ctrl-D too)"),
}
"""Each command's arguments and what it does: ``/help`` and the completion menu show them."""

DESCRIPTIONS = {name: what for name, (_, what) in USAGE.items()}
HELP = "\n".join(f"/{name} {args}".ljust(40) + what for name, (args, what) in USAGE.items())


def run_command(app: Any, line: str) -> bool:
    """Run ``line`` (which starts with "/"); False when the user asked to leave."""
    name, _, arg = line[1:].partition(" ")
    handler: Callable[[Any, str], bool | None] | None = COMMANDS.get(name.lower())
    if handler is None:
        app.term.error(f"unknown command /{name}; /help lists them")
        return True
    try:
        return handler(app, arg.strip()) is not False
    except LosslessError as exc:
        app.term.error(f"/{name}: {exc}")
        return True


def _compact(app: Any, arg: str) -> None:
    chat = app.chat
    if not chat.history:
        app.term.note("nothing to compact yet")
        return
    view = chat.cm.compact(chat.history, chat.system_blocks, chat.tools, instructions=arg or None)
    chat.history = list(view.neutral)
    for line in notices(view.events) or [f"not compacted: {view.events[-1].detail}" if view.events else "not compacted"]:
        app.term.note(f"  ↳ {line}", "notice")
    chat.last_state = view.state
    app.term.note(f"[{status_line(view.state)}]", "status")


def _context(app: Any, arg: str) -> None:
    from ..inspect import inspect_messages

    chat = app.chat
    s = chat.settings
    state = chat.last_state
    measured = state.tokens if state is not None and state.calibrated else None  # as the status line says
    r = inspect_messages(chat.history, system=chat.system_blocks, tools=chat.tools, window=s.window,
                         max_output=s.max_output, counter=chat.cm.counter, measured=measured, top=5)
    app.term.say(f"~{r['tokens']:,} tokens of a {s.window:,}-token window in use ({r['percent_left']}% left; "
                 f"auto-compaction at {r['threshold']:,}); {plural(len(chat.history), 'message')}")
    for c in r["categories"]:
        app.term.say(f"  {c['name']:<32} {c['tokens']:>9,}  {100 * c['tokens'] / s.window:5.1f}%")
    if r["biggest"]:
        app.term.say("biggest items:")
    for it in r["biggest"][:5]:
        what = f"{it['type']} {it['tool'] or ''}".strip()
        app.term.say(f"  message {it['message']:<4} {what:<24} {it['tokens']:>7,}  {' '.join(it['preview'].split())[:60]}")


def _memory(app: Any, arg: str) -> None:
    store = app.chat.memory
    if store is None:
        app.term.note("memory is off (--no-memory)")
        return
    verb, _, rest = arg.partition(" ")
    if verb in ("", "list"):
        found = [(m, None) for m in store.recent(20)]
    elif verb == "search" and rest.strip():
        found = store.search(rest.strip(), 10)
    elif verb == "forget" and rest.strip():
        where = store.delete(rest.strip(), reason="forgotten by the user in lossless chat")
        app.term.say(f"forgot {rest.strip()} (kept in {where})")
        return
    else:
        app.term.error("usage: /memory [list | search WORDS | forget ID]")
        return
    if not found:
        app.term.say(f"no memories in {store.dir}" if verb in ("", "list") else "no memory matches")
    for m, _ in found:
        app.term.say(f"  {m.id} ({m.type}): {m.description}")


def _recall(app: Any, arg: str) -> None:
    from ..tools import run_recall

    if not arg:
        app.term.error("usage: /recall HANDLE (a handle such as sha256:0123… from a notice or a placeholder)")
        return
    handle, _, offset = arg.partition(" ")
    app.term.say(run_recall({"handle": handle, "offset": offset or 0}, app.chat.cm.store))


def _cost(app: Any, arg: str) -> None:
    chat = app.chat
    m = chat.meter
    managed, unmanaged, own = chat.cost_units
    app.term.say(f"{plural(m.calls, 'model call')} · {plural(m.output, 'output token')} · provider-reported input "
                 f"{m.reported['input']:,}, cache reads {m.reported['cache_read']:,}, "
                 f"cache writes {m.reported['cache_write']:,}")
    app.term.say("as lossless estimates a prompt cache that keeps every unchanged prefix "
                 "(what the provider's own cache reads above may differ from):")
    app.term.say(f"managed:   {m.managed.read:,} tokens read from the cache, {m.managed.write:,} written; "
                 f"{plural(chat.cm.llm_calls, 'call')} of lossless's own (summaries, memory)")
    app.term.say(f"unmanaged: {m.unmanaged.read:,} read, {m.unmanaged.write:,} written"
                 + (f" (its largest request, {m.peak_unmanaged:,} tokens, is over the window: it would fail)"
                    if m.peak_unmanaged > chat.settings.window else ""))
    price = model_price(chat.settings.model)
    if price is None:
        app.term.say(f"unknown price for {chat.settings.model or 'this model'}: in input-token units "
                     f"(cache read 0.1, write 1.25, output 5): managed {managed + own:,.0f}, unmanaged {unmanaged:,.0f}")
        return
    scale = price.input / 1e6
    out_extra = m.output * (price.output - price.input * 5) / 1e6  # the units price output at 5× input
    app.term.say(f"estimated cost with caching: managed ${(managed + own) * scale + out_extra:.4f}, "
                 f"unmanaged ${unmanaged * scale + out_extra:.4f} "
                 f"(${price.input:g}/${price.output:g} per million input/output tokens)")


def _clear(app: Any, arg: str) -> None:
    old = app.chat.session_id
    app.new_chat()
    app.term.say(f"new conversation {app.chat.session_id} (the previous one, {old}, stays resumable)")


def _resume(app: Any, arg: str) -> None:
    from . import resume

    if not arg:
        found = resume.sessions(app.settings.store, app.settings.workdir)
        if not found:
            app.term.say("no earlier sessions of this directory")
        for sid, _, info in found[:10]:
            mark = " (this one)" if sid == app.chat.session_id else ""
            app.term.say(f"  {sid}  {info.get('model') or info.get('provider')}{mark}")
        app.term.say("/resume ID continues one")
        return
    app.resume(arg)


def _help(app: Any, arg: str) -> None:
    app.term.say(HELP)


def _exit(app: Any, arg: str) -> bool:
    return False


COMMANDS: dict[str, Callable[[Any, str], bool | None]] = {
    "compact": _compact, "context": _context, "memory": _memory, "recall": _recall, "cost": _cost,
    "clear": _clear, "resume": _resume, "help": _help, "exit": _exit, "quit": _exit,
}
