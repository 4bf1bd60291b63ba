"""Stage 1, persist: oversized tool output goes to the artifact store, a marker stays.

Rules (all in ``ContextConfig``):

- a tool result longer than ``persist_chars`` characters (``persist_shell_chars``
  for a tool in ``shell_tools``; the name comes from the matching ``ToolUse`` in
  the assistant message before) is persisted;
- then, if the tool results of one user message still total more than
  ``persist_message_chars``, its largest results are persisted, largest first,
  until the total is under the limit (or nothing persistable is left);
- the same two rules in tokens against ``persist_threshold_fraction`` of the
  auto-compact threshold, which only bite on small windows (a result that alone
  takes half a 16k window's budget);
- a text block of the user's or the assistant's over that token limit is stored the same
  way (a pasted log; a model caught in a loop writing 150,000 characters in one answer),
  except in an assistant message with thinking, whose blocks go back exactly.

A persisted result keeps its id, ``is_error``, ``cache_control`` and ``extra``;
its text becomes ``markers.persisted(...)`` (size, line count, a preview of
``preview_chars`` characters, the handle and how to recall the rest).

What is stored is exactly the text the model read (``original_text``): the
string content, or for list content the ``Text`` parts joined by newlines.
Images are not text: they stay where they were in the result, after the marker
that takes the place of the first text part, so nothing leaves the context
unrecallable.  (Where a result had several text parts, recall gives their text
joined, not the split into parts.)

Cost: this stage runs before every model call.  Each user message is checked
once per configuration: the verdict is cached in ``message._memo["persist"]``,
so an unchanged history costs one dict lookup per message.  The verdict depends
on the tool name taken from the message before; messages are values, so the
same user message object never follows a different assistant message.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from .. import markers
from ..config import ContextConfig
from ..messages import Message, RedactedThinking, Text, Thinking, ToolResult
from ..account.archive import is_marked, original_text, text_chars, with_text
from ..account.keylines import ranked_lines
from .base import StageContext, StageResult, skipped

__all__ = ["original_text", "persist", "with_text"]

NAME = "persist"
_MEMO = "persist"
_PROBE_HANDLE = "sha256:" + "0" * 24  # same length as any handle
KEY_LINES = 8
"""Lines past the preview that a stored output's marker quotes, at most (about 1,300 characters): its
errors, definitions and rarest lines, so what the model is shown is not only the output's head."""
KEY_WINDOW = 16_000
"""Characters read for them at each end of a stored output, as an outcome reads (an account's key lines
read 6,000: its outputs are many).  50,000 took 13 ms on a shared run's 868,167-character output, this
2.6 ms: the middle of a huge log stays one recall away."""


def persist(messages: Sequence[Message], ctx: StageContext, tokens: int) -> tuple[list[Message], StageResult]:
    """Move oversized tool results to ``ctx.store``; see the module docstring for the rules."""
    cfg = ctx.config
    sig = (cfg.persist_chars, cfg.persist_shell_chars, cfg.persist_message_chars, cfg.shell_tools,
           _token_limit(ctx), ctx.counter.name)
    out: list[Message] | None = None
    handles: list[str] = []
    moved_chars = 0
    moved_results = 0
    moved_kind: set[str] = set()
    delta = 0
    for i in range(ctx.fresh_from, len(messages)):
        m = messages[i]
        memo = m._memo
        if memo.get(_MEMO) == sig:
            continue
        if m.role not in ("user", "assistant"):
            memo[_MEMO] = sig
            continue
        user = m.role == "user"
        pasted = _persist_text(m, ctx, handles, "text the user sent" if user else "text the assistant wrote")
        current = pasted[0] if pasted else m
        previous = messages[i - 1] if i > 0 else None
        results = _persist_message(current, previous, cfg, ctx, handles) if user and current.tool_results else None
        changed = results or pasted  # the results' message already carries the pasted text's change
        if changed is None:
            memo[_MEMO] = sig
            continue
        new_message, chars, count = changed
        if pasted is not None:
            moved_kind.add("text" if user else "answer")
        if results is not None:
            moved_kind.add("result")
        if pasted is not None and results is not None:
            chars, count = chars + pasted[1], count + pasted[2]
        new_message._memo[_MEMO] = sig
        if out is None:
            out = list(messages)
        out[i] = new_message
        moved_chars += chars
        moved_results += count
        delta += ctx.counter.count_message(new_message) - ctx.counter.count_message(m)
    if out is None:  # the input as is (pipeline.run passes a list: no copy)
        unchanged = messages if isinstance(messages, list) else list(messages)
        return unchanged, skipped(NAME, tokens, "no tool result over the size limits")
    what = {"result": "tool result", "text": "pasted text", "answer": "long answer"}.get(
        next(iter(moved_kind)) if len(moved_kind) == 1 else "", "item")
    detail = (
        f"persisted {moved_results} {what}{'s' if moved_results != 1 else ''} "
        f"({moved_chars:,} characters) to the artifact store"
    )
    return out, StageResult(
        stage=NAME,
        fired=True,
        tokens_before=tokens,
        tokens_after=tokens + delta,
        detail=detail,
        handles=tuple(handles),
        kept_before=ctx.fresh_from,
    )


