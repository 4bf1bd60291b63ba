"""The wire on both sides: the pooled upstream client, headers in and out, answers to
the client, and server-sent events cut from a byte stream as they arrive.

The client is httpx2's ``AsyncClient`` (the client both official SDKs are built on:
real async streaming, connection pooling, HTTP/1.1 keep-alive).  Requests ask for
``accept-encoding: identity`` so a stream can be read event by event as it arrives:

    parser = SSEParser()
    for event in parser.feed(chunk):     # whole events only; the rest waits for the next chunk
        event.name, event.data, event.raw

An event's ``raw`` is its bytes exactly as received (with its blank-line terminator),
so an event the proxy does not change is relayed byte for byte; ``data`` is the parsed
JSON of its ``data:`` lines (the string itself when it is not JSON, e.g. ``[DONE]``).
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator

from ..providers.errors import error_fields, recognize_context_too_long
from ..errors import ContextTooLong

__all__ = ["BadAnswer", "Event", "SSEParser", "Upstream", "client_headers", "encode", "reply", "response_headers", "too_long"]

HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "trailers",
    "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding", "content-encoding",
    "x-lossless-token",  # the proxy's own token: never passed on
})
TIMEOUT_SECONDS = 600.0
"""A long answer streams for minutes; only connecting is expected to be quick."""
CONNECT_SECONDS = 10.0


class BadAnswer(Exception):
    """The upstream answered 200 with what the proxy cannot read as that API's answer (HTML
    from a misconfigured gateway, JSON of another shape): the client gets a 502 in its API's shape."""


def answer_json(raw: bytes) -> dict[str, Any]:
    """A whole 200 answer, parsed; ``BadAnswer`` when it is not a JSON object."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise BadAnswer(f"a 200 whose body is not JSON ({len(raw):,} bytes, starting {raw[:40]!r})") from None
    if not isinstance(value, dict):
        raise BadAnswer(f"a 200 whose body is JSON but not an object ({type(value).__name__})")
    return value


def client_headers(raw: list[tuple[bytes, bytes]], *, rewritten: bool = False) -> list[tuple[bytes, bytes]]:
    """The client's headers to send upstream: all but hop-by-hop ones, those its ``connection``
    header names included (RFC 9110 §7.6.1); keys pass untouched.  Values stay the bytes the client
    sent (a value that is not ASCII, ``x-title: Café``, goes on as it came).  ``rewritten``: the proxy
    sends a body of its own, UTF-8 JSON, whatever the client's ``content-type`` said of its own."""
    named = {t.strip().lower() for k, v in raw if k.lower() == b"connection" for t in v.decode("latin-1").split(",")}
    out = [(k, v) for k, v in raw
           if (name := k.decode("latin-1").lower()) not in HOP_BY_HOP and name not in named
           and not (rewritten and name == "content-type")]
    out.append((b"accept-encoding", b"identity"))
    if rewritten:
        out.append((b"content-type", b"application/json"))
    return out


def response_headers(headers: Any, *, raw: bool = False) -> list[tuple[bytes, bytes]]:
    """The upstream's response headers to give the client (``retry-after*`` included).
    ``raw``: the body goes on as the upstream encoded it, so its ``content-encoding``
    stays; otherwise the proxy relays the decoded body (an upstream that compresses
    despite ``accept-encoding: identity`` is read through httpx2's decoders)."""
    keep = {"content-encoding"} if raw else set()
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.multi_items()
            if (k.lower() not in HOP_BY_HOP or k.lower() in keep) and k.lower() != "date"]  # the proxy sends its own


def too_long(status: int, body: bytes) -> ContextTooLong | None:
    """The upstream's "prompt too long", in any provider's wording (None: another error).

    Its ``tokens``/``limit`` (what the upstream counted, what it takes) are what the
    reactive retry aims under: from the message, else from the body's own fields
    (llama.cpp: 400, ``exceed_context_size_error`` with ``n_prompt_tokens``/``n_ctx``)."""
    if status not in (400, 413, 422):
        return None
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        parsed = body.decode("utf-8", "replace")
    message, code = error_fields(parsed)
    return recognize_context_too_long(status, message, code, body=parsed)


class Upstream:
    """The pooled client; make it inside the server's event loop, ``close`` it there."""

    def __init__(self) -> None:
        import httpx2

        self._httpx = httpx2
        self.client = httpx2.AsyncClient(timeout=httpx2.Timeout(TIMEOUT_SECONDS, connect=CONNECT_SECONDS),
                                         limits=httpx2.Limits(max_connections=None, max_keepalive_connections=64),
                                         follow_redirects=False)
        self.unreachable: tuple[type[BaseException], ...] = (httpx2.TransportError,)
        self.decoding: tuple[type[BaseException], ...] = (httpx2.DecodingError,)

    @asynccontextmanager
    async def open(self, method: str, url: str, headers: list[tuple[bytes, bytes]], body: bytes) -> AsyncIterator[Any]:
        """The upstream's response, its body not yet read (``aiter_bytes`` streams it decoded,
        ``aiter_raw`` as it came).

        An upstream that drops the connection without a byte of answer (``RemoteProtocolError``:
        a kept-alive connection it closed as it idled out, just as the request went on it) is
        asked once more, on a new connection — what the providers' SDKs do on their own, which a
        client behind the proxy cannot, since it sees a 502."""
        request = self.client.build_request(method, url, headers=headers, content=body)
        try:
            response = await self.client.send(request, stream=True)
        except self._httpx.RemoteProtocolError:
            request = self.client.build_request(method, url, headers=headers, content=body)
            response = await self.client.send(request, stream=True)
        try:
            yield response
        finally:
            await response.aclose()

    async def close(self) -> None:
        await self.client.aclose()


async def reply(send: Any, status: int, headers: list[tuple[bytes, bytes]], raw: bytes) -> None:
    headers = [h for h in headers if h[0].lower() != b"content-length"]
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-length", str(len(raw)).encode())]})
    await send({"type": "http.response.body", "body": raw, "more_body": False})


ToolCall = tuple[Any, Any, Any]
"""``(id, name, input)`` of a tool call, the JSON values the upstream sent: nothing checks
them on the way through (a malformed answer may lack an id), so they stay untyped."""


# -- server-sent events ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Event:
    name: str | None
    data: Any
    raw: bytes


def encode(name: str | None, data: Any) -> bytes:
    body = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {body}\n\n".encode()


class SSEParser:
    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[Event]:
        self._buffer += chunk
        if b"\r" in self._buffer:
            self._buffer = self._buffer.replace(b"\r\n", b"\n")
        events: list[Event] = []
        while True:
            end = self._buffer.find(b"\n\n")
            if end < 0:
                return events
            raw, self._buffer = self._buffer[: end + 2], self._buffer[end + 2:]
            events.append(_parse(raw))

    def rest(self) -> bytes:
        """What arrived after the last whole event (a stream cut mid-event)."""
        return self._buffer


def _parse(raw: bytes) -> Event:
    name = None
    data: list[str] = []
    for line in raw.decode("utf-8", "replace").split("\n"):
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    text = "\n".join(data)
    try:
        value: Any = json.loads(text) if text else None
    except ValueError:
        value = text
    return Event(name, value, raw)
