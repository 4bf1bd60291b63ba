"""Token accounting: the ``TokenCounter`` protocol.

(The content-aware estimator, calibration and tiktoken counter are added here.)
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from .messages import Block, Message


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens. ``count_message`` is cached per message object (in
    ``Message._memo[name]``), so counting a history again costs O(new messages)."""

    name: str

    def count_text(self, text: str) -> int: ...

    def count_block(self, block: Block) -> int: ...

    def count_message(self, message: Message) -> int: ...

    def count_system(self, system: str | Sequence[Mapping[str, Any]] | None) -> int: ...

    def count_tools(self, tools: Sequence[Mapping[str, Any]] | None) -> int: ...


class _CharCounter:
    """Interim chars/4 counter (replaced by the content-aware estimator)."""

    name = "chars4"

    def count_text(self, text: str) -> int:
        return (len(text) + 3) // 4

    def count_block(self, block: Block) -> int:
        from .messages import block_text

        return 4 + self.count_text(block_text(block))

    def count_message(self, message: Message) -> int:
        n = message._memo.get(self.name)
        if n is None:
            n = message._memo[self.name] = 4 + sum(self.count_block(b) for b in message.content)
        return n

    def count_system(self, system: str | Sequence[Mapping[str, Any]] | None) -> int:
        if not system:
            return 0
        import json

        return self.count_text(system if isinstance(system, str) else json.dumps(system))

    def count_tools(self, tools: Sequence[Mapping[str, Any]] | None) -> int:
        import json

        return self.count_text(json.dumps(tools)) if tools else 0


def default_counter() -> TokenCounter:
    """The counter recollect uses when none is given."""
    return _CharCounter()
