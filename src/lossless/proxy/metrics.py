"""What ``GET /metrics`` serves: the proxy's counters in Prometheus's text format.

    metrics = Metrics()
    metrics.request(tenant, "anthropic", 200, before=52_000, after=31_000, stages=["snip"], recall_rounds=1)
    metrics.error(tenant, "upstream_unreachable")
    body, content_type = metrics.render(conversations=12)

Every series carries the tenant as the proxy already names it: a keyed hash of the API key or
of the gateway's header (``conversations.tenant_of``), never the credential; "-" for a request
without one.  Error kinds are a closed set (``ErrorKind``), so a hostile client cannot grow
the label space.  Each ``Metrics`` has its own registry (several proxies in one process, as
in the tests, do not share counters).  Needs ``prometheus-client`` (the ``proxy`` extra).
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["ErrorKind", "Metrics"]

ErrorKind = Literal["refused", "too_large", "bad_target", "unauthorized", "upstream_status", "upstream_unreachable",
                    "upstream_bad_answer", "internal", "hangup", "usage_distrusted", "body_stalled",
                    "upstream_stream_error"]


class Metrics:
    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge

        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("lossless_proxy_requests", "Managed requests answered, by status.",
                                ["tenant", "route", "status"], registry=r)
        self.tokens_before = Counter("lossless_proxy_tokens_before", "Tokens the clients sent (lossless's estimate).",
                                     ["tenant"], registry=r)
        self.tokens_after = Counter("lossless_proxy_tokens_after", "Tokens forwarded upstream (lossless's estimate).",
                                    ["tenant"], registry=r)
        self.stages = Counter("lossless_proxy_stages", "Pipeline stages that fired.", ["tenant", "stage"], registry=r)
        self.recall_rounds = Counter("lossless_proxy_recall_rounds", "Recall round-trips the proxy answered itself.",
                                     ["tenant"], registry=r)
        self.errors = Counter("lossless_proxy_errors", "Failures, by kind.", ["tenant", "kind"], registry=r)
        self.conversations = Gauge("lossless_proxy_conversations", "Conversations held in memory.", registry=r)

    def request(self, tenant: str, route: str, status: int, *, before: int, after: int, stages: list[str],
                recall_rounds: int) -> None:
        t = tenant or "-"
        self.requests.labels(t, route, str(status)).inc()
        self.tokens_before.labels(t).inc(max(before, 0))
        self.tokens_after.labels(t).inc(max(after, 0))
        for stage in stages:
            self.stages.labels(t, stage).inc()
        if recall_rounds:
            self.recall_rounds.labels(t).inc(recall_rounds)

    def error(self, tenant: str, kind: ErrorKind, n: int = 1) -> None:
        if n:
            self.errors.labels(tenant or "-", kind).inc(n)

    def render(self, *, conversations: int) -> tuple[bytes, Any]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        self.conversations.set(conversations)
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
