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
        except Exception:
            self.failures += 1
            raise
        out = response.usage.output_tokens or self.counter.count_text(response.text)
        self.cost += out * OUTPUT
        return response

    def __getattr__(self, name: str) -> Any:  # count_tokens, stream: the wrapped provider's
        return getattr(self.provider, name)
