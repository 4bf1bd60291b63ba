"""Anthropic Messages API dicts ⇄ neutral messages, losslessly.

    msgs = from_anthropic(body["messages"])       # list[Message]
    assert to_anthropic(msgs) == body["messages"]  # for any valid Messages-API list

What keeps the round trip exact:

- ``"content": "hi"`` becomes one ``Text`` and ``meta["string_content"] = True``;
- block keys the neutral model has no field for (``citations``, Claude Code's
  ``caller``, ``cache_control: null``, an explicit ``"is_error": false``...) go to
  the block's ``extra`` and are written back as they were;
- message keys other than ``role``/``content`` go to ``meta["anthropic_extra"]``;
- a ``tool_result`` without ``content`` gets ``content=""`` and the private
  ``extra`` flag ``lossless_no_content``.

Private ``extra`` keys — ``synthetic`` and anything starting with ``openai_``,
``mswe_`` or ``lossless_`` — belong to other adapters or to lossless and are
never written to the Anthropic wire.

Unknown block types are a ``FormatError`` naming the message index and the type:
the neutral model cannot carry them, and dropping them silently would break the
"nothing is lost" promise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence  # not typing's aliases: an isinstance through them costs ~1 µs
from typing import Any

from ..errors import FormatError, InputError
from ..messages import Block, Image, Message, Opaque, RedactedThinking, Text, Thinking, ToolResult, ToolUse

__all__ = [
    "block_from_dict",
    "block_to_dict",
    "blocks_from_content",
    "from_anthropic",
    "message_from_dict",
    "message_to_dict",
    "to_anthropic",
]

_PRIVATE_PREFIXES = ("openai_", "mswe_", "lossless_")
_PRIVATE_KEYS = frozenset({"synthetic", "lossless"})
_NO_CONTENT = "lossless_no_content"


def _where(index: int | None, block: int | None = None) -> str:
    parts = []
    if index is not None:
        parts.append(f"message {index}")
    if block is not None:
        parts.append(f"block {block}")
    return (", ".join(parts) + ": ") if parts else ""


def _split(d: Mapping[str, Any], known: tuple[str, ...]) -> tuple[Mapping[str, Any] | None, dict[str, Any]]:
    """(cache_control or None, every other key not in ``known``)."""
    extra = {k: v for k, v in d.items() if k not in known and k != "type" and k != "cache_control"}
    cc = d.get("cache_control")
    if "cache_control" in d and cc is None:
        extra["cache_control"] = None
    return cc, extra


def _need(d: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str, btype: str) -> Any:
    if key not in d:
        raise FormatError(f"{where}{btype} block has no {key!r}")
    value = d[key]
    if not isinstance(value, kind):
        raise FormatError(f"{where}{btype} block: {key!r} is {type(value).__name__}, not the expected type")
    return value


def block_from_dict(d: Any, index: int | None = None, block: int | None = None) -> Block:
    """One content block dict → a neutral block. ``index``/``block`` only locate errors."""
    where = _where(index, block)
    if not isinstance(d, Mapping):
        raise FormatError(f"{where}a content block must be an object, not {type(d).__name__}")
    btype = d.get("type")
    match btype:
        case "text":
            cc, extra = _split(d, ("text",))
            return Text(text=_need(d, "text", str, where, btype), cache_control=cc, extra=extra)
        case "image":
            cc, extra = _split(d, ("source",))
            return Image(source=_need(d, "source", Mapping, where, btype), cache_control=cc, extra=extra)
        case "thinking":
            _, extra = _split(d, ("thinking", "signature"))
            if "cache_control" in d:
                extra["cache_control"] = d["cache_control"]
            return Thinking(
                thinking=_need(d, "thinking", str, where, btype),
                signature=_need(d, "signature", str, where, btype),
                extra=extra,
            )
        case "redacted_thinking":
            _, extra = _split(d, ("data",))
            if "cache_control" in d:
                extra["cache_control"] = d["cache_control"]
            return RedactedThinking(data=_need(d, "data", str, where, btype), extra=extra)
        case "tool_use":
            cc, extra = _split(d, ("id", "name", "input"))
            return ToolUse(
                id=_need(d, "id", str, where, btype),
                name=_need(d, "name", str, where, btype),
                input=_need(d, "input", Mapping, where, btype),
                cache_control=cc,
                extra=extra,
            )
        case "tool_result":
            cc, extra = _split(d, ("tool_use_id", "content", "is_error"))
            is_error = d.get("is_error") is True
            if "is_error" in d and not is_error:
                extra["is_error"] = d["is_error"]  # an explicit false (or odd value) comes back as given
            raw = d.get("content")
            content: str | tuple[Text | Image | Opaque, ...]
            if "content" not in d:
                content, extra[_NO_CONTENT] = "", True
            elif isinstance(raw, str):
                content = raw
            elif isinstance(raw, list):
                inner = []
                for j, b in enumerate(raw):
                    nb = block_from_dict(b, index, block)
                    if not isinstance(nb, (Text, Image, Opaque)):
                        raise FormatError(f"{where}tool_result content item {j} has type {nb.type!r}, which only a "
                                          f"message's own content may hold")
                    inner.append(nb)
                content = tuple(inner)
            else:
                raise FormatError(f"{where}tool_result content must be a string or a list, not {type(raw).__name__}")
            return ToolResult(
                tool_use_id=_need(d, "tool_use_id", str, where, btype),
                content=content,
                is_error=is_error,
                cache_control=cc,
                extra=extra,
            )
    if isinstance(btype, str) and btype:
        # A kind lossless does not describe (a server tool's call or result, a document, a search
        # result, a kind newer than this code): carried through exactly as it came.
        return Opaque(data=dict(d))
    raise FormatError(f"{where}a content block needs a 'type' string, not {btype!r}")


def _public(extra: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in extra.items() if k not in _PRIVATE_KEYS and not k.startswith(_PRIVATE_PREFIXES)}


def block_to_dict(b: Block) -> dict[str, Any]:
    """A neutral block → its Anthropic dict (the inverse of ``block_from_dict``)."""
    out: dict[str, Any]
    match b:
        case Opaque():
            return dict(b.data)
        case Text():
            out = {"type": "text", "text": b.text}
        case Image():
            out = {"type": "image", "source": b.source}
        case Thinking():
            out = {"type": "thinking", "thinking": b.thinking, "signature": b.signature}
        case RedactedThinking():
            out = {"type": "redacted_thinking", "data": b.data}
        case ToolUse():
            out = {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
        case ToolResult():
            out = {"type": "tool_result", "tool_use_id": b.tool_use_id}
            if not (b.extra.get(_NO_CONTENT) and b.content == ""):
                out["content"] = b.content if isinstance(b.content, str) else [block_to_dict(x) for x in b.content]
        case _:
            raise TypeError(f"unknown block type {type(b).__name__!r}")
    out.update(_public(b.extra))
    if isinstance(b, ToolResult) and b.is_error:
        out["is_error"] = True
    cc = getattr(b, "cache_control", None)
    if cc is not None:
        out["cache_control"] = cc
    return out


def blocks_from_content(content: Any, index: int | None = None) -> tuple[tuple[Block, ...], bool]:
    """A message's ``content`` (string or list) → (blocks, was_a_string)."""
    if isinstance(content, str):
        return (Text(text=content),), True
    if not isinstance(content, list):
        raise FormatError(f"{_where(index)}content must be a string or a list, not {type(content).__name__}")
    return tuple(block_from_dict(b, index, j) for j, b in enumerate(content)), False


