"""Whether lossless may spend requests on its own side calls right now.

    health = ProviderHealth()
    health.failed(RateLimited("429", retry_after=30))   # a transient failure, after its retries
    health.failing                                       # True: side calls are skipped...
    health.succeeded()                                   # ...until a request succeeds again
    health.failing                                       # False

One per ``MeteredProvider`` (so one per ``ContextManager``), shared by every side
call it makes: session notes, memory selection and extraction, collapse and
auto-compact summaries.  Only transient failures count (429, 529/503, 5xx, 408, no
answer — what ``RetryPolicy`` retries); a 400 or a bad summary says nothing about
whether the provider is up.  Invariant: while ``failing``, no side call sends a
request; it ends when a request succeeds (the agent's own call, usually) or when
the cool-down has passed — ``cooldown`` seconds, or the provider's retry_after
when that is longer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from ..errors import ProviderError

__all__ = ["ProviderHealth"]


@dataclass(slots=True, kw_only=True)
class ProviderHealth:
    cooldown: float = 60.0
    """Seconds after a transient failure during which side calls are skipped."""
    clock: Callable[[], float] = time.monotonic
    """Monotonic seconds; tests pass their own."""
    error: ProviderError | None = field(default=None, init=False)
    """The last transient failure, while it still counts."""
    since: float = field(default=0.0, init=False)
    """When it happened (``clock`` time)."""

    def failed(self, error: ProviderError) -> None:
        self.error, self.since = error, self.clock()

    def succeeded(self) -> None:
        self.error = None

    @property
    def failing(self) -> bool:
        if self.error is None:
            return False
        wait = max(self.cooldown, self.error.retry_after or 0.0)
        if self.clock() - self.since >= wait:
            self.error = None
            return False
        return True

    def why(self) -> str:
        """One line for a skipped call's error and a stage's detail."""
        if not self.failing:
            return "the provider is answering"
        assert self.error is not None
        first = (str(self.error).strip().splitlines() or [type(self.error).__name__])[0]
        ago = self.clock() - self.since
        return f"the provider failed {ago:.0f} s ago and has not answered since ({first})"
