"""A fake OpenAI Responses endpoint (``POST /v1/responses``), for testing what speaks it.

    with ResponsesServer() as srv:
        client = OpenAI(base_url=srv.openai_base_url, api_key="k")     # or the Agents SDK
        srv.enqueue([{"type": "tool_use", "id": "call_1", "name": "recall", "input": {"handle": h}}], "done")
        ...
        srv.requests[-1].body["input"]          # every request, parsed

Answers are scripted as with ``FakeServer.enqueue`` (a text, or Anthropic-style blocks:
``text`` → an assistant message item, ``tool_use`` → a ``function_call``, ``thinking`` →
a ``reasoning`` item whose ``encrypted_content`` is the signature); unscripted requests
get "Fake reply to: <last user text>".  A request the real API refuses — a
``function_call`` without its output, an output without its call, an item it cannot
read — gets its 400; a prompt estimated above ``max_prompt_tokens`` gets the
``context_length_exceeded`` 400.  A request with ``"stream": true`` is answered with the
API's typed events (``response.created`` … ``response.completed``, each with its
``sequence_number``; an item's events with its ``output_index``).  Bound to 127.0.0.1.

The pure functions (``problem``, ``response``) are what ``FakeServer`` would need to
serve the same route.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Mapping, Sequence

from ..dialects.responses import problems_responses
from ..errors import FormatError
from .server import RecordedRequest
from .wire import Blocks, estimate

__all__ = ["ResponsesServer", "events", "problem", "response"]


def problem(body: Any) -> str | None:
    """The real API's 400 message for ``body``, or None when it would accept it."""
    if not isinstance(body, Mapping) or not isinstance(body.get("input"), (str, list)):
        return "body must be a JSON object with 'input' (a string or a list of items)"
    if isinstance(body["input"], str):
        return None
    try:
        found = problems_responses(body["input"])
    except FormatError as e:
        return f"Invalid 'input': {e}"
    if not found:
        return None
    p = found[0]
    if "function_call_output answers" in str(p):
        return f"No tool call found for function call output with call_id {p.tool_id}."
    if p.tool_id is not None:
        return f"No tool output found for function call {p.tool_id}."
    return f"Invalid 'input': {p}"


def _last_user_text(items: Any) -> str:
    if isinstance(items, str):
        return items
    for item in reversed(items):
        if isinstance(item, Mapping) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            return " ".join(str(p.get("text", "")) for p in content or [] if isinstance(p, Mapping))
    return ""


