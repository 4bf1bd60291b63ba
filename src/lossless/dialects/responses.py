"""OpenAI Responses API input items ⇄ neutral messages, losslessly.

    msgs = from_responses(body["input"])
    assert to_responses(msgs) == body["input"]    # byte for byte as JSON, for any valid item list
    problems_responses(body["input"])             # [] or what the API would refuse, by item index

The mapping (item order is kept; every item's keys keep their order):

- a ``message`` item (``type`` may be absent, as the API allows) with role ``user`` →
  a neutral ``user`` message; ``system``/``developer`` → a neutral ``system`` message
  (``meta["openai_responses_item"]`` keeps the item without its content).  Content is a
  string or a list of parts: ``input_text``/``output_text``/``refusal`` → ``Text``,
  ``input_image`` → ``Image`` (``source`` is a URL, base64 for a ``data:`` URL, or
  ``{"type": "file", "file_id": ...}``), each with the original part in
  ``extra["openai_responses_part"]``.
- A run of consecutive ``reasoning``, assistant ``message`` and ``function_call``
  items → ONE neutral ``assistant`` message, so ``group_rounds`` sees an API round:
  ``reasoning`` → ``RedactedThinking`` whose ``extra["openai_responses_item"]`` is the item
  as-is (its ``encrypted_content`` included; it never changes, and it leaves the
  context only with its round); ``function_call`` → ``ToolUse`` whose ``input`` is the
  parsed ``arguments`` and whose ``extra["openai_responses_item"]`` keeps the item, so it comes
  back byte-identical while ``input`` is unchanged.  A ``custom_tool_call`` (a free-form tool,
  as Codex's ``apply_patch``) is a ``ToolUse`` whose input is ``{"input": <its text>}``.
- A run of consecutive ``function_call_output`` (or ``custom_tool_call_output``) items → ONE neutral user message of
  ``ToolResult``s (``meta["openai_responses_role"] = "tool"``).
- ``instructions`` is the system prompt: it is passed beside the items, never among them.

The keys lossless adds start with ``openai_``, which the Anthropic dialect (hence the
transcript) never writes to a wire.

- A hosted tool's call (``web_search_call``, ``file_search_call``, ``code_interpreter_call``,
  ``image_generation_call``, ``mcp_call``, ``mcp_list_tools``: the API ran it, nothing answers
  it) joins the assistant run like ``reasoning``: opaque, kept as-is, counted by its JSON.

Any other item type (``item_reference``, client-run computer or shell calls…) and an
``input_file`` part are a ``FormatError`` naming the item: lossless cannot know what
removing them would break.

Rendering a history from another dialect (or what a stage wrote): ``Thinking`` and a
``RedactedThinking`` that did not come from here are dropped (Responses has no item for
them), and so are ``Opaque`` blocks (a server tool's call, a document, a search result);
``is_error`` is lost, and text after tool results becomes a user message.
"""

from __future__ import annotations

import json
from dataclasses import replace
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import FormatError, InputError, InvalidRequest
from ..messages import Block, Image, Message, Opaque, RedactedThinking, Text, Thinking, ToolResult, ToolUse
from ..rounds import problems
from .openai import parse_arguments

__all__ = ["HOSTED", "from_responses", "item_kind", "problems_responses", "render_message", "to_responses"]

_TEXT_PARTS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
# Calls the API runs itself: the item holds the call and its result, and the client answers nothing.
HOSTED = ("web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call", "mcp_call",
          "mcp_list_tools")
_ITEMS = ("message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
          "custom_tool_call_output", *HOSTED)
_CALLS = ("function_call", "custom_tool_call")
"""Calls the client runs: a function's (JSON arguments) or a custom tool's (free text, as Codex's
``apply_patch``), each answered by its ``…_output`` item."""
_ROLES = ("user", "assistant", "system", "developer")


def item_kind(item: Any) -> str:
    """Which neutral message an item joins: ``assistant`` (a run of reasoning, assistant
    messages and calls), ``tool`` (a run of call outputs) or ``single`` (its own)."""
    if not isinstance(item, Mapping):
        return "single"
    kind = item.get("type", "message")
    if kind in ("reasoning", *_CALLS, *HOSTED) or (kind == "message" and item.get("role") == "assistant"):
        return "assistant"
    return "tool" if kind in ("function_call_output", "custom_tool_call_output") else "single"


