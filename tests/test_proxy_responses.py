"""The official OpenAI SDK's Responses API → lossless proxy → the fake Responses endpoint, streamed and not.

What Codex CLI and the OpenAI Agents SDK speak: a history of items, one model turn several of
them.  The proxy fits it as it fits the other two APIs: every request valid and within the
window, recall answered inside, a "too long" retried once, and a history the server keeps
(``previous_response_id``) forwarded as it came.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from proxy_kit import KEY, handles_in, output
from lossless.dialects.responses import problems_responses
from lossless.proxy import ProxyServer, ProxySettings
from lossless.testing.responses import ResponsesServer, events, problem
from lossless.testing.wire import estimate

openai = pytest.importorskip("openai")
WINDOW = 20_000
MAX_TOKENS = 2_000
INSTRUCTIONS = "You are a careful agent."
BASH = {"type": "function", "name": "Bash", "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}
PATCH = {"type": "custom", "name": "apply_patch", "description": "Apply a patch."}


@contextlib.contextmanager
def proxied(tmp_path, **settings: Any) -> Iterator[tuple[ResponsesServer, ProxyServer, Any]]:
    lines: list[str] = []
    with ResponsesServer(max_prompt_tokens=settings.pop("max_prompt_tokens", None)) as srv:
        upstream = srv.openai_base_url.removesuffix("/v1")
        options = {"window": WINDOW, "store": tmp_path / "store", **settings}
        with ProxyServer(ProxySettings(upstream=upstream, **options), log=lines.append) as proxy:
            proxy.log_lines = lines
            client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key=KEY, max_retries=0)
            try:
                yield srv, proxy, client
            finally:
                client.close()


def ask(client, items, *, stream, tools=(BASH,)):
    """(the output items as the client keeps them for its next request, the text)."""
    kwargs = dict(model="gpt-test", instructions=INSTRUCTIONS, input=items, tools=list(tools),
                  max_output_tokens=MAX_TOKENS)
    if not stream:
        r = client.responses.create(**kwargs)
        return [item.model_dump(mode="json", exclude_none=True) for item in r.output], r.output_text
    with client.responses.stream(**kwargs) as s:
        seen = [e for e in s]
        final = s.get_final_response()
    numbers = [e.sequence_number for e in seen]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))  # no gap, none twice
    added = [e.output_index for e in seen if e.type == "response.output_item.added"]
    assert added == list(range(len(added))) == list(range(len(final.output)))  # the client's items: 0, 1, … no gap
    return [item.model_dump(mode="json", exclude_none=True) for item in final.output], final.output_text


def agent(srv, client, turns, *, stream, big_every=5):
    items: list[Any] = [{"role": "user", "content": "Survey the repository and report."}]
    for turn in range(turns):
        srv.enqueue([{"type": "text", "text": f"Looking at part {turn}."},
                     {"type": "tool_use", "id": f"call_{turn:03d}", "name": "Bash", "input": {"command": f"cat part{turn}"}}])
        said, _ = ask(client, items, stream=stream)
        assert [i["type"] for i in said] == ["message", "function_call"] and said[1]["name"] == "Bash"
        chars = 60_000 if turn % big_every == big_every - 1 else 3_000
        items += [*said, {"type": "function_call_output", "call_id": f"call_{turn:03d}", "output": output(turn, chars)}]
    return items


def opened(srv, client, question: str, *, stream: bool) -> tuple[list[Any], list[Any], str]:
    """Five rounds of ``agent`` (enough to compact), then ``question`` asked: the items so far, the
    answer's items and a handle the last request held."""
    items = agent(srv, client, 5, stream=stream)
    items.append({"role": "user", "content": question})
    said, _ = ask(client, items, stream=stream)
    return items, said, handles_in(sent(srv)[-1]["input"])[0]


def sent(srv) -> list[dict[str, Any]]:
    return [r.body for r in srv.requests if r.path == "/v1/responses"]


