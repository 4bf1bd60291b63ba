"""The fake server's HTTP side: one handler thread per connection, the shared state.

Kept apart from ``server`` (the ``FakeServer`` a test holds) so each reads alone:
this module routes, records, injects the faults, asks the queue, the responder and
``wire`` for the answer, and writes it as JSON or a stream.
"""

from __future__ import annotations

import copy
import email.utils
import json
import math
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Mapping, Sequence

from . import wire
from .records import Faults, RecordedRequest, Responder

__all__ = ["ROUTES", "HTTPServer", "State"]

ROUTES: dict[str, tuple[wire.Api, str]] = {
    "/v1/messages": ("anthropic", "complete"),
    "/v1/messages/count_tokens": ("anthropic", "count"),
    "/v1/chat/completions": ("openai", "complete"),
}


@dataclass(slots=True)
class State:
    faults: Faults
    remaining: dict[int, int] = field(default_factory=dict)
    requests: list[RecordedRequest] = field(default_factory=list)
    cache: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    connections: set[socket.socket] = field(default_factory=set)
    queue: list[wire.Blocks] = field(default_factory=list)
    responder: Responder | None = None
    statuses: list[int | None] = field(default_factory=list)
    """The status answered to each recorded request (None until its answer starts)."""
    errors: list[str] = field(default_factory=list)

    def reset_counters(self) -> None:
        f = self.faults
        self.remaining = {429: f.fail_429, 529: f.fail_529, 500: f.fail_500}

    def take_failure(self) -> int | None:
        """The status of the next scripted failure, consuming it (None: no failure)."""
        for status in (429, 529, 500):
            if self.remaining.get(status, 0) > 0:
                self.remaining[status] -= 1
                return status
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "lossless-fake/1"
    timeout = 30  # an idle keep-alive connection does not hold a thread forever
    server: HTTPServer
    number = 0  # the recorded request being answered (1-based; 0: not recorded)

    # -- plumbing ----------------------------------------------------------
    def setup(self) -> None:
        super().setup()
        with self.server.state.lock:
            self.server.state.connections.add(self.connection)
            stopping = self.server.state.stopping.is_set()
        if stopping:  # accepted just as stop() took its list of connections: cut it here
            self.connection.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        with self.server.state.lock:
            self.server.state.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        if self.server.verbose:
            super().log_message(format, *args)

    def handle_one_request(self) -> None:
        self.number = 0  # a keep-alive connection reuses this handler: nothing recorded yet
        super().handle_one_request()

    def _record(self, method: str, body: Any) -> int:
        """Record this request (status pending); its 1-based number."""
        path, _, query = self.path.partition("?")
        state = self.server.state
        state.requests.append(RecordedRequest(method, path, {k.lower(): v for k, v in self.headers.items()}, body,
                                              query))
        state.statuses.append(None)
        self.number = len(state.requests)
        return self.number

    def send_response(self, code: int, message: str | None = None) -> None:
        state = self.server.state
        with state.lock:
            if 0 < self.number <= len(state.statuses):  # clear() may have emptied the list meanwhile
                state.statuses[self.number - 1] = code
        super().send_response(code, message)

    def _send_json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: str) -> None:
        raw = data.encode()
        self.wfile.write(f"{len(raw):X}\r\n".encode() + raw + b"\r\n")
        self.wfile.flush()

    def _end_stream(self, *, cut: bool) -> None:
        if cut:  # drop the connection mid-body: the client sees an incomplete chunked read
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        else:
            self.wfile.write(b"0\r\n\r\n")

    # -- routes -------------------------------------------------------------
    def do_HEAD(self) -> None:  # noqa: N802 - the stdlib's name
        with self.server.state.lock:
            self._record("HEAD", None)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if self.path == "/health":
            self._send_json(200, {"status": "ok"})
        else:
            self._send_json(404, {"error": {"message": f"no route GET {self.path}", "type": "not_found_error"}})

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace")
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw
        path = self.path.split("?", 1)[0]
        with state.lock:
            number = self._record("POST", body)
            faults = state.faults
            failure = state.take_failure() if path in ROUTES else None
        if faults.slow > 0 and state.stopping.wait(faults.slow):
            return
        if path not in ROUTES:
            self._send_json(404, {"error": {"message": f"no route POST {path}", "type": "not_found_error"}})
            return
        api, action = ROUTES[path]
        if failure is not None:
            status, error = wire.FAULT_BODIES[(api, failure)]
            ra = faults.retry_after
            if faults.retry_after_date:  # whole seconds, rounded up so the wait is never shorter than asked
                headers = {"retry-after": email.utils.formatdate(math.ceil(time.time() + ra), usegmt=True)}
            else:
                headers = {"retry-after": str(math.ceil(ra)), "retry-after-ms": str(int(ra * 1000))}
            self._send_json(status, error, headers if failure in (429, 529) else None)
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._send_json(400, wire.bad_request(api, "body must be a JSON object with a 'messages' list"))
            return
        if (problem := wire.invalid(api, body, wire.betas_of(self.headers))) is not None:  # as the real API does
            self._send_json(400, wire.bad_request(api, problem))
            return
        with state.lock:
            size, prefixes = wire.measure(api, body, state.cache)
        if action == "count":  # counting a prompt that does not fit is what the endpoint is for
            self._send_json(200, {"input_tokens": size.total})
            return
        if faults.max_prompt_tokens is not None and size.total > faults.max_prompt_tokens:
            max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
            self._send_json(*wire.too_long(api, faults.too_long_style, size.total, faults.max_prompt_tokens,
                                           max_tokens))
            return
        with state.lock:
            state.cache |= prefixes
            queued = state.queue.pop(0) if state.queue else None
            responder = state.responder
        if queued is None and responder is not None:
            try:
                queued = _as_blocks(responder(api, copy.deepcopy(body)))  # the recorded body stays as sent
            except Exception as error:  # a broken script is the test's bug: say so, once, where it can be read
                message = f"responder failed on request {number}: {type(error).__name__}: {error}"
                with state.lock:
                    state.errors.append(message)
                self._send_json(500, wire.bad_request(api, message))
                return
        if queued is None:
            queued = wire.answer(api, body, faults.summary, faults.reply, notes=faults.notes)
        blocks = queued
        self._answer(api, body, wire.thought(api, body, blocks, number), size, number, cut=faults.broken_stream)

    def _answer(self, api: wire.Api, body: dict[str, Any], blocks: wire.Blocks, size: wire.PromptSize, number: int,
                *, cut: bool) -> None:
        model = str(body.get("model") or "fake-model")
        limit = body.get("max_tokens") or body.get("max_completion_tokens") or 0
        blocks, stop = wire.fit(blocks, limit if isinstance(limit, int) and not isinstance(limit, bool) else 0)
        if not body.get("stream"):
            make = wire.anthropic_message if api == "anthropic" else wire.openai_completion
            self._send_json(200, make(model, blocks, size, number, stop))
            return
        self._start_stream()
        if api == "anthropic":
            for data in wire.anthropic_events(model, blocks, size, number, cut=cut, stop=stop):
                self._paced(data["type"] != "message_start")
                self._chunk(f"event: {data['type']}\ndata: {json.dumps(data)}\n\n")
        else:
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
            for i, payload in enumerate(wire.openai_chunks(model, blocks, size, number, cut=cut,
                                                           include_usage=include_usage, stop=stop)):
                self._paced(i > 0)
                self._chunk(f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n")
        self._end_stream(cut=cut)

    def _paced(self, wait: bool) -> None:
        """Wait ``Faults.stream_delay`` before a stream's event (not its first); stop() cuts the wait."""
        delay = self.server.state.faults.stream_delay
        if wait and delay > 0:
            self.server.state.stopping.wait(delay)


def _as_blocks(answer: str | Sequence[Mapping[str, Any]] | None) -> wire.Blocks | None:
    if answer is None:
        return None
    if isinstance(answer, str):
        return [{"type": "text", "text": answer}]
    return [dict(block) for block in answer]


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 drops bursts of connections (then a 1 s SYN retry)

    def __init__(self, port: int, state: State, verbose: bool) -> None:
        self.state = state
        self.verbose = verbose
        super().__init__(("127.0.0.1", port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (or a connection stop() cuts) is not a server error.
        import sys

        if not isinstance(sys.exc_info()[1], OSError) or self.verbose:
            super().handle_error(request, client_address)
