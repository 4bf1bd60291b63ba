"""Echo: a new tool result gives up the runs of lines that an output still in context shows.

    new, result = echo(messages, ctx, tokens)

Fold (``stages.fold``) works when snip fires: an older result gives up what a later one repeats.
Between snips the repeats pile up — a file read again after an edit, a test suite run again, a
``grep`` widened — each spending the budget, so the next snip comes sooner and the context holds
fewer distinct lines meanwhile.  Echo takes them out as they arrive: each tool result new on this
call (never one the model was sent before, so the cached prefix stays as it was) has its runs of
lines that an earlier result in context shows replaced by one ``markers.echo_run`` line naming
that result's call, much as Claude Code answers a file read again unchanged with a note rather
than the file.  The input of a call in context counts as shown too: a file the model wrote and
then read back, or a write tool that answers with the whole file it was given, repeats the
model's own words (on a held-out Claude Code session one such answer was 8,900 tokens, 40 % of a
32k window's threshold, and it forced a second compaction on the next call).  What only the new
result says stays verbatim, in place, with its first and last lines; its whole text is stored and
one recall away (the marker names the handle).

When snip fires it puts every echoed result back whole (``restore``) before it folds, so the
newest copy of a line is the one kept and the older gives it up.  After micro-compact or a
summary (``pipeline.run``) only the echoes whose lines left are put back, while there is room
under the threshold; otherwise their handle still gives them whole.

Cost: nothing below a landing's size (65 % of the threshold by default): there the context has
room, and new results arrive whole.  Above it the lines shown in context are kept in ``ctx.memo``
from call to call and extended with what each call adds, so a call pays for its new results only;
they are made again from the whole context after a call whose view another stage rewrote (a snip:
about once per landing) or one below that size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .. import markers
from ..account.archive import is_marked, original_text, text_chars, with_text
from ..messages import Message, ToolResult, ToolUse
from .base import StageContext, StageResult, skipped
from .fold import MIN_RESULT_CHARS, MIN_SAVED_CHARS, _message_keys, _trivial, fold_text, give, input_keys, where

__all__ = ["echo", "restore"]

NAME = "echo"
_MEMO = "echo"


@dataclass(slots=True)
class _Shown:
    """Each line key shown by a tool result in ``view`` → the call of the newest result showing it;
    each shown by the input of a call in ``view`` (and by no result) → that call."""

    view: list[Message]
    lines: dict[str, ToolUse | None]
    given: dict[str, ToolUse]
    shell: frozenset[str] = frozenset()
    inputs: bool = False
    """Whether a run since this was last reset stands for lines a call's input shows."""

    def __contains__(self, k: object) -> bool:
        return k in self.lines or k in self.given

    def run(self, n: int, first: str) -> str:
        """The line standing for a run of ``n`` lines from the one keyed ``first``."""
        if first in self.lines:
            return markers.echo_run(n, where(self.lines[first], self.shell))
        self.inputs = True
        return markers.echo_run(n, where(self.given.get(first), self.shell), given=True)


def _uses(previous: Message | None) -> dict[str, ToolUse]:
    return {u.id: u for u in previous.tool_uses} if previous is not None and previous.role == "assistant" else {}


def _add(lines: dict[str, ToolUse | None], message: Message, previous: Message | None,
         echoed: frozenset[str] = frozenset()) -> None:
    """Map the lines ``message``'s results show to their calls; a result in ``echoed`` (by tool id)
    shows only what was not shown before, so the lines it shares keep their earlier call."""
    uses = _uses(previous)
    for b, keys in zip(message.tool_results, _message_keys(message)):
        call = uses.get(b.tool_use_id)
        if b.tool_use_id in echoed:
            for k in keys:
                lines.setdefault(k, call)
        else:
            lines.update(dict.fromkeys(keys, call))


def _shown(messages: Sequence[Message], ctx: StageContext) -> _Shown:
    """The lines shown by the results and the calls' inputs in ``messages[:ctx.fresh_from]``: kept
    from the last call when its view is this call's start, else made from them."""
    start, memo = ctx.fresh_from, ctx.memo
    kept = memo.pop(_MEMO, None) if memo is not None else None
    view = memo.get("view") if memo is not None else None
    if isinstance(kept, _Shown) and kept.view is view and view is not None and len(view) == start:
        return kept
    shown = _Shown([], {}, {})
    for i in range(start):
        m = messages[i]
        if m.role == "user" and m.tool_results:
            _add(shown.lines, m, messages[i - 1] if i else None)
        elif m.role == "assistant":
            give(shown.given, m)
    return shown