def check(srv, window: int = WINDOW) -> int:
    """Every request the fake received is one the API accepts and leaves room for its answer."""
    bodies = sent(srv)
    for body in bodies:
        assert problem(body) is None
        assert problems_responses(body["input"]) == []
        size = estimate({k: body.get(k) for k in ("instructions", "tools", "input")})
        assert size + (body.get("max_output_tokens") or 0) <= window, size
    return len(bodies)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_long_conversation_compacts_and_every_request_is_valid_and_fits(tmp_path, stream):
    with proxied(tmp_path) as (srv, proxy, client):
        items = agent(srv, client, 24, stream=stream)
        items.append({"role": "user", "content": "Summarise what you found."})
        said, text = ask(client, items, stream=stream)
        stats = proxy.stats()
    assert text.startswith("Fake reply to: Summarise") and said[0]["type"] == "message"
    assert check(srv) == 25
    (conv,) = stats["conversations"]
    assert conv["dialect"] == "responses" and conv["calls"] == 25
    assert conv["tokens"]["before"] > WINDOW > conv["tokens"]["after"] and conv["handles"] >= 1
    bodies = sent(srv)
    assert all(b["instructions"] == INSTRUCTIONS for b in bodies)
    assert all(b["input"][0] == {"role": "user", "content": "Survey the repository and report."} for b in bodies)
    names = [[t["name"] for t in b["tools"]] for b in bodies]
    assert "recall" in names[-1] and "recall" not in names[0]
    assert len(bodies[-1]["input"]) < len(items)  # fitted, not forwarded whole


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_recall_is_answered_inside_the_proxy_and_the_client_never_sees_it(tmp_path, stream):
    with proxied(tmp_path) as (srv, proxy, client):
        items, said, handle = opened(srv, client, "What did part 4 say?", stream=stream)
        srv.enqueue([{"type": "text", "text": "Reading. "},
                     {"type": "tool_use", "id": "call_recall", "name": "recall", "input": {"handle": handle}}],
                    "Part 4 lists module_4.")
        items += [*said, {"role": "user", "content": "Please check."}]
        said, text = ask(client, items, stream=stream)
        continuation = sent(srv)[-1]["input"]
        items += [*said, {"role": "user", "content": "Thanks."}]
        ask(client, items, stream=stream)
        spliced = sent(srv)[-1]["input"]
        stats = proxy.stats()["conversations"][0]
    assert [i["type"] for i in said] == ["message", "message"]  # no call for the client to run
    assert text == "Reading. Part 4 lists module_4."
    assert continuation[-2]["type"] == "function_call" and continuation[-2]["name"] == "recall"
    assert continuation[-1]["call_id"] == "call_recall" and output(4, 100) in continuation[-1]["output"]
    assert any(i.get("type") == "function_call" and i["name"] == "recall" for i in spliced)  # the model's turn, as it said it
    assert stats["recall_round_trips"] == 1 and stats["recall_spliced"] == 1
    check(srv)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_recall_mixed_with_client_tools_is_spliced_into_the_next_request(tmp_path, stream):
    with proxied(tmp_path) as (srv, proxy, client):
        items, said, handle = opened(srv, client, "Go on.", stream=stream)
        srv.enqueue([{"type": "tool_use", "id": "call_r", "name": "recall", "input": {"handle": handle}},
                     {"type": "tool_use", "id": "call_b", "name": "Bash", "input": {"command": "ls"}}])
        items += [*said, {"role": "user", "content": "Continue."}]
        said, _ = ask(client, items, stream=stream)
        assert [(i["type"], i.get("call_id")) for i in said] == [("function_call", "call_b")]
        items += [*said, {"type": "function_call_output", "call_id": "call_b", "output": "a b"}]
        ask(client, items, stream=stream)
        last = sent(srv)[-1]["input"]
    calls = [i["call_id"] for i in last if i.get("type") == "function_call"]
    assert calls[-2:] == ["call_r", "call_b"]
    results = {i["call_id"]: i["output"] for i in last if i.get("type") == "function_call_output"}
    assert results["call_b"] == "a b" and output(4, 100) in results["call_r"]
    check(srv)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_an_input_too_long_for_the_server_gets_one_reactive_retry(tmp_path, stream):
    with proxied(tmp_path, window=100_000, max_prompt_tokens=3_000) as (srv, proxy, client):
        items = [{"role": "user", "content": "Look around."}]
        for turn in range(6):
            items += [{"type": "function_call", "call_id": f"c{turn}", "name": "Bash", "arguments": "{}"},
                      {"type": "function_call_output", "call_id": f"c{turn}", "output": output(turn, 3_000)}]
        items.append({"role": "user", "content": "And now?"})
        said, text = ask(client, items, stream=stream)
        stats = proxy.stats()["conversations"][0]
        bodies = sent(srv)
    assert text.startswith("Fake reply to: And now") and stats["too_long_retries"] == 1
    assert len(bodies) == 2 and estimate(bodies[-1]["input"]) <= 3_000


