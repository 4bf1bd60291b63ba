"""Prompt-cache breakpoints: where a request marks the prefix the provider may cache.

    messages, system, tools = with_breakpoints(view.neutral, system, tools)
    provider.send(Request(messages=messages, system=system, tools=tools, ...))

Anthropic caches a prompt's prefix up to each block marked ``cache_control`` and reads it
back on a later request that begins the same way; a request may carry four marks.  A prompt
is read in the order tools → system → messages, so three marks cover what changes least
often first:

- the last tool definition (the tools, cached even when the system prompt changes);
- the last block of the system prompt (the tools and the system prompt);
- the last block of the newest message that can carry one (the whole request, which the
  next request extends: it reads this prefix and writes only what was appended).

Marks already in the request are the caller's and stay; a part that has one gets no other,
and when fewer than three slots are free the newest message is marked first, then the
system prompt, then the tools.  The marks go on the request only, never on the history a
caller keeps (so they do not pile up turn after turn).  OpenAI caches prefixes by itself and
its adapter drops the marks, so they are harmless there.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from .messages import Image, Message, Text, ToolResult, ToolUse
from .rounds import MAX_CACHE_BREAKPOINTS

__all__ = ["EPHEMERAL", "breakpoints", "with_breakpoints"]

EPHEMERAL: Mapping[str, str] = {"type": "ephemeral"}
"""The mark itself: the default cache lifetime."""

System = str | Sequence[Mapping[str, Any]] | None
_MARKABLE = (Text, Image, ToolResult, ToolUse)  # thinking blocks cannot carry a mark


def breakpoints(messages: Sequence[Message], system: System = None,
                tools: Sequence[Mapping[str, Any]] | None = None) -> int:
    """How many ``cache_control`` marks the request already carries."""
    marked = sum(1 for m in messages for b in m.content if getattr(b, "cache_control", None))
    if system is not None and not isinstance(system, str):
        marked += sum(1 for b in system if b.get("cache_control"))
    return marked + sum(1 for t in tools or () if t.get("cache_control"))


def with_breakpoints(
    messages: Sequence[Message],
    system: System = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[tuple[Message, ...], str | tuple[Mapping[str, Any], ...] | None, tuple[Mapping[str, Any], ...]]:
    """The request's messages, system prompt and tools with the marks placed (see the module
    docstring); never more than ``MAX_CACHE_BREAKPOINTS`` in all.  The inputs are not changed."""
    out = tuple(messages)
    blocks: str | tuple[Mapping[str, Any], ...] | None = system if system is None or isinstance(system, str) else tuple(system)
    defs = tuple(tools or ())
    free = MAX_CACHE_BREAKPOINTS - breakpoints(out, blocks, defs)
    if free > 0:
        marked = _mark_newest(out)
        if marked is not None:
            out, free = marked, free - 1
    if free > 0 and blocks and not _has_mark(blocks):
        blocks, free = _mark_system(blocks), free - 1
    if free > 0 and defs and not any(t.get("cache_control") for t in defs):
        defs = (*defs[:-1], {**defs[-1], "cache_control": dict(EPHEMERAL)})
    return out, blocks, defs


def _has_mark(system: str | tuple[Mapping[str, Any], ...]) -> bool:
    return not isinstance(system, str) and any(b.get("cache_control") for b in system)


def _mark_system(system: str | tuple[Mapping[str, Any], ...]) -> tuple[Mapping[str, Any], ...]:
    if isinstance(system, str):
        return ({"type": "text", "text": system, "cache_control": dict(EPHEMERAL)},)
    return (*system[:-1], {**system[-1], "cache_control": dict(EPHEMERAL)})


def _mark_newest(messages: tuple[Message, ...]) -> tuple[Message, ...] | None:
    """``messages`` with the last markable block of the newest message that has one marked;
    None when that block is marked already, or no message has a markable block."""
    for i in range(len(messages) - 1, -1, -1):
        blocks = list(messages[i].content)
        for j in range(len(blocks) - 1, -1, -1):
            block = blocks[j]
            if isinstance(block, _MARKABLE):
                if block.cache_control:
                    return None
                blocks[j] = replace(block, cache_control=dict(EPHEMERAL))
                return (*messages[:i], messages[i].with_content(blocks), *messages[i + 1:])
    return None
