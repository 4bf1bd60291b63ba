"""What ``lossless proxy`` is told: one frozen dataclass, checked when it is made.

    settings = ProxySettings(upstream="http://127.0.0.1:8080", port=0)   # each model's own window
    settings = ProxySettings(upstream="http://127.0.0.1:8080", window=64_000)   # --window: one for all

``upstream=None`` means the providers' public endpoints (Anthropic for
``/v1/messages``, OpenAI for ``/v1/chat/completions``); a given URL serves every
route, as an OpenAI-compatible local server or a gateway does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from ..config import ContextConfig
from ..errors import ConfigError
from ..modelinfo import fitted  # noqa: F401 - the proxy's managers are fitted with it (app, server)

Route = Literal["anthropic", "openai", "responses"]

PUBLIC_UPSTREAMS: dict[Route, str] = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com",
    "responses": "https://api.openai.com",
}
MAX_CONVERSATIONS = 1_000
"""Conversations kept in memory; the least recently used is closed beyond it (its
transcript stays on disk, and its client is then handled from scratch)."""
MAX_HELD_BYTES = 256 * 1024 * 1024
"""Bytes of requests the conversations in memory may stand for (Python holds several times as
much); beyond it the least recently used is parked in the store and restored when it goes on."""
MAX_BODY = 32 * 1024 * 1024
"""Bytes of a request body: the Messages API's own limit (32 MB), room for an agent's images;
a larger body is a 413 before it is read further."""
BODY_IDLE_SECONDS = 60.0
"""Seconds a request body may go without a byte arriving: a client that stalls mid-body (or a
slow-loris one) gets a 408 rather than holding its connection and its buffer for ever."""
HEAD_SECONDS = 30.0
"""Seconds a connection has to send a request's line and headers, from its opening or its last
answer; past them it is closed (``proxy._http``): half a header held open ties up no socket."""
RECALL_ROUNDS = 4
"""Recall round-trips the proxy answers itself within one client call."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxySettings:
    upstream: str | None = None
    """Where requests go (scheme://host[:port], a path prefix allowed); None: the providers' public APIs."""
    window: int | None = None
    """The context window every forwarded request fits, in tokens (``--window``); None: each
    request's ``model``'s window, from the models' data (``lossless.modelinfo.window_for``)."""
    max_output: int | None = None
    """Tokens reserved for the answer; a request asking for more ``max_tokens`` gets what it asks."""
    store: str | Path | None = None
    """The store (transcripts, artifacts): a directory or ``postgresql://…``; None: ``$LOSSLESS_STORE``,
    else ``$LOSSLESS_HOME`` or the nearest ``.lossless`` (``lossless.storage.open_store``)."""
    host: str = "127.0.0.1"
    port: int = 0
    """0: any free port (``ProxyServer.base_url`` says which)."""
    verbose: bool = False
    """One line per request on stderr: ids, sizes, stages, status and time — never headers or content."""
    provider: Any = None
    """A lossless ``Provider`` that summarises (collapse, auto-compact, session notes); None:
    the deterministic stages only, no model call of lossless's own."""
    max_conversations: int = MAX_CONVERSATIONS
    recall_rounds: int = RECALL_ROUNDS
    auth_token: str | None = None
    """When set, every request must carry it (``x-lossless-token``); others get a 401."""
    tenant_header: str | None = None
    """A header naming the tenant (set by a gateway in front), trusted only behind ``auth_token``;
    None: the tenant is a keyed hash of the request's API key."""
    tenant_secret: bytes = b""
    """The key of the tenant hash (``ProxyServer`` reads or makes the store's own)."""
    max_body: int = MAX_BODY
    body_idle_seconds: float = BODY_IDLE_SECONDS
    head_seconds: float = HEAD_SECONDS
    max_held_bytes: int = MAX_HELD_BYTES
    insecure: bool = False
    """Serve beyond this machine (``host`` not a loopback address) without ``auth_token``."""

    def __post_init__(self) -> None:
        if self.upstream is not None:
            bad = ConfigError(f"--upstream {redacted(self.upstream)!r} must be an http(s) URL such as "
                              "http://127.0.0.1:8080")
            try:
                parts = urlsplit(self.upstream)
                parts.port  # a port out of range or not a number raises here  # noqa: B018
            except ValueError:
                raise bad from None
            if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in self.upstream):
                raise bad
        if self.window is not None:
            ContextConfig(window=self.window, max_output=self.max_output)  # the same checks, the same messages
        elif self.max_output is not None:
            if self.max_output < 1:
                raise ConfigError(f"--max-output ({self.max_output}) must be at least 1")
            from ..modelinfo import DEFAULT_WINDOW

            try:  # each request is fitted to its model's window; one the data lacks gets DEFAULT_WINDOW
                ContextConfig(window=DEFAULT_WINDOW, max_output=self.max_output)
            except ConfigError as exc:
                raise ConfigError(f"--max-output {self.max_output:,} does not fit the {DEFAULT_WINDOW:,}-token window a "
                                  f"model unknown to lossless gets ({exc}); lower it, or give --window too") from None
        if not 0 <= self.port <= 65_535:
            raise ConfigError(f"--port {self.port} must be between 0 and 65535")
        if self.tenant_header is not None and not self.auth_token:
            raise ConfigError("--tenant-header is trusted only behind the proxy's own token: give --auth-token too")
        if not self.auth_token and not self.insecure and not loopback(self.host):
            raise ConfigError(f"--host {self.host} serves beyond this machine: give --auth-token TOKEN (clients send "
                              "it in the x-lossless-token header), or --insecure to serve without one")
        if self.max_body < 1:
            raise ConfigError(f"--max-body {self.max_body} must be at least 1 byte")
        if not self.body_idle_seconds > 0 or not self.head_seconds > 0:
            raise ConfigError(f"body_idle_seconds ({self.body_idle_seconds}) and head_seconds ({self.head_seconds}) "
                              "must be above 0")
        if self.max_conversations < 1 or self.recall_rounds < 0:
            raise ConfigError("max_conversations must be at least 1 and recall_rounds at least 0")

    @property
    def public(self) -> bool:
        """Whether it listens beyond this machine."""
        return not loopback(self.host)

    def upstream_shown(self, route: Route | None = None) -> str:
        """``upstream_for(route)`` as a message may show it: without a user name or password."""
        return redacted(self.upstream_for(route)) if self.upstream or route else "the providers’ APIs"

    def upstream_for(self, route: Route | None) -> str:
        """The base URL a request of ``route`` goes to."""
        base = self.upstream or PUBLIC_UPSTREAMS[route or "anthropic"]
        return base.rstrip("/")


def redacted(url: str) -> str:
    """``url`` without the user name and password it may carry (``http://user:pass@host`` →
    ``http://***@host``): a gateway's credentials never reach a message, a log or a client."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.rpartition("@")[2] if "@" in url else url
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()


def loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (``localhost``, 127.0.0.0/8, ::1)."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere
