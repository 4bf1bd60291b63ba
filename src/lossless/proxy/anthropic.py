"""The Anthropic Messages API, as the proxy needs it: errors, the recall tool, the
answer's tool calls, recall rounds spliced into history, and a stream filter.

Recall rounds are kept as ``(assistant message dict, [(tool_use_id, text)])``; the
same shapes exist for Chat Completions in ``openai``, so ``app`` treats both alike.
"""

from __future__ import annotations

import json
from typing import Any

from ..tools import RECALL_TOOL
from .relay import Event, ToolCall, encode

ROUTE = "anthropic"


def error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def split(body: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(messages, system, tools) as ``ContextManager.prepare`` takes them; ``system``-role
    messages among the messages are folded into user turns (see ``fold_system``)."""
    return fold_system(body.get("messages")), body.get("system"), body.get("tools")


def fold_system(messages: Any) -> Any:
    """``messages`` with each ``role: "system"`` message (sent mid-conversation under a beta,
    as Claude Code does with its agent and skill listings) folded into a user turn as a
    ``<system-reminder>`` text block — what Claude Code itself sends when that beta is off.

    It joins the user message before it, else the next one, else it becomes a user
    message of its own.  The fold is a pure function of the messages up to the next
    user turn, so a client resending the same history folds it the same way and its
    conversation is still recognised.  The same list comes back when there is none."""
    if not isinstance(messages, list) or not any(isinstance(m, dict) and m.get("role") == "system"
                                                 for m in messages):
        return messages
    out: list[Any] = []
    waiting: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "system":
            block = {"type": "text", "text": f"<system-reminder>\n{_text(m.get('content'))}\n</system-reminder>"}
            if out and isinstance(out[-1], dict) and out[-1].get("role") == "user" and not waiting:
                out[-1] = {**out[-1], "content": [*_blocks(out[-1].get("content")), block]}
            else:
                waiting.append(block)
            continue
        if waiting and isinstance(m, dict) and m.get("role") == "user":
            m = {**m, "content": [*waiting, *_blocks(m.get("content"))]}
            waiting = []
        out.append(m)
    if waiting:
        out.append({"role": "user", "content": waiting})
    return out


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list) else []


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def tool_names(tools: Any) -> set[str]:
    return {name for t in tools or [] if isinstance(t, dict) if isinstance(name := t.get("name"), str)}


def recall_tool() -> dict[str, Any]:
    return dict(RECALL_TOOL)


def max_tokens(body: dict[str, Any]) -> int | None:
    value = body.get("max_tokens")
    return value if isinstance(value, int) and value > 0 else None


# -- a whole answer -----------------------------------------------------------
def calls(response: dict[str, Any]) -> list[ToolCall]:
    """(id, name, input) of every tool call in the answer."""
    return [(b.get("id"), b.get("name"), b.get("input") or {}) for b in response.get("content") or []
            if isinstance(b, dict) and b.get("type") == "tool_use"]


def stopped_for_tools(response: dict[str, Any]) -> bool:
    return response.get("stop_reason") == "tool_use"


def assistant(response: dict[str, Any]) -> dict[str, Any]:
    """The answer as the assistant message of the next request."""
    return {"role": "assistant", "content": list(response.get("content") or [])}


def results(answers: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The message(s) carrying the tool results, after the assistant message."""
    return [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": text}
                                         for i, text in answers]}]


def extended(forward: dict[str, Any], said: dict[str, Any], answers: list[tuple[str, str]]) -> dict[str, Any]:
    """``forward`` continued: the model's message and the recall results after its messages."""
    return {**forward, "messages": [*forward["messages"], said, *results(answers)]}


def without(response: dict[str, Any], ids: set[str]) -> dict[str, Any]:
    """The answer without the tool calls in ``ids`` (what the client sees)."""
    content = [b for b in response.get("content") or [] if not (isinstance(b, dict) and b.get("id") in ids)]
    return {**response, "content": content}


