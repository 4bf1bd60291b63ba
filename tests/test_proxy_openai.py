"""The official OpenAI SDK → lossless proxy → the fake server (Chat Completions), streamed and not."""

from __future__ import annotations

import json

import pytest

from proxy_kit import BASH_FN, KEY, check_requests, handles_in, key_nowhere, output, proxied, sdk_client, slow_splice
from lossless.testing import Faults

openai = pytest.importorskip("openai")
WINDOW = 20_000
MAX_TOKENS = 2_000


def _client(proxy):
    return sdk_client(proxy, "openai")


def _ask(client, history, *, stream):
    """(the assistant message dict as the client keeps it, finish reason)."""
    kwargs = dict(model="gpt-test", max_completion_tokens=MAX_TOKENS, messages=history, tools=[BASH_FN])
    if not stream:
        r = client.chat.completions.create(**kwargs)
        choice = r.choices[0]
        return choice.message.model_dump(mode="json", exclude_none=True), choice.finish_reason
    text, calls, finish = [], {}, None
    for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs):
        for choice in chunk.choices:
            delta = choice.delta
            text.append(delta.content or "")
            for call in delta.tool_calls or []:
                slot = calls.setdefault(call.index, {"id": None, "type": "function",
                                                     "function": {"name": None, "arguments": ""}})
                slot["id"] = call.id or slot["id"]
                if call.function:
                    slot["function"]["name"] = call.function.name or slot["function"]["name"]
                    slot["function"]["arguments"] += call.function.arguments or ""
            finish = choice.finish_reason or finish
    assert sorted(calls) == list(range(len(calls)))  # the client's tool calls are numbered 0, 1, … with no gap
    message = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message, finish


def _agent(srv, client, turns, *, stream, big_every=5):
    history = [{"role": "system", "content": "You are a careful agent."},
               {"role": "user", "content": "Survey the repository and report."}]
    for turn in range(turns):
        srv.enqueue([{"type": "text", "text": f"Looking at part {turn}."},
                     {"type": "tool_use", "id": f"call_{turn:03d}", "name": "Bash",
                      "input": {"command": f"cat part{turn}"}}])
        message, finish = _ask(client, history, stream=stream)
        assert finish == "tool_calls" and [c["function"]["name"] for c in message["tool_calls"]] == ["Bash"]
        chars = 60_000 if turn % big_every == big_every - 1 else 3_000
        history += [message, {"role": "tool", "tool_call_id": f"call_{turn:03d}", "content": output(turn, chars)}]
    return history


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_long_conversation_compacts_and_every_request_is_valid_and_fits(tmp_path, stream):
    with proxied(tmp_path) as (srv, proxy):
        client = _client(proxy)
        history = _agent(srv, client, 24, stream=stream)
        history.append({"role": "user", "content": "Summarise what you found."})
        message, finish = _ask(client, history, stream=stream)
        stats = proxy.stats()
    assert finish == "stop" and message["content"].startswith("Fake reply to: Summarise")
    assert check_requests(srv, "openai", WINDOW) == 25
    (conv,) = stats["conversations"]
    assert conv["dialect"] == "openai" and conv["calls"] == 25
    assert conv["tokens"]["before"] > WINDOW > conv["tokens"]["after"] and conv["handles"] >= 1
    sent = [r.body for r in srv.requests]
    assert all(b["messages"][0] == {"role": "system", "content": "You are a careful agent."} for b in sent)
    names = [[t["function"]["name"] for t in b["tools"]] for b in sent]
    assert "recall" in names[-1] and "recall" not in names[0]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_recall_is_answered_inside_the_proxy_and_the_client_never_sees_it(tmp_path, stream):
    with proxied(tmp_path) as (srv, proxy):
        client = _client(proxy)
        history = _agent(srv, client, 5, stream=stream)
        history.append({"role": "user", "content": "What did part 4 say?"})
        prev = _ask(client, history, stream=stream)
        handle = handles_in(srv.requests[-1].body["messages"])[0]
        srv.enqueue([{"type": "text", "text": "Reading. "},
                     {"type": "tool_use", "id": "call_recall", "name": "recall", "input": {"handle": handle}}],
                    "Part 4 lists module_4.")
        history += [prev[0], {"role": "user", "content": "Please check."}]
        message, finish = _ask(client, history, stream=stream)
        continuation = srv.requests[-1].body["messages"]
        history += [message, {"role": "user", "content": "Thanks."}]
        _ask(client, history, stream=stream)
        spliced = srv.requests[-1].body["messages"]
        stats = proxy.stats()["conversations"][0]
    assert finish == "stop" and "tool_calls" not in message
    assert message["content"] == "Reading. Part 4 lists module_4."
    assert continuation[-2]["tool_calls"][0]["function"]["name"] == "recall"
    assert continuation[-1]["tool_call_id"] == "call_recall" and output(4, 100) in continuation[-1]["content"]
    assert any(c["function"]["name"] == "recall" for m in spliced for c in m.get("tool_calls") or [])
    assert stats["recall_round_trips"] == 1 and stats["recall_spliced"] == 1
    check_requests(srv, "openai", WINDOW)


