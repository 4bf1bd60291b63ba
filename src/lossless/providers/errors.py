"""From an HTTP failure to lossless's error tree, without any SDK.

Both adapters funnel every SDK exception through ``error_from_status`` (or make a
``ProviderConnectionError`` themselves), so the mapping lives here, once:

    status / body                                  → error
    "prompt is too long", context_length_exceeded,
      llama.cpp / vLLM / Ollama context messages,
      413 request too large                       → ContextTooLong(tokens, limit)
      (numbers from the message, else from llama.cpp's n_prompt_tokens / n_ctx)
    429, or error type rate_limit_error           → RateLimited(retry_after)
    529, 503, or error type overloaded_error      → Overloaded(retry_after)
    anything else                                 → ProviderHTTPError(status)

Everything here is a pure function of its arguments (``now`` is injectable), so
the recognisers are unit- and property-tested without a server.
"""

from __future__ import annotations

import email.utils
import re
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

from ..errors import ContextTooLong, Overloaded, ProviderError, ProviderHTTPError, RateLimited

__all__ = ["error_fields", "error_from_status", "mapped_errors", "parse_retry_after", "recognize_context_too_long"]

# Machine codes (OpenAI ``code``, llama.cpp ``type``, Anthropic ``type``) that mean "does not fit".
_TOO_LONG_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "request_too_large"})

_NUM = r"(\d[\d,_]*)"
# Each pattern's groups are turned into (tokens, limit) by its function.
_WITH_NUMBERS: tuple[tuple[re.Pattern[str], Any], ...] = (
    # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
    (re.compile(rf"prompt is too long:\s*{_NUM}\s*tokens?\s*>\s*{_NUM}", re.I), lambda n, m: (n, m)),
    # Anthropic: "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000"
    (re.compile(rf"exceed context limit:\s*{_NUM}\s*\+\s*{_NUM}\s*>\s*{_NUM}", re.I), lambda a, b, m: (a + b, m)),
    # vLLM: "... your request has 3500 input tokens (1000 > 4096 - 3500)" — output + input > window
    (re.compile(rf"\(\s*{_NUM}\s*>\s*{_NUM}\s*-\s*{_NUM}\s*\)"), lambda out, m, inp: (out + inp, m)),
    # llama.cpp: "request (5000 tokens) exceeds the available context size (4096 tokens)"
    (re.compile(rf"\(\s*{_NUM}\s*tokens?\s*\)\s*exceeds the available context size\s*\(\s*{_NUM}", re.I),
     lambda n, m: (n, m)),
    # llama.cpp, a prompt it cannot split (multimodal): "input (5000 tokens) is larger than the max context
    # size (4096 tokens). skipping"
    (re.compile(rf"\(\s*{_NUM}\s*tokens?\s*\)\s*is larger than the max context size\s*\(\s*{_NUM}", re.I),
     lambda n, m: (n, m)),
)
# OpenAI / vLLM / OpenRouter: the limit and the size are said in two places (read only
# once a message is recognised, so "context window of N" alone never triggers).
_LIMIT = (
    re.compile(rf"maximum context length is\s*{_NUM}", re.I),
    re.compile(rf"(?:configured )?limit of\s*{_NUM}\s*tokens", re.I),
    re.compile(rf"context (?:length|size|window) (?:of|is)\s*{_NUM}", re.I),
)
_TOKENS = (
    re.compile(rf"resulted in\s*{_NUM}\s*tokens", re.I),
    re.compile(rf"(?:you )?requested\s*{_NUM}\s*tokens", re.I),
    re.compile(rf"request has\s*{_NUM}\s*(?:input )?tokens", re.I),
    re.compile(rf"prompt (?:has|contains|is)\s*{_NUM}\s*tokens", re.I),
)
# Wordings without numbers (llama.cpp, Ollama, generic gateways).
_WITHOUT_NUMBERS = (
    re.compile(r"exceeds the available context size", re.I),
    re.compile(r"maximum context length", re.I),
    re.compile(r"context (?:length|size|window)\b.{0,40}\b(?:exceed|too (?:long|large|small)|overflow)", re.I),
    re.compile(r"\b(?:exceed|exceeds|exceeded|exceeding)\b.{0,40}\bcontext (?:length|size|window|limit)", re.I),
    re.compile(r"\b(?:prompt|input|messages?|request|context)\b.{0,12}\btoo (?:long|large)\b", re.I),
    re.compile(r"too many (?:input )?tokens", re.I),
    re.compile(r"input tokens exceed", re.I),
)
_NOT_SIZE = re.compile(r"rate.?limit|per min|tokens per|TPM\b|quota", re.I)


def _int(text: str) -> int:
    return int(text.replace(",", "").replace("_", ""))


