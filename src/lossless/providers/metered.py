"""A provider wrapper that counts lossless's own model calls and what they cost,
and keeps them from multiplying the agent's retries.

Every call lossless makes for itself (summaries, collapse, session notes, memory
selection and extraction) goes through the manager's ``MeteredProvider.complete``,
so a replay can add them to the managed session's cost.  Pricing follows the
replay's cache model in base-input-token units: a request that carries the
conversation (a summary, a notes refresh while it fits) reuses its cached prefix, so
everything but its last message is a cache read (0.1×) and the last message a write
(1.25×); a request of one message is a write; output costs 5×.  The agent's own request goes through ``send`` and is not metered.

Bounded retries (the invariant ``ContextManager.call()`` relies on):

* After a transient failure (what ``RetryPolicy`` retries) ``health`` is failing
  and side calls raise ``ProviderUnavailable`` without sending anything, until a
  request succeeds or the cool-down passes (``providers.health``).
* Within ``turn()`` — one ``call()`` — side calls are tried once, and every
  request shares the wrapped provider's ``RetryPolicy.max_attempts``: a side call's
  transient failure counts as the turn's first try, so ``send`` waits the policy's
  delay (or fails fast on a retry_after over its maximum) and gets the tries left.
  Under a persistent 429/529 or no answer, one ``call()`` sends at most
  ``max_attempts`` requests, side calls included.

A provider without a ``retry`` policy (a ``FakeProvider``, say) never retries: the
agent's request then gets its one try whatever happened before it.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Iterator

from ..errors import ProviderError, ProviderUnavailable
from ..tokens import TokenCounter
from .base import Provider, Request, Response
from .health import ProviderHealth
from .retry import RetryPolicy, is_retryable

CACHE_READ, CACHE_WRITE, OUTPUT = 0.1, 1.25, 5.0


@dataclass(slots=True)
class _Turn:
    failures: int = 0
    """Transient failures so far in this turn (side calls' and the agent's)."""
    last: ProviderError | None = None


class MeteredProvider:
    def __init__(self, provider: Provider, counter: TokenCounter, *, health: ProviderHealth | None = None) -> None:
        self.provider = provider
        self.counter = counter
        self.health = health or ProviderHealth()
        self.calls = 0
        self.failures = 0
        self.skipped = 0
        """Side calls not sent because the provider was failing (not in ``calls``)."""
        self.cost = 0.0
        self.by_purpose: dict[str, int] = {}
        self.last_error: BaseException | None = None
        self._turn: _Turn | None = None

    @property
    def policy(self) -> RetryPolicy | None:
        """The wrapped provider's retry policy (the adapters' and ``RetryingProvider``'s ``retry``)."""
        policy = getattr(self.provider, "retry", None)
        return policy if isinstance(policy, RetryPolicy) else None

    @property
    def available(self) -> bool:
        """Whether a side call would be sent now (check before preparing an expensive one)."""
        return not self.health.failing

    @contextmanager
    def turn(self) -> Iterator[None]:
        """One agent call: side calls get one try each and all requests share the policy's tries."""
        outer, self._turn = self._turn, _Turn()
        try:
            yield
        finally:
            self._turn = outer

    def complete(self, request: Request) -> Response:
        """A side call: metered, skipped while the provider is failing, tried once inside a turn."""
        if self.health.failing:
            self.skipped += 1
            raise ProviderUnavailable(f"{request.purpose} call skipped: {self.health.why()}")
        if self._turn is not None:
            request = replace(request, max_attempts=1)
        self.calls += 1
        self.by_purpose[request.purpose] = self.by_purpose.get(request.purpose, 0) + 1
        count = self.counter.count_message
        head = self.counter.count_system(request.system) + self.counter.count_tools(request.tools or None)
        body = [count(m) for m in request.messages]
        if len(body) > 1:  # the conversation plus one request (a summary, notes): its prefix is cached
            self.cost += (head + sum(body[:-1])) * CACHE_READ + body[-1] * CACHE_WRITE
        else:
            self.cost += (head + sum(body)) * CACHE_WRITE
        try:
            response = self._send(request)
        except Exception as exc:
            self.failures += 1
            self.last_error = exc
            raise
        out = response.usage.output_tokens or self.counter.count_text(response.text)
        self.cost += out * OUTPUT
        return response

    def send(self, request: Request) -> Response:
        """The agent's own request (not metered): within a turn, the policy's tries left,
        after the policy's delay when a side call of the turn just failed."""
        turn, policy = self._turn, self.policy
        if turn is not None and turn.last is not None and policy is not None:
            left = policy.max_attempts - turn.failures
            if left < 1:
                raise turn.last
            if (refused := policy.refusal(turn.last)) is not None:
                raise refused from turn.last
            policy.sleep(policy.delay(turn.failures, turn.last))
            request = replace(request, max_attempts=left)
        return self._send(request)

    def _send(self, request: Request) -> Response:
        try:
            response = self.provider.complete(request)
        except ProviderError as exc:
            if is_retryable(exc):
                self.health.failed(exc)
                if self._turn is not None:
                    self._turn.failures += 1
                    self._turn.last = exc
            raise
        self.health.succeeded()
        return response

    def check_answered(self) -> None:
        """Raise ``ProviderError`` when lossless called the model and every call failed (a
        wrong URL, key or model): the fallback then did all the work, and a report or file
        built on it must not pass for the model's."""
        if self.calls and self.failures == self.calls:
            err = self.last_error
            what = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise ProviderError(f"every model call failed ({self.calls} of {self.calls}); the last: {what} — "
                                "check --provider, --model, --base-url and the API key")

    def __getattr__(self, name: str) -> Any:  # count_tokens, stream: the wrapped provider's
        return getattr(self.provider, name)
