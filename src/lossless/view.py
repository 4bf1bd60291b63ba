"""What ``prepare`` returns, and the bookkeeping that makes a turn cost O(new messages)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .messages import Message
from .stages.base import StageResult


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextState:
    tokens: int
    """Estimated tokens of the request (messages + system + tools), calibrated when possible."""
    window: int
    threshold: int
    percent_left: float
    """Percent of the window still free: 15.9k of a 24k window is 33.8 % left."""
    above_warning: bool
    above_error: bool
    above_threshold: bool
    blocking: bool
    """True when even after every stage the request is above the blocking limit."""
    calibrated: bool
    messages: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    messages: list[Any]
    """Ready to send, in the form given (Anthropic dicts in, Anthropic dicts out)."""
    state: ContextState
    events: list[StageResult] = field(default_factory=list)
    """What each stage did on this call (fired or not, and why)."""
    neutral: list[Message] = field(default_factory=list)

    @property
    def fired(self) -> list[StageResult]:
        return [e for e in self.events if e.fired]


def fingerprint(messages: Sequence[Any], k: int | None = None) -> tuple[Any, ...]:
    """Length and the first, middle and last of the first ``k`` items (compared by identity).

    O(1), and kept instead of the list itself, so a caller that appends to its own
    list in place is still seen to have added messages.  Messages are values: an
    edit in place of an earlier message is not detected (call ``reset()``)."""
    k = len(messages) if k is None else k
    if not k:
        return ()
    return (k, messages[0], messages[k // 2], messages[k - 1])


def round_start(messages: Sequence[Message], index: int) -> int:
    """Back up from ``index`` to the assistant message that opens its round."""
    i = min(index, len(messages)) - 1
    while i > 0 and messages[i].role != "assistant":
        i -= 1
    return max(i, 0)


def context_tokens(usage: Any) -> int:
    """The real prompt size from a provider's usage, whatever its shape: Anthropic
    (input + cache writes + cache reads), OpenAI (prompt_tokens) or lossless's Usage."""
    if usage is None:
        return 0
    get = usage.get if isinstance(usage, Mapping) else lambda k, d=None: getattr(usage, k, d)
    if get("prompt_tokens") is not None:
        return int(get("prompt_tokens") or 0)
    if get("context_tokens") is not None and not isinstance(usage, Mapping):
        return int(usage.context_tokens)
    return int(get("input_tokens") or 0) + int(get("cache_creation_input_tokens") or 0) + int(
        get("cache_read_input_tokens") or 0
    )