def _first(patterns: tuple[re.Pattern[str], ...], message: str) -> int | None:
    for pattern in patterns:
        if match := pattern.search(message):
            return _int(match.group(1))
    return None


def recognize_context_too_long(
    status: int | None, message: str, code: str | None = None, *, body: object = None
) -> ContextTooLong | None:
    """A ``ContextTooLong`` when this failure means "the prompt does not fit", else None.

    ``code`` is the body's machine code (OpenAI ``code``, or the error ``type`` when
    there is no string code).  ``tokens``/``limit`` are filled when the message says
    them, else from ``body`` (the parsed error body) when it carries them — llama.cpp's
    ``exceed_context_size_error`` has ``n_prompt_tokens``/``n_ctx`` beside a message
    that, in some versions, says no number.  For "input + max_tokens > window" wordings
    ``tokens`` is the sum, so ``tokens - limit`` is always what must go.  Rate limits
    ("tokens per min") are never a size error, whatever their wording.
    """
    message = message or ""
    if status == 429 or _NOT_SIZE.search(message):
        return None
    for pattern, numbers in _WITH_NUMBERS:
        if match := pattern.search(message):
            tokens, limit = numbers(*(_int(g) for g in match.groups()))
            return ContextTooLong(message, tokens=tokens, limit=limit, status=status)
    coded = code in _TOO_LONG_CODES or status == 413
    if coded or any(p.search(message) for p in _WITHOUT_NUMBERS):
        tokens, limit = _first(_TOKENS, message), _first(_LIMIT, message)
        if tokens is None and limit is None:
            tokens, limit = _body_numbers(body)
        return ContextTooLong(message or f"context too long ({code or status})", tokens=tokens, limit=limit,
                              status=status)
    return None


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait, from ``retry-after-ms``, ``retry-after`` (seconds or an HTTP
    date) — None when absent, unparsable or negative."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    if (ms := lower.get("retry-after-ms")) is not None:
        try:
            value = float(ms) / 1000
        except ValueError:
            value = -1
        if value >= 0:
            return value
    raw = lower.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        value = when.timestamp() - (time.time() if now is None else now)
        return max(value, 0.0)
    return value if value >= 0 else None


def error_fields(body: object) -> tuple[str, str | None]:
    """(message, code) out of any provider's error body.

    Handles ``{"type": "error", "error": {...}}`` (Anthropic), ``{"error": {...}}``
    (OpenAI, llama.cpp, vLLM), ``{"error": "text"}`` (Ollama), an already
    unwrapped ``{"message": ...}`` and plain text.
    """
    if isinstance(body, str):
        return body, None
    if not isinstance(body, Mapping):
        return "", None
    inner = body.get("error", body)
    if isinstance(inner, str):
        return inner, None
    if not isinstance(inner, Mapping):
        return str(inner), None
    message = inner.get("message") or body.get("message") or ""
    code = inner.get("code")
    if not isinstance(code, str):
        code = inner.get("type") if isinstance(inner.get("type"), str) else None
    return str(message), code


def _body_numbers(body: object) -> tuple[int | None, int | None]:
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    if not isinstance(inner, Mapping):
        return None, None
    tokens, limit = inner.get("n_prompt_tokens"), inner.get("n_ctx")
    tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0 else None
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None
    return tokens, limit


def error_from_status(
    status: int,
    message: str,
    *,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
    body: object = None,
    now: float | None = None,
) -> ProviderError:
    """The error an HTTP failure becomes; the single mapping both adapters share.

    ``body`` (optional) supplies numbers a message leaves out: llama.cpp puts them
    in ``n_prompt_tokens`` / ``n_ctx`` beside its message."""
    if (too_long := recognize_context_too_long(status, message, code, body=body)) is not None:
        return too_long
    retry_after = parse_retry_after(headers, now=now)
    text = f"{status}: {message}" if message else f"HTTP {status}"
    if status == 429 or code in ("rate_limit_error", "rate_limit_exceeded"):
        return RateLimited(f"rate limited ({text}); retry later or lower the request rate",
                           status=status, retry_after=retry_after)
    if status in (503, 529) or code == "overloaded_error":
        return Overloaded(f"provider overloaded ({text}); retry later", status=status, retry_after=retry_after)
    return ProviderHTTPError(f"provider returned {text}", status=status, retry_after=retry_after)


@contextmanager
def mapped_errors(translate: Callable[[Exception], ProviderError | None]) -> Iterator[None]:
    """Re-raise what ``translate`` recognises as our error (chained to the SDK's);
    let everything else — programming errors included — through untouched."""
    try:
        yield
    except ProviderError:
        raise
    except Exception as exc:
        error = translate(exc)
        if error is None:
            raise
        raise error from exc
