"""A fake Anthropic + OpenAI HTTP server, for testing the real SDKs end to end.

    with FakeServer(Faults(fail_429=2, retry_after=3)) as srv:
        provider = AnthropicProvider("claude-x", api_key="k", base_url=srv.base_url)
        ...                                   # OpenAI SDKs take srv.openai_base_url
        srv.requests[-1].body["messages"]     # every request, parsed, with its headers
        srv.set_faults(max_prompt_tokens=1000)

Endpoints: ``POST /v1/messages`` (JSON, or SSE when ``"stream": true``),
``POST /v1/messages/count_tokens``, ``POST /v1/chat/completions`` (JSON or
``data:`` chunks ending ``[DONE]``), ``GET /health``, and ``HEAD`` on any path (the
connectivity check some clients make first).  Answers scripted with ``enqueue``
(texts or tool calls) come first; then the ``responder``, when one is set, decides
from the request (a client that sends side requests between its turns is scripted
this way); then a request whose last user message asks for a ``<summary>`` gets the
deterministic nine-section summary, and anything else a short reply (JSON matching
the schema when the request asks for structured output).  With thinking ``enabled``
an answer starts with a signed thinking block, as a real model's does (one is added
when a scripted answer has none).  An answer longer than the request's
``max_tokens`` is cut there (stop reason ``max_tokens`` / ``length``).
Usage is an estimate of the request (JSON chars / 4) with a simulated prompt cache,
so size faults can be triggered by size.  A request the real API would refuse (a
tool_use without its tool_result, an orphan tool_result, an unknown key on a
tool_use, a ``system`` message without its beta header, a tool loop sent back
without its thinking while thinking is enabled) gets its 400; ``statuses`` says what each request was answered.

Faults apply in this order: ``slow`` delay, then the first ``fail_429`` requests
get a 429, the next ``fail_529`` an overload (529; 503 on the OpenAI path), the
next ``fail_500`` a 500; then a prompt above ``max_prompt_tokens`` gets the
provider's "too long" 400; ``broken_stream`` cuts streams mid-way.  Bound to
127.0.0.1 only.  ``python -m lossless.testing serve`` runs one from a shell.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import replace
from typing import Any, Mapping, Sequence

from .handler import HTTPServer, State
from .records import Faults, RecordedRequest, Responder

__all__ = ["Faults", "FakeServer", "RecordedRequest", "Responder"]


class FakeServer:
    """The fake server on 127.0.0.1, in a background thread; a context manager."""

    def __init__(self, faults: Faults | None = None, *, port: int = 0, verbose: bool = False,
                 responder: Responder | None = None) -> None:
        self._state = State(faults=faults or Faults(), responder=responder)
        self._state.reset_counters()
        self._port = port
        self._verbose = verbose
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> FakeServer:
        if self._httpd is not None:
            raise RuntimeError("FakeServer already started")
        self._httpd = HTTPServer(self._port, self._state, self._verbose)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"FakeServer:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut open connections, and wait for every handler thread."""
        if self._httpd is None:
            return
        self._state.stopping.set()
        self._httpd.shutdown()
        with self._state.lock:
            connections = list(self._state.connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()  # joins the handler threads
        assert self._thread is not None
        self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------
    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeServer is not running: use it as a context manager or call start()")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """The root URL: what the Anthropic SDK takes as ``base_url``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """The OpenAI SDK's ``base_url`` (it includes ``/v1``)."""
        return self.base_url + "/v1"

    # -- state ---------------------------------------------------------------
    @property
    def faults(self) -> Faults:
        return self._state.faults

    def set_faults(self, faults: Faults | None = None, **fields: Any) -> None:
        """From now on the faults are exactly these (``faults``, with ``fields`` changed;
        no argument clears them all); failure counters start again."""
        with self._state.lock:
            self._state.faults = replace(faults or Faults(), **fields)
            self._state.reset_counters()

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request received so far, in arrival order."""
        with self._state.lock:
            return list(self._state.requests)

    @property
    def statuses(self) -> list[int | None]:
        """The status answered to each request in ``requests``, in the same order
        (None: its answer has not started yet)."""
        with self._state.lock:
            return list(self._state.statuses)

    @property
    def errors(self) -> list[str]:
        """What the responder raised (each such request got a 500 saying so)."""
        with self._state.lock:
            return list(self._state.errors)

    def set_responder(self, responder: Responder | None) -> None:
        """From now on ``responder(api, body)`` decides each answer that no queued one
        takes (None: back to the default answers)."""
        with self._state.lock:
            self._state.responder = responder

    def enqueue(self, *answers: str | Sequence[Mapping[str, Any]]) -> None:
        """Script the next answers, in order, before the default ones: a text, or
        Anthropic-style content blocks (``text``, ``tool_use``, ``thinking``) that the
        OpenAI path renders as ``content`` + ``tool_calls``.  Faults still come first."""
        with self._state.lock:
            for item in answers:
                blocks = [{"type": "text", "text": item}] if isinstance(item, str) else [dict(b) for b in item]
                self._state.queue.append(blocks)

    def clear(self) -> None:
        """Forget recorded requests, queued answers and the simulated prompt cache."""
        with self._state.lock:
            self._state.requests.clear()
            self._state.statuses.clear()
            self._state.errors.clear()
            self._state.queue.clear()
            self._state.cache.clear()
