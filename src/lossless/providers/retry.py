"""Bounded retries with exponential backoff and jitter.

The SDKs' own retries are switched off (``max_retries=0``) so that this is the
only retry loop: one policy, one place to test, and a ``sleep`` tests replace.

What is retried: ``RateLimited`` (429), ``Overloaded`` (529/503), other 5xx and
408 ``ProviderHTTPError``s, and ``ProviderConnectionError``.  Never retried:
``ContextTooLong`` (the same request fails the same way — compact instead) and
every other 4xx.  A ``retry_after`` from the provider (``retry-after`` or
``retry-after-ms``) is honoured up to ``max_retry_after``; a longer one fails fast
— no sleep, the error re-raised with the server's value in ``retry_after`` and in
its message.  Without one the delay is ``base_delay * 2**n`` capped at
``max_delay``, shortened by up to ``jitter`` (a fraction) so clients spread out.

Use it inside an adapter (``AnthropicProvider(retry=RetryPolicy(...))``) or around
any other provider (``with_retries(FakeProvider(...), RetryPolicy(...))``).  The
adapters already retry: wrapping one as well multiplies the attempts.  A request's
``max_attempts`` lowers the policy's for that request (how ``ContextManager.call()``
keeps all of its requests within one policy's tries).
"""

from __future__ import annotations

import random as _random
import time
from dataclasses import dataclass
from typing import Callable, Generator, TypeVar

from ..errors import (
    ConfigError,
    ContextTooLong,
    Overloaded,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    RateLimited,
)
from .base import Provider, Request, Response

T = TypeVar("T")

__all__ = ["RetryPolicy", "RetryingProvider", "is_retryable", "with_retries"]


def is_retryable(error: BaseException) -> bool:
    match error:
        case ContextTooLong():
            return False
        case RateLimited() | Overloaded() | ProviderConnectionError():
            return True
        case ProviderHTTPError(status=int(status)):
            return status == 408 or status >= 500
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    max_attempts: int = 3
    """Total tries, the first included (1 means no retry)."""
    base_delay: float = 0.5
    """Seconds before the first retry when the provider gave no retry_after."""
    max_delay: float = 8.0
    """Cap on a computed backoff delay."""
    max_retry_after: float = 60.0
    """The longest provider-given retry_after waited for: a quota that resets in an
    hour fails fast (see ``refusal``) instead of blocking the caller."""
    jitter: float = 0.25
    """Each computed delay is shortened by a random fraction in [0, jitter)."""
    sleep: Callable[[float], None] = time.sleep
    """How to wait: tests pass ``list.append`` to record the schedule instead."""
    random: Callable[[], float] = _random.random
    """Uniform in [0, 1): replace it for a reproducible schedule."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigError(f"max_attempts must be >= 1, got {self.max_attempts!r}")
        if not 0 <= self.jitter <= 1:
            raise ConfigError(f"jitter must be in [0, 1], got {self.jitter!r}")

    def delay(self, retry: int, error: BaseException) -> float:
        """Seconds to wait before retry number ``retry`` (1-based) after ``error``
        (a retry_after over ``max_retry_after`` is capped here; ``call`` refuses it first)."""
        retry_after = getattr(error, "retry_after", None)
        if retry_after is not None and retry_after >= 0:
            return min(float(retry_after), self.max_retry_after)
        backoff = min(self.base_delay * 2 ** (retry - 1), self.max_delay)
        return backoff * (1 - self.jitter * self.random())

    def refusal(self, error: BaseException) -> ProviderError | None:
        """The error to fail fast with when ``error`` asks for a wait over ``max_retry_after``
        (same class, status and ``retry_after``; chain it to ``error``), else None."""
        retry_after = getattr(error, "retry_after", None)
        if not isinstance(error, ProviderError) or retry_after is None or retry_after <= self.max_retry_after:
            return None
        return type(error)(
            f"provider asked to retry after {_seconds(retry_after)} s, over the {_seconds(self.max_retry_after)} s "
            f"maximum wait; not waiting — retry later or raise RetryPolicy.max_retry_after ({error})",
            status=error.status, retry_after=retry_after)

    def call(self, fn: Callable[[], T], *, attempts: int | None = None) -> T:
        """``fn()``, tried up to ``max_attempts`` times (fewer when ``attempts`` says so);
        the last error propagates, a retry_after over ``max_retry_after`` at once."""
        limit = self.max_attempts if attempts is None else max(1, min(attempts, self.max_attempts))
        for attempt in range(1, limit + 1):
            try:
                return fn()
            except ProviderError as error:
                if attempt == limit or not is_retryable(error):
                    raise
                if (refused := self.refusal(error)) is not None:
                    raise refused from error
                self.sleep(self.delay(attempt, error))
        raise AssertionError("unreachable: the loop returns or raises")


def _seconds(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


class RetryingProvider:
    """A provider that retries another one's calls under a ``RetryPolicy``.

    A stream is retried only until its first text arrives: after that, a retry
    would repeat text the caller already has, so the error propagates.
    """

    def __init__(self, provider: Provider, policy: RetryPolicy) -> None:
        self.provider = provider
        self.policy = policy

    @property
    def retry(self) -> RetryPolicy:
        """The policy, under the name the adapters give theirs."""
        return self.policy

    def complete(self, request: Request) -> Response:
        return self.policy.call(lambda: self.provider.complete(request), attempts=request.max_attempts)

    def count_tokens(self, request: Request) -> int:
        fn = getattr(self.provider, "count_tokens", None)
        if fn is None:
            raise NotImplementedError(f"{type(self.provider).__name__} has no token-count endpoint")
        return self.policy.call(lambda: fn(request), attempts=request.max_attempts)

    def stream(self, request: Request) -> Generator[str, None, Response | None]:
        fn = getattr(self.provider, "stream", None)
        if fn is None:
            raise NotImplementedError(f"{type(self.provider).__name__} does not stream")

        def opened() -> tuple[Generator[str, None, Response | None], str] | Response | None:
            # Pull the first delta inside the retried call: connection and status
            # errors surface there, before the caller has seen any text.
            it = fn(request)
            try:
                return it, next(it)
            except StopIteration as stop:  # an empty stream: its return value
                return stop.value
            except BaseException:
                getattr(it, "close", lambda: None)()
                raise

        opening = self.policy.call(opened, attempts=request.max_attempts)
        if not isinstance(opening, tuple):
            return opening
        it, first = opening
        yield first
        return (yield from it)

def with_retries(provider: Provider, policy: RetryPolicy | None = None) -> RetryingProvider:
    return RetryingProvider(provider, policy or RetryPolicy())
