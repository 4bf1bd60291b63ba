"""OpenAI Chat Completions message dicts ⇄ neutral messages, losslessly.

    msgs = from_openai(body["messages"])
    assert to_openai(msgs) == body["messages"]   # for any valid Chat Completions list

The mapping:

- ``system``/``developer`` → a neutral ``system`` message; ``meta["openai_role"]``
  keeps which one.
- ``user`` content, a string or a list of parts: ``text`` → ``Text``;
  ``image_url`` → ``Image`` (``source`` is ``{"type": "url", "url": ...}``, or
  ``{"type": "base64", ...}`` for a ``data:`` URL) with the original part in
  ``extra["openai_part"]``.
- ``assistant``: ``content`` (string, list of parts, ``null`` or absent) → ``Text``;
  each of ``tool_calls`` → ``ToolUse`` whose ``input`` is the parsed ``arguments``
  (``{}`` when they are not a JSON object) and whose ``extra["openai_arguments"]``
  keeps the raw string, so it comes back byte-identical while ``input`` is unchanged.
- A run of consecutive ``tool`` messages → ONE neutral user message of
  ``ToolResult``s (``meta["openai_role"] = "tool"``), so ``group_rounds`` sees an
  API round; ``to_openai`` writes it back as separate ``tool`` messages.
- ``name`` and any other unknown message key → ``meta["openai_extra"]``; unknown
  keys of a tool call → ``extra["openai_call_keys"]``/``["openai_function_keys"]``.

Rendering a history from another dialect: ``Thinking``/``RedactedThinking`` are
dropped (Chat Completions has no field for them), results become ``tool`` messages
followed by a user message with any remaining blocks, and ``is_error`` is lost.  A part of
a kind this module does not describe (``input_audio``, ``file``, newer ones) is kept as it
came (``Opaque``) and written back as it was; one from another dialect is written as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence  # not typing's aliases: an isinstance through them costs ~1 µs
from typing import Any

from ..errors import FormatError, InputError
from ..messages import Block, Image, Message, Opaque, RedactedThinking, Text, Thinking, ToolResult, ToolUse

__all__ = ["from_openai", "to_openai"]

_ROLES = ("system", "developer", "user", "assistant", "tool")


def parse_arguments(raw: str) -> dict[str, Any]:
    """A function call's JSON arguments as a dict ({} when they are not a JSON object)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _image_source(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {"type": "base64", "media_type": media_type, "data": data}
    return {"type": "url", "url": url}


def _part_from_dict(p: Any, i: int) -> Text | Image | Opaque:
    if not isinstance(p, Mapping):
        raise FormatError(f"message {i}: a content part must be an object, not {type(p).__name__}")
    match p.get("type"):
        case "text" if isinstance(p.get("text"), str):
            extra = {"openai_part": dict(p)} if set(p) != {"type", "text"} else {}
            return Text(text=p["text"], extra=extra)
        case "refusal" if isinstance(p.get("refusal"), str):
            return Text(text=p["refusal"], extra={"openai_part": dict(p)})
        case "image_url" if isinstance(p.get("image_url"), Mapping) and isinstance(p["image_url"].get("url"), str):
            return Image(source=_image_source(p["image_url"]["url"]), extra={"openai_part": dict(p)})
        case str(kind) if kind and kind not in ("text", "refusal", "image_url"):
            return Opaque(data=dict(p))  # an audio or file part, or a kind newer than this code: as it came
    raise FormatError(f"message {i}: unsupported content part type {p.get('type')!r} (or it lacks its field)")


def _content_from(content: Any, i: int) -> tuple[tuple[Text | Image | Opaque, ...], str]:
    """(blocks, shape) where shape is ``string``, ``list``, ``null`` or ``absent``."""
    if isinstance(content, str):
        return (Text(text=content),), "string"
    if content is None:
        return (), "null"
    if isinstance(content, list):
        return tuple(_part_from_dict(p, i) for p in content), "list"
    raise FormatError(f"message {i}: content must be a string, a list or null, not {type(content).__name__}")


