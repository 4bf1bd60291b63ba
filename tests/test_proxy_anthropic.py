"""The official Anthropic SDK → lossless proxy → the fake server, streamed and not."""

from __future__ import annotations

import json

import pytest

from proxy_kit import BASH, KEY, check_requests, handles_in, key_nowhere, output, proxied, sdk_client, slow_splice
from lossless.testing import Faults

anthropic = pytest.importorskip("anthropic")
WINDOW = 20_000
MAX_TOKENS = 2_000


def _client(proxy, **kw):
    return sdk_client(proxy, "anthropic", **kw)


def _ask(client, history, *, stream, tools=(BASH,)):
    kwargs = dict(model="claude-test", max_tokens=MAX_TOKENS, messages=history, tools=list(tools),
                  system="You are a careful agent.")
    if stream:
        with client.messages.stream(**kwargs) as s:
            return s.get_final_message()
    return client.messages.create(**kwargs)


def _dump(message):
    return [b.model_dump(mode="json", exclude_none=True, exclude={"parsed_output"}) for b in message.content]


def _agent(srv, client, turns, *, stream, big_every=5):
    """A tool-calling agent: each turn the fake asks for a command, the client answers it."""
    history = [{"role": "user", "content": "Survey the repository and report."}]
    for turn in range(turns):
        srv.enqueue([{"type": "text", "text": f"Looking at part {turn}."},
                     {"type": "tool_use", "id": f"toolu_{turn:03d}", "name": "Bash",
                      "input": {"command": f"cat part{turn}"}}])
        answer = _ask(client, history, stream=stream)
        assert [b.type for b in answer.content] == ["text", "tool_use"] and answer.stop_reason == "tool_use"
        chars = 60_000 if turn % big_every == big_every - 1 else 3_000
        history += [{"role": "assistant", "content": _dump(answer)},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{turn:03d}",
                                                  "content": output(turn, chars)}]}]
    return history


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_long_conversation_compacts_and_every_request_is_valid_and_fits(tmp_path, stream):
    with proxied(tmp_path) as (srv, proxy):
        client = _client(proxy)
        history = _agent(srv, client, 24, stream=stream)
        history.append({"role": "user", "content": "Summarise what you found."})
        final = _ask(client, history, stream=stream)
        stats = proxy.stats()
    assert final.content[0].text.startswith("Fake reply to: Summarise")
    assert check_requests(srv, "anthropic", WINDOW) == 25
    (conv,) = stats["conversations"]
    assert conv["calls"] == 25 and conv["tokens"]["before"] > WINDOW > conv["tokens"]["after"]
    assert conv["stages"].get("persist", 0) >= 1 and set(conv["stages"]) - {"persist"}  # and more than persist
    assert conv["handles"] >= 1 and conv["cost"]["saved"] > 0
    # the recall tool joined the requests once handles existed, and stayed
    tools = [[t["name"] for t in r.body["tools"]] for r in srv.requests if r.path == "/v1/messages"]
    first = next(i for i, names in enumerate(tools) if "recall" in names)
    assert first > 0 and all("recall" in names for names in tools[first:])


def _handle_sent(srv):
    handles = handles_in(srv.requests[-1].body["messages"])
    assert handles, "the proxy forwarded no handle"
    return handles[0]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_recall_is_answered_inside_the_proxy_and_the_client_never_sees_it(tmp_path, stream):
    with proxied(tmp_path) as (srv, proxy):
        client = _client(proxy)
        history = _agent(srv, client, 5, stream=stream)  # turn 4's 60,000-character output is persisted
        history.append({"role": "user", "content": "What did part 4 say?"})
        prev = _ask(client, history, stream=stream)
        handle = _handle_sent(srv)
        srv.enqueue([{"type": "text", "text": "Let me read it."},
                     {"type": "tool_use", "id": "toolu_recall_1", "name": "recall", "input": {"handle": handle}}],
                    "Part 4 lists module_4.")
        history += [{"role": "assistant", "content": _dump(prev)}, {"role": "user", "content": "Please check."}]
        answer = _ask(client, history, stream=stream)
        continuation = srv.requests[-1].body["messages"]
        history += [{"role": "assistant", "content": _dump(answer)}, {"role": "user", "content": "Thanks."}]
        _ask(client, history, stream=stream)
        spliced = srv.requests[-1].body["messages"]
        stats = proxy.stats()["conversations"][0]
    assert [b.type for b in answer.content] == ["text", "text"] and answer.stop_reason == "end_turn"
    assert answer.content[0].text == "Let me read it." and answer.content[1].text == "Part 4 lists module_4."
    # the continuation carried the recall call and its result: the original bytes
    assert continuation[-2]["content"][-1]["name"] == "recall"
    assert continuation[-1]["content"][0]["tool_use_id"] == "toolu_recall_1"
    assert output(4, 100) in continuation[-1]["content"][0]["content"]
    # the next request of the conversation has the round, so the model sees what it read
    assert any(b.get("name") == "recall" for m in spliced if isinstance(m["content"], list) for b in m["content"])
    assert stats["recall_round_trips"] == 1 and stats["recall_spliced"] == 1
    check_requests(srv, "anthropic", WINDOW)


