"""A raw upstream for the proxy's hostile tests: it answers every request with the bytes it
is told to (or drips a stream slowly), and records what it received and when each
connection closed.  Nothing here parses HTTP beyond what a test needs."""

from __future__ import annotations

import socket
import threading
import time
from typing import Callable

Answer = Callable[[bytes], bytes | list[tuple[float, bytes]]]
"""The request's bytes → the whole response, or ``(delay, bytes)`` pieces sent in turn."""


def http(status: int, body: bytes, content_type: str = "application/json") -> bytes:
    head = (f"HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n")
    return head.encode() + body


def sse_head() -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"


class RawUpstream:
    """``with RawUpstream(answer) as up: up.base_url, up.requests, up.closed_at``."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self.closed_at: list[float] = []
        """When the proxy hung up (or the answer's last piece could not be sent)."""
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def __enter__(self) -> RawUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                body += conn.recv(65536)
            self.requests.append(head + b"\r\n\r\n" + body)
            answer = self.answer(body)
            if answer == b"":  # a server that drops the connection without a word
                self.closed_at.append(time.monotonic())
                return
            pieces = [(0.0, answer)] if isinstance(answer, bytes) else answer
            try:
                for delay, piece in pieces:
                    if delay:
                        conn.settimeout(delay)
                        try:  # wait, but notice at once when the proxy hangs up
                            if conn.recv(1) == b"":
                                raise ConnectionResetError
                        except socket.timeout:
                            pass
                    conn.sendall(piece)
                if b"\r\nconnection: close\r\n" in pieces[0][1].partition(b"\r\n\r\n")[0].lower() + b"\r\n":
                    conn.shutdown(socket.SHUT_WR)  # the answer ends where the connection does, as it said
                conn.settimeout(5)
                conn.recv(1)  # the proxy closes or keeps the connection: wait a little for it
            except OSError:
                pass
            self.closed_at.append(time.monotonic())