@pytest.mark.parametrize("slow", [False, True], ids=["", "slow-proxy"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_recall_mixed_with_client_tools(tmp_path, monkeypatch, stream, slow):
    """The recall round the client never saw is spliced into its next request — also when
    that request comes the instant the answer ends, before the proxy's handler has run on
    (``slow``: the proxy takes 0.3 s to answer the recall calls, as on a loaded machine)."""
    if slow:
        slow_splice(monkeypatch, 0.3)
    with proxied(tmp_path) as (srv, proxy):
        client = _client(proxy)
        history = _agent(srv, client, 5, stream=stream)
        history.append({"role": "user", "content": "Go on."})
        prev = _ask(client, history, stream=stream)
        handle = handles_in(srv.requests[-1].body["messages"])[0]
        srv.enqueue([{"type": "tool_use", "id": "call_r", "name": "recall", "input": {"handle": handle}},
                     {"type": "tool_use", "id": "call_b", "name": "Bash", "input": {"command": "ls"}}])
        history += [prev[0], {"role": "user", "content": "Continue."}]
        message, finish = _ask(client, history, stream=stream)
        assert finish == "tool_calls" and [c["id"] for c in message["tool_calls"]] == ["call_b"]
        history += [message, {"role": "tool", "tool_call_id": "call_b", "content": "a b"}]
        _ask(client, history, stream=stream)
        last = srv.requests[-1].body["messages"]
    calling = next(m for m in reversed(last) if m.get("tool_calls"))
    assert sorted(c["id"] for c in calling["tool_calls"]) == ["call_b", "call_r"]
    results = {m["tool_call_id"]: m["content"] for m in last if m["role"] == "tool"}
    assert results["call_b"] == "a b" and output(4, 100) in results["call_r"]
    check_requests(srv, "openai", WINDOW)


@pytest.mark.parametrize("style", ["native", "llamacpp", "vllm", "ollama"])
def test_prompt_too_long_in_each_servers_wording_gets_one_reactive_retry(tmp_path, style):
    with proxied(tmp_path, window=100_000) as (srv, proxy):
        client = _client(proxy)
        history = _agent(srv, client, 6, stream=False, big_every=100)
        srv.set_faults(max_prompt_tokens=3_000, too_long_style=style)
        history.append({"role": "user", "content": "And now?"})
        message, finish = _ask(client, history, stream=style == "native")
        stats = proxy.stats()["conversations"][0]
    assert finish == "stop" and message["content"].startswith("Fake reply to")
    assert stats["too_long_retries"] == 1


def test_rate_limit_passes_through_and_the_invalid_history_is_refused(tmp_path):
    bad = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "nope", "content": "x"}]
    with proxied(tmp_path, Faults(fail_429=1, retry_after=3)) as (srv, proxy):
        client = _client(proxy)
        with pytest.raises(openai.RateLimitError) as limited:
            _ask(client, [{"role": "user", "content": "hi"}], stream=True)
        with pytest.raises(openai.BadRequestError) as refused:
            _ask(client, bad, stream=False)
        assert len(srv.requests) == 1
    assert limited.value.response.headers["retry-after"] == "3"
    assert limited.value.body["code"] == "rate_limit_exceeded"
    assert refused.value.body["type"] == "invalid_request_error" and "nope" in refused.value.body["message"]


def test_keys_never_reach_disk(tmp_path):
    with proxied(tmp_path, verbose=True) as (srv, proxy):
        _agent(srv, _client(proxy), 6, stream=False)
    assert srv.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    lines = proxy.log_lines  # read once the proxy has stopped: a request's line follows its answer
    assert json.dumps(lines).count("openai") == 6
    key_nowhere(tmp_path, *lines)