@pytest.mark.parametrize("slow", [False, True], ids=["", "slow-proxy"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_recall_mixed_with_client_tools_the_client_gets_its_own_and_the_next_request_both(
        tmp_path, monkeypatch, stream, slow):
    """``slow``: the proxy takes 0.3 s to answer the recall calls, so a client that sends its
    next request the instant the stream closes would get there first if the close came early."""
    if slow:
        slow_splice(monkeypatch, 0.3)
    with proxied(tmp_path) as (srv, proxy):
        client = _client(proxy)
        history = _agent(srv, client, 5, stream=stream)
        history.append({"role": "user", "content": "Go on."})
        prev = _ask(client, history, stream=stream)
        handle = _handle_sent(srv)
        srv.enqueue([{"type": "tool_use", "id": "toolu_r", "name": "recall", "input": {"handle": handle}},
                     {"type": "tool_use", "id": "toolu_b", "name": "Bash", "input": {"command": "ls"}}])
        history += [{"role": "assistant", "content": _dump(prev)}, {"role": "user", "content": "Continue."}]
        answer = _ask(client, history, stream=stream)
        assert [(b.type, b.name) for b in answer.content] == [("tool_use", "Bash")]
        assert answer.stop_reason == "tool_use"
        history += [{"role": "assistant", "content": _dump(answer)},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_b", "content": "a b"}]}]
        _ask(client, history, stream=stream)
        last = srv.requests[-1].body["messages"]
    calls = [b["id"] for b in last[-2]["content"] if b["type"] == "tool_use"]
    results = {b["tool_use_id"]: b["content"] for b in last[-1]["content"] if b["type"] == "tool_result"}
    assert sorted(calls) == ["toolu_b", "toolu_r"] and set(results) == {"toolu_b", "toolu_r"}
    assert output(4, 100) in results["toolu_r"] and results["toolu_b"] == "a b"
    check_requests(srv, "anthropic", WINDOW)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_prompt_too_long_gets_reactive_compaction_and_one_retry(tmp_path, stream):
    with proxied(tmp_path, window=100_000) as (srv, proxy):
        client = _client(proxy)
        history = _agent(srv, client, 6, stream=stream, big_every=100)
        srv.set_faults(max_prompt_tokens=3_000)
        history.append({"role": "user", "content": "And now?"})
        answer = _ask(client, history, stream=stream)
        stats = proxy.stats()["conversations"][0]
        sizes = [r.body for r in srv.requests[-2:]]
    assert answer.content[0].text.startswith("Fake reply to")
    assert stats["too_long_retries"] == 1 and stats["stages"].get("reactive") == 1
    assert len(json.dumps(sizes[1])) < len(json.dumps(sizes[0]))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_other_upstream_errors_pass_through_with_retry_after(tmp_path, stream):
    with proxied(tmp_path, Faults(fail_429=1, retry_after=7)) as (srv, proxy):
        client = _client(proxy)
        with pytest.raises(anthropic.RateLimitError) as info:
            _ask(client, [{"role": "user", "content": "hi"}], stream=stream)
        answer = _ask(client, [{"role": "user", "content": "hi"}], stream=stream)  # the client's own retry
        stats = proxy.stats()
    assert info.value.response.headers["retry-after"] == "7"
    assert info.value.response.headers["retry-after-ms"] == "7000"
    assert info.value.body["error"]["type"] == "rate_limit_error"
    assert answer.content[0].text == "Fake reply to: hi"
    assert stats["totals"]["conversations"] == 1  # the retry continued the same conversation


def test_an_invalid_history_is_a_400_naming_the_message_and_nothing_is_forwarded(tmp_path):
    history = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_x", "name": "Bash",
                                                  "input": {}}]},
               {"role": "user", "content": "I never ran it"}]
    with proxied(tmp_path) as (srv, proxy):
        with pytest.raises(anthropic.BadRequestError) as info:
            _ask(_client(proxy), history, stream=False)
        assert not srv.requests
    message = info.value.body["error"]["message"]
    assert info.value.body["error"]["type"] == "invalid_request_error"
    assert "message 1" in message and "toolu_x" in message and "\n" not in message


