"""A load and fault test: two replicas on one PostgreSQL store, 100 conversations over 4 tenants
alternating between them, and an upstream that fails, hangs and cuts streams meanwhile — for a
bounded time.  Zero crossed content (every request upstream carries one conversation's words, under
its own tenant's key), zero tracebacks, bounded memory."""

from __future__ import annotations

import contextlib
import random
import re
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import pytest

from proxy_kit import BASH
from lossless.proxy import ProxyServer, ProxySettings
from lossless.testing import FakeServer

anthropic = pytest.importorskip("anthropic")
MARK = re.compile(r"conv-(\d{3})")
KEYS = [f"sk-tenant-{t}-0123456789abcdef" for t in range(4)]


def _conversation(n: int, clients, turns: int) -> int:
    """One agent: its own marker in every message it writes; returns the answers it got."""
    history = [{"role": "user", "content": f"conv-{n:03d}: start the task of conversation {n}."}]
    got = 0
    for turn in range(turns):
        client = clients[(n + turn) % 2][n % 4]
        stream = (n + turn) % 3 == 0
        try:
            if stream:
                with client.messages.stream(model="m", max_tokens=500, messages=history, tools=[BASH]) as s:
                    answer = s.get_final_message()
            else:
                answer = client.messages.create(model="m", max_tokens=500, messages=history, tools=[BASH])
        except (anthropic.APIError, Exception):  # noqa: BLE001 - the upstream fails on purpose: try the next turn
            history = history[:1] if len(history) == 1 else history
            continue
        got += 1
        content = [b.model_dump(mode="json", exclude_none=True, exclude={"parsed_output"}) for b in answer.content]
        if not content:
            continue
        history += [{"role": "assistant", "content": content},
                    {"role": "user", "content": f"conv-{n:03d} turn {turn}: " + f"words of conversation {n} " * 200}]
    return got


def test_two_replicas_100_conversations_4_tenants_and_a_faulty_upstream(pg_server, capfd):
    url = pg_server.create_db()
    tracemalloc.start()
    stop = threading.Event()
    with FakeServer() as srv, contextlib.ExitStack() as stack:
        proxies = [stack.enter_context(ProxyServer(ProxySettings(upstream=srv.base_url, window=20_000, store=url,
                                                                 max_held_bytes=2_000_000), log=lambda _: None))
                   for _ in range(2)]
        clients = [[stack.enter_context(anthropic.Anthropic(base_url=p.base_url, api_key=key, max_retries=0,
                                                            timeout=20)) for key in KEYS] for p in proxies]

        def chaos() -> None:  # the upstream misbehaves, on and off
            rng = random.Random(7)
            while not stop.wait(0.3):
                srv.set_faults(**rng.choice([{}, {}, {"fail_500": 3}, {"broken_stream": True}, {"slow": 0.5},
                                             {"fail_429": 2, "retry_after": 0}]))
            srv.set_faults()

        chaos_thread = threading.Thread(target=chaos, daemon=True)
        chaos_thread.start()
        started = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            answered = sum(pool.map(lambda n: _conversation(n, clients, 4), range(100)))
        stop.set()
        chaos_thread.join(5)
        elapsed = time.monotonic() - started
        requests = [r for r in srv.requests if r.path == "/v1/messages"]
        failed = sum(1 for status in srv.statuses if status not in (200, None))
        restored = sum(p.conversations.restored for p in proxies)
        _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 240 and answered >= 150, (elapsed, answered)
    assert failed > 0 and restored > 50, (failed, restored)  # the faults hit; switches continued the other's state
    for r in requests:
        marks = set(MARK.findall(str(r.body["messages"])))
        assert len(marks) == 1, marks  # one conversation's content, never another's
        n = int(marks.pop())
        key = r.headers.get("x-api-key") or r.headers.get("authorization", "").removeprefix("Bearer ")
        assert key == KEYS[n % 4]  # under its own tenant
    assert "Traceback" not in capfd.readouterr().err
    assert peak < 400 * 1024 * 1024, peak
