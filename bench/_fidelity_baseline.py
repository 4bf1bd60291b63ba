"""The baseline peer: the first message and the most recent rounds verbatim, up to half the window.

    keep = RecentRounds(threshold=..., keep_tokens=window // 2, count=counter.count_message)
    messages = keep(history, overhead)          # unchanged until the history passes the threshold

What the best peer measured on real sessions keeps (DESIGN.md, "What a compacted context
holds"), reimplemented so the bench needs no other code: when the request passes the
auto-compact threshold, everything is dropped but the first message and the most recent
*rounds* that fit in ``keep_tokens`` (system prompt included).  A round is an assistant
message with the user message(s) carrying its tool results — never split; a user message of
text alone is a unit of its own.  The most recent unit is always kept, whatever its size.
Nothing here imports lossless (messages are read by duck typing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def _has_results(message: Any) -> bool:
    return any(b.type == "tool_result" for b in message.content)


def units(messages: Sequence[Any]) -> list[list[int]]:
    """Indices of ``messages[1:]`` grouped into rounds (and lone user messages), in order."""
    out: list[list[int]] = []
    for i in range(1, len(messages)):
        m = messages[i]
        if m.role == "assistant" or not out or not _has_results(m):
            out.append([i])
        else:
            out[-1].append(i)  # tool results join the round that asked for them
    return out


def keep_recent(messages: Sequence[Any], budget: int, count: Callable[[Any], int]) -> list[Any]:
    """The first message plus the latest whole units whose tokens, with it, stay within ``budget``."""
    if len(messages) <= 1:
        return list(messages)
    used = count(messages[0])
    kept: list[list[int]] = []
    for unit in reversed(units(messages)):
        size = sum(count(messages[i]) for i in unit)
        if kept and used + size > budget:
            break
        kept.append(unit)
        used += size
    return [messages[0]] + [messages[i] for unit in reversed(kept) for i in unit]


class RecentRounds:
    """The baseline as a live policy: cut only when the request passes ``threshold``."""

    def __init__(self, *, threshold: int, keep_tokens: int, count: Callable[[Any], int]) -> None:
        self.threshold, self.keep_tokens, self.count = threshold, keep_tokens, count

    def __call__(self, history: Sequence[Any], overhead: int = 0) -> list[Any]:
        if overhead + sum(self.count(m) for m in history) <= self.threshold:
            return list(history)
        return keep_recent(history, self.keep_tokens - overhead, self.count)