def _tool_use(call: Any, i: int) -> ToolUse:
    if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
        raise FormatError(f"message {i}: a tool call must be an object with a 'function'")
    fn = call["function"]
    cid, name, raw = call.get("id"), fn.get("name"), fn.get("arguments")
    if not isinstance(cid, str) or not isinstance(name, str) or not isinstance(raw, str):
        raise FormatError(f"message {i}: a tool call needs a string id, function.name and function.arguments")
    extra: dict[str, Any] = {"openai_arguments": raw}
    call_keys = {k: v for k, v in call.items() if k not in ("id", "function")}
    fn_keys = {k: v for k, v in fn.items() if k not in ("name", "arguments")}
    if call_keys != {"type": "function"}:
        extra["openai_call_keys"] = call_keys
    if fn_keys:
        extra["openai_function_keys"] = fn_keys
    return ToolUse(id=cid, name=name, input=parse_arguments(raw), extra=extra)


def _tool_result(d: Mapping[str, Any], i: int) -> ToolResult:
    tid = d.get("tool_call_id")
    if not isinstance(tid, str):
        raise FormatError(f"message {i}: a tool message needs a string 'tool_call_id'")
    blocks, shape = _content_from(d.get("content"), i)
    content: str | tuple[Text | Image | Opaque, ...] = blocks
    if shape == "string" and isinstance(blocks[0], Text):  # a string content is always one Text block
        content = blocks[0].text
    extra: dict[str, Any] = {}
    keys = {k: v for k, v in d.items() if k not in ("role", "tool_call_id", "content")}
    if keys:
        extra["openai_keys"] = keys
    if shape in ("null", "absent") or "content" not in d:
        extra["openai_content"] = "absent" if "content" not in d else "null"
    return ToolResult(tool_use_id=tid, content=content, extra=extra)


def from_openai(messages: Sequence[Any], *, start: int = 0) -> list[Message]:
    """A Chat Completions ``messages`` list → neutral messages (errors name the index;
    ``start`` is the index of ``messages[0]`` in the caller's whole list)."""
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise FormatError(f"messages must be a list, not {type(messages).__name__}")
    out: list[Message] = []
    results: list[ToolResult] = []
    for i, d in enumerate(messages, start):
        if not isinstance(d, Mapping):
            raise FormatError(f"message {i}: a message must be an object, not {type(d).__name__}")
        role = d.get("role")
        if role not in _ROLES:
            raise FormatError(f"message {i}: unknown or missing role {role!r} (expected one of {', '.join(_ROLES)})")
        if role == "tool":
            results.append(_tool_result(d, i))
            continue
        if results:
            out.append(Message(role="user", content=tuple(results), meta={"openai_role": "tool"}))
            results = []
        if role == "assistant":
            blocks, shape = _content_from(d.get("content"), i)
            if "content" not in d:
                shape = "absent"
            calls = d.get("tool_calls")
            uses: tuple[ToolUse, ...] = ()
            if calls is not None:
                if not isinstance(calls, list):
                    raise FormatError(f"message {i}: tool_calls must be a list")
                uses = tuple(_tool_use(c, i) for c in calls)
            known: tuple[str, ...] = ("role", "content", "tool_calls")
            meta: dict[str, Any] = {"openai_content": shape}
            if "tool_calls" in d and not uses:
                meta["openai_tool_calls"] = calls
            content: tuple[Block, ...] = blocks + uses
        else:
            if "content" not in d:
                raise FormatError(f"message {i}: the {role} message has no 'content'")
            blocks, shape = _content_from(d["content"], i)
            known = ("role", "content")
            meta = {"openai_content": shape}
            if role != "user":
                meta["openai_role"] = role
            content = blocks
        if shape == "string":
            meta["string_content"] = True
        rest = {k: v for k, v in d.items() if k not in known}
        if rest:
            meta["openai_extra"] = rest
        out.append(Message(role="system" if role in ("system", "developer") else role, content=content, meta=meta))
    if results:
        out.append(Message(role="user", content=tuple(results), meta={"openai_role": "tool"}))
    return out