def test_a_history_the_server_keeps_is_forwarded_as_it_came(tmp_path):
    with proxied(tmp_path) as (srv, proxy, client):
        r = client.responses.create(model="gpt-test", input="Go on.", previous_response_id="resp_earlier")
        listed = client.responses.create(model="gpt-test", input="Hi.",
                                         extra_body={"instructions": [{"role": "developer", "content": "Be brief."}]})
        stats = proxy.stats()
    assert r.output_text == "Fake reply to: Go on." and listed.output_text == "Fake reply to: Hi."
    assert sent(srv)[0]["previous_response_id"] == "resp_earlier"
    assert sent(srv)[1]["instructions"] == [{"role": "developer", "content": "Be brief."}]
    assert stats["totals"]["unmanaged"] == 2 and stats["conversations"] == []


def test_an_invalid_history_is_refused_in_the_apis_shape_and_nothing_is_forwarded(tmp_path):
    bad = [{"role": "user", "content": "hi"}, {"type": "function_call_output", "call_id": "nope", "output": "x"}]
    with proxied(tmp_path) as (srv, proxy, client):
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model="gpt-test", input=bad)
        with pytest.raises(openai.BadRequestError) as empty:
            client.responses.create(model="gpt-test", input=[])
        with pytest.raises(openai.BadRequestError) as shapeless:
            client.responses.create(model="gpt-test", input=[{"role": "user", "content": "hi"}],
                                    extra_body={"instructions": 5})
    assert sent(srv) == []
    body = refused.value.body
    assert body["type"] == "invalid_request_error" and "item 1" in body["message"] and "nope" in body["message"]
    assert "'instructions' must be a string" in shapeless.value.body["message"]
    assert "the input has no items" in empty.value.body["message"]


def test_a_codex_style_history_of_custom_tool_calls_is_fitted_and_given_back_whole(tmp_path):
    """Codex's ``apply_patch`` is a custom tool: its calls and outputs are items of their own."""
    items: list[Any] = [{"role": "developer", "content": "Sandbox: workspace-write."},
                        {"role": "user", "content": "Patch every module."}]
    with proxied(tmp_path) as (srv, proxy, client):
        for turn in range(12):
            items += [{"type": "reasoning", "id": f"rs_{turn}", "summary": [], "encrypted_content": f"enc{turn}"},
                      {"type": "custom_tool_call", "id": f"ctc_{turn}", "call_id": f"p{turn}", "name": "apply_patch",
                       "input": f"*** Begin Patch\n*** Update File: m{turn}.py\n" + "".join(
                           f"+    value_{k} = compute(turn={turn}, part={k})\n" for k in range(50))},
                      {"type": "custom_tool_call_output", "call_id": f"p{turn}", "output": output(turn, 4_000)}]
            said, _ = ask(client, items, stream=turn % 2 == 1, tools=(BASH, PATCH))
            items += said  # the client keeps the answer; its next turn's items follow it
        (stats,) = proxy.stats()["conversations"]
    bodies = sent(srv)
    assert check(srv) == 12 and stats["tokens"]["before"] > WINDOW > stats["tokens"]["after"]
    assert all(b["input"][:2] == items[:2] for b in bodies)  # the developer message and the task stay first
    last = bodies[-1]["input"]
    assert last[-3:] == items[-4:-1]  # the newest round as the client sent it, byte for byte
    kept = {i["call_id"] for i in last if i.get("type") == "custom_tool_call"}
    assert kept == {i["call_id"] for i in last if i.get("type") == "custom_tool_call_output"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(min_size=0, max_size=12), min_size=1, max_size=3),
       calls=st.lists(st.sampled_from(["recall", "Bash"]), max_size=3), cut=st.integers(0, 60))
def test_the_stream_filter_shows_every_item_but_recall_numbered_without_gaps(texts, calls, cut):
    """Whatever a segment holds, the client gets its items but the recall calls, output indexes
    0, 1, … and sequence numbers without a gap, and a closing response listing exactly those items."""
    from lossless.proxy.relay import SSEParser
    from lossless.proxy.responses import StreamFilter
    from lossless.testing.responses import response

    blocks = [{"type": "text", "text": t} for t in texts]
    blocks += [{"type": "tool_use", "id": f"call_{n}", "name": name, "input": {"handle": "h"}} for n, name in enumerate(calls)]
    answer = response({"input": "x"}, blocks, 1)
    raw = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events(answer))
    flt = StreamFilter(own_recall=True)
    parser = SSEParser()
    shown = [piece for chunk in (raw[:cut], raw[cut:]) for event in parser.feed(chunk) for piece in flt.feed(event)]
    shown += flt.final or flt.end_events()
    out = [event.data for event in SSEParser().feed(b"".join(shown))]
    kept = [i for i in answer["output"] if not (i["type"] == "function_call" and i["name"] == "recall")]
    assert [e["sequence_number"] for e in out] == list(range(len(out)))
    assert [e["output_index"] for e in out if e["type"] == "response.output_item.added"] == list(range(len(kept)))
    assert out[-1]["type"] == "response.completed" and out[-1]["response"]["output"] == kept
    assert flt.continue_with_recall == ("recall" in calls and "Bash" not in calls)
    assert [c[0] for c in flt.recall_calls()] == [f"call_{n}" for n, name in enumerate(calls) if name == "recall"]