def _head(item: Mapping[str, Any], payload: str) -> dict[str, Any]:
    """The item with its payload replaced by its shape (``string`` or ``list``): its keys
    and their order, never the big value (which the blocks hold, and a stage may replace)."""
    return {k: (("string" if isinstance(v, str) else "list") if k == payload else v) for k, v in item.items()}


# -- reading -----------------------------------------------------------------------
def _image(p: Mapping[str, Any]) -> Image:
    url, file_id = p.get("image_url"), p.get("file_id")
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        source: dict[str, Any] = {"type": "base64", "media_type": media_type, "data": data}
    elif isinstance(url, str):
        source = {"type": "url", "url": url}
    elif isinstance(file_id, str):
        source = {"type": "file", "file_id": file_id}
    else:
        raise ValueError("an input_image part needs an image_url or a file_id")
    return Image(source=source, extra={"openai_responses_part": dict(p)})


def _part(p: Any, i: int) -> Text | Image:
    if not isinstance(p, Mapping):
        raise FormatError(f"item {i}: a content part must be an object, not {type(p).__name__}")
    kind = p.get("type")
    field = _TEXT_PARTS.get(kind) if isinstance(kind, str) else None
    if field is not None and isinstance(p.get(field), str):
        return Text(text=p[field], extra={"openai_responses_part": dict(p)})
    if kind == "input_image":
        try:
            return _image(p)
        except ValueError as e:
            raise FormatError(f"item {i}: {e}") from None
    raise FormatError(f"item {i}: unsupported content part type {kind!r} (or it lacks its field)")


def _content(content: Any, i: int) -> tuple[Text | Image, ...]:
    if isinstance(content, str):
        return (Text(text=content),)
    if isinstance(content, list):
        return tuple(_part(p, i) for p in content)
    raise FormatError(f"item {i}: content must be a string or a list of parts, not {type(content).__name__}")


def _string(item: Mapping[str, Any], key: str, i: int) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise FormatError(f"item {i}: a {item.get('type')} item needs a string {key!r}")
    return value


def _assistant_blocks(item: Mapping[str, Any], i: int) -> list[Block]:
    kind = item.get("type", "message")
    if kind == "reasoning":
        return [RedactedThinking(data=str(item.get("encrypted_content") or ""), extra={"openai_responses_item": dict(item)})]
    if kind in HOSTED:  # counted by what it says, less a generated image's bytes
        said = json.dumps({k: v for k, v in item.items() if k != "result" or kind != "image_generation_call"},
                          ensure_ascii=False)
        return [RedactedThinking(data=said, extra={"openai_responses_item": dict(item)})]
    if kind == "function_call":
        cid, name, raw = _string(item, "call_id", i), _string(item, "name", i), _string(item, "arguments", i)
        return [ToolUse(id=cid, name=name, input=parse_arguments(raw), extra={"openai_responses_item": dict(item)})]
    if kind == "custom_tool_call":  # its free-text input is the one field of the neutral call's input
        cid, name, raw = _string(item, "call_id", i), _string(item, "name", i), _string(item, "input", i)
        return [ToolUse(id=cid, name=name, input={"input": raw}, extra={"openai_responses_item": dict(item)})]
    parts = _content(item.get("content"), i)
    head = _head(item, "content")
    if not parts:  # an empty message still is an item: an empty text holds its place
        return [Text(text="", extra={"openai_responses_item": head, "openai_responses_empty": True})]
    return [replace(parts[0], extra={**parts[0].extra, "openai_responses_item": head}), *parts[1:]]


def _tool_result(item: Mapping[str, Any], i: int) -> ToolResult:
    cid = _string(item, "call_id", i)
    output = item.get("output")
    content: str | tuple[Text | Image, ...] = output if isinstance(output, str) else _content(output, i)
    return ToolResult(tool_use_id=cid, content=content, extra={"openai_responses_item": _head(item, "output")})