def test_count_tokens_and_other_routes_pass_through_with_the_query_string(tmp_path):
    import httpx2

    with proxied(tmp_path) as (srv, proxy):
        client = _client(proxy)
        counted = client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hello"}])
        other = httpx2.get(proxy.base_url + "/v1/nothing?x=1")
        health = httpx2.get(proxy.base_url + "/health").json()
        stats = proxy.stats()
    assert counted.input_tokens > 0
    assert srv.requests[0].path == "/v1/messages/count_tokens"
    assert srv.requests[0].body["messages"] == [{"role": "user", "content": "hello"}]
    # the fake's own 404, naming the path it was asked for, query string included
    assert other.status_code == 404 and "no route GET /v1/nothing?x=1" in other.json()["error"]["message"]
    assert health == {"status": "ok"} and stats["totals"]["conversations"] == 0


def test_unreachable_upstream_is_a_502_in_the_api_shape(tmp_path):
    from lossless.proxy import ProxyServer, ProxySettings
    from lossless.proxy.server import bind

    sock = bind("127.0.0.1", 0)
    dead = sock.getsockname()[1]
    sock.close()
    with ProxyServer(ProxySettings(upstream=f"http://127.0.0.1:{dead}", store=tmp_path)) as proxy, \
            anthropic.Anthropic(base_url=proxy.base_url, api_key=KEY, max_retries=0) as client:
        with pytest.raises(anthropic.InternalServerError) as info:
            _ask(client, [{"role": "user", "content": "hi"}], stream=False)
    assert info.value.status_code == 502
    assert "unreachable" in info.value.body["error"]["message"]


def test_keys_are_never_written_nor_logged(tmp_path):
    with proxied(tmp_path, verbose=True) as (srv, proxy):
        client = _client(proxy, default_headers={"x-api-key": KEY})
        _agent(srv, client, 6, stream=True)
    assert srv.requests[-1].headers["x-api-key"] == KEY  # passed through untouched
    lines = proxy.log_lines  # read once the proxy has stopped: a request's line follows its answer
    assert len(lines) == 6 and all(line.startswith("lossless proxy: ") for line in lines)
    key_nowhere(tmp_path, *lines)


def test_a_block_type_lossless_does_not_describe_is_managed_and_forwarded_unchanged(tmp_path):
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "notes"}}
    history = [{"role": "user", "content": [document, {"type": "text", "text": "Read this."}]}]
    with proxied(tmp_path, verbose=True) as (srv, proxy):
        answer = _ask(_client(proxy), history, stream=True)
        stats = proxy.stats()
    assert answer.content[0].text == "Fake reply to: Read this."
    assert srv.requests[-1].body["messages"] == history and "recall" not in json.dumps(srv.requests[-1].body["tools"])
    assert stats["totals"]["unmanaged"] == 0 and stats["totals"]["conversations"] == 1


def test_a_block_lossless_cannot_read_is_forwarded_unchanged_not_refused(tmp_path):
    odd = {"source": {"type": "text", "data": "notes"}}  # no type: the upstream's to judge
    history = [{"role": "user", "content": [odd, {"type": "text", "text": "Read this."}]}]
    with proxied(tmp_path, verbose=True) as (srv, proxy):
        client = _client(proxy)
        client.messages.create(model="claude-test", max_tokens=MAX_TOKENS, messages=history)
        stats = proxy.stats()
    assert srv.requests[-1].body["messages"] == history
    assert stats["totals"]["unmanaged"] == 1 and stats["totals"]["conversations"] == 0
    lines = proxy.log_lines
    assert "forwarded unmanaged" in lines[0] and "needs a 'type' string" in lines[0]


