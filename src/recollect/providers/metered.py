"""A provider wrapper that counts recollect's own model calls and what they cost.

Every call recollect makes for itself (summaries, collapse, session notes, memory
selection) goes through the manager's ``MeteredProvider``, so a replay can add
them to the managed session's cost.  Pricing follows the replay's cache model in
base-input-token units: a summary request reuses the conversation's cached
prefix, so everything but its last message is a cache read (0.1×) and the last
message a write (1.25×); any other request is a write; output costs 5×.
"""

from __future__ import annotations

from typing import Any

from ..tokens import TokenCounter
from ..errors import ProviderError
from .base import Provider, Request, Response

CACHE_READ, CACHE_WRITE, OUTPUT = 0.1, 1.25, 5.0


class MeteredProvider:
    def __init__(self, provider: Provider, counter: TokenCounter) -> None:
        self.provider = provider
        self.counter = counter
        self.calls = 0
        self.failures = 0
        self.cost = 0.0
        self.by_purpose: dict[str, int] = {}
        self.last_error: BaseException | None = None

    def complete(self, request: Request) -> Response:
        self.calls += 1
        self.by_purpose[request.purpose] = self.by_purpose.get(request.purpose, 0) + 1
        count = self.counter.count_message
        head = self.counter.count_system(request.system) + self.counter.count_tools(request.tools or None)
        body = [count(m) for m in request.messages]
        if request.purpose == "summary" and body:
            self.cost += (head + sum(body[:-1])) * CACHE_READ + body[-1] * CACHE_WRITE
        else:
            self.cost += (head + sum(body)) * CACHE_WRITE
        try:
            response = self.provider.complete(request)
        except Exception as exc:
            self.failures += 1
            self.last_error = exc
            raise
        out = response.usage.output_tokens or self.counter.count_text(response.text)
        self.cost += out * OUTPUT
        return response

    def check_answered(self) -> None:
        """Raise ``ProviderError`` when recollect called the model and every call failed (a
        wrong URL, key or model): the fallback then did all the work, and a report or file
        built on it must not pass for the model's."""
        if self.calls and self.failures == self.calls:
            err = self.last_error
            what = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise ProviderError(f"every model call failed ({self.calls} of {self.calls}); the last: {what} — "
                                "check --provider, --model, --base-url and the API key")

    def __getattr__(self, name: str) -> Any:  # count_tokens, stream: the wrapped provider's
        return getattr(self.provider, name)
