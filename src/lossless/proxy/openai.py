"""OpenAI Chat Completions, as the proxy needs it: the counterpart of ``anthropic``.

The recall tool is offered as a function tool; the answer's tool calls are
``choices[0].message.tool_calls`` (arguments a JSON string); results go back as
``tool`` messages; a stream is ``data:`` chunks ending ``[DONE]``.
"""

from __future__ import annotations

import json
from typing import Any

from ..tools import RECALL_TOOL
from .relay import Event, ToolCall, encode

ROUTE = "openai"


def error(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def split(body: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(messages, system, tools): the system prompt is part of the messages."""
    return body.get("messages"), None, body.get("tools")


def tool_names(tools: Any) -> set[str]:
    return {name for t in tools or [] if isinstance(t, dict) and isinstance(fn := t.get("function"), dict)
            if isinstance(name := fn.get("name"), str)}


def recall_tool() -> dict[str, Any]:
    return {"type": "function", "function": {"name": RECALL_TOOL["name"], "description": RECALL_TOOL["description"],
                                             "parameters": RECALL_TOOL["input_schema"]}}


def max_tokens(body: dict[str, Any]) -> int | None:
    value = body.get("max_completion_tokens") or body.get("max_tokens")
    return value if isinstance(value, int) and value > 0 else None


def _args(raw: Any) -> Any:
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _message(response: dict[str, Any]) -> dict[str, Any]:
    choices = response.get("choices") or [{}]
    return choices[0].get("message") or {}


# -- a whole answer -----------------------------------------------------------
def calls(response: dict[str, Any]) -> list[ToolCall]:
    return [(c.get("id"), (c.get("function") or {}).get("name"), _args((c.get("function") or {}).get("arguments")))
            for c in _message(response).get("tool_calls") or [] if isinstance(c, dict)]


def stopped_for_tools(response: dict[str, Any]) -> bool:
    choices = response.get("choices") or [{}]
    return choices[0].get("finish_reason") == "tool_calls"


def assistant(response: dict[str, Any]) -> dict[str, Any]:
    message = _message(response)
    out = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    return out


def results(answers: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"role": "tool", "tool_call_id": i, "content": text} for i, text in answers]


def extended(forward: dict[str, Any], said: dict[str, Any], answers: list[tuple[str, str]]) -> dict[str, Any]:
    """``forward`` continued: the model's message and the recall results after its messages."""
    return {**forward, "messages": [*forward["messages"], said, *results(answers)]}


def without(response: dict[str, Any], ids: set[str]) -> dict[str, Any]:
    choices = list(response.get("choices") or [])
    if not choices:
        return response
    message = dict(choices[0].get("message") or {})
    kept = [c for c in message.get("tool_calls") or [] if c.get("id") not in ids]
    if kept:
        message["tool_calls"] = kept
    else:
        message.pop("tool_calls", None)
    return {**response, "choices": [{**choices[0], "message": message}, *choices[1:]]}


def merge(first: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    texts = [text for m in (_message(first), _message(later)) if isinstance(text := m.get("content"), str)]
    message = {**_message(later), "content": "".join(texts) if texts else None}
    usage = dict(later.get("usage") or {})
    if "completion_tokens" in usage:
        usage["completion_tokens"] += int((first.get("usage") or {}).get("completion_tokens") or 0)
    choice = {**(later.get("choices") or [{}])[0], "message": message}
    return {**later, "id": first.get("id", later.get("id")), "choices": [choice], "usage": usage}


def usage(response: dict[str, Any]) -> Any:
    return response.get("usage")


def splice_final(echo: list[Any], model_message: dict[str, Any], answers: list[tuple[str, str]]) -> list[Any] | None:
    """The client's next messages with the model's own tool-calling message (recall
    calls included) instead of the client's echo, the recall results right after it."""
    if not echo or echo[0].get("role") != "assistant" or len(echo) < 2 or echo[1].get("role") != "tool":
        return None
    return [model_message, *results(answers), *echo[1:]]


# -- a stream ------------------------------------------------------------------
class StreamFilter:
    """Relays one answer's chunks, holding back the ``recall`` tool calls (see
    ``anthropic.StreamFilter``; here the finish chunk, the usage chunk and ``[DONE]``
    are withheld when the answer called only recall)."""

    def __init__(self, *, own_recall: bool, shift: int = 0, first: bool = True, chunk_id: str | None = None) -> None:
        self.own_recall = own_recall
        self.first = first
        self.chunk_id = chunk_id
        self.text: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.held: set[int] = set()
        self.finish: str | None = None
        self.usage: Any = None
        self._tail: list[bytes] = []
        self.final: list[bytes] = []
        """``[DONE]``, held until the turn has recorded what the next request needs (see
        ``anthropic.StreamFilter.final``)."""

    @property
    def client_tools(self) -> int:
        return len(self.tool_calls) - len(self.held)

    @property
    def continue_with_recall(self) -> bool:
        return bool(self.held) and self.client_tools == 0 and self.finish == "tool_calls"

    def feed(self, event: Event) -> list[bytes]:
        data = event.data
        if data == "[DONE]":
            (self._tail if self.continue_with_recall else self.final).append(event.raw)
            return []
        if not isinstance(data, dict):  # a keep-alive comment, or an event not for us to read: on at once, in place
            return [event.raw]
        if self.chunk_id is None:
            self.chunk_id = data.get("id")
        changed = not self.first and data.get("id") != self.chunk_id
        choices = data.get("choices") or []
        if not choices:  # the usage chunk
            self.usage = data.get("usage")
            if self.continue_with_recall:
                self._tail.append(event.raw)
                return []
            return [self._out(event, data, changed)]
        choice = dict(choices[0])
        delta = dict(choice.get("delta") or {})
        if isinstance(delta.get("content"), str):
            self.text.append(delta["content"])
        had_calls = bool(delta.get("tool_calls"))
        if had_calls:
            kept = self._calls(delta["tool_calls"])
            changed = changed or kept != delta["tool_calls"]
            if kept:
                delta["tool_calls"] = kept
            else:
                delta.pop("tool_calls")
        if choice.get("finish_reason"):
            self.finish = choice["finish_reason"]
            if self.continue_with_recall:
                self._tail.append(event.raw)
                return []
        elif not delta.get("content") and not delta.get("tool_calls"):
            if had_calls or not self.first:
                return []  # nothing left for the client: a held call's piece, a continuation's opening
        if changed:
            return [self._out(event, {**data, "choices": [{**choice, "delta": delta}, *choices[1:]]}, True)]
        return [event.raw]

    def _calls(self, pieces: list[Any]) -> list[Any]:
        kept = []
        for piece in pieces:
            index = piece.get("index", 0)
            call = self.tool_calls.setdefault(index, {"id": None, "name": None, "arguments": ""})
            fn = piece.get("function") or {}
            call["id"] = piece.get("id") or call["id"]
            call["name"] = fn.get("name") or call["name"]
            call["arguments"] += fn.get("arguments") or ""
            if self.own_recall and call["name"] == "recall":
                self.held.add(index)
                continue
            new = index - sum(1 for i in self.held if i < index)
            kept.append(piece if new == index else {**piece, "index": new})
        return kept

    def _out(self, event: Event, data: dict[str, Any], changed: bool) -> bytes:
        if not changed:
            return event.raw
        return encode(None, {**data, "id": self.chunk_id})

    def message(self) -> dict[str, Any]:
        calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                 for _, c in sorted(self.tool_calls.items())]
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if calls:
            message["tool_calls"] = calls
        return {"choices": [{"index": 0, "message": message, "finish_reason": self.finish}], "usage": self.usage}

    def recall_calls(self) -> list[ToolCall]:
        return [(self.tool_calls[i]["id"], "recall", _args(self.tool_calls[i]["arguments"])) for i in sorted(self.held)]

    def end_events(self) -> list[bytes]:
        return self._tail