def test_a_claude_code_like_client_moving_its_breakpoints_stays_one_conversation(tmp_path):
    """Streaming with ?beta=true, a system prompt and tools carrying breakpoints, thinking
    before each tool call, and the message breakpoint moved to the newest message every turn."""
    system = [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]
    tools = [{**BASH, "cache_control": {"type": "ephemeral"}}]
    history = [{"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]}]
    with proxied(tmp_path) as (srv, proxy):
        client = _client(proxy)
        for turn in range(16):
            srv.enqueue([{"type": "thinking", "thinking": f"Plan {turn}.", "signature": f"sig{turn}"},
                         {"type": "tool_use", "id": f"toolu_{turn:03d}", "name": "Bash",
                          "input": {"command": f"cat f{turn}"}}])
            marked = [*history[:-1], {**history[-1], "content": [*history[-1]["content"][:-1], {
                **history[-1]["content"][-1], "cache_control": {"type": "ephemeral"}}]}]
            with client.messages.stream(model="claude-test", max_tokens=MAX_TOKENS, system=system, tools=tools,
                                        messages=marked, extra_query={"beta": "true"}) as s:
                answer = s.get_final_message()
            assert [b.type for b in answer.content] == ["thinking", "tool_use"]
            history += [{"role": "assistant", "content": _dump(answer)},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{turn:03d}",
                                                      "content": output(turn, 60_000 if turn == 6 else 4_000)}]}]
        stats = proxy.stats()
    assert stats["totals"]["conversations"] == 1 and stats["conversations"][0]["calls"] == 16
    assert set(stats["conversations"][0]["stages"]) - {"persist"}  # it had to compact
    for r in srv.requests:
        body = r.body
        assert body["system"] == system and body["tools"][0] == tools[0]
        assert json.dumps(body).count('"cache_control"') == 3
        assert "cache_control" in json.dumps(body["messages"][-1]["content"][-1])
        assert all(b.get("signature") for m in body["messages"] for b in m["content"] if b["type"] == "thinking")
    check_requests(srv, "anthropic", WINDOW)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_recall_rounds_are_bounded_and_the_client_still_gets_an_ordinary_end(tmp_path, stream):
    with proxied(tmp_path, recall_rounds=2) as (srv, proxy):
        client = _client(proxy)
        history = _agent(srv, client, 5, stream=stream)
        history.append({"role": "user", "content": "Again and again."})
        prev = _ask(client, history, stream=stream)
        handle = _handle_sent(srv)
        calls = [[{"type": "text", "text": f"Reading {i}."},
                  {"type": "tool_use", "id": f"toolu_rc{i}", "name": "recall",
                   "input": {"handle": handle, "offset": 1000 * i, "limit": 500}}] for i in range(3)]
        srv.enqueue(*calls)
        history += [{"role": "assistant", "content": _dump(prev)}, {"role": "user", "content": "Read it all."}]
        sent = len(srv.requests)
        answer = _ask(client, history, stream=stream)
        stats = proxy.stats()["conversations"][0]
    assert len(srv.requests) - sent == 3  # the call and two continuations, no more
    assert [b.text for b in answer.content] == ["Reading 0.", "Reading 1.", "Reading 2."]
    assert answer.stop_reason == "end_turn" and stats["recall_round_trips"] == 2
    check_requests(srv, "anthropic", WINDOW)


def test_a_stream_the_upstream_cuts_is_cut_for_the_client_and_the_next_call_works(tmp_path):
    import anthropic
    import httpx2

    with proxied(tmp_path, Faults(broken_stream=True)) as (srv, proxy):
        client = _client(proxy)
        # a cut body reaches the caller as httpx's protocol error, or in newer SDK releases as the SDK's own connection error
        with pytest.raises((httpx2.RemoteProtocolError, anthropic.APIConnectionError), match="peer closed"):
            _ask(client, [{"role": "user", "content": "tell me a long story please"}], stream=True)
        srv.set_faults()
        answer = _ask(client, [{"role": "user", "content": "again"}], stream=True)
    assert answer.content[0].text == "Fake reply to: again"