def _persist_message(
    message: Message, previous: Message | None, cfg: ContextConfig, ctx: StageContext, handles: list[str]
) -> tuple[Message, int, int] | None:
    """The message with its oversized results persisted, the characters and results moved; None if none."""
    blocks = list(message.content)
    results = {j: b for j, b in enumerate(blocks) if isinstance(b, ToolResult)}
    sizes = {j: text_chars(r) for j, r in results.items()}
    names = {u.id: u.name for u in previous.tool_uses} if previous is not None else {}
    moved: dict[int, int] = {}  # block index -> characters moved

    def move(j: int) -> None:
        result = results[j]
        text = original_text(result)
        tool = names.get(result.tool_use_id)
        preview = _preview(text, cfg.preview_chars)
        keys = _keys(text, preview)
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        probe = markers.persisted(handle=_PROBE_HANDLE, chars=len(text), lines=lines, preview=preview, tool=tool, keys=keys)
        if len(probe) >= sizes[j]:
            return  # the marker would not be smaller: nothing to gain
        handle = ctx.store.put(text)
        marker = markers.persisted(handle=handle, chars=len(text), lines=lines, preview=preview, tool=tool, keys=keys)
        results[j] = with_text(result, marker)
        blocks[j] = results[j]
        moved[j] = len(text)
        sizes[j] = text_chars(results[j])
        handles.append(handle)

    for j, result in list(results.items()):
        if sizes[j] <= min(cfg.persist_chars, cfg.persist_shell_chars) or is_marked(result):
            continue
        limit = cfg.persist_shell_chars if names.get(result.tool_use_id) in cfg.shell_tools else cfg.persist_chars
        if sizes[j] > limit:
            move(j)

    total = sum(sizes.values())
    if total > cfg.persist_message_chars:
        ranked = sorted((j for j in results if j not in moved and not is_marked(results[j])),
                        key=lambda j: sizes[j], reverse=True)
        for j in ranked:
            if total <= cfg.persist_message_chars:
                break
            before = sizes[j]
            move(j)
            total += sizes[j] - before

    # The token rules.  A token is at least a character for any text the counters
    # see, so results shorter than the limit in characters need no count.
    limit = _token_limit(ctx)
    if sum(sizes.values()) > limit:
        count = ctx.counter.count_block
        tokens = {j: count(results[j]) for j in results if j not in moved and not is_marked(results[j])}
        for j in sorted(tokens, key=lambda j: tokens[j], reverse=True):
            others = sum(count(results[i]) for i in results if i != j)
            if tokens[j] <= limit and tokens[j] + others <= limit:
                break
            move(j)

    if not moved:
        return None
    return message.with_content(blocks), sum(moved.values()), len(moved)


def _persist_text(message: Message, ctx: StageContext, handles: list[str], what: str) -> tuple[Message, int, int] | None:
    """A text block too big for the budget (over the same token limit as a result: half the
    threshold) is stored like a result, with a preview and its handle — so one pasted log can
    never make the request fail, and the model can page through it.  The user's own text, and
    the assistant's (a model caught in a loop can write 150,000 characters in one answer; left
    verbatim, the next snip must take every round before it to get under the target).  An
    assistant message with thinking is left as it is: its blocks go back to the API exactly."""
    limit = _token_limit(ctx)
    if message.role == "assistant" and any(isinstance(b, (Thinking, RedactedThinking)) for b in message.content):
        return None
    blocks = list(message.content)
    moved = chars = 0
    for j, b in enumerate(blocks):
        if not isinstance(b, Text) or markers.is_marker(b.text) or len(b.text) < limit:
            continue  # a token is at least a character: shorter text cannot be over the limit
        if ctx.counter.count_text(b.text) <= limit:
            continue
        handle = ctx.store.put(b.text)
        handles.append(handle)
        preview = _preview(b.text, ctx.config.preview_chars)
        blocks[j] = replace(b, text=markers.persisted(
            handle=handle, chars=len(b.text), lines=b.text.count("\n") + 1,
            preview=preview, tool=None, what=what, keys=_keys(b.text, preview)))
        moved, chars = moved + 1, chars + len(b.text)
    return (message.with_content(blocks), chars, moved) if moved else None


def _token_limit(ctx: StageContext) -> int:
    return int(ctx.config.persist_threshold_fraction * ctx.budget.threshold)


def _keys(text: str, preview: str) -> list[str]:
    """The output's key lines that the preview does not show, at most ``KEY_LINES``, in their order."""
    shown = " ".join(preview.split())
    chosen = [(at, line) for at, line in ranked_lines(text, KEY_WINDOW) if line.rstrip("…") not in shown][:KEY_LINES]
    return [line for _, line in sorted(chosen)]


def _preview(text: str, limit: int) -> str:
    """The first ``limit`` characters, cut at a line end when one falls in the second half."""
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit)
    return text[:cut] if cut > limit // 2 else text[:limit]