def from_responses(items: Sequence[Any], *, start: int = 0) -> list[Message]:
    """Responses ``input`` items → neutral messages (errors name the item index;
    ``start`` is the index of ``items[0]`` in the caller's whole list)."""
    if isinstance(items, str):  # the API takes a bare string as one user message
        items = [{"role": "user", "content": items}]
    if not isinstance(items, Sequence) or isinstance(items, bytes):
        raise FormatError(f"input must be a list of items, not {type(items).__name__}")
    out: list[Message] = []
    run: list[Block] = []
    run_kind = ""

    def close() -> None:
        nonlocal run, run_kind
        if run:
            meta = {"openai_responses_role": "tool"} if run_kind == "tool" else {}
            out.append(Message(role="assistant" if run_kind == "assistant" else "user", content=tuple(run), meta=meta))
        run, run_kind = [], ""

    for i, item in enumerate(items, start):
        if not isinstance(item, Mapping):
            raise FormatError(f"item {i}: an item must be an object, not {type(item).__name__}")
        kind = item.get("type", "message")
        if kind not in _ITEMS:
            raise FormatError(f"item {i}: unsupported item type {kind!r} (lossless reads {', '.join(_ITEMS)})")
        if kind == "message" and item.get("role") not in _ROLES:
            raise FormatError(f"item {i}: unknown or missing role {item.get('role')!r} "
                              f"(expected one of {', '.join(_ROLES)})")
        group = item_kind(item)
        if group != run_kind:
            close()
        if group == "assistant":
            run.extend(_assistant_blocks(item, i))
            run_kind = group
        elif group == "tool":
            run.append(_tool_result(item, i))
            run_kind = group
        else:
            role = item["role"]
            content = _content(item.get("content"), i)
            out.append(Message(role="user" if role == "user" else "system", content=content,
                               meta={"openai_responses_item": _head(item, "content")}))
    close()
    return out


# -- rendering ---------------------------------------------------------------------
def _part_dict(b: Text | Image, *, assistant: bool) -> dict[str, Any]:
    part = b.extra.get("openai_responses_part")
    if isinstance(b, Text):
        if part is not None and part.get(_TEXT_PARTS.get(part.get("type"), "text")) == b.text:
            return dict(part)
        return {"type": "output_text" if assistant else "input_text", "text": b.text}
    if part is not None and _image(part).source == b.source:
        return dict(part)
    src = b.source
    if src.get("type") == "file":
        return {"type": "input_image", "file_id": src.get("file_id"), "detail": "auto"}
    url = src.get("url") if src.get("type") == "url" else f"data:{src.get('media_type')};base64,{src.get('data')}"
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def _content_value(blocks: Sequence[Text | Image], head: Mapping[str, Any] | None, *, assistant: bool) -> Any:
    """``content`` for ``blocks``: a string when the item had one (or, for a fresh message,
    when it is one plain text: the API's easy form), else a list of parts."""
    if len(blocks) == 1 and blocks[0].extra.get("openai_responses_empty"):
        return []
    shape = head.get("content") if head is not None else "string"
    if shape == "string" and len(blocks) == 1 and isinstance(blocks[0], Text) and "openai_responses_part" not in blocks[0].extra:
        return blocks[0].text
    return [_part_dict(b, assistant=assistant) for b in blocks]


def _message_item(head: Mapping[str, Any] | None, role: str, blocks: Sequence[Text | Image]) -> dict[str, Any]:
    assistant = role == "assistant"
    if head is None:
        return {"type": "message", "role": role, "content": _content_value(blocks, None, assistant=assistant)}
    return {**head, "content": _content_value(blocks, head, assistant=assistant)}


def _call_item(u: ToolUse) -> dict[str, Any]:
    item = u.extra.get("openai_responses_item")
    if item is None:
        return {"type": "function_call", "call_id": u.id, "name": u.name, "arguments": json.dumps(dict(u.input))}
    if item.get("type") == "local_shell_call":  # Codex's older shell call: its input is the action
        return {**item, "call_id": u.id, "action": dict(u.input)}
    if item.get("type") == "custom_tool_call":
        text = u.input.get("input")
        if text == item.get("input") and item.get("name") == u.name:
            return dict(item)
        return {**item, "call_id": u.id, "name": u.name, "input": text if isinstance(text, str) else json.dumps(dict(u.input))}
    raw = item.get("arguments")
    if isinstance(raw, str) and parse_arguments(raw) == dict(u.input) and item.get("name") == u.name:
        return dict(item)
    return {**item, "call_id": u.id, "name": u.name, "arguments": json.dumps(dict(u.input))}