def test_a_client_with_its_own_recall_tool_keeps_it_and_gets_its_calls(tmp_path):
    own = {"name": "recall", "description": "The client's own memory tool.",
           "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
    with proxied(tmp_path) as (srv, proxy):
        client = _client(proxy)
        history = [{"role": "user", "content": "Start. " + "x" * 70_000}]  # persisted: handles exist
        prev = _ask(client, history, stream=False, tools=(BASH, own))
        srv.enqueue([{"type": "tool_use", "id": "toolu_own", "name": "recall", "input": {"q": "notes"}}])
        history += [{"role": "assistant", "content": _dump(prev)}, {"role": "user", "content": "Look it up."}]
        answer = _ask(client, history, stream=True, tools=(BASH, own))
        stats = proxy.stats()["conversations"][0]
    assert [(b.type, b.name) for b in answer.content] == [("tool_use", "recall")]  # the client's call, not ours
    assert all([t["name"] for t in r.body["tools"]] == ["Bash", "recall"] for r in srv.requests)
    assert stats["recall_tool"] == "client" and stats["handles"] >= 1 and stats["recall_round_trips"] == 0


def test_a_system_role_message_is_folded_into_a_user_turn_and_the_conversation_goes_on(tmp_path):
    """Claude Code 2.1 sends its agent and skill listings as a ``role: "system"`` message under
    a beta; the proxy folds it into the user turn as a ``<system-reminder>``, forwards a valid
    request, and recognises the conversation on the next turn."""
    listing = {"role": "system", "content": "Available agents: general-purpose, Explore."}
    history = [{"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]}, listing]
    with proxied(tmp_path) as (srv, proxy):
        client = _client(proxy)
        for turn in range(3):
            srv.enqueue([{"type": "tool_use", "id": f"toolu_{turn}", "name": "Bash", "input": {"command": "ls"}}])
            answer = _ask(client, history, stream=turn % 2 == 1)
            history += [{"role": "assistant", "content": _dump(answer)},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{turn}",
                                                      "content": output(turn, 500)}]}]
        stats = proxy.stats()
    assert all(status == 200 for status in srv.statuses)
    assert stats["totals"]["conversations"] == 1 and stats["conversations"][0]["calls"] == 3
    for r in srv.requests:
        roles = [m["role"] for m in r.body["messages"]]
        assert "system" not in roles and roles[0] == "user"
        first = r.body["messages"][0]["content"]
        assert first[0]["text"] == "Fix the bug." and "<system-reminder>" in first[-1]["text"]
        assert "Available agents: general-purpose, Explore." in first[-1]["text"]
    check_requests(srv, "anthropic", WINDOW)


def test_a_turn_sent_as_a_block_then_as_a_string_is_the_same_conversation(tmp_path):
    """The newest user turn goes as one text block carrying the breakpoint, and as a plain
    string once it is older (Claude Code does this): still one conversation, one transcript."""
    history: list = []
    with proxied(tmp_path) as (srv, proxy):
        client = _client(proxy)
        for turn in range(4):
            question = f"Question {turn}?"
            sent = [*history, {"role": "user", "content": [
                {"type": "text", "text": question, "cache_control": {"type": "ephemeral"}}]}]
            srv.enqueue(f"Answer {turn}.")
            answer = _ask(client, sent, stream=False, tools=())
            history += [{"role": "user", "content": question}, {"role": "assistant", "content": _dump(answer)}]
        stats = proxy.stats()
    assert stats["totals"]["conversations"] == 1 and stats["conversations"][0]["calls"] == 4
    sessions = list((tmp_path / "store" / "sessions").iterdir())
    assert len(sessions) == 1
    check_requests(srv, "anthropic", WINDOW)