def _parking_run(tmp_path, held: int) -> tuple[list[str], int, int]:
    """Conversation A for 8 turns, B for 3 (which parks A when ``held`` is small), A for 6 more
    past a compaction: what A's last requests forwarded, and how many were parked and restored."""
    with proxied(tmp_path, max_held_bytes=held) as (srv, proxy, client):
        def turn(items, name, n, chars):
            srv.enqueue([{"type": "tool_use", "id": f"call_{name}{n}", "name": "Bash", "input": {"command": "ls"}}])
            said, _ = ask(client, items, stream=n % 2 == 0)
            return [*items, *said, {"type": "function_call_output", "call_id": f"call_{name}{n}",
                                    "output": output(n, chars)}]

        a: list[Any] = [{"role": "user", "content": "Task A: survey the repository."}]
        for n in range(8):
            a = turn(a, "a", n, 60_000 if n == 3 else 4_000)
        b: list[Any] = [{"role": "user", "content": "Task B: something else entirely."}]
        for n in range(3):
            b = turn(b, "b", n, 4_000)
        start = len(srv.requests)
        for n in range(8, 14):
            a = turn(a, "a", n, 4_000)
        check(srv)
        return ([json.dumps(r.body, sort_keys=True) for r in srv.requests[start:]],
                proxy.conversations.parked, proxy.conversations.restored)


def test_a_parked_conversation_is_restored_and_forwards_the_same_bytes(tmp_path):
    kept, parked0, _ = _parking_run(tmp_path / "kept", held=1 << 30)
    sent, parked, restored = _parking_run(tmp_path / "parked", held=60_000)
    assert parked0 == 0 and parked >= 1 and restored >= 1
    assert sent == kept  # the same requests upstream: the cached prefix survives the restore


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_streamed"])
def test_the_openai_agents_sdk_runs_through_the_proxy_unchanged(tmp_path, stream):
    """The Agents SDK pointed at the proxy, no adapter: a run of tool calls far larger than the
    window completes, every request it made reached the server valid and within the window."""
    agents = pytest.importorskip("agents", reason="the OpenAI Agents SDK is not installed")
    import asyncio

    @agents.function_tool
    def read_part(n: int) -> str:
        """Read one part of the repository."""
        return output(n, 12_000)

    async def go(srv, proxy) -> Any:
        async with openai.AsyncOpenAI(base_url=proxy.base_url + "/v1", api_key=KEY, max_retries=0) as client:
            agent = agents.Agent(name="surveyor", instructions=INSTRUCTIONS, tools=[read_part],
                                 model=agents.OpenAIResponsesModel("gpt-test", client))
            for n in range(10):
                srv.enqueue([{"type": "tool_use", "id": f"call_{n}", "name": "read_part", "input": {"n": n}}])
            srv.enqueue("Surveyed all ten parts.")
            config = agents.RunConfig(tracing_disabled=True)
            if not stream:
                return await agents.Runner.run(agent, "Survey the repository.", run_config=config, max_turns=20)
            run = agents.Runner.run_streamed(agent, "Survey the repository.", run_config=config, max_turns=20)
            async for _ in run.stream_events():
                pass
            return run

    with proxied(tmp_path) as (srv, proxy, client):
        result = asyncio.run(go(srv, proxy))
        (stats,) = proxy.stats()["conversations"]
    assert result.final_output == "Surveyed all ten parts."
    assert check(srv) == 11 and stats["calls"] == 11
    assert stats["tokens"]["before"] > WINDOW > stats["tokens"]["after"]


