"""The proxy's conversation registry and its request rewriting, without HTTP."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import ContextManager
from lossless.errors import InvalidRequest
from lossless.proxy.conversations import Conversations, chain
from lossless.proxy.rewrite import MAX_BREAKPOINTS, rewrite, strip
from lossless.tokens import default_counter

CC = {"type": "ephemeral"}


def _message(role: str, word: str, mark: bool) -> dict:
    block = {"type": "text", "text": word}
    if mark:
        block["cache_control"] = CC
    return {"role": role, "content": [block]}


def _stripped(history: list[dict]) -> list[dict]:
    marks: list = []
    return [strip(m, i, len(history), marks) for i, m in enumerate(history)]


ops = st.lists(st.one_of(
    st.tuples(st.just("new"), st.sampled_from("ab")),
    st.tuples(st.just("continue"), st.integers(0, 5), st.sampled_from("ab"), st.booleans()),
    st.tuples(st.just("fork"), st.integers(0, 5), st.integers(0, 6)),
    st.tuples(st.just("resend"), st.integers(0, 5)),
    st.tuples(st.just("restart")),
), min_size=1, max_size=40)


@settings(max_examples=150)
@given(ops)
def test_each_request_continues_the_conversation_that_ended_at_its_prefix_or_a_fresh_one(script):
    """Continuing, forked, repeated and restarted conversations (words from a two-letter
    alphabet, so different clients send equal histories): a request is given a
    conversation only when that conversation's last request was exactly its first k
    messages (cache_control aside) — never a wrong one — and a client that continues
    right after its own request is always recognised as continuing."""
    registry = Conversations(lambda cid, route, tenant: object(), capacity=1_000)
    clients: list[list[dict]] = []
    last_sent: dict[str, list[dict]] = {}
    last_conv: dict[int, str] = {}  # client → the conversation its last request went to
    previous_client = None
    for op in script:
        if op[0] == "restart":
            registry = Conversations(lambda cid, route, tenant: object(), capacity=1_000)
            last_sent.clear()
            last_conv.clear()
            previous_client = None
            continue
        if op[0] == "new":
            clients.append([_message("user", op[1], False)])
            i = len(clients) - 1
        elif not clients:
            continue
        elif op[0] == "continue":
            i = op[1] % len(clients)
            clients[i] = [*clients[i], _message("assistant", "ok", False), _message("user", op[2], op[3])]
        elif op[0] == "fork":
            source = clients[op[1] % len(clients)]
            clients.append([dict(m) for m in source[: max(1, op[2] % (len(source) + 1))]])
            i = len(clients) - 1
        else:
            i = op[1] % len(clients)
        history = _stripped(clients[i])
        conv, k = registry.claim("anthropic", chain("anthropic", history), history)
        if k:
            assert last_sent[conv.id] == history[:k]
        if op[0] == "continue" and previous_client == i and i in last_conv:
            assert k >= len(history) - 2  # its own, or one whose last request was this much of it or all
        registry.settle(conv, chain("anthropic", history)[-1])
        last_sent[conv.id] = history
        last_conv[i] = conv.id
        previous_client = i


def test_cache_control_is_not_part_of_a_message_identity():
    plain = [_message("user", "a", False), _message("assistant", "b", False)]
    marked = [_message("user", "a", True), _message("assistant", "b", True)]
    assert chain("anthropic", _stripped(plain)) == chain("anthropic", _stripped(marked))
    assert chain("anthropic", plain) != chain("openai", plain)  # a route never continues the other's


def test_the_registry_is_bounded_and_closes_what_it_drops():
    closed = []

    class Manager:
        def __init__(self, cid):
            self.cid = cid

        def close(self):
            closed.append(self.cid)

    registry = Conversations(lambda cid, route, tenant: Manager(cid), capacity=3)
    for word in "abcde":
        history = [_message("user", word, False)]
        conv, k = registry.claim("anthropic", chain("anthropic", history), history)
        registry.settle(conv, chain("anthropic", history)[-1])
    assert len(registry) == 3 and registry.evicted == 2 and len(closed) == 2
    _, k = registry.claim("anthropic", chain("anthropic", [_message("user", "a", False)]), [_message("user", "a", False)])
    assert k == 0  # the oldest was dropped: handled from scratch


# -- rewrite: the pipeline step ----------------------------------------------------
class CountingCounter:
    """lossless's default counter, counting how many messages it was asked about."""

    def __init__(self):
        self.inner = default_counter()
        self.messages = 0

    def count_message(self, message):
        self.messages += 1
        return self.inner.count_message(message)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _registry(tmp_path, counter=None, window=200_000):
    def make(cid, route, tenant=""):
        return ContextManager(window=window, store=str(tmp_path), session_id=cid, dialect=route,
                              counter=counter, session_notes=False)
    return Conversations(make)