def echo(messages: Sequence[Message], ctx: StageContext, tokens: int) -> tuple[list[Message], StageResult]:
    """Echo the tool results new on this call against those before them; see the module docstring."""
    start = ctx.fresh_from
    unchanged = messages if isinstance(messages, list) else list(messages)
    if start <= 0 or ctx.trigger != "auto":
        if ctx.memo is not None:
            ctx.memo.pop(_MEMO, None)
        return unchanged, skipped(NAME, tokens, "no earlier view to compare with")
    floor = int(ctx.config.snip_target_fraction * ctx.budget.threshold)
    if tokens <= floor:  # room enough: new results arrive whole, and nothing is kept (made again above)
        if ctx.memo is not None:
            ctx.memo.pop(_MEMO, None)
        return unchanged, skipped(NAME, tokens, f"{tokens:,} tokens, at or below a landing's {floor:,}")
    shown = _shown(messages, ctx)
    shown.shell = ctx.config.shell_tools
    out: list[Message] | None = None
    delta = 0
    handles: list[str] = []
    count = ctx.counter.count_message
    for i in range(start, len(messages)):
        m = messages[i]
        if m.role == "assistant":
            give(shown.given, m)
        if m.role != "user" or not m.tool_results:
            continue
        previous = messages[i - 1] if i else None
        blocks = list(m.content)
        changed = False
        echoed: set[str] = set()
        positions = [j for j, b in enumerate(blocks) if isinstance(b, ToolResult)]
        for j, own in zip(positions, _message_keys(m)):
            b = blocks[j]
            assert isinstance(b, ToolResult)
            chars = text_chars(b)
            # (the characters of its lines shown before bound what a fold could take: most results
            # repeat too little to be worth the fold's line-by-line pass)
            if ((shown.lines or shown.given) and chars >= MIN_RESULT_CHARS and not is_marked(b)
                    and sum(len(k) for k in own if k in shown) >= max(MIN_SAVED_CHARS, chars // 5)):
                text = original_text(b)
                shown.inputs = False
                done = fold_text(text, shown, own, run=shown.run)
                if done is not None:
                    body, n, repeated = done
                    handle = ctx.store.put(text)
                    handles.append(handle)
                    blocks[j] = with_text(b, markers.echoed(handle=handle, lines=n, repeated=repeated, body=body,
                                                            inputs=shown.inputs))
                    changed = True
                    echoed.add(b.tool_use_id)
        _add(shown.lines, m, previous, frozenset(echoed))
        if changed:
            new = m.with_content(blocks)
            new._memo[_MEMO] = m  # the whole message, for ``restore`` without a read of the store
            delta += count(new) - count(m)
            if out is None:
                out = list(messages)
            out[i] = new
    result_list = unchanged if out is None else out
    if ctx.memo is not None:
        shown.view = result_list
        ctx.memo[_MEMO] = shown
    if out is None:
        return unchanged, skipped(NAME, tokens, "no new result repeats what the context shows")
    detail = (f"echoed {markers.counted(len(handles), 'new result')} against the outputs and calls before "
              f"{'it' if len(handles) == 1 else 'them'}: {tokens:,} → {tokens + delta:,} tokens")
    return out, StageResult(stage=NAME, fired=True, tokens_before=tokens, tokens_after=tokens + delta,
                            detail=detail, handles=tuple(handles), kept_before=start)


def restore(messages: Sequence[Message], ctx: StageContext, *, lost_only: bool = False) -> tuple[list[Message], int]:
    """``messages`` with echoed results whole again, and the tokens that adds.  With ``lost_only``
    only those a line of which no result before them shows any more (the output an echo pointed at
    left with a snipped range, or a fold gave the line to a later result): the rest stay as they
    are, pointing at lines still shown before them.  The lines shown are read only once an echoed
    result is met, so a view with none costs a look at each result's first characters.

    Either way an echo whose lines the input of its own call shows stays (a file written, shown
    back): the call goes only with its result, and folding, which gives a line to the newest
    result showing it, leaves a call's input alone."""
    shown: set[str] = set()
    read = 0  # the messages before this one have their lines in ``shown``
    out = list(messages)
    added = 0
    count = ctx.counter.count_message
    for i, m in enumerate(messages):
        if m.role != "user" or not m.tool_results:
            continue
        whole = _whole(m, ctx)
        if whole is None:
            continue
        if lost_only:
            for earlier in out[read:i]:
                if earlier.role == "user" and earlier.tool_results:
                    for keys in _message_keys(earlier):
                        shown.update(keys)
                elif earlier.role == "assistant":
                    for _, keys in input_keys(earlier):
                        shown.update(keys)
            read = i
            if _all_shown(whole, m, shown):
                continue
        elif i and _all_shown(whole, m, {k for _, keys in input_keys(messages[i - 1]) for k in keys}):
            continue
        out[i] = whole
        added += count(whole) - count(m)
    return out, added


def _whole(m: Message, ctx: StageContext) -> Message | None:
    """``m`` with its echoed results whole (from its memo, else the store); None if it has none."""
    whole = m._memo.get(_MEMO)
    if isinstance(whole, Message):
        return whole
    blocks = list(m.content)
    changed = False
    for j, b in enumerate(blocks):
        if isinstance(b, ToolResult) and is_marked(b):
            handle = markers.echoed_handle(original_text(b))
            if handle is not None and handle in ctx.store:
                blocks[j] = with_text(b, ctx.store.get(handle))
                changed = True
    return m.with_content(blocks) if changed else None


def _all_shown(whole: Message, echoed: Message, shown: set[str]) -> bool:
    """Every line an echo took out of ``whole`` (what ``echoed`` no longer shows) is in ``shown``."""
    for before, now in zip(_message_keys(whole), _message_keys(echoed)):
        here = set(now)
        if any(k not in here and k not in shown and not _trivial(k) for k in before):
            return False
    return True