def test_a_developer_item_for_a_system_prompt_is_counted_once_the_recall_tool_comes(tmp_path):
    """Codex sends its guide as the first ``developer`` item, not as ``instructions``.  Before: when
    the first compaction turned recall on, the proxy told the manager the request's system prompt
    was ``instructions`` alone, so the next estimate added the guide's ~4k tokens again and
    compacted on the very next request."""
    guide = "You are a coding agent. Follow the repository's conventions and keep changes small. " * 200
    items: list[Any] = [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": guide}]},
                        {"role": "user", "content": "List the ranges."}]
    from lossless.proxy.responses import recall_tool

    checked = []
    with proxied(tmp_path, window=32_000, verbose=True) as (srv, proxy, client):
        for n in range(14):  # each output is ~4k tokens, a fifth of the threshold
            srv.enqueue([{"type": "tool_use", "id": f"call_{n}", "name": "Bash", "input": {"command": "seq"}}])
            r = client.responses.create(model="gpt-test", input=items, tools=[BASH])
            said = [item.model_dump(mode="json", exclude_none=True) for item in r.output]
            items += [*said, {"type": "function_call_output", "call_id": f"call_{n}",
                              "output": "".join(f"{n}{k:05d}\n" for k in range(1_800))}]
            (conv,) = list(proxy.conversations)
            if conv.recall == "on" and not checked:  # the request that offered recall first: its usage is read
                cm = conv.manager                    # against the system prompt and tools it really had
                checked.append((cm.calibrator._overhead, cm.counter.count_system(conv.adapter.system)
                                + cm.counter.count_tools([BASH, recall_tool()])))
    lines = [line for line in proxy.log_lines if " responses messages " in line]  # once stopped: each follows its answer
    assert checked and checked[0][0] == checked[0][1] > 3_000, checked
    fired = [" stages - " not in line for line in lines]
    assert sum(fired) >= 2 and not any(a and b for a, b in zip(fired, fired[1:])), lines
    check(srv, 32_000)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with proxied(tmp_path_factory.mktemp("shared")) as running:
        yield running


TURN = st.fixed_dictionaries({
    "answer": st.sampled_from(["text", "bash", "recall", "recall+bash", "two bash"]),
    "output": st.sampled_from([0, 300, 4_000, 12_000, 30_000, 70_000]),
    "user": st.booleans(),
    "stream": st.booleans(),
})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(TURN, min_size=1, max_size=10), tag=st.uuids())
def test_any_conversation_through_the_door_is_valid_fits_and_never_shows_recall(shared, turns, tag):
    """Whatever the model answers (text, client calls, recall alone or beside a client call) and
    however large the outputs, streamed or not: every request the server gets is one the API
    accepts and leaves room for the answer, and the client never gets a call to ``recall``."""
    srv, proxy, client = shared
    start = len(srv.requests)
    items: list[Any] = [{"role": "user", "content": f"Task {tag}: survey the repository."}]
    for n, turn in enumerate(turns):
        handles = handles_in(srv.requests[-1].body["input"]) if len(srv.requests) > start else []
        kind = turn["answer"] if handles or "recall" not in turn["answer"] else "bash"
        recall = {"type": "tool_use", "id": f"call_r{n}_{tag.hex[:6]}", "name": "recall", "input": {"handle": handles[0] if handles else ""}}
        bash = [{"type": "tool_use", "id": f"call_b{n}_{k}_{tag.hex[:6]}", "name": "Bash", "input": {"command": "ls"}}
                for k in range(2 if kind == "two bash" else 1)]
        script = {"text": [{"type": "text", "text": f"Done {n}."}], "bash": bash, "two bash": bash,
                  "recall": [recall], "recall+bash": [recall, *bash]}[kind]
        event(f"answer: {kind}")
        srv.enqueue(script)
        if kind == "recall":
            srv.enqueue(f"Read it {n}.")
        said, _ = ask(client, items, stream=turn["stream"])
        assert not any(i.get("type") == "function_call" and i.get("name") == "recall" for i in said), said
        items += said
        calls = [i for i in said if i.get("type") == "function_call"]
        items += [{"type": "function_call_output", "call_id": c["call_id"], "output": output(n, turn["output"])}
                  for c in calls]
        if turn["user"] or not calls:
            items.append({"role": "user", "content": f"Go on {n}."})
    event(f"compacted: {any(handles_in(r.body['input']) for r in srv.requests[start:])}")
    for r in srv.requests[start:]:
        body = r.body
        assert problem(body) is None and problems_responses(body["input"]) == []
        size = estimate({k: body.get(k) for k in ("instructions", "tools", "input")})
        assert size + body["max_output_tokens"] <= WINDOW, size
