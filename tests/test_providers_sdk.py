"""The real anthropic and openai SDKs, through our adapters, against FakeServer on 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import sys
from typing import Any, Iterator

import pytest

pytest.importorskip("anthropic")
pytest.importorskip("openai")

from lossless.dialects.anthropic import to_anthropic  # noqa: E402
from lossless.errors import (  # noqa: E402
    ContextTooLong,
    Overloaded,
    ProviderConnectionError,
    ProviderHTTPError,
    RateLimited,
)
from lossless.messages import Message, Text, Thinking, ToolResult, ToolUse, assistant, user  # noqa: E402
from lossless.providers import AnthropicProvider, OpenAIProvider, Request, Response, RetryPolicy  # noqa: E402
from lossless.testing import SECTIONS, FakeServer  # noqa: E402
from lossless.testing.summaries import malformed_summary  # noqa: E402

SUMMARY_ASK = "Write a summary: <analysis> first, then <summary> with the nine sections."
TOOLS = ({"name": "Read", "description": "Read a file", "input_schema": {"type": "object",
                                                                         "properties": {"path": {"type": "string"}}}},)
HISTORY = (
    user("Fix the bug in src/app.py please."),
    Message(role="assistant", content=(ToolUse(id="toolu_1", name="Read", input={"path": "src/app.py"}),)),
    Message(role="user", content=(ToolResult(tool_use_id="toolu_1", content="print(1/0)"),)),
    assistant("It divides by zero; fixing."),
    user("Thanks, go on."),
)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as srv:
        yield srv


class Harness:
    """Builds providers of one API against the server, records sleeps, closes clients."""

    def __init__(self, api: str, server: FakeServer) -> None:
        self.api = api
        self.server = server
        self.sleeps: list[float] = []
        self._open: list[Any] = []

    def provider(self, *, attempts: int = 1, timeout: float = 10.0, **policy: Any) -> Any:
        retry = RetryPolicy(max_attempts=attempts, sleep=self.sleeps.append, jitter=0, **policy)
        if self.api == "anthropic":
            p: Any = AnthropicProvider("claude-test", api_key="test-key", base_url=self.server.base_url,
                                       retry=retry, timeout=timeout)
        else:
            p = OpenAIProvider("gpt-test", api_key="test-key", base_url=self.server.openai_base_url,
                               retry=retry, timeout=timeout)
        self._open.append(p)
        return p

    def close(self) -> None:
        for p in self._open:
            p.close()


@pytest.fixture(params=["anthropic", "openai"])
def harness(request, server) -> Iterator[Harness]:
    h = Harness(request.param, server)
    yield h
    h.close()


def drain(gen) -> tuple[list[str], Response]:
    deltas = []
    while True:
        try:
            deltas.append(next(gen))
        except StopIteration as stop:
            return deltas, stop.value


# -- plain calls -----------------------------------------------------------------
def test_complete_sends_the_wire_format_and_returns_neutral_values(harness, server):
    response = harness.provider().complete(Request(messages=HISTORY, system="Be brief.", tools=TOOLS, max_tokens=99))
    assert response.text == "Fake reply to: Thanks, go on."
    assert response.content == (Text(text="Fake reply to: Thanks, go on."),)
    assert response.stop_reason == "end_turn"
    assert response.model.endswith("-test")
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    (sent,) = server.requests
    body = sent.body
    if harness.api == "anthropic":
        assert sent.path == "/v1/messages"
        assert body["system"] == "Be brief."
        assert body["messages"] == to_anthropic(HISTORY)
        assert body["tools"] == list(TOOLS)
        assert body["max_tokens"] == 99
    else:
        assert sent.path == "/v1/chat/completions"
        assert body["messages"][0] == {"role": "system", "content": "Be brief."}
        assert [m["role"] for m in body["messages"][1:]] == ["user", "assistant", "tool", "assistant", "user"]
        assert body["tools"][0]["function"]["name"] == "Read"
        assert body["tools"][0]["function"]["parameters"] == TOOLS[0]["input_schema"]
        assert body["max_tokens"] == 99
        assert sent.headers["authorization"] == "Bearer test-key"


def test_request_extra_reaches_the_wire(harness, server):
    harness.provider().complete(Request(messages=(user("x"),), extra={"temperature": 0.25}))
    assert server.requests[0].body["temperature"] == 0.25


def test_anthropic_usage_reports_cache_writes_then_reads(server):
    system = ({"type": "text", "text": "You are a careful engineer. " * 50, "cache_control": {"type": "ephemeral"}},)
    with AnthropicProvider("claude-test", api_key="k", base_url=server.base_url, max_retries=0) as provider:
        first = provider.complete(Request(messages=(user("one"),), system=system)).usage
        second = provider.complete(Request(messages=(user("two"),), system=system)).usage
    assert first.cache_write_tokens > 300 and first.cache_read_tokens == 0
    assert second.cache_read_tokens == first.cache_write_tokens and second.cache_write_tokens == 0
    assert first.context_tokens == second.context_tokens  # same size, differently billed


def test_openai_usage_reports_cached_prompt_tokens(server):
    history = (user("context " * 400), assistant("ok"))
    with OpenAIProvider("gpt-test", base_url=server.openai_base_url, max_retries=0) as provider:
        first = provider.complete(Request(messages=history + (user("q1"),))).usage
        second = provider.complete(Request(messages=history + (user("q2"),))).usage
    assert first.cache_read_tokens == 0
    assert second.cache_read_tokens > 300
    assert second.context_tokens == first.context_tokens


def test_stream_yields_text_and_returns_the_full_response(harness, server):
    deltas, response = drain(harness.provider().stream(Request(messages=HISTORY)))
    assert len(deltas) > 1
    assert "".join(deltas) == response.text == "Fake reply to: Thanks, go on."
    assert response.usage.context_tokens > 0 and response.usage.output_tokens > 0
    assert server.requests[0].body["stream"] is True


TOOL_ANSWER = [{"type": "text", "text": "Let me look."},
               {"type": "tool_use", "id": "call_7", "name": "Read", "input": {"path": "src/app.py", "limit": 20}}]


@pytest.mark.parametrize("streamed", [False, True])
def test_tool_calls_come_back_as_neutral_tool_use(harness, server, streamed):
    server.enqueue(TOOL_ANSWER)
    provider = harness.provider()
    request = Request(messages=HISTORY, tools=TOOLS)
    if streamed:
        deltas, response = drain(provider.stream(request))
        assert "".join(deltas) == "Let me look."
    else:
        response = provider.complete(request)
    assert response.stop_reason == "tool_use"
    assert response.text == "Let me look."
    (use,) = [b for b in response.content if isinstance(b, ToolUse)]
    assert (use.id, use.name, dict(use.input)) == ("call_7", "Read", {"path": "src/app.py", "limit": 20})
    assert provider.complete(request).text == "Fake reply to: Thanks, go on."  # the queue is used up


def test_anthropic_stream_keeps_thinking_and_its_signature(server):
    server.enqueue([{"type": "thinking", "thinking": "Consider the options.", "signature": "sig-abc"},
                    {"type": "text", "text": "Done."}])
    with AnthropicProvider("claude-test", api_key="k", base_url=server.base_url) as provider:
        deltas, response = drain(provider.stream(Request(messages=(user("x"),))))
    assert deltas == ["Done."]
    assert response.content == (Thinking(thinking="Consider the options.", signature="sig-abc"), Text(text="Done."))


def test_count_tokens_uses_the_count_endpoint(server):
    request = Request(messages=HISTORY, system="sys", tools=TOOLS, extra={"temperature": 1})
    with AnthropicProvider("claude-test", api_key="k", base_url=server.base_url) as provider:
        n = provider.count_tokens(request)
        usage = provider.complete(request).usage
    assert n == usage.context_tokens > 0
    sent = server.requests[0]
    assert sent.path == "/v1/messages/count_tokens"
    assert "max_tokens" not in sent.body and "temperature" not in sent.body


def test_openai_has_no_count_endpoint(server):
    with OpenAIProvider("gpt-test", base_url=server.openai_base_url) as provider:
        with pytest.raises(NotImplementedError, match="token-count"):
            provider.count_tokens(Request(messages=(user("x"),)))


# -- faults ----------------------------------------------------------------------
def test_429_is_rate_limited_with_retry_after(harness, server):
    server.set_faults(fail_429=1, retry_after=2)
    with pytest.raises(RateLimited) as info:
        harness.provider().complete(Request(messages=(user("x"),)))
    assert info.value.status == 429 and info.value.retry_after == 2.0


def test_overload_is_overloaded_with_retry_after(harness, server):
    server.set_faults(fail_529=1, retry_after=0.5)
    with pytest.raises(Overloaded) as info:
        harness.provider().complete(Request(messages=(user("x"),)))
    assert info.value.status == (529 if harness.api == "anthropic" else 503)
    assert info.value.retry_after == 0.5


def test_500_is_an_http_error(harness, server):
    server.set_faults(fail_500=1)
    with pytest.raises(ProviderHTTPError) as info:
        harness.provider().complete(Request(messages=(user("x"),)))
    assert info.value.status == 500 and type(info.value) is ProviderHTTPError


@pytest.mark.parametrize(
    ("harness", "style"),
    # Local-server wordings exist on the OpenAI path only.
    [("anthropic", "native"), ("openai", "native"), ("openai", "llamacpp"), ("openai", "vllm"), ("openai", "ollama")],
    indirect=["harness"],
)
def test_prompt_too_long_is_context_too_long_with_numbers(harness, server, style):
    server.set_faults(max_prompt_tokens=200, too_long_style=style)
    provider = harness.provider(attempts=3)
    provider.complete(Request(messages=(user("short"),)))  # fits
    with pytest.raises(ContextTooLong) as info:
        provider.complete(Request(messages=(user("word " * 400),), max_tokens=50))
    error = info.value
    assert error.status == 400 and harness.sleeps == []  # never retried
    assert len(server.requests) == 2
    if harness.api == "anthropic":  # counting what does not fit still works
        assert provider.count_tokens(Request(messages=(user("word " * 400),))) > 400
    if style == "ollama":
        assert (error.tokens, error.limit) == (None, None)
    elif style == "vllm":
        assert error.limit == 200 and error.tokens > 250  # messages + completion
    else:
        assert error.limit == 200 and error.tokens > 400


def test_retries_then_success_honour_retry_after(harness, server):
    server.set_faults(fail_429=2, retry_after=3)
    response = harness.provider(attempts=3).complete(Request(messages=(user("x"),)))
    assert response.text == "Fake reply to: x"
    assert harness.sleeps == [3.0, 3.0]
    assert len(server.requests) == 3


def test_mixed_failures_follow_the_backoff_schedule(harness, server):
    server.set_faults(fail_529=1, fail_500=2, retry_after=2)
    harness.provider(attempts=4, base_delay=0.25).complete(Request(messages=(user("x"),)))
    assert harness.sleeps == [2.0, 0.5, 1.0]  # retry-after, then 0.25 * 2**1, 0.25 * 2**2


@pytest.mark.parametrize("fault", ["fail_429", "fail_529"])
def test_a_retry_after_over_the_maximum_wait_fails_fast_with_the_servers_value(harness, server, fault):
    server.set_faults(**{fault: 1}, retry_after=3600)
    with pytest.raises((RateLimited, Overloaded)) as info:
        harness.provider(attempts=3).complete(Request(messages=(user("x"),)))
    assert info.value.retry_after == 3600.0 and info.value.status in (429, 529, 503)
    assert str(info.value).startswith("provider asked to retry after 3600 s, over the 60 s maximum wait; ")
    assert harness.sleeps == [] and len(server.requests) == 1  # no wait, no second request


def test_a_retry_after_within_the_maximum_wait_is_waited(harness, server):
    server.set_faults(fail_429=1, retry_after=5)
    harness.provider(attempts=2, max_retry_after=5).complete(Request(messages=(user("x"),)))
    assert harness.sleeps == [5.0] and len(server.requests) == 2


def test_exhausted_retries_raise(harness, server):
    server.set_faults(fail_529=10)
    with pytest.raises(Overloaded):
        harness.provider(attempts=3).complete(Request(messages=(user("x"),)))
    assert len(server.requests) == 3 and len(harness.sleeps) == 2


def test_stream_opening_is_retried(harness, server):
    server.set_faults(fail_429=1, retry_after=1)
    deltas, response = drain(harness.provider(attempts=2).stream(Request(messages=(user("x"),))))
    assert "".join(deltas) == response.text and harness.sleeps == [1.0]


def test_broken_stream_is_a_connection_error_after_partial_text(harness, server):
    server.set_faults(broken_stream=True)
    got: list[str] = []
    with pytest.raises(ProviderConnectionError):
        for delta in harness.provider(attempts=3).stream(Request(messages=(user("tell me a long story"),))):
            got.append(delta)
    assert got and "".join(got) != "Fake reply to: tell me a long story"
    assert len(server.requests) == 1 and harness.sleeps == []  # text had arrived: not retried


def test_timeout_is_a_connection_error(harness, server):
    server.set_faults(slow=5)
    with pytest.raises(ProviderConnectionError):
        harness.provider(timeout=0.3).complete(Request(messages=(user("x"),)))


def test_refused_connection_is_a_connection_error(harness):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    retry = RetryPolicy(max_attempts=2, sleep=harness.sleeps.append)
    if harness.api == "anthropic":
        provider: Any = AnthropicProvider("m", api_key="k", base_url=f"http://127.0.0.1:{port}", retry=retry)
    else:
        provider = OpenAIProvider("m", api_key="k", base_url=f"http://127.0.0.1:{port}/v1", retry=retry)
    with provider, pytest.raises(ProviderConnectionError, match=str(port)):
        provider.complete(Request(messages=(user("x"),)))
    assert len(harness.sleeps) == 1


# -- summaries ---------------------------------------------------------------------
def test_summary_request_gets_the_nine_sections(harness):
    text = harness.provider().complete(Request(messages=HISTORY + (user(SUMMARY_ASK),))).text
    assert text.startswith("<analysis>") and text.endswith("</summary>")
    assert all(f"{i}. {name}:" in text for i, name in enumerate(SECTIONS, 1))
    assert "src/app.py" in text


@pytest.mark.parametrize(("mode", "expected"), [("malformed", malformed_summary([])), ("empty", "")])
def test_bad_summaries_pass_through_as_text(harness, server, mode, expected):
    server.set_faults(summary=mode)
    response = harness.provider().complete(Request(messages=HISTORY + (user(SUMMARY_ASK),)))
    assert response.text == expected  # validating it is the caller's job


def test_importing_providers_does_not_import_the_sdks():
    code = ("import sys, lossless.providers, lossless.testing; "
            "assert not {'anthropic', 'openai', 'httpx2'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)



# -- round trips found in review ------------------------------------------------------------------
SIGNED = [{"type": "thinking", "thinking": "Check the file first.", "signature": "EqQBCkYIBxgCKkD=="},
          {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"},
          {"type": "text", "text": "Reading it."},
          {"type": "tool_use", "id": "toolu_01A", "name": "Read", "input": {"path": "a.py", "n": [1, {"x": None}]},
           "caller": {"type": "direct"}}]


def answer(provider: Any, request: Request, streamed: bool) -> Response:
    return drain(provider.stream(request))[1] if streamed else provider.complete(request)


@pytest.mark.parametrize("streamed", [False, True])
def test_thinking_and_tool_use_come_back_byte_for_byte_on_the_next_request(server, streamed):
    """Signed thinking, redacted thinking and a tool_use (with Claude Code's ``caller``) go
    out on the next request exactly as the API sent them: the signature covers them."""
    server.enqueue(SIGNED)
    with AnthropicProvider("claude-test", api_key="k", base_url=server.base_url, max_retries=0) as provider:
        first = (user("Fix a.py"),)
        response = answer(provider, Request(messages=first), streamed)
        assert response.stop_reason == "tool_use"
        result = Message(role="user", content=(ToolResult(tool_use_id="toolu_01A", content="x = 1"),))
        provider.complete(Request(messages=(*first, Message(role="assistant", content=response.content), result)))
    assert server.requests[-1].body["messages"][1]["content"] == SIGNED


@pytest.mark.parametrize("streamed", [False, True])
def test_openai_tool_calls_round_trip(server, streamed):
    calls = [{"type": "text", "text": "Reading both."},
             {"type": "tool_use", "id": "call_1", "name": "Read", "input": {"path": "a.py"}},
             {"type": "tool_use", "id": "call_2", "name": "Grep", "input": {"pattern": "x", "n": [1, 2]}}]
    server.enqueue(calls)
    with OpenAIProvider("gpt-test", base_url=server.openai_base_url, max_retries=0) as provider:
        first = (user("Fix a.py"),)
        response = answer(provider, Request(messages=first), streamed)
        assert response.stop_reason == "tool_use"
        results = Message(role="user", content=(ToolResult(tool_use_id="call_1", content="a"),
                                                ToolResult(tool_use_id="call_2", content="b")))
        provider.complete(Request(messages=(*first, Message(role="assistant", content=response.content), results)))
    sent = server.requests[-1].body["messages"]
    assert sent[1]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "Read", "arguments": '{"path": "a.py"}'}},
        {"id": "call_2", "type": "function",
         "function": {"name": "Grep", "arguments": '{"pattern": "x", "n": [1, 2]}'}},
    ]
    assert [(m["role"], m.get("tool_call_id")) for m in sent[2:]] == [("tool", "call_1"), ("tool", "call_2")]


def test_caller_is_sent_and_tool_use_keys_the_api_does_not_know_are_not(server):
    """Claude Code writes ``caller`` on tool_use blocks; the Messages API takes it (SDK >= 2
    declares it), so it is sent.  A key the API does not declare would be a 400 ("Extra
    inputs are not permitted"): the adapter leaves it out of the request, the neutral
    message keeps it."""
    use = ToolUse(id="toolu_1", name="Read", input={"path": "a.py"},
                  extra={"caller": {"type": "direct"}, "origin": "some-proxy"})
    history = (user("go"), Message(role="assistant", content=(use,)),
               Message(role="user", content=(ToolResult(tool_use_id="toolu_1", content="ok"),)))
    with AnthropicProvider("claude-test", api_key="k", base_url=server.base_url, max_retries=0) as provider:
        assert provider.complete(Request(messages=history)).text == "Fake reply to: go"
        assert provider.count_tokens(Request(messages=history)) > 0
    for sent in server.requests:
        block = sent.body["messages"][1]["content"][0]
        assert block == {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.py"},
                         "caller": {"type": "direct"}}
    assert use.extra["origin"] == "some-proxy"


def test_a_stream_cut_at_max_tokens_inside_a_tool_call_is_not_a_crash(server):
    server.enqueue([{"type": "text", "text": "Writing."},
                    {"type": "tool_use", "id": "toolu_9", "name": "Write", "input": '{"path": "a.py", "conte'}])
    with AnthropicProvider("claude-test", api_key="k", base_url=server.base_url, max_retries=0) as provider:
        _, response = drain(provider.stream(Request(messages=(user("x"),))))
    (use,) = [b for b in response.content if isinstance(b, ToolUse)]
    assert dict(use.input) == {} and use.extra["lossless_partial_json"] == '{"path": "a.py", "conte'
    assert "lossless_partial_json" not in str(to_anthropic([Message(role="assistant", content=(use,))]))


@pytest.mark.parametrize("streamed", [False, True])
def test_an_answer_longer_than_max_tokens_stops_there(harness, streamed):
    response = answer(harness.provider(), Request(messages=HISTORY + (user(SUMMARY_ASK),), max_tokens=50), streamed)
    assert response.stop_reason == "max_tokens" and 0 < len(response.text) <= 200


def test_retry_after_as_an_http_date_is_honoured(harness, server):
    server.set_faults(fail_429=1, fail_529=1, retry_after=3, retry_after_date=True)
    harness.provider(attempts=3).complete(Request(messages=(user("x"),)))
    assert len(harness.sleeps) == 2 and all(2 < s <= 4 for s in harness.sleeps), harness.sleeps


def test_a_refused_request_is_not_retried(harness, server):
    orphan = (user("x"), assistant("ok"), Message(role="user", content=(ToolResult(tool_use_id="nope", content="r"),)))
    with pytest.raises(ProviderHTTPError) as info:
        harness.provider(attempts=3).complete(Request(messages=orphan))
    assert info.value.status == 400 and type(info.value) is ProviderHTTPError
    assert len(server.requests) == 1 and harness.sleeps == []
