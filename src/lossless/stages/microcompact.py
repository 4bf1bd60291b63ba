"""Stage 3, micro-compact: old tool results become one-line markers, in batches.

Which results: those of tools in ``config.compactable_tools``.  The results of
the ``micro_keep`` most recent compactable calls are kept (counted per call,
reads included); so are, always:

- results in the last message of the history (the model has not seen them yet);
- results of ``config.read_tools`` when ``micro_keep_reads`` is set;
- results already replaced by a marker (persisted or cleared): never touched again (a folded
  one is cleared like any other, its marker naming the same whole original);
- results under ``MIN_CLEAR_CHARS`` characters, which a marker would hardly shrink.

Error results are cleared like any other: a short error message is kept by the
size floor, and an old failing-test dump is as stale as any other output (it
stays recallable).

When: clearing rewrites the prompt prefix from the first cleared result on, so
the prompt cache is lost from there.  To make that rare, the stage fires only

- under pressure — ``tokens > micro_trigger_fraction × budget.threshold`` — and
  when the clearable results total at least ``micro_min_batch_fraction ×
  budget.window`` tokens; it then clears *all* of them at once, so the next
  firing is far away; or
- when the cache is cold anyway — ``ctx.now`` is set, the last assistant
  message's ``meta["timestamp"]`` is more than ``micro_idle_minutes`` old, and so is
  the conversation's previous call when the manager saw one (``ctx.last_call``: a
  replayed session's or a skewed clock's old timestamps do not make a warm cache cold
  on every call) —
  keeping ``micro_idle_keep`` recent calls, whatever the batch size, and the head
  snip pins (the task and the first rounds of work on it).

Every cleared original is written to ``ctx.store`` first and the marker
(``markers.cleared``) names the tool, what the result said in one line (its exit
status, error or last meaningful line) and the handle; the call itself stays in
context, so the model still sees what was run on what.  Stored text and image
handling follow ``persist.original_text``/``with_text``: images stay in place.

Cost: each user message's candidates (tool, size, tokens) are cached in
``message._memo["micro"]``, so deciding not to fire costs O(1) below the trigger
and one dict lookup per message above it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, NamedTuple, Sequence

from .. import markers
from ..messages import Message, ToolResult
from ..account.outcome import outcome
from .base import StageContext, StageResult, skipped
from .snip import pinned_head
from ..account.archive import is_marked, original_text, text_chars, with_text

__all__ = ["MIN_CLEAR_CHARS", "microcompact"]

NAME = "microcompact"
_MEMO = "micro"
OUTCOME_CHARS = 160
"""The marker keeps what the result said in one line (exit status, error or last line)."""
MIN_CLEAR_CHARS = 600
"""Results shorter than this are never cleared: the marker is about 350 characters."""


# (block index, tool, clearable: neither a marker nor under MIN_CLEAR_CHARS, tokens), cached per message
_Entry = tuple[int, str, bool, int]


class _Call(NamedTuple):
    message: int
    block: int
    tool: str
    tokens: int


def microcompact(messages: Sequence[Message], ctx: StageContext, tokens: int) -> tuple[list[Message], StageResult]:
    """Clear old compactable tool results in one batch; see the module docstring for when."""
    cfg = ctx.config
    unchanged = messages if isinstance(messages, list) else list(messages)  # pipeline.run passes a list: no copy
    idle_minutes = _idle_minutes(messages, ctx.now, ctx.last_call)
    idle = idle_minutes is not None and idle_minutes > cfg.micro_idle_minutes
    trigger = cfg.micro_trigger_fraction * ctx.budget.threshold
    if not idle and tokens <= trigger:
        return unchanged, skipped(NAME, tokens, f"{tokens:,} tokens, not above the trigger {trigger:,.0f}")

    keep = cfg.micro_idle_keep if idle else cfg.micro_keep
    spare_reads = cfg.read_tools if cfg.micro_keep_reads else frozenset()
    targets = _targets(messages, ctx, keep, spare_reads)
    if idle:  # a cold cache is a chance to save, not a need for room: the pinned first rounds stay
        head = pinned_head(messages, ctx)
        targets = [c for c in targets if c.message >= head]
    clearable = sum(c.tokens for c in targets)
    if not targets:
        return unchanged, skipped(NAME, tokens, "no old tool result to clear")
    minimum = cfg.micro_min_batch_fraction * ctx.budget.window
    if not idle and clearable < minimum:
        why = f"batch too small: {len(targets)} results, {clearable:,} tokens clearable < {minimum:,.0f}"
        return unchanged, skipped(NAME, tokens, why)

    out = list(messages)
    handles: list[str] = []
    by_message: dict[int, list[_Call]] = {}
    for c in targets:
        by_message.setdefault(c.message, []).append(c)
    delta = 0
    for i, group in by_message.items():
        old = messages[i]
        blocks = list(old.content)
        for c in group:
            result = blocks[c.block]
            assert isinstance(result, ToolResult)
            text = original_text(result)
            behind = markers.folded_handle(text)  # a folded result's whole text is stored already
            if behind is not None and behind in ctx.store:
                text = ctx.store.get(behind)
            handle = ctx.store.put(text)
            handles.append(handle)
            said = outcome(text, is_error=result.is_error, limit=OUTCOME_CHARS)
            blocks[c.block] = with_text(result, markers.cleared(handle=handle, tool=c.tool, chars=len(text),
                                                                outcome=said))
        new = old.with_content(blocks)
        out[i] = new
        delta += ctx.counter.count_message(new) - ctx.counter.count_message(old)
    why = f"idle {idle_minutes:,.0f} min, cache cold" if idle else f"above {trigger:,.0f} tokens"
    detail = (
        f"cleared {len(targets)} older tool result{'s' if len(targets) != 1 else ''} "
        f"(about {-delta:,} tokens; {why}); kept the {keep} most recent"
    )
    return out, StageResult(
        stage=NAME,
        fired=True,
        tokens_before=tokens,
        tokens_after=tokens + delta,
        detail=detail,
        handles=tuple(handles),
    )


def _targets(messages: Sequence[Message], ctx: StageContext, keep: int, spare: frozenset[str]) -> list[_Call]:
    """The clearable results older than the ``keep`` most recent compactable calls, oldest first.

    Never one in the last message (its results are new to the model) nor of a tool in ``spare``.
    """
    cfg = ctx.config
    sig = (cfg.compactable_tools, ctx.counter.name)
    found: list[tuple[int, tuple[_Entry, ...]]] = []
    total = 0
    for i, m in enumerate(messages):
        if m.role != "user":
            continue
        cached = m._memo.get(_MEMO)
        if cached is not None and cached[0] == sig:
            entries = cached[1]
        else:
            entries = _scan(m, messages[i - 1] if i > 0 else None, ctx)
            m._memo[_MEMO] = (sig, entries)
        if entries:
            found.append((i, entries))
            total += len(entries)
    older = total - keep
    last = len(messages) - 1
    out: list[_Call] = []
    seen = 0
    for i, entries in found:
        if seen >= older:
            break
        for block, tool, clearable, tokens in entries[: older - seen]:
            if clearable and i != last and tool not in spare:
                out.append(_Call(i, block, tool, tokens))
        seen += len(entries)
    return out


def _scan(message: Message, previous: Message | None, ctx: StageContext) -> tuple[_Entry, ...]:
    if previous is None or previous.role != "assistant" or not message.tool_results:
        return ()
    names = {u.id: u.name for u in previous.tool_uses}
    entries = []
    for j, b in enumerate(message.content):
        if not isinstance(b, ToolResult):
            continue
        tool = names.get(b.tool_use_id)
        if tool is None or tool not in ctx.config.compactable_tools:
            continue
        clearable = text_chars(b) >= MIN_CLEAR_CHARS and (not is_marked(b) or _folded(b))
        entries.append((j, tool, clearable, ctx.counter.count_block(b) if clearable else 0))
    return tuple(entries)


def _folded(result: ToolResult) -> bool:
    return markers.folded_handle(original_text(result)) is not None


def _idle_minutes(messages: Sequence[Message], now: float | None, last_call: float | None = None) -> float | None:
    """Minutes since the last assistant message — or since the previous call, if that was more
    recent — or None when the message's time is unknown."""
    if now is None:
        return None
    for m in reversed(messages):
        if m.role == "assistant":
            then = _unix(m.meta.get("timestamp"))
            if then is None:
                return None
            return (now - (then if last_call is None else max(then, last_call))) / 60.0
    return None


def _unix(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.timestamp()
    return None
