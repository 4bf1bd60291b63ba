"""``ProxyServer``: the proxy on a port, in a background thread, as a context manager.

    with ProxyServer(ProxySettings(upstream=srv.base_url, window=20_000)) as proxy:
        anthropic.Anthropic(base_url=proxy.base_url)         # OpenAI: proxy.base_url + "/v1"
        proxy.stats()                                        # what GET /stats returns

The socket is bound before the server starts (a port in use is a one-line
``ConfigError`` at once), and ``start`` returns once it accepts connections.  The
server is uvicorn (the maintained ASGI server: HTTP/1.1 keep-alive, streaming,
graceful shutdown); it runs its own event loop in the thread, so signals stay with
the caller (``lossless proxy`` stops it on Ctrl-C or SIGTERM and exits 0).
"""

from __future__ import annotations

import errno
import logging
import socket
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError
from ._http import protocol_class
from .app import ProxyApp
from .conversations import Conversations
from .settings import ProxySettings, Route, fitted

__all__ = ["ProxyServer", "manager_factory"]

START_SECONDS = 10.0


class _ServerLines(logging.Handler):
    """What the HTTP server itself reports, as the proxy's own one-line messages on stderr.

    An answer the upstream cut mid-way is cut for the client too: the app returns without
    completing it on purpose, so that report is dropped.  A connection that is not HTTP at all
    (a TLS handshake sent to this plain-HTTP port, a scanner) is named with what to check."""

    PLAIN = {
        "Invalid HTTP request received.": "a connection sent a request that is not HTTP/1.1 as the proxy reads it "
                                          "(no Host header, bad framing, or TLS to this plain-HTTP port: the base "
                                          "URL must start http://): answered 400 and closed it",
        "Unsupported upgrade request.": "a client asked to upgrade its connection (a WebSocket?), which the proxy "
                                        "does not serve: answered as plain HTTP",
    }

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.sinks: dict[str, Callable[[str], None]] = {}  # a server thread's name → its proxy's log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format
            text = str(record.msg)
        if "without completing response" in text:
            return
        text = self.PLAIN.get(text, text)
        if record.exc_info and record.exc_info[1] is not None:
            text = f"{text} ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
        line = f"lossless proxy: {text.splitlines()[0] if text else record.levelname.lower()}"
        sink = self.sinks.get(record.threadName or "")
        if sink is not None:
            sink(line)
        else:
            print(line, file=sys.stderr, flush=True)


_LINES = _ServerLines()