# -- rendering ---------------------------------------------------------------


def _part_to_dict(b: Text | Image | Opaque) -> dict[str, Any]:
    if isinstance(b, Opaque):
        return dict(b.data)
    part = b.extra.get("openai_part")
    if isinstance(b, Text):
        if part is not None and (part.get("text", part.get("refusal")) == b.text):
            return dict(part)
        return {"type": "text", "text": b.text}
    if part is not None and _image_source(part["image_url"]["url"]) == dict(b.source):
        return dict(part)
    src = b.source
    url = src.get("url") if src.get("type") == "url" else f"data:{src.get('media_type')};base64,{src.get('data')}"
    return {"type": "image_url", "image_url": {"url": url}}


def _render_content(blocks: Sequence[Text | Image | Opaque], shape: str | None) -> Any:
    """The ``content`` value for ``blocks``; ``shape`` is how the wire had it, if known."""
    texts_only = all(isinstance(b, Text) for b in blocks)
    if shape == "string" and len(blocks) == 1 and isinstance(blocks[0], Text) and "openai_part" not in blocks[0].extra:
        return blocks[0].text
    if shape in ("null", "absent") and not blocks:
        return None
    if shape is None and texts_only and len(blocks) <= 1:
        first = blocks[0] if blocks else None
        return first.text if isinstance(first, Text) else None
    return [_part_to_dict(b) for b in blocks]


def _call_to_dict(u: ToolUse) -> dict[str, Any]:
    raw = u.extra.get("openai_arguments")
    args = raw if isinstance(raw, str) and parse_arguments(raw) == dict(u.input) else json.dumps(dict(u.input))
    call_keys = u.extra.get("openai_call_keys", {"type": "function"})
    return {"id": u.id, **call_keys, "function": {"name": u.name, "arguments": args, **u.extra.get("openai_function_keys", {})}}


def _tool_message(r: ToolResult) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "tool", "tool_call_id": r.tool_use_id}
    how = r.extra.get("openai_content")
    if isinstance(r.content, str):
        out["content"] = r.content
    elif r.content or how is None:
        out["content"] = [_part_to_dict(b) for b in r.content]
    elif how == "null":
        out["content"] = None
    out.update(r.extra.get("openai_keys", {}))
    return out


def to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Neutral messages → a Chat Completions ``messages`` list (see the module
    docstring for what a history from another dialect loses)."""
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        shape = m.meta.get("openai_content")
        extra = m.meta.get("openai_extra") or {}
        texts: list[Text | Image | Opaque] = []
        uses: list[ToolUse] = []
        results: list[ToolResult] = []
        for b in m.content:
            match b:
                case Text() | Image() | Opaque():
                    texts.append(b)
                case ToolUse():
                    uses.append(b)
                case ToolResult():
                    results.append(b)
                case Thinking() | RedactedThinking():
                    pass  # no place for them in Chat Completions
                case _:
                    raise TypeError(f"message {i}: unknown block type {type(b).__name__!r}")
        if m.role == "assistant":
            if results:
                raise InputError(f"message {i}: an assistant message cannot carry a tool_result")
            d: dict[str, Any] = {"role": "assistant"}
            content = _render_content(texts, shape)
            if shape != "absent" or texts:
                d["content"] = content
            if uses:
                d["tool_calls"] = [_call_to_dict(u) for u in uses]
            elif "openai_tool_calls" in m.meta:
                d["tool_calls"] = m.meta["openai_tool_calls"]
            out.append({**d, **{k: v for k, v in extra.items() if k not in d}})
            continue
        if uses:
            raise InputError(f"message {i}: a {m.role} message cannot carry a tool_use")
        out.extend(_tool_message(r) for r in results)
        if results and not texts:
            continue
        role = m.meta.get("openai_role", m.role)
        if role == "tool" or (m.role == "user") != (role == "user"):
            role = m.role
        content = _render_content(texts, shape)
        d = {"role": role, "content": "" if content is None and shape != "null" else content}
        out.append({**d, **{k: v for k, v in extra.items() if k not in d}})
    return out
