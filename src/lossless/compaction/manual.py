"""Manual compaction: ``compact_now`` and the ``compact`` tool an agent can expose.

    new, result = compact_now(history, ctx, compactor, instructions="Keep the API decisions.")

    tools = [*my_tools, COMPACT_TOOL]              # the model may ask for a compaction itself
    if use.name == "compact":                     # history ends with that call, not yet answered:
        new, result = compact_now(history, ctx, compactor, instructions=compact_instructions(use.input))
        history = [*new, tool_result_message]     # the call is still last in ``new``; answer it

A manual compaction runs whatever the size (the user asked), uses the same
``AutoCompactor`` as the pipeline so that a success closes its circuit breaker, and
like every compaction never replaces the history with a failed summary: check
``result.fired`` and show ``result.detail`` otherwise.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from ..messages import Message
from ..stages.base import StageContext, StageResult
from .autocompact import AutoCompactor
from .summarizer import Summarizer

__all__ = ["COMPACT_TOOL", "compact_instructions", "compact_now"]

COMPACT_TOOL: Mapping[str, Any] = {
    "name": "compact",
    "description": (
        "Summarise the conversation so far to free room in the context window. Use it at a natural break "
        "(a task finished, a phase of work done), not in the middle of an edit. Recent messages are kept word "
        "for word, the rest is replaced by a structured summary, and the originals stay retrievable by handle. "
        "Optionally say what the summary must preserve."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "instructions": {
                "type": "string",
                "description": "What the summary must keep in particular, e.g. 'all database schema decisions'.",
            }
        },
        "additionalProperties": False,
    },
}


def compact_instructions(tool_input: Mapping[str, Any] | None) -> str | None:
    """The ``instructions`` of a ``compact`` tool call, or None."""
    value = (tool_input or {}).get("instructions")
    return value.strip() or None if isinstance(value, str) else None


def compact_now(
    messages: Sequence[Message],
    ctx: StageContext,
    summarizer: AutoCompactor | Summarizer,
    instructions: str | None = None,
    *,
    tokens: int | None = None,
) -> tuple[list[Message], StageResult]:
    """Compact now (``trigger="manual"``).  Pass the session's ``AutoCompactor`` so that a
    success closes its breaker and its hooks run; a bare ``Summarizer`` gets a one-off one."""
    compactor = summarizer if isinstance(summarizer, AutoCompactor) else AutoCompactor(summarizer)
    ctx = replace(ctx, trigger="manual")
    return compactor.run(messages, ctx, ctx.count(messages) if tokens is None else tokens, instructions=instructions)
