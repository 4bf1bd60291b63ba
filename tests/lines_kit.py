"""What the echo and fold tests check a taken-out line against: the line keys (``fold.key``) that
tool results and calls' inputs show, read here on their own rather than through the stages'
caches, so a test does not check the code with itself."""

from __future__ import annotations

from collections.abc import Sequence

from lossless.messages import Message, result_text
from lossless.stages.fold import key


def _strings(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def output_keys(messages: Sequence[Message]) -> set[str]:
    """The keys of every line the tool results in ``messages`` show."""
    return {key(x) for m in messages for r in m.tool_results for x in result_text(r).split("\n")}


def input_keys(messages: Sequence[Message]) -> set[str]:
    """The keys of every line the inputs of the calls in ``messages`` show (any string, however nested)."""
    return {key(x) for m in messages for u in m.tool_uses for s in _strings(u.input) for x in s.split("\n")}