def merge(first: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """One answer out of two segments (recall calls already removed): the first's id,
    both contents, the later's stop and input usage, the output tokens of both."""
    usage = dict(later.get("usage") or {})
    usage["output_tokens"] = int((first.get("usage") or {}).get("output_tokens") or 0) + int(
        usage.get("output_tokens") or 0)
    return {**later, "id": first.get("id", later.get("id")),
            "content": [*(first.get("content") or []), *(later.get("content") or [])], "usage": usage}


def usage(response: dict[str, Any]) -> Any:
    return response.get("usage")


# -- splicing what the client never saw into its next request ------------------
def splice_final(echo: list[Any], model_message: dict[str, Any], answers: list[tuple[str, str]]) -> list[Any] | None:
    """The client's next messages with the model's own last message (recall calls
    included) instead of the client's echo of it, and the recall results added to the
    client's results message.  None when the client's messages do not have that shape."""
    if len(echo) < 2 or echo[0].get("role") != "assistant":
        return None
    reply = echo[1]
    content = reply.get("content")
    if reply.get("role") != "user" or not isinstance(content, list):
        return None
    last = max((j for j, b in enumerate(content) if isinstance(b, dict) and b.get("type") == "tool_result"),
               default=-1)
    extra = results(answers)[0]["content"]
    merged = {**reply, "content": [*content[: last + 1], *extra, *content[last + 1:]]}
    return [model_message, merged, *echo[2:]]


# -- a stream ------------------------------------------------------------------
class StreamFilter:
    """Relays one answer's SSE events, holding back the ``recall`` tool-use blocks.

    ``shift`` is how many content blocks earlier segments already showed the client
    (a continuation's blocks follow them); ``first`` says whether this segment opens
    the client's message (a continuation's ``message_start`` is dropped).  After the
    last event, ``continue_with_recall`` says the answer called only recall: its
    ``message_delta``/``message_stop`` were withheld for the continuation to end it."""

    def __init__(self, *, own_recall: bool, shift: int = 0, first: bool = True) -> None:
        self.own_recall = own_recall
        self.shift = shift
        self.first = first
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial: dict[int, str] = {}
        self.held: set[int] = set()
        self.shown = 0
        self.client_tools = 0
        self.stop_reason: str | None = None
        self.usage: Any = None
        self._tail: list[bytes] = []
        self.final: list[bytes] = []
        """The closing ``message_stop``, held until the turn has recorded what the next request
        needs (recall rounds to splice): a client may send that request as soon as it reads
        the close, before the stream's handler has run on."""

    def feed(self, event: Event) -> list[bytes]:
        data = event.data
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == "message_start":
            self.usage = (data.get("message") or {}).get("usage")
            return [event.raw] if self.first else []
        if kind == "content_block_start":
            index, block = data.get("index"), dict(data.get("content_block") or {})
            self.blocks[index] = block
            if block.get("type") == "tool_use":
                if self.own_recall and block.get("name") == "recall":
                    self.held.add(index)
                    return []
                self.client_tools += 1
            self.shown += 1
            return [self._renumbered(event, data)]
        if kind == "content_block_delta":
            self._accumulate(data.get("index"), data.get("delta") or {})
            return [] if data.get("index") in self.held else [self._renumbered(event, data)]
        if kind == "content_block_stop":
            self._finish(data.get("index"))
            return [] if data.get("index") in self.held else [self._renumbered(event, data)]
        if kind == "message_delta":
            self.stop_reason = (data.get("delta") or {}).get("stop_reason")
            if self.continue_with_recall:
                self._tail.append(event.raw)
                return []
            return [event.raw]
        if kind == "message_stop":
            (self._tail if self.continue_with_recall else self.final).append(event.raw)
            return []
        return [event.raw]

    @property
    def continue_with_recall(self) -> bool:
        return bool(self.held) and self.client_tools == 0 and self.stop_reason == "tool_use"

    def _renumbered(self, event: Event, data: dict[str, Any]) -> bytes:
        index = data.get("index")
        new = self.shift + sum(1 for i in self.blocks if i < index and i not in self.held) if isinstance(index, int) \
            else index
        return event.raw if new == index else encode(event.name, {**data, "index": new})

    def _accumulate(self, index: Any, delta: dict[str, Any]) -> None:
        block = self.blocks.get(index)
        if block is None:
            return
        match delta.get("type"):
            case "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            case "input_json_delta":
                self.partial[index] = self.partial.get(index, "") + delta.get("partial_json", "")
            case "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            case "signature_delta":
                block["signature"] = delta.get("signature", "")
            case "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))

    def _finish(self, index: Any) -> None:
        block = self.blocks.get(index)
        if block is not None and block.get("type") == "tool_use" and index in self.partial:
            try:
                block["input"] = json.loads(self.partial[index] or "{}")
            except ValueError:
                block["input"] = {}

    def message(self) -> dict[str, Any]:
        """This segment as a whole answer (content in order, recall calls included)."""
        content = [self.blocks[i] for i in sorted(self.blocks)]
        return {"content": content, "stop_reason": self.stop_reason, "usage": self.usage}

    def recall_calls(self) -> list[ToolCall]:
        return [(self.blocks[i].get("id"), "recall", self.blocks[i].get("input") or {}) for i in sorted(self.held)]

    def end_events(self) -> list[bytes]:
        """The withheld ending, for when the continuation cannot be made."""
        return self._tail
