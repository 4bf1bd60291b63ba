"""Where the context goes, as ``/context`` shows it: the window by category.

``inspect_session`` reads a recorded session the way ``compact`` and ``replay`` do:

- the **live context** is what follows the last compaction recorded in the file
  (its summary included) — what the next request carries, and what ``compact``
  works on; the **whole history** (every boundary bridged) is reported beside it,
  with how many boundaries it crossed;
- what each request carries that the file does not show (a Claude Code session
  has no system prompt or tool schemas) is inferred from the first recorded usage
  by ``infer_unseen_tokens`` — the inference ``replay --unseen-tokens auto`` makes;
- the window is split like the budget the pipeline acts on: the categories in use,
  the free room below the auto-compact threshold, the auto-compact buffer and the
  room reserved for the answer.  The categories sum exactly to the tokens in use.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Sequence

from .calibration import plausible
from .config import ContextConfig
from .memory.inject import SYSTEM_HEADER
from .messages import Image, Message, Opaque, RedactedThinking, Text, Thinking, ToolResult, ToolUse, block_text, tool_names
from .session import Session
from .tokens import TokenCounter, default_counter
from .view import context_tokens

MEMORY_TEXT = re.compile(r'<memory id="|Contents of \S*(?:CLAUDE|AGENTS|LOSSLESS)\.md')
"""Memories in a message: lossless's attachments, or a harness's instruction files."""

MEMORY_INDEX = SYSTEM_HEADER.split(" (")[0]
"""How lossless's memory index opens in a system prompt (``memory.system_index``)."""

CATEGORIES = (
    "system prompt", "tool schemas", "unseen system prompt and tools", "memory", "summaries", "user messages", "assistant text",
    "thinking", "tool calls", "tool results", "images", "other blocks",
)
"""Categories of the tokens in use, in the order the bar shows them."""


def infer_unseen_tokens(session: Session, counter: TokenCounter) -> int:
    """Recorded size of the first call minus our count of what the file shows of it
    (0 when the file records no usage): the system prompt and tool schemas a harness
    sends but does not write down."""
    for call in session.calls:
        reported = context_tokens(call.usage)
        if reported > 0:
            shown = counter.count_system(session.system) + sum(
                counter.count_message(m) for m in session.messages[session.request_start(call) : call.index]
            )
            return max(0, reported - shown)
    return 0


def live_anchor(session: Session) -> tuple[int, int] | None:
    """``(reported, k)``: the provider's count of the live context's last recorded request,
    which was the first ``k`` messages of the live context (from the last boundary); None
    when the live context has no recorded usage.  ``inspect`` and ``compact`` anchor their
    figures to it (reported + the estimate of what followed), as ``ContextManager.observe``
    anchors a live session's: the estimator's error is then confined to what followed."""
    start = max((b.index for b in session.boundaries), default=0)
    for call in reversed(session.calls):
        if call.index < start:
            return None
        reported = context_tokens(call.usage)
        if reported > 0 and session.request_start(call) == start:
            return reported, call.index - start
    return None


def category(message: Message, block: Any) -> str:
    """The category of one block of ``message`` (one of ``CATEGORIES``)."""
    kind = (message.meta.get("lossless") or {}).get("kind") if isinstance(message.meta.get("lossless"), dict) \
        else None
    if message.meta.get("is_compact_summary") or kind in ("summary", "snip"):
        return "summaries"
    match block:
        case ToolUse():
            return "tool calls"
        case ToolResult():
            return "tool results"
        case Thinking() | RedactedThinking():
            return "thinking"
        case Image():
            return "images"
        case Opaque():
            return "other blocks"
        case Text() if MEMORY_TEXT.search(block.text):
            return "memory"
        case Text():
            return "user messages" if message.role == "user" else "assistant text"
    raise ValueError(f"unknown block type {type(block).__name__!r}")


