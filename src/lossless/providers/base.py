"""The ``Provider`` protocol: one method, ``complete(request) -> response``.

Requests and responses are neutral values (``lossless.messages``); adapters in
this package translate them to a wire API.  Optional capabilities
(``count_tokens``, ``stream``) raise ``NotImplementedError`` when absent.

``stream(request)`` is a generator of text deltas whose *return value* is the
complete ``Response`` (usage included): ``response = yield from provider.stream(r)``.
Every failure is a ``lossless.errors.ProviderError`` (see ``providers.errors``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generator, Mapping, Protocol, runtime_checkable

from ..messages import Block, Message, Text


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def context_tokens(self) -> int:
        """The real size of the prompt: input + cache writes + cache reads."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    messages: tuple[Message, ...]
    system: str | tuple[Mapping[str, Any], ...] | None = None
    """A string, or Anthropic-style text blocks (``cache_control`` allowed)."""
    tools: tuple[Mapping[str, Any], ...] = ()
    """Anthropic-style schemas (``name``, ``description``, ``input_schema``)."""
    max_tokens: int = 4096
    model: str | None = None
    purpose: str = "chat"
    """What the call is for ("chat", "summary", "memory-select", ...): for logs and fakes."""
    max_attempts: int | None = None
    """At most this many tries for this request, below the provider's ``RetryPolicy``
    (None: the policy's own).  lossless sets it to share one call's tries."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Merged into the wire body verbatim (``temperature``, ``thinking``, ...)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    content: tuple[Block, ...]
    stop_reason: str = "end_turn"
    usage: Usage = field(default_factory=Usage)
    model: str = ""

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, Text))


CONNECT_TIMEOUT = 10.0
"""Seconds to wait for a connection; the read timeout is the adapter's ``timeout``."""


class OwnsClient:
    """For adapters that hold an SDK client in ``_client``: close it, or use ``with``."""

    _client: Any

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@runtime_checkable
class Provider(Protocol):
    def complete(self, request: Request) -> Response: ...


def count_tokens(provider: Provider, request: Request) -> int:
    """The provider's exact count for a request, when it has a count endpoint."""
    fn = getattr(provider, "count_tokens", None)
    if fn is None:
        raise NotImplementedError(f"{type(provider).__name__} has no token-count endpoint")
    return fn(request)


def stream(provider: Provider, request: Request) -> Generator[str, None, Response]:
    """Text deltas as they arrive; the generator returns the complete ``Response``."""
    fn = getattr(provider, "stream", None)
    if fn is None:
        raise NotImplementedError(f"{type(provider).__name__} does not stream")
    return fn(request)