def _body(messages, **extra):
    return json.dumps({"model": "m", "max_tokens": 1000, "messages": messages, **extra}).encode()


def _turns(n):
    out = [{"role": "user", "content": "start"}]
    for i in range(n):
        out += [{"role": "assistant", "content": [{"type": "text", "text": f"step {i}"},
                                                  {"type": "tool_use", "id": f"t{i}", "name": "Bash",
                                                   "input": {"command": f"ls {i}"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                              "content": f"file{i}.txt " * 20}]}]
    return out


def test_a_continuing_request_costs_the_new_messages_not_the_history(tmp_path):
    counter = CountingCounter()
    registry = _registry(tmp_path, counter)
    history = _turns(150)
    first = rewrite(registry, "anthropic", _body(history))
    assert first.matched == 0
    counted_first = counter.messages
    assert counted_first >= len(history)
    counter.messages = 0
    longer = [*history, {"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]
    second = rewrite(registry, "anthropic", _body(longer))
    assert second.conversation is first.conversation and second.matched == len(history)
    assert counter.messages <= 10, counter.messages  # the 2 new messages (in the pipeline and in /stats), not 301
    assert json.loads(second.forward_bytes)["messages"] == longer


def test_breakpoints_go_back_where_the_client_put_them_counted_from_the_end(tmp_path):
    registry = _registry(tmp_path)
    history = _turns(3)
    history[-1] = {**history[-1], "content": [{**history[-1]["content"][0], "cache_control": CC}]}
    history[1] = {**history[1], "content": [history[1]["content"][0], {**history[1]["content"][1],
                                                                       "cache_control": CC}]}
    out = json.loads(rewrite(registry, "anthropic", _body(history)).forward_bytes)
    assert out["messages"] == history
    # the manager was handed stripped copies: the client's dicts and the transcript carry no breakpoint
    assert "cache_control" not in json.dumps(registry._by_id[next(iter(registry._by_id))].handed)


def test_never_more_than_four_breakpoints_in_all(tmp_path):
    registry = _registry(tmp_path)
    history = _turns(4)
    for i in (2, 4, 6, 8):
        history[i] = {**history[i], "content": [{**history[i]["content"][0], "cache_control": CC}]}
    system = [{"type": "text", "text": "sys", "cache_control": CC}]
    out = json.loads(rewrite(registry, "anthropic", _body(history, system=system)).forward_bytes)
    marks = json.dumps(out).count('"cache_control"')
    assert marks == MAX_BREAKPOINTS
    kept = [i for i, m in enumerate(out["messages"]) if "cache_control" in json.dumps(m)]
    assert kept == [4, 6, 8]  # the latest ones; the system prompt's is untouched


def test_an_invalid_history_is_refused_with_its_index_and_tool_id_and_forgotten(tmp_path):
    registry = _registry(tmp_path)
    history = _turns(2)[:-1]
    history.append({"role": "user", "content": "no result for t1"})
    with pytest.raises(InvalidRequest) as info:
        rewrite(registry, "anthropic", _body(history))
    assert "message 3" in str(info.value) and info.value.tool_id == "t1"
    assert len(registry) == 0


def test_max_tokens_above_max_output_is_reserved(tmp_path):
    registry = _registry(tmp_path)
    out = rewrite(registry, "anthropic", _body(_turns(1), max_tokens=60_000))
    budget = out.conversation.manager.budget
    assert budget.effective <= 200_000 - 60_000


def test_the_proxy_package_loads_its_server_and_client_only_when_serving():
    import subprocess
    import sys

    code = ("import sys, lossless.proxy, lossless.cli; lossless.cli.build_parser(); "
            "from lossless.proxy import ProxySettings, rewrite, Conversations; ProxySettings(); "
            "print(sorted(m for m in ('uvicorn', 'httpx2', 'httpx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_without_an_upstream_each_api_goes_to_its_providers_endpoint():
    from lossless.proxy.app import _owner
    from lossless.proxy.settings import ProxySettings

    settings = ProxySettings()
    anthropic_call = {"path": "/v1/models", "headers": [(b"anthropic-version", b"2023-06-01")]}
    openai_call = {"path": "/v1/models", "headers": [(b"authorization", b"Bearer k")]}
    assert settings.upstream_for(_owner(anthropic_call)) == "https://api.anthropic.com"
    assert settings.upstream_for(_owner(openai_call)) == "https://api.openai.com"
    assert settings.upstream_for("openai") == "https://api.openai.com"
    assert ProxySettings(upstream="http://127.0.0.1:8080/").upstream_for("anthropic") == "http://127.0.0.1:8080"


def test_the_listening_socket_makes_connections_without_nagle():
    """asyncio sets TCP_NODELAY on an accepted connection only when the socket names
    IPPROTO_TCP; without it an answer's headers and first event wait out a delayed ACK."""
    import socket

    from lossless.proxy.server import bind

    sock = bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        sock.close()