def inspect_session(
    session: Session,
    *,
    window: int = 200_000,
    max_output: int | None = None,
    unseen_tokens: int | None = None,
    counter: TokenCounter | None = None,
    top: int = 10,
    tools: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """A report (plain data, JSON-ready) of the live context of ``session`` against a
    ``window``; ``unseen_tokens`` None infers the overhead the file does not show;
    ``tools`` are the tool schemas the file holds, if any (a request body's)."""
    counter = counter or default_counter()
    inferred = unseen_tokens is None
    if unseen_tokens is None:
        unseen = max(0, infer_unseen_tokens(session, counter) - counter.count_tools(tools)) if tools else \
            infer_unseen_tokens(session, counter)
    else:
        unseen = unseen_tokens
    start = max((b.index for b in session.boundaries), default=0)
    live = session.messages[start:]
    anchor = live_anchor(session) if inferred or unseen else None  # usage includes the unseen part
    distrusted = None
    if anchor is not None:
        # A report far under lossless's count of the same request was not of what the file shows: the
        # requests were made smaller on their way (through lossless proxy, say), so it anchors nothing.
        counted = unseen + counter.count_system(session.system) + (counter.count_tools(tools) if tools else 0) + sum(
            counter.count_message(m) for m in live[: anchor[1]])
        if not plausible(anchor[0], counted, window // 20):
            distrusted, anchor = {"reported": anchor[0], "counted": counted}, None
    measured = anchor[0] + sum(counter.count_message(m) for m in live[anchor[1]:]) if anchor else None
    report = inspect_messages(live, system=session.system, window=window, counter=counter, top=top,
                              unseen_tokens=unseen, max_output=max_output, first=start, tools=tools,
                              measured=measured)
    last = session.calls[-1] if session.calls else None
    report.update({
        "file": str(session.path) if session.path else None,
        "format": session.format,
        "unseen_inferred": inferred,
        "live_start": start,
        "history": {
            "messages": len(session.messages),
            "tokens": report["overhead"] + sum(counter.count_message(m) for m in session.messages),
            "boundaries": [{"message": b.index, "trigger": b.trigger, "pre_tokens": b.pre_tokens}
                           for b in session.boundaries],
        },
        "calls": len(session.calls),
        "usage_distrusted": distrusted,
        "last_recorded": None if last is None or not context_tokens(last.usage) else {
            "message": last.index, "tokens": context_tokens(last.usage),
            "estimate": report["overhead"] + sum(
                counter.count_message(m) for m in session.messages[session.request_start(last):last.index]),
        },
    })
    return report


def inspect_messages(
    messages: Sequence[Message],
    *,
    system: Any = None,
    window: int = 200_000,
    counter: TokenCounter | None = None,
    top: int = 10,
    unseen_tokens: int = 0,
    max_output: int | None = None,
    first: int = 0,
    tools: Sequence[Any] | None = None,
    measured: int | None = None,
) -> dict[str, Any]:
    """A report of how the tokens of one context (``messages`` plus ``system``, ``tools``
    and ``unseen_tokens``) are spent; message indexes are reported from ``first``.

    ``measured`` is the context's size by the provider's count (see ``live_anchor``): the
    categories are then scaled to add up to it — all but the unseen tokens, which were
    measured already — and ``estimate`` keeps the plain count."""
    counter = counter or default_counter()
    budget = ContextConfig(window=window, max_output=max_output).budget
    names = tool_names(messages)
    by_role: Counter[str] = Counter()
    by_type: Counter[str] = Counter()
    by_tool: Counter[str] = Counter()
    by_category: Counter[str] = Counter()
    items: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        total = counter.count_message(m)
        by_role[m.role] += total
        framing = total - sum(counter.count_block(b) for b in m.content)
        for k, b in enumerate(m.content):
            n = counter.count_block(b)
            by_type[b.type] += n
            by_category[category(m, b)] += n + (framing if k == 0 else 0)
            tool = b.name if isinstance(b, ToolUse) else names.get(b.tool_use_id) if isinstance(b, ToolResult) else None
            if tool:
                by_tool[tool] += n
            preview = " ".join(block_text(b)[:100].split())
            items.append({"message": i + first, "role": m.role, "type": b.type, "tool": tool, "tokens": n,
                          "preview": preview})
        if not m.content:
            by_category["user messages" if m.role == "user" else "assistant text"] += framing
    system_tokens = counter.count_system(system)
    if isinstance(system, str) and MEMORY_INDEX in system:  # the memory index is memory, not the prompt
        memory_index = system_tokens - counter.count_system(system[: system.index(MEMORY_INDEX)])
        by_category["memory"] += memory_index
        system_tokens -= memory_index
    tool_tokens = counter.count_tools(tools) if tools else 0
    by_category["system prompt"] += system_tokens
    by_category["tool schemas"] += tool_tokens
    by_category["unseen system prompt and tools"] += unseen_tokens
    overhead = counter.count_system(system) + tool_tokens + unseen_tokens
    estimate = overhead + sum(by_role.values())
    if measured is not None and measured < unseen_tokens:  # an --unseen-tokens the usage contradicts
        measured = None
    used = estimate if measured is None else measured
    if measured is not None:
        _scale(by_category, used - unseen_tokens, skip="unseen system prompt and tools")
    items.sort(key=lambda it: -it["tokens"])
    reserved = budget.window - budget.effective
    buffer = budget.effective - budget.threshold
    categories = [{"name": c, "tokens": by_category[c]} for c in CATEGORIES if by_category[c]]
    categories += [
        {"name": "free", "tokens": max(0, budget.threshold - used)},
        {"name": "auto-compact buffer", "tokens": buffer},
        {"name": "reserved for the answer", "tokens": reserved},
    ]
    return {
        "messages": len(messages),
        "tokens": used,
        "estimate": estimate,
        "calibrated": measured is not None,
        "system_tokens": system_tokens,
        "tool_tokens": tool_tokens,
        "unseen_tokens": unseen_tokens,
        "overhead": overhead,
        "window": window,
        "threshold": budget.threshold,
        "percent_of_window": round(100.0 * used / window, 1),
        "percent_left": round(100.0 * (window - used) / window, 1),
        "categories": categories,
        "by_role": dict(by_role.most_common()),
        "by_type": dict(by_type.most_common()),
        "by_tool": dict(by_tool.most_common()),
        "biggest": items[:top],
    }


def _scale(counts: Counter[str], total: int, *, skip: str) -> None:
    """Scale ``counts`` (all but ``skip``) in place to add up to ``total``, by largest
    remainder so the sum is exact and no category turns negative."""
    keys = [k for k, v in counts.items() if k != skip and v > 0]
    base = sum(counts[k] for k in keys)
    if not keys or base <= 0 or total < 0:
        return
    exact = {k: counts[k] * total / base for k in keys}
    for k in keys:
        counts[k] = int(exact[k])
    for k in sorted(keys, key=lambda k: exact[k] - counts[k], reverse=True)[: total - sum(counts[k] for k in keys)]:
        counts[k] += 1
