"""The neutral message model: immutable values that every stage reads and writes.

Wire formats (Anthropic, OpenAI, Claude Code JSONL, mini-swe-agent) exist only in
``lossless.dialects``; everything in between speaks these types.

A message is a ``Message`` with a role and a tuple of blocks.  Blocks are frozen
dataclasses tagged by ``type``.  Nested JSON values (an image ``source``, a tool's
``input``, ``cache_control``, unknown wire keys kept in ``extra``) are plain dicts
that no code in lossless mutates: stages build new values instead.

Invariant protected here: values never change after construction, so a stage can
always hand back the same object for a message it did not touch, and the token
counts cached in ``Message._memo`` stay correct.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Mapping, Sequence, TypeAlias

Role: TypeAlias = Literal["user", "assistant", "system"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Text:
    text: str
    cache_control: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    type: Literal["text"] = field(default="text", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Image:
    source: Mapping[str, Any]
    cache_control: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    type: Literal["image"] = field(default="image", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Thinking:
    """Extended thinking. Never edited: the signature covers the exact text."""

    thinking: str
    signature: str
    extra: Mapping[str, Any] = field(default_factory=dict)
    type: Literal["thinking"] = field(default="thinking", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RedactedThinking:
    data: str
    extra: Mapping[str, Any] = field(default_factory=dict)
    type: Literal["redacted_thinking"] = field(default="redacted_thinking", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolUse:
    id: str
    name: str
    input: Mapping[str, Any]
    cache_control: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    type: Literal["tool_use"] = field(default="tool_use", init=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Opaque:
    """A block of a kind the neutral model does not describe — a server tool's call and its
    result, a document, a search result, an audio or file part — kept exactly as the wire had it
    (``data``, its own ``type`` included), counted by its size and never edited.  A stage moves
    it only with the message that holds it."""

    data: Mapping[str, Any]
    type: Literal["opaque"] = field(default="opaque", init=False)

    @property
    def kind(self) -> str:
        """The wire's own name for the block (``server_tool_use``, ``document``, ``input_audio``…)."""
        return str(self.data.get("type"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """The answer to one ``ToolUse``.

    ``content`` is either a string or a tuple of ``Text``/``Image`` blocks (and ``Opaque``
    ones: a document, a search result), as the wire format had it (kept so a round trip is
    lossless).
    """

    tool_use_id: str
    content: str | tuple[Text | Image | Opaque, ...]
    is_error: bool = False
    cache_control: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    type: Literal["tool_result"] = field(default="tool_result", init=False)


Block: TypeAlias = Text | Image | Thinking | RedactedThinking | ToolUse | ToolResult | Opaque
BLOCK_TYPES: tuple[type, ...] = (Text, Image, Thinking, RedactedThinking, ToolUse, ToolResult, Opaque)


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message. ``meta`` carries what is not content: usage, uuid, timestamp,
    the wire's own quirks (``string_content``, ``openai_role``) and lossless's
    own markers (``lossless`` → ``{"kind": ..., "handle": ...}``)."""

    role: Role
    content: tuple[Block, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)
    # Per-object cache (token counts, fingerprints). Not part of the value.
    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.role not in ("user", "assistant", "system"):
            raise ValueError(f"unknown role {self.role!r}")
        if not isinstance(self.content, tuple):
            object.__setattr__(self, "content", tuple(self.content))
        for block in self.content:
            if not isinstance(block, BLOCK_TYPES):
                raise TypeError(f"unknown block type {type(block).__name__!r} in {self.role} message")

    # -- convenience views -------------------------------------------------
    @property
    def tool_uses(self) -> tuple[ToolUse, ...]:
        uses: tuple[ToolUse, ...] | None = self._memo.get("tool_uses")  # content is frozen: found once
        if uses is None:
            uses = self._memo["tool_uses"] = tuple(b for b in self.content if isinstance(b, ToolUse))
        return uses

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        results: tuple[ToolResult, ...] | None = self._memo.get("tool_results")
        if results is None:
            results = self._memo["tool_results"] = tuple(b for b in self.content if isinstance(b, ToolResult))
        return results

    @property
    def text(self) -> str:
        """The concatenated plain text of the message (no tool or thinking content)."""
        return "\n".join(b.text for b in self.content if isinstance(b, Text))

    @property
    def marker(self) -> Mapping[str, Any] | None:
        """lossless's own marker when this message is a placeholder or summary."""
        return self.meta.get("lossless")

    def with_content(self, content: Sequence[Block]) -> Message:
        return replace(self, content=tuple(content))

    def with_meta(self, **updates: Any) -> Message:
        return replace(self, meta={**self.meta, **updates})


def user(text: str, **meta: Any) -> Message:
    return Message(role="user", content=(Text(text=text),), meta=meta)


def assistant(*blocks: Block | str, **meta: Any) -> Message:
    content = tuple(Text(text=b) if isinstance(b, str) else b for b in blocks)
    return Message(role="assistant", content=content, meta=meta)


def result_text(result: ToolResult) -> str:
    """The text of a tool result (images are shown as ``[image]``, other parts by their kind:
    ``[document]``)."""
    if isinstance(result.content, str):
        return result.content
    return "\n".join(b.text if isinstance(b, Text) else "[image]" if isinstance(b, Image) else f"[{b.kind}]"
                     for b in result.content)


_INPUT_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True)
"""A tool call's input as ``block_text`` writes it (made once: ``json.dumps`` with arguments makes one per call)."""


def block_text(block: Block) -> str:
    """Every character of a block that the model reads, for counting and search."""
    match block:
        case Text():
            return block.text
        case Thinking():
            return block.thinking
        case RedactedThinking():
            return block.data
        case ToolUse():
            return block.name + _INPUT_JSON.encode(block.input)
        case ToolResult():
            return result_text(block)
        case Image():
            return ""
        case Opaque():
            return _INPUT_JSON.encode(block.data)
    raise TypeError(f"unknown block type {type(block).__name__!r}")


def tool_names(messages: Sequence[Message]) -> dict[str, str]:
    """Map tool_use id → tool name over a history."""
    return {u.id: u.name for m in messages for u in m.tool_uses}
