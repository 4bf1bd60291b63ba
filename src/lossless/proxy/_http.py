"""The proxy's HTTP/1.1 connections: uvicorn's h11 protocol, with a deadline for a request's head.

uvicorn starts no timer while a connection sends its request line and headers, and its keep-alive
timer is cancelled by any byte: a client that opens connections and sends half a header (or one
byte now and then) holds each one, and its file descriptor, for as long as it likes — a few hundred
of them and the process can accept nothing, its own health check included.  Here a connection
must finish each request's head within ``ProxySettings.head_seconds`` of opening or of its last
answer, else it is closed (never in the middle of a request: a slow answer is not cut).  (A body that trickles is ``ProxyApp``'s to time: ``ProxySettings.body_idle_seconds``.)

A request that is not HTTP/1.1 as h11 reads it (no ``Host``, bad framing, TLS to this plain port)
gets its 400 as a JSON error, in the shape both APIs' clients read (``error.message``), rather
than uvicorn's text.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

BAD_REQUEST = ("lossless proxy: the request is not HTTP/1.1 as the proxy reads it (a Host header, one "
               "Content-Length or chunked framing; plain HTTP on this port, not TLS)")


def protocol_class(head_seconds: float) -> type[asyncio.Protocol]:
    """The protocol class for ``uvicorn.Config(http=…)`` (uvicorn imported here, where it is needed)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    head_seconds_ = head_seconds

    class Guarded(H11Protocol):
        head_seconds = head_seconds_
        _head_timer: asyncio.TimerHandle | None = None
        _waiting_from: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.cycle is not self._waiting_from:  # a request's head was read: it came in time
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request on this connection has as long

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            body = json.dumps({"type": "error", "error": {"type": "invalid_request_error",
                                                          "message": BAD_REQUEST}}).encode()
            headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
            try:
                self.transport.write(self.conn.send(h11.Response(status_code=400, headers=headers,
                                                                 reason=b"Bad Request")))
                self.transport.write(self.conn.send(h11.Data(data=body)))
                self.transport.write(self.conn.send(h11.EndOfMessage()))
            except h11.LocalProtocolError:  # h11 cannot answer in this state: the connection just ends
                pass
            self.transport.close()

        def _arm(self) -> None:
            self._disarm()
            self._waiting_from = self.cycle
            self._head_timer = self.loop.call_later(self.head_seconds, self._too_slow)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            self._head_timer = None

        def _too_slow(self) -> None:
            self._head_timer = None
            idle = self.cycle is None or self.cycle.response_complete  # not in the middle of a request
            if idle and not self.transport.is_closing():
                self.transport.close()

    return Guarded
