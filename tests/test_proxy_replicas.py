"""Two proxies on one PostgreSQL store, a client alternating between them: one conversation,
continued wherever the request lands, forwarding what a single proxy would have forwarded."""

from __future__ import annotations

import contextlib
import json

import pytest

from proxy_kit import BASH, KEY, output
from lossless.proxy import ProxyServer, ProxySettings
from lossless.testing import FakeServer

anthropic = pytest.importorskip("anthropic")


def _dump(message):
    return [b.model_dump(mode="json", exclude_none=True, exclude={"parsed_output"}) for b in message.content]


def _session(srv, clients, turns=12):
    history = [{"role": "user", "content": "Survey the repository."}]
    for turn in range(turns):
        client = clients[turn % len(clients)]
        tool_id = f"toolu_{turn:03d}"
        srv.enqueue([{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": f"cat part{turn}"}}])
        answer = client.messages.create(model="m", max_tokens=1_000, messages=history, tools=[BASH],
                                        system="Be brief.")
        history += [{"role": "assistant", "content": _dump(answer)},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id,
                                                  "content": output(turn, 60_000 if turn == 4 else 4_000)}]}]
    return [json.dumps(r.body, sort_keys=True) for r in srv.requests if r.path == "/v1/messages"]


def _run(stores):
    with FakeServer() as srv, contextlib.ExitStack() as stack:
        proxies = [stack.enter_context(ProxyServer(ProxySettings(upstream=srv.base_url, window=20_000, store=store),
                                                   log=lambda _: None)) for store in stores]
        clients = [stack.enter_context(anthropic.Anthropic(base_url=p.base_url, api_key=KEY, max_retries=0))
                   for p in proxies]
        sent = _session(srv, clients)
        counts = [(p.conversations.published, p.conversations.restored) for p in proxies]
    return sent, counts


def test_a_client_alternating_between_two_replicas_continues_one_conversation(pg_server):
    """Before: each replica held its own conversations, so a request landing on the other one was
    rebuilt from scratch (11–18× the floor) with a new cached prefix."""
    single, _ = _run([pg_server.create_db()])
    url = pg_server.create_db()
    sent, counts = _run([url, url])
    assert all(published >= 5 for published, _ in counts)
    assert all(restored >= 5 for _, restored in counts)  # every switch continued the other's state
    assert sent == single  # the same requests upstream as one proxy: the cached prefix survives


def test_two_replica_processes_share_one_conversation(pg_server):
    """The same with two ``lossless proxy`` processes: nothing but the database between them."""
    import os
    import signal
    import subprocess
    import sys

    from conftest import ROOT

    url = pg_server.create_db()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with FakeServer() as srv, contextlib.ExitStack() as stack:
        procs = []
        for _ in range(2):
            p = subprocess.Popen([sys.executable, "-m", "lossless.cli", "proxy", "--port", "0", "--upstream",
                                  srv.base_url, "--window", "20000", "--store", url], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env)
            stack.callback(lambda p=p: (p.send_signal(signal.SIGTERM), p.communicate(timeout=20)))
            line = p.stdout.readline()
            assert line.startswith("lossless proxy listening on http://127.0.0.1:"), line
            procs.append(line.split()[4])
        clients = [stack.enter_context(anthropic.Anthropic(base_url=u, api_key=KEY, max_retries=0)) for u in procs]
        sent = _session(srv, clients)
    single, _ = _run([pg_server.create_db()])
    assert sent == single
