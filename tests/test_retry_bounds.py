"""Retries stay bounded end to end: one ``call()`` under a persistent 429/529 or no answer
sends at most the policy's ``max_attempts`` requests, side calls (memory extraction and
selection, session notes, collapse and auto-compact summaries) included; a retry-after over
the maximum wait fails fast with the server's value; a manual compact with the breaker
open asks no model.  Against the real SDKs and FakeServer, counting what the server got;
and by property over scripted fault sequences."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import ContextManager, validate
from lossless.config import ContextConfig
from lossless.errors import (
    ContextTooLong,
    Overloaded,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    RateLimited,
)
from lossless.memory import MemoryStore
from lossless.memory.extract import EXTRACT_SYSTEM
from lossless.memory.retrieval import SELECT_SYSTEM
from lossless.memory.session import NOTES_SYSTEM
from lossless.messages import Message, Text, ToolResult, ToolUse
from lossless.providers import AnthropicProvider, OpenAIProvider, Request, RetryPolicy, is_retryable, with_retries
from lossless.testing import FakeProvider, FakeServer
from lossless.testing.summaries import build_summary, turns_from_messages, wants_summary
from lossless.tokens import default_counter

pytest.importorskip("anthropic")
pytest.importorskip("openai")

CFG = ContextConfig(window=32_000, max_output=4_000, micro_trigger_fraction=5.0, snip_trigger_fraction=5.0)
TASK = "Fix the flaky test. Never touch the public API."


def rnd(i: int, size: int) -> list[Message]:
    tid = f"toolu_{i:05d}"
    return [Message(role="assistant", content=(Text(text=f"step {i}"),
                                               ToolUse(id=tid, name="Bash", input={"command": f"cat f{i}.py"}))),
            Message(role="user", content=(ToolResult(tool_use_id=tid, content=f"line {i} def f{i}(): pass\n" * size),))]


def long_history(tokens_over: int) -> list[Message]:
    """A history past ``tokens_over`` tokens that ends with a new user request."""
    history = [Message(role="user", content=(Text(text=TASK),))]
    i = 0
    while size(history) < tokens_over:
        history += rnd(i, 60)
        i += 1
    return history + [Message(role="user", content=(Text(text="Now run the tests with pytest -x."),))]


def size(messages: list[Message]) -> int:
    count = default_counter().count_message
    return sum(count(m) for m in messages)


def kind(body: Any) -> str:
    """What a request the server received was for, from its system prompt."""
    if body.get("system") is not None:
        system = body["system"] if isinstance(body["system"], str) else str(body["system"])
    else:
        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
    for name, prompt in (("extract", EXTRACT_SYSTEM), ("select", SELECT_SYSTEM), ("notes", NOTES_SYSTEM)):
        if prompt[:60] in system:
            return name
    return "chat" if "be brief" in system else "summary"


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """``fn()``, or a failure if it is still running after ``seconds`` (a guard, not a measurement)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test thread
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s: it waited instead of failing fast"
    if "error" in box:
        raise box["error"]
    return box["value"]


class Rig:
    """A manager with notes and memory over a real SDK client pointed at FakeServer."""

    def __init__(self, api: str, server: FakeServer, tmp_path, *, sleep: Callable[[float], None]) -> None:
        self.server = server
        retry = RetryPolicy(max_attempts=3, jitter=0, sleep=sleep)
        if api == "anthropic":
            self.client: Any = AnthropicProvider("claude-x", api_key="k", base_url=server.base_url, retry=retry)
        else:
            self.client = OpenAIProvider("gpt-x", api_key="k", base_url=server.openai_base_url, retry=retry)
        self.memory = MemoryStore(tmp_path / "memory")
        self.memory.add(name="test-runner", description="The user runs tests with pytest -x", type="user",
                        body="Use pytest -x.")
        self.cm = ContextManager(config=CFG, store=tmp_path, provider=self.client, memory=self.memory,
                                 session_id="s1")
        self.cm.extractor.debounce = 0  # each call's start extracts what the last one ended with

    def kinds(self) -> list[str]:
        return [kind(r.body) for r in self.server.requests]

    def close(self) -> None:
        self.cm.close()
        self.client.close()


@pytest.fixture(params=["anthropic", "openai"])
def api(request) -> str:
    return request.param


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as srv:
        yield srv


