"""What a team's operators expect of the proxy: a Prometheus ``/metrics`` endpoint (requests,
tokens before and after, stages, recall rounds, errors by kind, per tenant as a hashed label)
and ``--verbose`` lines that name the tenant's hash."""

from __future__ import annotations

import re

import httpx
import pytest

from proxy_kit import BASH, KEY, output, proxied, sdk_client

pytest.importorskip("prometheus_client")
anthropic = pytest.importorskip("anthropic")


def _series(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not (line.startswith(name + "{") or line.startswith(name + " ")):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0] if "{" in line else ""))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_count_requests_tokens_stages_and_errors_per_hashed_tenant(tmp_path):
    with proxied(tmp_path, verbose=True) as (srv, proxy):
        client = sdk_client(proxy, "anthropic")
        history = [{"role": "user", "content": "Look around."}]
        for turn in range(12):
            srv.enqueue([{"type": "tool_use", "id": f"toolu_{turn}", "name": "Bash", "input": {"command": "ls"}}])
            answer = client.messages.create(model="m", max_tokens=1_000, messages=history, tools=[BASH])
            history += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.content]},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{turn}",
                                                      "content": output(turn, 6_000)}]}]
        bad = httpx.post(proxy.base_url + "/v1/messages", json={"messages": 5}, headers={"x-api-key": KEY})
        assert bad.status_code == 400
        metrics = httpx.get(proxy.base_url + "/metrics", headers={"x-api-key": KEY})
        tenant = proxy.app.tenant({"headers": [(b"x-api-key", KEY.encode())]})
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert KEY not in text and re.fullmatch(r"[0-9a-f]{16}", tenant)
    assert _series(text, "lossless_proxy_requests_total", tenant=tenant, route="anthropic", status="200") == 12
    before = _series(text, "lossless_proxy_tokens_before_total", tenant=tenant)
    after = _series(text, "lossless_proxy_tokens_after_total", tenant=tenant)
    assert before > after > 0
    assert _series(text, "lossless_proxy_stages_total", tenant=tenant) >= 1
    assert _series(text, "lossless_proxy_errors_total", tenant=tenant, kind="refused") == 1
    assert _series(text, "lossless_proxy_conversations") == 1
    assert "lossless_proxy_recall_rounds" in text
    assert all(f"tenant {tenant}" in line for line in proxy.log_lines if "messages" in line)
    assert any(f"tenant {tenant}" in line for line in proxy.log_lines)


def test_metrics_sit_behind_the_proxys_token(tmp_path):
    with proxied(tmp_path, auth_token="t0k") as (_, proxy):
        assert httpx.get(proxy.base_url + "/metrics").status_code == 401
        ok = httpx.get(proxy.base_url + "/metrics", headers={"x-lossless-token": "t0k"})
    assert ok.status_code == 200 and "lossless_proxy_errors_total" in ok.text