def _output_item(block: Mapping[str, Any], number: int, k: int) -> dict[str, Any]:
    match block.get("type"):
        case "tool_use":
            return {"id": f"fc_fake{number:06d}_{k}", "type": "function_call", "status": "completed",
                    "call_id": block["id"], "name": block["name"], "arguments": json.dumps(block["input"])}
        case "thinking":
            return {"id": f"rs_fake{number:06d}_{k}", "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": block.get("thinking", "")}],
                    "encrypted_content": block.get("signature", "")}
    return {"id": f"msg_fake{number:06d}_{k}", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": block.get("text", ""), "annotations": []}]}


def response(body: Mapping[str, Any], blocks: Blocks, number: int) -> dict[str, Any]:
    """The Response object for ``blocks``, with usage estimated from ``body``."""
    prompt = estimate({k: body.get(k) for k in ("instructions", "tools", "input")})
    completion = estimate(blocks)
    return {
        "id": f"resp_fake{number:06d}", "object": "response", "created_at": 1_700_000_000, "status": "completed",
        "model": str(body.get("model") or "fake-model"), "instructions": body.get("instructions"),
        "output": [_output_item(b, number, k) for k, b in enumerate(blocks)],
        "parallel_tool_calls": True, "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
        "error": None, "incomplete_details": None, "metadata": {}, "temperature": 1.0, "top_p": 1.0,
        "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": completion,
                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": prompt + completion},
    }


def events(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The stream of events that delivers ``answer`` (a Response object), as the API sends it."""
    start = {**answer, "status": "in_progress", "output": [], "usage": None}
    out: list[dict[str, Any]] = [{"type": "response.created", "response": start},
                                 {"type": "response.in_progress", "response": start}]
    for index, item in enumerate(answer["output"]):
        kind = item.get("type")
        opened = ({**item, "status": "in_progress", "content": []} if kind == "message" else
                  {**item, "status": "in_progress", "arguments": ""} if kind == "function_call" else dict(item))
        out.append({"type": "response.output_item.added", "output_index": index, "item": opened})
        if kind == "message":
            for c, part in enumerate(item.get("content") or []):
                text = str(part.get("text", ""))
                at = {"item_id": item["id"], "output_index": index, "content_index": c}
                out.append({"type": "response.content_part.added", **at, "part": {**part, "text": ""}})
                for piece in (text[: len(text) // 2], text[len(text) // 2:]):
                    out.append({"type": "response.output_text.delta", **at, "delta": piece, "logprobs": []})
                out.append({"type": "response.output_text.done", **at, "text": text, "logprobs": []})
                out.append({"type": "response.content_part.done", **at, "part": part})
        elif kind == "function_call":
            at = {"item_id": item["id"], "output_index": index}
            out.append({"type": "response.function_call_arguments.delta", **at, "delta": item["arguments"]})
            out.append({"type": "response.function_call_arguments.done", **at, "arguments": item["arguments"]})
        out.append({"type": "response.output_item.done", "output_index": index, "item": item})
    out.append({"type": "response.completed", "response": dict(answer)})
    return [{**event, "sequence_number": n} for n, event in enumerate(out)]


@dataclass(slots=True)
class _State:
    max_prompt_tokens: int | None
    requests: list[RecordedRequest] = field(default_factory=list)
    queue: list[Blocks] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        state = self.server.state
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw
        path = self.path.split("?", 1)[0]
        with state.lock:
            state.requests.append(RecordedRequest("POST", path, {k.lower(): v for k, v in self.headers.items()}, body))
            number = len(state.requests)
        if path != "/v1/responses":
            self._send(404, {"error": {"message": f"no route POST {path}", "type": "not_found_error"}})
            return
        if (why := problem(body)) is not None:
            self._send(400, {"error": {"message": why, "type": "invalid_request_error", "param": "input",
                                       "code": None}})
            return
        size = estimate({k: body.get(k) for k in ("instructions", "tools", "input")})
        if state.max_prompt_tokens is not None and size > state.max_prompt_tokens:
            self._send(400, {"error": {"message": f"Your input exceeds the context window of this model "
                                                  f"({size} > {state.max_prompt_tokens} tokens).",
                                       "type": "invalid_request_error", "param": "input",
                                       "code": "context_length_exceeded"}})
            return
        with state.lock:
            blocks = state.queue.pop(0) if state.queue else None
        if blocks is None:
            words = " ".join(_last_user_text(body["input"]).split())
            blocks = [{"type": "text", "text": f"Fake reply to: {words[:60]}" if words else "Fake reply."}]
        answer = response(body, blocks, number)
        if body.get("stream"):
            self._stream(events(answer))
        else:
            self._send(200, answer)

    def _stream(self, items: list[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for event in items:
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: _State) -> None:
        self.state = state
        super().__init__(("127.0.0.1", 0), _Handler)


class ResponsesServer:
    """The fake Responses endpoint on 127.0.0.1, in a background thread; a context manager."""

    def __init__(self, *, max_prompt_tokens: int | None = None) -> None:
        self._state = _State(max_prompt_tokens=max_prompt_tokens)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ResponsesServer:
        self._httpd = _Server(self._state)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            assert self._thread is not None
            self._thread.join(timeout=5)
            self._httpd = None

    @property
    def openai_base_url(self) -> str:
        """The OpenAI SDK's ``base_url`` (it includes ``/v1``)."""
        if self._httpd is None:
            raise RuntimeError("ResponsesServer is not running: use it as a context manager")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request received so far, in arrival order."""
        with self._state.lock:
            return list(self._state.requests)

    def enqueue(self, *answers: str | Sequence[Mapping[str, Any]]) -> None:
        """Script the next answers, in order (see the module docstring)."""
        with self._state.lock:
            for item in answers:
                self._state.queue.append([{"type": "text", "text": item}] if isinstance(item, str)
                                         else [dict(b) for b in item])
