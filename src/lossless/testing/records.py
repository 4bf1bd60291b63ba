"""The fake server's values: the faults it is told to inject, the requests it
records, and the responder that scripts its answers.  Plain frozen data, shared by
``server`` (the public ``FakeServer``) and ``handler`` (the HTTP side)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from . import wire

__all__ = ["Faults", "RecordedRequest", "Responder"]

Responder = Callable[[wire.Api, dict[str, Any]], str | Sequence[Mapping[str, Any]] | None]
"""Decides an answer from a request: ``fn(api, body)`` returns a text, Anthropic-style
content blocks (as ``FakeServer.enqueue`` takes them), or None for the default answer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Faults:
    fail_429: int = 0
    """The first N requests get a 429 with retry-after headers."""
    fail_529: int = 0
    """The next N get an overload: 529 (Anthropic) or 503 (OpenAI), with retry-after."""
    fail_500: int = 0
    """The next N get a 500."""
    retry_after: float = 1.0
    """Seconds sent in ``retry-after`` (rounded up) and ``retry-after-ms``."""
    retry_after_date: bool = False
    """Send ``retry-after`` as an HTTP date instead (as some gateways do), without ``retry-after-ms``."""
    max_prompt_tokens: int | None = None
    """A prompt estimated above this gets the provider's "prompt too long" 400."""
    too_long_style: wire.TooLongStyle = "native"
    """How the OpenAI path says "too long": native OpenAI, llamacpp, vllm or ollama."""
    broken_stream: bool = False
    """Streams stop after half their deltas and the connection is dropped."""
    slow: float = 0.0
    """Seconds to wait before answering each request."""
    stream_delay: float = 0.0
    """Seconds to wait before each event of a stream (after its first), as a model writing
    its answer a token at a time: a client shows the text as it arrives, not at the end."""
    summary: wire.SummaryMode = "good"
    """What a summary request gets: the good summary, an empty text, or a malformed one."""
    reply: str | None = None
    """Fixed text for non-summary requests (default: "Fake reply to: <last user text>")."""
    notes: bool = False
    """Session-notes requests get the deterministic notes of ``notes`` (by default they are
    answered as any request is, which is not notes, so a client keeps its old ones)."""


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    method: str
    path: str
    headers: Mapping[str, str]
    """Lower-cased header names."""
    body: Any
    """The parsed JSON body (the raw text when it was not JSON)."""
    query: str = ""
    """The query string, without its ``?`` (Claude Code sends ``beta=true``)."""
