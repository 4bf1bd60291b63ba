"""No client sees another's content: two clients with the same history each continue their
own conversation, and tenants (API keys, or a gateway's header behind the proxy's token)
never share a conversation, a store, a recall or a line of /stats.  Through the official
SDKs, streamed and not."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy_kit import KEY, output, proxied, sdk_client
from test_proxy_anthropic import _ask, _dump
from lossless.proxy.conversations import Conversations, answer_key, chain

anthropic = pytest.importorskip("anthropic")


def _opening(srv, client, *, stream):
    """Five Bash turns, the fifth output big enough to be persisted: a history with a handle."""
    history = [{"role": "user", "content": "Survey the repository and report."}]
    for turn in range(5):
        srv.enqueue([{"type": "tool_use", "id": f"toolu_{turn:03d}", "name": "Bash",
                      "input": {"command": f"cat part{turn}"}}])
        answer = _ask(client, history, stream=stream)
        history += [{"role": "assistant", "content": _dump(answer)},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{turn:03d}",
                                                  "content": output(turn, 60_000 if turn == 4 else 3_000)}]}]
    srv.enqueue("Noted.")
    answer = _ask(client, history, stream=stream)
    return [*history, {"role": "assistant", "content": _dump(answer)}, {"role": "user", "content": "What did part 4 say?"}]


def _texts(body) -> str:
    return json.dumps(body["messages"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_two_clients_with_one_history_each_continue_their_own(tmp_path, stream):
    """Client A's answer came after a recall round the proxy answered itself; client B, with
    the same history, got another answer.  Each one's next request carries its own answer
    (and A's the recall round behind it), never the other's."""
    with proxied(tmp_path) as (srv, proxy):
        client = sdk_client(proxy, "anthropic")
        history = _opening(srv, client, stream=stream)
        handle = next(h for h in _handles(srv.requests[-1].body))
        srv.enqueue([{"type": "text", "text": "Let me read it."},
                     {"type": "tool_use", "id": "toolu_recall_A", "name": "recall", "input": {"handle": handle}}],
                    "ANSWER-A: part 4 lists module_4.")
        a1 = _ask(client, history, stream=stream)
        srv.enqueue("ANSWER-B: I did not look.")
        b1 = _ask(client, history, stream=stream)
        assert "ANSWER-A" in a1.content[-1].text and "ANSWER-B" in b1.content[-1].text

        srv.enqueue("ok B")
        _ask(client, [*history, {"role": "assistant", "content": _dump(b1)}, {"role": "user", "content": "Thanks, B."}],
             stream=stream)
        sent_b = _texts(srv.requests[-1].body)
        srv.enqueue("ok A")
        _ask(client, [*history, {"role": "assistant", "content": _dump(a1)}, {"role": "user", "content": "Thanks, A."}],
             stream=stream)
        sent_a = _texts(srv.requests[-1].body)
    assert "ANSWER-B" in sent_b and "ANSWER-A" not in sent_b and "toolu_recall_A" not in sent_b
    assert "ANSWER-A" in sent_a and "toolu_recall_A" in sent_a and "ANSWER-B" not in sent_a


def _handles(body):
    from lossless.markers import handles_in

    return handles_in(json.dumps(body))


def test_tenants_never_share_a_conversation_a_store_a_recall_or_stats(tmp_path):
    with proxied(tmp_path) as (srv, proxy):
        a = sdk_client(proxy, "anthropic")
        b = anthropic.Anthropic(base_url=proxy.base_url, api_key="sk-other-tenant", max_retries=0)
        proxy.clients.append(b)
        history = _opening(srv, a, stream=False)
        handle = _handles(srv.requests[-1].body)[0]
        srv.enqueue("B's answer.")
        _ask(b, history, stream=False)  # the same history under another key: a conversation of its own
        first_of_b = srv.requests[-1].body
        # another of B's conversations, whose model asks for A's handle: B's recall does not have it
        own = [{"role": "user", "content": "Hello from B. " + "y" * 70_000}]  # persisted: the recall tool is on
        srv.enqueue("Hi.")
        hi = _ask(b, own, stream=False)
        srv.enqueue([{"type": "tool_use", "id": "toolu_recall_B", "name": "recall", "input": {"handle": handle}}],
                    "done")
        _ask(b, [*own, {"role": "assistant", "content": _dump(hi)}, {"role": "user", "content": "More."}],
             stream=False)
        recall_result = json.dumps(srv.requests[-1].body["messages"][-1])
        stats_a = httpx.get(proxy.base_url + "/stats", headers={"x-api-key": KEY}).json()
        stats_b = httpx.get(proxy.base_url + "/stats", headers={"x-api-key": "sk-other-tenant"}).json()
        stats_none = httpx.get(proxy.base_url + "/stats").json()
    assert output(4, 200) not in recall_result and "toolu_recall_B" in recall_result
    assert len(stats_a["conversations"]) == 1 and len(stats_b["conversations"]) == 2
    # the totals are each tenant's own (they were the whole proxy's: one tenant saw another's traffic)
    assert stats_a["totals"]["requests"] == stats_a["totals"]["calls"] == stats_a["conversations"][0]["calls"]
    assert stats_b["totals"]["requests"] == 3
    assert stats_none["totals"]["requests"] == 0
    assert stats_a["conversations"][0]["id"] not in {c["id"] for c in stats_b["conversations"]}
    assert stats_none["conversations"] == []
    assert "no artifact" in recall_result
    assert first_of_b["messages"] != []  # B's first request was managed from scratch, not A's view
    for raw in (p.read_bytes() for p in (tmp_path / "store").rglob("*") if p.is_file()):
        assert KEY.encode() not in raw and b"sk-other-tenant" not in raw


def test_a_gateway_header_names_the_tenant_only_behind_the_proxy_token(tmp_path):
    from lossless.errors import ConfigError
    from lossless.proxy import ProxySettings

    with pytest.raises(ConfigError, match="auth-token"):
        ProxySettings(tenant_header="x-team")
    with proxied(tmp_path, auth_token="s3cret", tenant_header="x-team") as (srv, proxy):
        refused = httpx.post(proxy.base_url + "/v1/messages", json={"model": "m", "max_tokens": 5, "messages": []},
                             headers={"x-api-key": KEY})
        team = {"x-lossless-token": "s3cret"}
        one = anthropic.Anthropic(base_url=proxy.base_url, api_key=KEY, max_retries=0,
                                  default_headers={**team, "x-team": "red"})
        two = anthropic.Anthropic(base_url=proxy.base_url, api_key=KEY, max_retries=0,
                                  default_headers={**team, "x-team": "blue"})
        proxy.clients += [one, two]
        history = [{"role": "user", "content": "Hello."}]
        srv.enqueue("Hi red.")
        _ask(one, history, stream=False)
        srv.enqueue("Hi blue.")
        _ask(two, history, stream=False)
        red = httpx.get(proxy.base_url + "/stats", headers={**team, "x-team": "red"}).json()
        forwarded = srv.requests[-1].headers
    assert refused.status_code == 401 and refused.json()["type"] == "error"
    assert refused.json()["error"]["type"] == "authentication_error"
    assert len(red["conversations"]) == 1 and proxy.stats()["totals"]["conversations"] == 2
    assert "x-lossless-token" not in {k.lower() for k in forwarded}


# -- the registry's promise, over arbitrary interleavings -----------------------------
ops = st.lists(st.one_of(
    st.tuples(st.just("new"), st.sampled_from("ab")),
    st.tuples(st.just("continue"), st.integers(0, 5), st.sampled_from("ab")),
    st.tuples(st.just("fork"), st.integers(0, 5), st.integers(1, 8)),
    st.tuples(st.just("resend"), st.integers(0, 5)),
), min_size=1, max_size=50)


@settings(max_examples=200)
@given(ops)
def test_a_request_continues_only_the_conversation_whose_answer_it_echoes(script):
    """Clients from a two-letter alphabet (so many share histories), each answer unique to
    the request it answered: a request is given a conversation only when that conversation's
    last request was its first k messages and its answer is message k; a client continuing
    with the answer it was just given is always recognised."""
    registry = Conversations(lambda cid, route, tenant: object(), capacity=10_000)
    clients: list[list[dict]] = []
    answers: dict[str, dict] = {}  # conversation → the answer its last request was given
    sent: dict[str, list[dict]] = {}
    own: dict[int, str] = {}  # client → its conversation, when its last request is answered
    serial = 0
    for op in script:
        if op[0] == "new":
            clients.append([{"role": "user", "content": op[1]}])
            i = len(clients) - 1
        elif not clients:
            continue
        elif op[0] == "continue":
            i = op[1] % len(clients)
            if clients[i][-1]["role"] != "assistant":
                continue
            clients[i] = [*clients[i], {"role": "user", "content": op[2]}]
        elif op[0] == "fork":
            source = clients[op[1] % len(clients)]
            clients.append([dict(m) for m in source[: max(1, min(op[2], len(source)))]])
            if clients[-1][-1]["role"] == "assistant":
                clients[-1].append({"role": "user", "content": "a"})
            i = len(clients) - 1
        else:
            i = op[1] % len(clients)
            if clients[i][-1]["role"] == "assistant":
                continue
        history = clients[i]
        hashes = chain("anthropic", history)
        conv, k = registry.claim("anthropic", hashes, history)
        if k:
            assert sent[conv.id] == history[:k]
            if conv.id in answers:
                assert history[k] == answers[conv.id]
        if op[0] == "continue" and i in own:
            assert conv.id == own[i] and k == len(history) - 2
        registry.settle(conv, hashes[-1], in_flight=True)
        serial += 1
        answer = {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{serial}", "name": "Bash",
                                                    "input": {}}]}
        registry.answered(conv, answer_key(answer))
        answers[conv.id], sent[conv.id] = answer, history
        clients[i] = [*history, answer]
        own[i] = conv.id
        for j, other in own.copy().items():  # another client still echoing an older answer of it
            if j != i and other == conv.id:
                del own[j]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_an_answer_the_proxy_did_not_give_never_takes_another_clients_recall_round(tmp_path, stream):
    """A got its answer through a recall round; B, with the same history, continues with an
    answer of its own (from another proxy, a fork of a saved session): B's request goes
    upstream with B's answer — not A's answer and recall round in its place."""
    with proxied(tmp_path) as (srv, proxy):
        client = sdk_client(proxy, "anthropic")
        history = _opening(srv, client, stream=stream)
        handle = _handles(srv.requests[-1].body)[0]
        srv.enqueue([{"type": "text", "text": "Let me read it."},
                     {"type": "tool_use", "id": "toolu_recall_A", "name": "recall", "input": {"handle": handle}}],
                    "ANSWER-A: part 4 lists module_4.")
        _ask(client, history, stream=stream)
        srv.enqueue("ok B")
        b1 = {"role": "assistant", "content": [{"type": "text", "text": "ANSWER-B: from elsewhere."}]}
        _ask(client, [*history, b1, {"role": "user", "content": "Thanks, B."}], stream=stream)
        sent_b = _texts(srv.requests[-1].body)
    assert "ANSWER-B" in sent_b and "ANSWER-A" not in sent_b and "toolu_recall_A" not in sent_b