def _server_logging() -> None:
    """The HTTP server's loggers write through ``_LINES`` only (added once per process)."""
    for name in ("uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        if _LINES not in logger.handlers:
            logger.handlers = [_LINES]
        logger.propagate = False
        logger.setLevel(logging.WARNING)


def manager_factory(settings: ProxySettings) -> Any:
    """Makes each conversation's ``ContextManager``: the route's dialect, the
    conversation id as session id, one store root for all (artifacts are content-addressed,
    so conversations share them safely; the proxy's recall answers a conversation only the
    handles it was shown, ``turn.Scoped``, so no tenant reads another's)."""
    from ..config import ContextConfig
    from ..manager import ContextManager
    from ..modelinfo import DEFAULT_WINDOW
    from ..storage import open_store

    shared = open_store(settings.store).artifacts  # opened once: a database that is down stops the start
    # Without --window, each request fits its manager to its model's window (ProxyApp.fit) before it prepares.
    config = (ContextConfig(window=settings.window, max_output=settings.max_output) if settings.window is not None
              else fitted(ContextConfig(window=DEFAULT_WINDOW), DEFAULT_WINDOW, settings.max_output))

    def make(conversation_id: str, route: Route, tenant: str = "") -> Any:
        return ContextManager(config=config, store=shared,
                              session_id=conversation_id,
                              dialect="anthropic" if route == "anthropic" else "openai", provider=settings.provider,
                              session_notes=settings.provider is not None)

    return make


def tenant_secret(settings: ProxySettings) -> bytes:
    """The key of the tenant hash: ``proxy.key`` in a directory store (made once, 0600, so
    every proxy on that store names a tenant alike), a row in a PostgreSQL one (``shared``)."""
    import os
    import secrets
    import tempfile

    from ..storage import open_store
    from ..store import store_dir

    store = open_store(settings.store)
    if store.kind != "directory":
        from .shared import shared_secret

        return shared_secret(store.artifacts) or secrets.token_bytes(32)
    path = store.root / "proxy.key"
    if not path.exists():
        store_dir(store.root)  # made 0700, with its .gitignore in a working tree
        fd, tmp = tempfile.mkstemp(dir=store.root, prefix=".proxy.key.", suffix=".tmp")  # 0600
        try:
            os.write(fd, secrets.token_bytes(32))
            os.fsync(fd)
            os.close(fd)
            os.link(tmp, path)  # the first proxy's key wins; a racing one reads it
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    return path.read_bytes()


class ProxyServer:
    def __init__(self, settings: ProxySettings, *, log: Any = None) -> None:
        if not settings.tenant_secret:
            settings = replace(settings, tenant_secret=tenant_secret(settings))
        self.settings = settings
        from ..storage import open_store

        from .shared import shared_tips

        artifacts = open_store(settings.store).artifacts
        db = getattr(artifacts, "db", None)
        self.store_label = f"postgresql://{db.label}" if db is not None else str(Path(artifacts.root).resolve())
        """Where the transcripts and artifacts go, as a message may name it (a database without its password)."""
        self.conversations = Conversations(manager_factory(settings), capacity=settings.max_conversations,
                                           max_bytes=settings.max_held_bytes, store=artifacts,
                                           shared=shared_tips(artifacts))
        self.app = ProxyApp(settings, self.conversations, log=log)
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    def start(self) -> ProxyServer:
        import uvicorn

        if self._server is not None:
            raise RuntimeError("ProxyServer already started")
        self._socket = bind(self.settings.host, self.settings.port)
        _server_logging()
        # The upstream's server header is relayed, and the date is the proxy's: each once (uvicorn's
        # own server header and the upstream's date made both twice).
        config = uvicorn.Config(self.app, log_config=None, log_level="warning", lifespan="on", access_log=False,
                                server_header=False, http=protocol_class(self.settings.head_seconds),
                                timeout_graceful_shutdown=5, ws="none")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name=f"lossless-proxy:{self.port}", daemon=True)
        _LINES.sinks[self._thread.name] = self.app.log
        self._thread.start()
        ready = threading.Event()
        for _ in range(int(START_SECONDS / 0.01)):
            if self._server.started or not self._thread.is_alive():
                break
            ready.wait(0.01)
        if not self._server.started:
            self.stop()
            raise ConfigError(f"lossless proxy could not start on {self.settings.host}:{self.settings.port}")
        return self

    def stop(self) -> None:
        """Stop serving (open streams get a few seconds to finish) and close every conversation."""
        if self._server is None:
            return
        self._server.should_exit = True
        assert self._thread is not None
        self._thread.join(timeout=15)
        if self._socket is not None:
            self._socket.close()
        self._server = None
        _LINES.sinks.pop(self._thread.name, None)
        self.conversations.close()

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._socket is None:
            raise RuntimeError("ProxyServer is not running: use it as a context manager or call start()")
        return self._socket.getsockname()[1]

    @property
    def base_url(self) -> str:
        """The Anthropic SDK's ``base_url`` (the OpenAI SDK's is this plus ``/v1``)."""
        host = self.settings.host
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)
        return f"http://{shown}:{self.port}"

    def stats(self) -> dict[str, Any]:
        return self.app.stats()


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, or a one-line ``ConfigError`` (port in use, bad host)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, so asyncio sets TCP_NODELAY on each accepted connection (it checks the
    # protocol): without it an answer's headers and first event wait out the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
        sock.listen(512)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} on {host} is in use: pick another with --port (0: any free port)") from None
        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    sock.setblocking(False)
    return sock