def _output_item(r: ToolResult) -> dict[str, Any]:
    # A part of another API's kind (a search result, a document) has no Responses form, as thinking has none.
    output: Any = r.content if isinstance(r.content, str) else [_part_dict(b, assistant=False) for b in r.content
                                                                if not isinstance(b, Opaque)]
    head = r.extra.get("openai_responses_item") or {"type": "function_call_output", "call_id": r.tool_use_id}
    return {**head, "call_id": r.tool_use_id, "output": output}


def _assistant_items(m: Message, i: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    texts: list[Text | Image] = []
    head: Mapping[str, Any] | None = None

    def flush() -> None:
        nonlocal texts, head
        if texts:
            out.append(_message_item(head, "assistant", texts))
        texts, head = [], None

    for b in m.content:
        match b:
            case Text() | Image():
                starts = b.extra.get("openai_responses_item")
                if starts is not None:
                    flush()
                    head = starts
                texts.append(b)
            case ToolUse():
                flush()
                out.append(_call_item(b))
            case RedactedThinking() if "openai_responses_item" in b.extra:
                flush()
                out.append(dict(b.extra["openai_responses_item"]))
            case Thinking() | RedactedThinking() | Opaque():
                pass  # reasoning (or a server tool's block) from elsewhere has no Responses item
            case ToolResult():
                raise InputError(f"message {i}: an assistant message cannot carry a tool_result")
            case _:
                raise TypeError(f"message {i}: unknown block type {type(b).__name__!r}")
    flush()
    return out


def render_message(m: Message, i: int = 0) -> list[dict[str, Any]]:
    """One neutral message → its Responses items (``i`` names it in errors)."""
    if m.role == "assistant":
        return _assistant_items(m, i)
    if m.tool_uses:
        raise InputError(f"message {i}: a {m.role} message cannot carry a tool_use")
    out = [_output_item(r) for r in m.tool_results]
    rest = [b for b in m.content if isinstance(b, (Text, Image))]
    if out and not rest:
        return out
    head = m.meta.get("openai_responses_item")
    role = "user" if m.role == "user" else "system"
    if head is not None and (head.get("role") == "user") == (m.role == "user"):
        return [*out, {**head, "content": _content_value(rest, head, assistant=False)}]
    return [*out, _message_item(None, role, rest)]


def to_responses(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Neutral messages → Responses ``input`` items (see the module docstring for what a
    history from another dialect loses)."""
    return [item for i, m in enumerate(messages) for item in render_message(m, i)]


# -- validity --------------------------------------------------------------------
def problems_responses(items: Sequence[Any]) -> list[InvalidRequest]:
    """What the Responses API would refuse in ``items``, naming the item index and call id:
    every ``function_call`` answered by its ``function_call_output`` in the outputs that
    follow it, no output without its call, call ids unique.  (A ``FormatError`` for items
    lossless cannot read.)"""
    if isinstance(items, str):
        return []
    neutral = from_responses(items)
    starts: list[int] = []
    where: dict[str, int] = {}
    for i, item in enumerate(items):
        if i == 0 or item_kind(item) == "single" or item_kind(item) != item_kind(items[i - 1]):
            starts.append(i)
        if isinstance(item, Mapping) and item.get("type") in (*_CALLS, "function_call_output", "custom_tool_call_output"):
            side = "function_call_output" if str(item.get("type")).endswith("_output") else "function_call"
            where.setdefault(f"{side}:{item.get('call_id')}", i)
    out: list[InvalidRequest] = []
    for p in problems(neutral, "openai"):
        index = None if p.index is None else starts[p.index]
        what = str(p).split(": ", 1)[-1] if p.index is not None else str(p)
        if p.tool_id is not None and "not unique" not in what:
            kind = "function_call_output" if "tool_result answers" in what else "function_call"
            index = where.get(f"{kind}:{p.tool_id}", index)
            what = what.replace("tool_use", "function_call").replace("tool_result", "function_call_output")
            what = what.replace("in the next message", "after it").replace("in the message before", "before it")
        out.append(InvalidRequest(f"item {index}: {what}" if index is not None else what, index=index,
                                  tool_id=p.tool_id))
    return out