@pytest.mark.parametrize("fault", ["fail_429", "fail_529"])
def test_a_persistent_429_or_529_costs_one_call_at_most_three_requests_side_calls_included(api, server, tmp_path,
                                                                                           fault):
    sleeps: list[float] = []
    rig = Rig(api, server, tmp_path, sleep=sleeps.append)
    rig.cm.call([Message(role="user", content=(Text(text="Always use tabs, please."),))], system="be brief",
                max_tokens=100)  # healthy: its turn leaves an extraction pending
    server.clear()
    server.set_faults(**{fault: 1000}, retry_after=2)
    history = long_history(CFG.budget.threshold + 500)  # wants notes, memory selection, collapse, auto-compact
    with pytest.raises((RateLimited, Overloaded)):
        rig.cm.call(history, system="be brief", max_tokens=100)
    # the pending extraction was the call's first try; everything else waited; the agent's request had the rest
    assert rig.kinds() == ["extract", "chat", "chat"]
    assert sleeps == [2.0, 2.0]  # the server's retry-after before each of the agent's tries
    assert rig.cm.provider.skipped >= 1  # memory selection: skipped, the lexical ranker answered

    # The provider recovers.  Until it has answered the agent, side calls still wait; then the
    # extraction deferred above runs (it was not lost), and the next call selects memories again.
    server.clear()
    server.set_faults()
    response, view = rig.cm.call(history, system="be brief", max_tokens=100)
    assert response.text and view.state.tokens < CFG.budget.blocking
    validate(view.neutral)
    assert rig.kinds() == ["chat", "extract"]
    server.clear()
    rig.cm.call([*view.neutral, Message(role="assistant", content=response.content),
                 Message(role="user", content=(Text(text="And the lint?"),))], system="be brief", max_tokens=100)
    assert "select" in rig.kinds() and rig.kinds()[-1] == "chat"
    rig.close()


@pytest.mark.parametrize("fault", ["fail_429", "fail_529"])
def test_a_retry_after_over_the_maximum_wait_fails_the_call_fast_with_the_servers_value(api, server, tmp_path, fault):
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:  # really sleeps: the guard below is what stops a long wait
        sleeps.append(seconds)
        time.sleep(seconds)

    rig = Rig(api, server, tmp_path, sleep=sleep)
    server.set_faults(**{fault: 1000}, retry_after=3600)
    history = long_history(CFG.budget.threshold + 500)
    with pytest.raises((RateLimited, Overloaded)) as info:
        within(30, lambda: rig.cm.call(history, system="be brief", max_tokens=100))
    assert info.value.retry_after == 3600.0
    assert str(info.value).startswith("provider asked to retry after 3600 s, over the 60 s maximum wait; ")
    assert len(server.requests) == 1 and sleeps == []  # one try (a side call here), no wait, no second request
    rig.close()


def test_manual_compact_with_the_breaker_open_asks_no_model_and_uses_the_fallback(api, server, tmp_path):
    rig = Rig(api, server, tmp_path, sleep=lambda s: None)
    cm = rig.cm
    server.set_faults(summary="malformed")  # three bad summaries open the breaker
    history = [Message(role="user", content=(Text(text=TASK),))]
    for i in range(200):
        history = cm.prepare(history + rnd(i, 60), system="be brief").neutral
        if cm.compactor.is_open:
            break
    assert cm.compactor.is_open
    server.clear()
    view = cm.compact(history, system="be brief")
    assert server.requests == []  # not one model request
    assert view.fired and view.neutral[0].text.startswith("<lossless-summary")
    assert "built without a model" in view.neutral[0].text
    (event,) = [e for e in view.events if e.stage == "fallback_summary"]
    assert event.detail.startswith("circuit breaker open after 3 consecutive failures: the deterministic summary")
    validate(view.neutral)
    rig.close()


