"""OpenAI's Responses API (``POST /v1/responses``), as the proxy needs it: the counterpart of ``openai``.

A request's history is ``input`` (a string, or a list of items) with ``instructions`` beside
it; one model turn is several items (reasoning, a message, calls), which the neutral model
holds as one message (``dialects.responses``).  The recall tool is offered as a function
tool; the answer's calls are its ``function_call`` output items; results go back as
``function_call_output`` items; a stream is typed events (``response.created`` …
``response.completed``), each with a ``sequence_number`` and, for an item's events, its
``output_index``.

A request the proxy cannot fit is forwarded as it came (``rewrite.Unmanaged``): one that
continues a history the server keeps (``previous_response_id``, ``conversation``), since
lossless sees only its newest items.
"""

from __future__ import annotations

from typing import Any

from ..tools import RECALL_TOOL
from .openai import _args
from .relay import Event, ToolCall, encode

ROUTE = "responses"

CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "computer_call", "local_shell_call", "shell_call",
                        "apply_patch_call"})
"""Output items the client runs (the hosted tools' calls the API runs itself)."""


def error(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def items(body: dict[str, Any]) -> Any:
    """The request's history as a list of items (a string ``input`` is one user message)."""
    value = body.get("input")
    return [{"role": "user", "content": value}] if isinstance(value, str) else value


def split(body: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(items, instructions, tools)."""
    return items(body), body.get("instructions"), body.get("tools")


def server_side(body: dict[str, Any]) -> str | None:
    """What makes the server hold part of the history (then the proxy cannot fit it), or None."""
    for key in ("previous_response_id", "conversation"):
        if body.get(key):
            return f"{key} continues a history the server keeps"
    if isinstance(body.get("instructions"), list):  # input items as instructions: not a system prompt lossless counts
        return "'instructions' is a list of items"
    return None


def tool_names(tools: Any) -> set[str]:
    return {name for t in tools or [] if isinstance(t, dict) if isinstance(name := t.get("name"), str)}


def recall_tool() -> dict[str, Any]:
    return {"type": "function", "name": RECALL_TOOL["name"], "description": RECALL_TOOL["description"],
            "parameters": RECALL_TOOL["input_schema"]}


def max_tokens(body: dict[str, Any]) -> int | None:
    value = body.get("max_output_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _output(response: dict[str, Any]) -> list[Any]:
    output = response.get("output")
    return [item for item in output if isinstance(item, dict)] if isinstance(output, list) else []


# -- a whole answer -----------------------------------------------------------
def calls(response: dict[str, Any]) -> list[ToolCall]:
    """Every call the client would run (a custom tool's input as ``{"input": text}``)."""
    out: list[ToolCall] = []
    for item in _output(response):
        if item.get("type") == "function_call":
            out.append((item.get("call_id"), item.get("name"), _args(item.get("arguments"))))
        elif item.get("type") in CALL_ITEMS:
            out.append((item.get("call_id"), item.get("name") or item.get("type"), {"input": item.get("input")}))
    return out


def stopped_for_tools(response: dict[str, Any]) -> bool:
    return response.get("status", "completed") == "completed" and any(
        item.get("type") in CALL_ITEMS for item in _output(response))


def assistant(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer's output items, as the next request's input carries them."""
    return _output(response)


def results(answers: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"type": "function_call_output", "call_id": i, "output": text} for i, text in answers]


def extended(forward: dict[str, Any], said: list[dict[str, Any]], answers: list[tuple[str, str]]) -> dict[str, Any]:
    """``forward`` continued: the model's items and the recall results after its input."""
    return {**forward, "input": [*items(forward), *said, *results(answers)]}


def without(response: dict[str, Any], ids: set[str]) -> dict[str, Any]:
    if not ids:
        return response
    return {**response, "output": [item for item in _output(response)
                                   if not (item.get("type") == "function_call" and item.get("call_id") in ids)]}


def merge(first: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """One answer from two segments: the first's id, every item shown, the output tokens of both."""
    usage = dict(later.get("usage") or {})
    if "output_tokens" in usage:
        usage["output_tokens"] += int((first.get("usage") or {}).get("output_tokens") or 0)
        if "input_tokens" in usage:
            usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    return {**later, "id": first.get("id", later.get("id")), "output": [*_output(first), *_output(later)],
            "usage": usage or later.get("usage")}


def usage(response: dict[str, Any]) -> Any:
    return response.get("usage")


def ended(response: dict[str, Any]) -> dict[str, Any]:
    """An answer whose recall calls were taken out reads as an ordinary end already."""
    return response


def splice_final(echo: list[Any], model_items: list[dict[str, Any]], answers: list[tuple[str, str]],
                 shown: int) -> list[Any] | None:
    """The client's next items with the model's own items (recall calls included) instead of the
    ``shown`` items the client echoes, the recall results right after them."""
    if len(echo) < shown:
        return None
    return [*model_items, *results(answers), *echo[shown:]]


def echo_length(new: list[Any], answer: bytes | None) -> int:
    """How many leading items of ``new`` are the client's echo of the answer whose
    ``conversations.answer_key`` is ``answer`` (0: it does not start with it).  Output items
    may follow the echo directly (a client's own turn, a resumed run), so the shortest run
    of output items with that key is the echo; with no key, the whole run."""
    from ..dialects.responses import item_kind
    from .conversations import answer_key

    run = 0
    while run < len(new) and item_kind(new[run]) == "assistant":
        run += 1
    if answer is None:
        return run
    return next((n for n in range(1, run + 1) if answer_key(new[:n]) == answer), 0)


# -- a stream ------------------------------------------------------------------
class StreamFilter:
    """Relays one answer's events, holding back the ``recall`` function calls (see
    ``anthropic.StreamFilter``).  ``shift`` is how many output items earlier segments showed
    the client (a continuation's items follow them), ``seq`` the next ``sequence_number`` to
    give, ``before`` the answer those segments made; a continuation's ``response.created`` and
    ``response.in_progress`` are dropped.  Each event's ``output_index`` and
    ``sequence_number`` are renumbered when anything was held or shifted.  The terminal event
    (``response.completed`` …) carries the whole answer the client saw: it is held in
    ``final`` (or, when the answer called only recall, withheld for the continuation)."""

    TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})

    def __init__(self, *, own_recall: bool, shift: int = 0, first: bool = True, seq: int | None = None,
                 before: dict[str, Any] | None = None) -> None:
        self.own_recall = own_recall
        self.shift = shift
        self.first = first
        self.seq = seq
        self.before = before
        self.items: dict[int, dict[str, Any]] = {}
        self.held: set[int] = set()
        self.held_ids: set[str] = set()
        self.shown = 0
        self.response: dict[str, Any] | None = None
        self.usage: Any = None
        self._tail: list[bytes] = []
        self.final: list[bytes] = []

    @property
    def client_tools(self) -> int:
        return sum(1 for i, item in self.items.items() if i not in self.held and item.get("type") in CALL_ITEMS)

    @property
    def continue_with_recall(self) -> bool:
        status = (self.response or {}).get("status")
        return bool(self.held) and self.client_tools == 0 and status == "completed"

    def feed(self, event: Event) -> list[bytes]:
        data = event.data
        if not isinstance(data, dict):  # a keep-alive comment, or what is not for us to read: on, in place
            return [event.raw]
        kind = data.get("type")
        if kind in ("response.created", "response.in_progress"):
            return self._out(event, data) if self.first else []
        if kind in self.TERMINAL:
            self.response = dict(data.get("response") or {})
            self.usage = self.response.get("usage")
            if not self.held and self.before is None:
                raw = self._out(event, data)[0]
            else:
                raw = encode(event.name, self._numbered({**data, "response": self._shown_response(self.response)}))
            if self.continue_with_recall:
                self._tail.append(raw)  # sent only if no continuation follows: its number is the next one's
                if self.seq is not None and isinstance(data.get("sequence_number"), int):
                    self.seq -= 1
            else:
                self.final.append(raw)
            return []
        index = data.get("output_index")
        if kind == "response.output_item.added" and isinstance(index, int):
            item = dict(data.get("item") or {})
            self.items[index] = item
            if self.own_recall and item.get("type") == "function_call" and item.get("name") == "recall":
                self.held.add(index)
                if isinstance(item.get("id"), str):
                    self.held_ids.add(item["id"])
                return []
            self.shown += 1
        elif kind == "response.output_item.done" and isinstance(index, int) and isinstance(data.get("item"), dict):
            self.items[index] = dict(data["item"])
        if index in self.held or data.get("item_id") in self.held_ids:
            return []
        return self._out(event, data)

    def _new_index(self, index: int) -> int:
        return self.shift + index - sum(1 for i in self.held if i < index)

    def _numbered(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` with the next ``sequence_number`` (a copy only when that changes it)."""
        number = data.get("sequence_number")
        if not isinstance(number, int):
            return data
        if self.seq is None:
            self.seq = number
        if number != self.seq:
            data = {**data, "sequence_number": self.seq}
        self.seq += 1
        return data

    def _out(self, event: Event, data: dict[str, Any]) -> list[bytes]:
        index = data.get("output_index")
        moved = isinstance(index, int) and self._new_index(index) != index
        numbered = self._numbered(data)
        if numbered is data and not moved:
            return [event.raw]
        if isinstance(index, int) and moved:
            numbered = {**numbered, "output_index": self._new_index(index)}
        return [encode(event.name, numbered)]

    def _shown_response(self, response: dict[str, Any]) -> dict[str, Any]:
        visible = without(response, {str(self.items[i].get("call_id")) for i in self.held})
        return visible if self.before is None else merge(self.before, visible)

    def message(self) -> dict[str, Any]:
        if self.response is not None:
            return self.response
        return {"output": [item for _, item in sorted(self.items.items())], "usage": self.usage}

    def recall_calls(self) -> list[ToolCall]:
        return [(self.items[i].get("call_id"), "recall", _args(self.items[i].get("arguments")))
                for i in sorted(self.held)]

    def end_events(self) -> list[bytes]:
        return self._tail
