"""What ``GET /stats`` reports: per conversation and in total.

Cost model (the replay's, ``lossless.replay``): input tokens in base-input-token
units, prompt-cache reads at 0.1× and writes at 1.25×.  A request reads from the
cache what the previous request of its conversation also had — all of it when the
proxy rewrote nothing, only the system prompt and tools when a stage fired — and
writes the rest.  The client's own (unmanaged) history only grows, so it reads its
previous request and writes what was appended.  Tokens are lossless's estimates
(calibrated by the usage the upstream reports); cache expiry is not modelled, and
what lossless's own summaries cost is not counted (the proxy makes none without
a model).  ``saved`` is the unmanaged cost minus the managed one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..replay import CACHE_READ, CACHE_WRITE

__all__ = ["ConversationStats", "cost"]


def cost(previous: int, current: int, shared: int) -> float:
    """Input cost of a request of ``current`` tokens whose first ``shared`` the
    previous request (of ``previous`` tokens) also had."""
    read = min(shared, previous, current)
    return read * CACHE_READ + (current - read) * CACHE_WRITE


@dataclass(slots=True)
class ConversationStats:
    """Counters of one conversation; changed only under its lock."""

    calls: int = 0
    messages_in: int = 0
    messages_out: int = 0
    tokens_before: int = 0
    """Last request: what the client sent, estimated."""
    tokens_after: int = 0
    """Last request: what was forwarded."""
    tokens_before_total: int = 0
    tokens_after_total: int = 0
    stages: dict[str, int] = field(default_factory=dict)
    handles: set[str] = field(default_factory=set)
    recall_round_trips: int = 0
    recall_spliced: int = 0
    too_long_retries: int = 0
    upstream_errors: int = 0
    usage_distrusted: int = 0
    """Upstream usage reports far below lossless's own estimate, not used for the budget."""
    last_status: int | None = None
    cost_unmanaged: float = 0.0
    cost_managed: float = 0.0
    overhead: int = 0
    """Tokens of the system prompt and tools (as of the first request)."""
    client_tokens: int = 0
    """The client's whole history, as it sends it, kept up to date in O(new)."""

    def record(self, *, messages_in: int, messages_out: int, before: int, after: int, fired: list[Any],
               rewritten: bool) -> None:
        """One forwarded request: sizes, the stages that fired and their handles."""
        self.cost_unmanaged += cost(self.tokens_before, before, self.tokens_before) if self.calls else cost(0, before, 0)
        shared = self.overhead if rewritten else self.tokens_after
        self.cost_managed += cost(self.tokens_after, after, shared) if self.calls else cost(0, after, 0)
        self.calls += 1
        self.messages_in, self.messages_out = messages_in, messages_out
        self.tokens_before, self.tokens_after = before, after
        self.tokens_before_total += before
        self.tokens_after_total += after
        for event in fired:
            self.stages[event.stage] = self.stages.get(event.stage, 0) + 1
            self.handles.update(event.handles)
            self.handles.update(event.items)

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "messages": {"in": self.messages_in, "out": self.messages_out},
            "tokens": {"before": self.tokens_before, "after": self.tokens_after,
                       "before_total": self.tokens_before_total, "after_total": self.tokens_after_total},
            "stages": dict(sorted(self.stages.items())),
            "handles": len(self.handles),
            "recall_round_trips": self.recall_round_trips,
            "recall_spliced": self.recall_spliced,
            "too_long_retries": self.too_long_retries,
            "upstream_errors": self.upstream_errors,
            "usage_distrusted": self.usage_distrusted,
            "last_status": self.last_status,
            "cost": {"unmanaged": round(self.cost_unmanaged), "managed": round(self.cost_managed),
                     "saved": round(self.cost_unmanaged - self.cost_managed)},
        }


def totals(conversations: list[dict[str, Any]]) -> dict[str, Any]:
    """The sums over every conversation's ``to_json``."""
    def total(*path: str) -> int:
        out = 0
        for c in conversations:
            value: Any = c
            for key in path:
                value = value[key]
            out += value
        return out

    stages: dict[str, int] = {}
    for c in conversations:
        for name, n in c["stages"].items():
            stages[name] = stages.get(name, 0) + n
    return {
        "conversations": len(conversations),
        "calls": total("calls"),
        "tokens": {"before_total": total("tokens", "before_total"), "after_total": total("tokens", "after_total")},
        "stages": dict(sorted(stages.items())),
        "handles": total("handles"),
        "recall_round_trips": total("recall_round_trips"),
        "too_long_retries": total("too_long_retries"),
        "usage_distrusted": total("usage_distrusted"),
        "cost": {k: total("cost", k) for k in ("unmanaged", "managed", "saved")},
    }