def test_recall_rounds_are_bounded_in_a_stream_too(tmp_path):
    with proxied(tmp_path, recall_rounds=1) as (srv, proxy):
        client = _client(proxy)
        history = _agent(srv, client, 5, stream=True)
        history.append({"role": "user", "content": "Read it twice."})
        prev = _ask(client, history, stream=True)
        handle = handles_in(srv.requests[-1].body["messages"])[0]
        srv.enqueue(*[[{"type": "text", "text": f"R{i}. "},
                       {"type": "tool_use", "id": f"call_rc{i}", "name": "recall", "input": {"handle": handle}}]
                      for i in range(2)])
        history += [prev[0], {"role": "user", "content": "Go."}]
        message, finish = _ask(client, history, stream=True)
    assert message == {"role": "assistant", "content": "R0. R1. "} and finish == "stop"
    check_requests(srv, "openai", WINDOW)


def test_the_recall_tool_offered_at_the_first_compaction_is_counted_once(tmp_path):
    """A conversation of long pastes at a 2k window: the first compaction makes the proxy offer
    ``recall``, so that request already carries the tool and its reported usage counts it.  The
    next estimate must not add the tool again — it did, and the request right after the first
    compaction compacted again (seen through a real llama.cpp server, bench/cache.py)."""
    import random

    rng = random.Random(3)
    words = "the module returns a value when config is loaded and cache entry expires after request".split()
    with proxied(tmp_path, window=2048) as (srv, proxy):
        client = _client(proxy)
        history = [{"role": "system", "content": "You are a concise reader."}, {"role": "user", "content": "Hello."}]
        history.append(client.chat.completions.create(model="gpt-test", messages=history, max_tokens=16)
                       .choices[0].message.model_dump(mode="json", exclude_none=True))
        for turn in range(24):
            paste = " ".join(rng.choice(words) for _ in range(330))
            history.append({"role": "user", "content": f"Document {turn}:\n{paste}\n\nWhat does it say?"})
            srv.enqueue(f"It is document {turn}.")
            answer = client.chat.completions.create(model="gpt-test", messages=history, max_tokens=16)
            history.append(answer.choices[0].message.model_dump(mode="json", exclude_none=True))
        stats = proxy.stats()["conversations"][0]
    bodies = [r.body for r in srv.requests if r.path == "/v1/chat/completions"]
    offered = ["recall" in [t["function"]["name"] for t in b.get("tools") or []] for b in bodies]
    # A request compacted when what it forwards is not the previous request's messages plus what came since.
    compacted = [i for i in range(1, len(bodies))
                 if bodies[i]["messages"][:len(bodies[i - 1]["messages"])] != bodies[i - 1]["messages"]]
    first = offered.index(True)
    assert first in compacted and not any(offered[:first]) and all(offered[first:])
    assert len(compacted) >= 4, compacted
    assert not [i for i in compacted if i - 1 in compacted], compacted
    assert stats["calls"] == 25
    check_requests(srv, "openai", 2048)


def test_a_refusal_kept_in_the_history_passes_and_survives_compaction(tmp_path):
    """The SDK's ``choices[0].message`` of a refusal is ``{"content": null, "refusal": "…"}``; an
    agent appends it as it came. The proxy forwards it, compacts around it, and keeps it exact."""
    refusal = {"role": "assistant", "content": None, "refusal": "I can't help with deleting the backups."}
    with proxied(tmp_path) as (srv, proxy):
        client = _client(proxy)
        history = [{"role": "system", "content": "You are a careful agent."},
                   {"role": "user", "content": "Delete the backups."}, refusal,
                   {"role": "user", "content": "Then survey the repository and report."}]
        for turn in range(24):
            srv.enqueue([{"type": "tool_use", "id": f"call_{turn:03d}", "name": "Bash",
                          "input": {"command": f"cat part{turn}"}}])
            message, finish = _ask(client, history, stream=False)
            assert finish == "tool_calls"
            history += [message, {"role": "tool", "tool_call_id": f"call_{turn:03d}", "content": output(turn, 3_000)}]
        history.append({"role": "user", "content": "Summarise what you found."})
        message, finish = _ask(client, history, stream=False)
    assert finish == "stop" and message["content"].startswith("Fake reply to: Summarise")
    assert check_requests(srv, "openai", WINDOW) == 25
    sent = [r.body["messages"] for r in srv.requests]
    assert all(refusal in messages for messages in sent[:3])  # forwarded exactly while it fits
    assert any(len(messages) < len(sent[0]) + 40 for messages in sent[-5:])  # and compaction ran after it
