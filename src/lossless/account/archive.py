"""What a removal stores: a result's text as it is kept, and the exact JSON behind a range handle.

    original_text(result)        # the text persist and micro-compact store for a result
    with_text(result, marker)    # the result with its text replaced (images stay)
    archive_json(messages)       # the Anthropic ``messages`` list of a removed range, deterministic

Pure functions below the stages that use them (persist, micro-compact, snip, the summaries)
and the account that maps what they removed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Mapping, Sequence

from .. import markers
from ..dialects.anthropic import block_to_dict, message_to_dict
from ..messages import Image, Message, Opaque, Text, ToolResult

__all__ = ["archive_json", "is_marked", "original_text", "text_chars", "with_text"]


def original_text(result: ToolResult) -> str:
    """The text of a result as it is stored: the string, or its Text parts joined."""
    if isinstance(result.content, str):
        return result.content
    return "\n".join(b.text for b in result.content if isinstance(b, Text))


def text_chars(result: ToolResult) -> int:
    if isinstance(result.content, str):
        return len(result.content)
    parts = [len(b.text) for b in result.content if isinstance(b, Text)]
    return sum(parts) + max(0, len(parts) - 1)


def is_marked(result: ToolResult) -> bool:
    """True when the result's text is already one of lossless's markers."""
    content = result.content
    if isinstance(content, str):
        return markers.is_marker(content)
    first = next((b for b in content if isinstance(b, Text)), None)
    return first is not None and markers.is_marker(first.text)


def with_text(result: ToolResult, text: str) -> ToolResult:
    """The result with its text replaced by ``text``; images (and parts of other kinds: a
    document, a search result) stay in place, so what is stored is the text alone."""
    if isinstance(result.content, str):
        return replace(result, content=text)
    content: list[Text | Image | Opaque] = []
    placed = False
    for b in result.content:
        if isinstance(b, Text):
            if not placed:
                content.append(Text(text=text))
                placed = True
        else:
            content.append(b)
    if not placed:
        content.insert(0, Text(text=text))
    return replace(result, content=tuple(content))


def archive_json(messages: Sequence[Message]) -> str:
    """The exact JSON stored behind a handle: the Anthropic ``messages`` list of the removed part.

    Deterministic (same messages → same bytes, hence the same handle), and read back with
    ``json.loads`` + ``dialects.anthropic.from_anthropic``.  A system message (OpenAI
    dialect), which the Anthropic wire cannot carry, is written as ``{"role": "system", ...}``.
    """
    wire = [
        {"role": "system", "content": [block_to_dict(b) for b in m.content]} if m.role == "system"
        else message_to_dict(m, i)
        for i, m in enumerate(messages)
    ]
    return json.dumps(wire, ensure_ascii=False, separators=(",", ":"), default=_plain)


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"cannot store a {type(value).__name__!r} in a message archive")