def message_from_dict(d: Any, index: int | None = None) -> Message:
    """One Messages-API message dict → a ``Message``; ``index`` locates errors."""
    where = _where(index)
    if not isinstance(d, Mapping):
        raise FormatError(f"{where}a message must be an object, not {type(d).__name__}")
    role = d.get("role")
    if role not in ("user", "assistant"):
        if role is None:
            raise FormatError(f"{where}the message has no 'role'")
        # "not supported" + "role 'system'" is what Claude Code reads as "fall back to a system-reminder"
        raise FormatError(f"{where}role {role!r} is not an Anthropic messages role (user or assistant; others are "
                          f"not supported)")
    if "content" not in d:
        raise FormatError(f"{where}the message has no 'content'")
    blocks, was_string = blocks_from_content(d["content"], index)
    meta: dict[str, Any] = {}
    if was_string:
        meta["string_content"] = True
    rest = {k: v for k, v in d.items() if k not in ("role", "content")}
    if rest:
        meta["anthropic_extra"] = rest
    return Message(role=role, content=blocks, meta=meta)


def message_to_dict(m: Message, index: int | None = None) -> dict[str, Any]:
    """A ``Message`` → its Messages-API dict. A system message is an ``InputError``
    (Anthropic takes the system prompt as a separate ``system`` parameter)."""
    if m.role == "system":
        raise InputError(f"{_where(index)}a system message cannot go in an Anthropic messages list; pass it as system=")
    content: Any
    only = m.content[0] if len(m.content) == 1 else None
    if (
        m.meta.get("string_content")
        and isinstance(only, Text)
        and only.cache_control is None
        and not _public(only.extra)
    ):
        content = only.text
    else:
        content = [block_to_dict(b) for b in m.content]
    out: dict[str, Any] = {"role": m.role, "content": content}
    for k, v in (m.meta.get("anthropic_extra") or {}).items():
        out.setdefault(k, v)
    return out


def from_anthropic(messages: Sequence[Any]) -> list[Message]:
    """A Messages-API ``messages`` list → neutral messages (errors name the index)."""
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise FormatError(f"messages must be a list, not {type(messages).__name__}")
    return [message_from_dict(d, i) for i, d in enumerate(messages)]


def to_anthropic(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Neutral messages → a Messages-API ``messages`` list."""
    return [message_to_dict(m, i) for i, m in enumerate(messages)]