def test_blocks_of_kinds_lossless_does_not_describe_are_managed_and_come_back_exactly(tmp_path):
    """Documents, a server tool's search and a search result inside a tool result: the proxy
    manages the conversation (before, a block type it did not know sent the request on
    unmanaged, so a long conversation would fail for size), forwards each block as the client
    sent it while it stays, and the range that leaves holds them byte for byte."""
    from lossless.store import ArtifactStore

    def search(turn):
        sid = f"srvtoolu_{turn:03d}"
        return [{"type": "server_tool_use", "id": sid, "name": "web_search", "input": {"query": f"part {turn}"}},
                {"type": "web_search_tool_result", "tool_use_id": sid,
                 "content": [{"type": "web_search_result", "url": f"https://example.com/{turn}", "title": "hit",
                              "encrypted_content": "E" * 300, "page_age": None}]}]

    document = {"type": "document", "title": "spec",
                "source": {"type": "text", "media_type": "text/plain", "data": "The spec says: " + "x " * 400}}
    history = [{"role": "user", "content": [document, {"type": "text", "text": "Survey the repository against the spec."}]}]
    with proxied(tmp_path) as (srv, proxy):
        client = _client(proxy)
        for turn in range(24):
            srv.enqueue([*search(turn), {"type": "text", "text": f"Looking at part {turn}."},
                         {"type": "tool_use", "id": f"toolu_{turn:03d}", "name": "Bash", "input": {"command": f"cat part{turn}"}}])
            answer = _ask(client, history, stream=False)
            said = _dump(answer)  # the model searched the web first
            found = {"type": "search_result", "source": f"kb://{turn}", "title": "kb",
                     "content": [{"type": "text", "text": f"note {turn}"}]}
            history += [{"role": "assistant", "content": said},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{turn:03d}",
                                                      "content": [found, {"type": "text", "text": output(turn, 3_000)}]}]}]
        srv.enqueue("Done.")
        _ask(client, history, stream=False)
        stats = proxy.stats()
        lines = list(proxy.log_lines)
    assert not [line for line in lines if "unmanaged" in line], lines
    (conv,) = stats["conversations"]
    assert conv["tokens"]["before"] > WINDOW > conv["tokens"]["after"]
    check_requests(srv, "anthropic", WINDOW)
    last = srv.requests[-1].body["messages"]
    assert last[0]["content"][0] == document  # the task is pinned, its document with it
    assert last[-2] == history[-2] and last[-1] == history[-1]  # the newest round as the client sent it
    assert [b["type"] for b in last[-2]["content"][:2]] == ["server_tool_use", "web_search_tool_result"]
    store = ArtifactStore(tmp_path / "store")
    moved = [json.loads(store.get(h)) for h in handles_in(last) if store.get(h).startswith("[{")]
    archived = [m for ranged in moved for m in ranged]
    assert archived and all(m in history for m in archived)
    assert any(b["type"] == "web_search_tool_result" for m in archived if m["role"] == "assistant" for b in m["content"])
    assert any(b["content"][0]["type"] == "search_result" for m in archived if m["role"] == "user"
               for b in m["content"] if b["type"] == "tool_result" and isinstance(b["content"], list))


def test_an_answer_too_long_to_keep_is_stored_once_and_comes_back_by_recall(tmp_path):
    """A model caught in a loop wrote one answer of over half the threshold (with a larger
    ``max_tokens`` than this client asks for): the request carries it stored, with a preview and its
    handle, the requests after it the same bytes (the cached prefix holds), and a recall of the
    handle brings it back, page by page."""
    runaway = "".join(f"Wait, line {i} still returns mmsubsup; checking again.\n" for i in range(1_200))
    with proxied(tmp_path) as (srv, proxy):
        client = _client(proxy)
        history = [{"role": "user", "content": "Fix the MathML printer."},
                   {"role": "assistant", "content": [{"type": "text", "text": runaway}]},
                   {"role": "user", "content": "Go on."}]
        _ask(client, history, stream=False)
        sent = srv.requests[-1].body["messages"][1]["content"][0]["text"]
        handle = _handle_sent(srv)
        srv.enqueue([{"type": "tool_use", "id": "toolu_recall_1", "name": "recall", "input": {"handle": handle}}],
                    "Done.")
        history += [{"role": "assistant", "content": [{"type": "text", "text": "Fake reply to: Go on."}]},
                    {"role": "user", "content": "What did you write first?"}]
        _ask(client, history, stream=False)
        again = srv.requests[-2].body["messages"][1]["content"][0]["text"]
        recalled = srv.requests[-1].body["messages"][-1]["content"][0]["content"]
        conv = proxy.stats()["conversations"]
    assert sent.startswith("<persisted-output") and "text the assistant wrote" in sent and len(sent) < 5_000
    assert again == sent  # the same bytes on the next request: the prefix is unchanged
    assert runaway[:19_000] in recalled and f"of {len(runaway):,}" in recalled  # the first page of all of it
    assert len(conv) == 1 and conv[0]["stages"].get("persist") == 1
    check_requests(srv, "anthropic", WINDOW)