def test_an_outage_pauses_model_summaries_without_opening_their_breakers(api, server, tmp_path):
    rig = Rig(api, server, tmp_path, sleep=lambda s: None)
    cm, now = rig.cm, [0.0]
    cm.provider.health.clock = lambda: now[0]
    server.set_faults(fail_529=10_000, retry_after=0)
    history, fired = [Message(role="user", content=(Text(text=TASK),))], []
    for i in range(150):  # prepare only (the agent calls its model itself): full retries, then a pause
        view = cm.prepare(history + rnd(i, 60), system="be brief")
        history, fired = view.neutral, fired + [e.stage for e in view.fired]
    assert len(server.requests) == 3  # one side call (the notes), tried three times; then none
    assert fired.count("fallback_summary") >= 3  # the deterministic summary made room, again and again
    assert cm.compactor.failures == cm.collapser.failures == 0  # an outage is not a bad summary
    server.set_faults()
    now[0] += 61  # the cool-down has passed: summaries ask the model again
    for i in range(150, 210):
        view = cm.prepare(history + rnd(i, 60), system="be brief")
        history, fired = view.neutral, fired + [e.stage for e in view.fired]
    assert {"collapse", "autocompact"} & set(fired[fired.index("fallback_summary"):])
    rig.close()


# -- by property: any sequence of outcomes, request by request ------------------
OUTCOMES = ["ok", "ok", "429", "429-long", "529", "500", "conn", "400", "junk", "too-long"]
JUNK = "Error generating summary: upstream timeout"


def error_for(outcome: str) -> ProviderError | None:
    return {
        "429": RateLimited("rate limited (429)", status=429, retry_after=1.0),
        "429-long": RateLimited("rate limited (429)", status=429, retry_after=3600.0),
        "529": Overloaded("provider overloaded (529)", status=529),
        "500": ProviderHTTPError("provider returned 500", status=500),
        "conn": ProviderConnectionError("no answer from 127.0.0.1"),
        "400": ProviderHTTPError("provider returned 400", status=400),
        "too-long": ContextTooLong("prompt is too long: 40000 tokens > 30000 maximum", tokens=40_000, limit=30_000),
    }.get(outcome)


def good_answer(request: Request) -> str:
    if wants_summary(turns_from_messages(request.messages), request.purpose):
        return build_summary(turns_from_messages(request.messages))
    replies = {"memory-select": '{"selected": []}', "memory-extract": '{"operations": []}',
               "session-notes": "# Task\nFix the flaky test.\n# Current state\nrunning tests\n"}
    return replies.get(request.purpose, "done")


@settings(max_examples=25)
@given(script=st.lists(st.sampled_from(OUTCOMES), max_size=14), then=st.sampled_from(OUTCOMES))
def test_any_fault_sequence_keeps_retries_bounded_and_history_whole(tmp_path_factory, script, then):
    log: list[tuple[int, str]] = []  # (call number, outcome) per request, in order
    sleeps: list[float] = []
    now = [0]
    outcomes = list(script)

    def answer(request: Request) -> str:
        outcome = outcomes.pop(0) if outcomes else then
        log.append((now[0], outcome))
        if (error := error_for(outcome)) is not None:
            raise error
        return JUNK if outcome == "junk" else good_answer(request)

    tmp = tmp_path_factory.mktemp("bounds")
    policy = RetryPolicy(max_attempts=3, jitter=0, sleep=sleeps.append)
    memory = MemoryStore(tmp / "memory")
    memory.add(name="test-runner", description="The user runs tests with pytest -x", type="user", body="pytest -x")
    cm = ContextManager(config=CFG, store=tmp, transcript=False, memory=memory, session_id="s1",
                        provider=with_retries(FakeProvider(script=[answer] * 1000), policy))
    cm.extractor.debounce = 0
    history = long_history(CFG.budget.threshold + 500)
    for call in range(3):
        now[0] = call
        try:
            _, view = cm.call(history, system="be brief", max_tokens=100)
        except ProviderError:
            history = history + [Message(role="user", content=(Text(text=f"Try again ({call})."),))]
            continue
        validate(view.neutral)
        assert view.state.tokens < CFG.budget.blocking
        assert not any(JUNK in m.text for m in view.neutral)  # a failed summary never replaced history
        history = [*view.neutral, Message(role="assistant", content=(Text(text="done"),)),
                   Message(role="user", content=(Text(text=f"Next step {call}."),))]
    for call in range(3):
        outcomes_of_call = [o for c, o in log if c == call]
        run = longest = 0
        for i, outcome in enumerate(outcomes_of_call):
            error = error_for(outcome)
            run = run + 1 if error is not None and is_retryable(error) else 0
            longest = max(longest, run)
            if outcome == "429-long":  # the server asked for an hour: nothing more this call
                assert i == len(outcomes_of_call) - 1, outcomes_of_call
        assert longest <= policy.max_attempts, outcomes_of_call
    assert all(s <= policy.max_retry_after for s in sleeps)
    cm.close()
