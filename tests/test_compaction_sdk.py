"""Compaction through the real anthropic and openai SDKs, against FakeServer: the cached prefix, retries,
prompt-too-long during compaction, bad summaries, the breaker."""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

pytest.importorskip("anthropic")
pytest.importorskip("openai")

from test_snip import snapshot, assert_unchanged  # noqa: E402

from lossless import pipeline  # noqa: E402
from lossless.compaction import AutoCompactor, LLMSummarizer, ReattachConfig, compact_now  # noqa: E402
from lossless.config import ContextConfig  # noqa: E402
from lossless.dialects.anthropic import to_anthropic  # noqa: E402
from lossless.messages import Message, Text, ToolResult, ToolUse, user  # noqa: E402
from lossless.providers import AnthropicProvider, OpenAIProvider, Request, RetryPolicy  # noqa: E402
from lossless.rounds import validate  # noqa: E402
from lossless.stages.base import StageContext  # noqa: E402
from lossless.stages.summary import fallback_summary  # noqa: E402
from lossless.store import ArtifactStore  # noqa: E402
from lossless.testing import FakeServer  # noqa: E402
from lossless.tokens import default_counter  # noqa: E402

SYSTEM = ({"type": "text", "text": "You are a careful coding agent. " * 20, "cache_control": {"type": "ephemeral"}},)
TOOLS = [{"name": "Read", "description": "Read a file",
          "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}]
CFG = ContextConfig(window=20_000)  # threshold 13,500; the summary request may use 15,000


def history(rounds: int = 8, lines: int = 115) -> list[Message]:
    msgs = [user("Please fix the parser in src/parse.py; keep the public API unchanged.")]
    for i in range(rounds):
        msgs.append(Message(role="assistant", content=(Text(text=f"Reading part {i}."),
                                                      ToolUse(id=f"toolu_{i:03d}", name="Read",
                                                              input={"file_path": f"src/part{i}.py"}))))
        body = "".join(f"def handler_{i}_{j}(value):  # branch {j}\n" for j in range(lines))
        msgs.append(Message(role="user", content=(ToolResult(tool_use_id=f"toolu_{i:03d}", content=body),)))
    msgs.append(Message(role="assistant", content=(Text(text="Found it: parse() drops the last token.",
                                                        cache_control={"type": "ephemeral"}),)))
    return msgs


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as srv:
        yield srv


class Providers:
    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.sleeps: list[float] = []
        self._open: list[Any] = []

    def make(self, api: str, attempts: int = 1) -> Any:
        retry = RetryPolicy(max_attempts=attempts, sleep=self.sleeps.append, jitter=0)
        if api == "anthropic":
            p: Any = AnthropicProvider("claude-test", api_key="k", base_url=self.server.base_url, retry=retry)
        else:
            p = OpenAIProvider("gpt-test", api_key="k", base_url=self.server.openai_base_url, retry=retry)
        self._open.append(p)
        return p

    def close(self) -> None:
        for p in self._open:
            p.close()


@pytest.fixture
def providers(server) -> Iterator[Providers]:
    p = Providers(server)
    yield p
    p.close()


@pytest.fixture
def store(tmp_path) -> ArtifactStore:
    return ArtifactStore(tmp_path)


def ctx_for(store, trigger="auto") -> StageContext:
    return StageContext(config=CFG, counter=default_counter(), store=store, trigger=trigger, system=SYSTEM,
                        tools=TOOLS)


def compactor(provider, **kw) -> AutoCompactor:
    return AutoCompactor(LLMSummarizer(provider), reattach=ReattachConfig(enabled=False), **kw)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=False, separators=(",", ":"))


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_summary_request_is_the_previous_request_plus_one_message(providers, server, store, api):
    msgs = history()
    ctx = ctx_for(store)
    tokens = ctx.count(msgs)
    assert CFG.budget.threshold < tokens < CFG.window - 5_000
    provider = providers.make(api)
    provider.complete(Request(messages=tuple(msgs), system=SYSTEM, tools=tuple(TOOLS), max_tokens=1_000))
    out, result = compactor(provider)(msgs, ctx, tokens)
    assert result.fired, result.detail
    validate(out)
    normal, summary = (r.body for r in server.requests)
    for key in ("system", "tools", "model"):
        assert dumps(summary.get(key)) == dumps(normal.get(key))
    n = len(normal["messages"])
    assert len(summary["messages"]) == n + 1
    assert dumps(summary["messages"][:n]) == dumps(normal["messages"])  # byte-identical prefix
    assert summary["messages"][-1]["role"] == "user" and "<summary>" in json.dumps(summary["messages"][-1])
    assert summary["max_tokens"] <= 20_000


def test_summary_request_reads_the_prompt_cache(providers, store):
    msgs = history()
    provider = providers.make("anthropic")
    provider.complete(Request(messages=tuple(msgs), system=SYSTEM, tools=tuple(TOOLS), max_tokens=1_000))
    result = LLMSummarizer(provider).summarize(msgs, system=SYSTEM, tools=TOOLS, mode="full", window=CFG.window)
    assert result.usage.cache_read_tokens > 0 and "Primary Request" in result.text


@pytest.mark.parametrize("api", ["anthropic", "openai"])
@pytest.mark.parametrize("fault", ["fail_429", "fail_529"])
def test_transient_errors_are_retried_then_compaction_succeeds(providers, server, store, api, fault):
    server.set_faults(**{fault: 2}, retry_after=0.5)
    msgs = history()
    ctx = ctx_for(store)
    out, result = compactor(providers.make(api, attempts=3))(msgs, ctx, ctx.count(msgs))
    assert result.fired and len(server.requests) == 3 and providers.sleeps == [0.5, 0.5]
    validate(out)


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_errors_beyond_the_retries_keep_the_history(providers, server, store, api):
    server.set_faults(fail_529=5, retry_after=0)
    msgs = history()
    snap = snapshot(msgs)
    ac = compactor(providers.make(api, attempts=2))
    ctx = ctx_for(store)
    out, result = ac(msgs, ctx, ctx.count(msgs))
    assert out is msgs and not result.fired and "Overloaded" in result.detail and ac.failures == 1
    assert_unchanged(msgs, snap)


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_prompt_too_long_during_compaction_drops_oldest_rounds(providers, server, store, api):
    msgs = history(rounds=10, lines=110)
    ctx = ctx_for(store)
    server.set_faults(max_prompt_tokens=7_000)
    out, result = compactor(providers.make(api), tail_fraction=0.1)(msgs, ctx, ctx.count(msgs))
    assert result.fired, result.detail
    validate(out)
    summary_requests = [r.body for r in server.requests]
    assert 2 <= len(summary_requests) <= 4
    sizes = [len(b["messages"]) for b in summary_requests]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < sizes[0]
    for body in summary_requests:
        first = next(m for m in body["messages"] if m["role"] != "system")
        assert first["role"] == "user"
    assert "did not fit the summary request" in out[0].text


@pytest.mark.parametrize("api", ["anthropic", "openai"])
@pytest.mark.parametrize("mode", ["empty", "malformed"])
def test_bad_summaries_never_replace_history(providers, server, store, api, mode):
    server.set_faults(summary=mode)
    msgs = history()
    ac = compactor(providers.make(api))
    ctx = ctx_for(store)
    out, result = ac(msgs, ctx, ctx.count(msgs))
    assert out is msgs and not result.fired and ac.failures == 1
    assert ("empty" if mode == "empty" else "malformed") in result.detail


def test_breaker_opens_fallback_takes_over_and_only_reset_closes_it(providers, server, store):
    server.set_faults(summary="empty")
    msgs = history()
    ac = compactor(providers.make("anthropic"))
    ctx = ctx_for(store)
    stages = (("autocompact", ac), ("summary", fallback_summary))
    for _ in range(3):
        out, (auto, fallback) = pipeline.run(msgs, ctx, ctx.count(msgs), stages)
        assert not auto.fired and fallback.fired
        validate(out)
    assert ac.is_open
    n = len(server.requests)
    out, (auto, fallback) = pipeline.run(msgs, ctx, ctx.count(msgs), stages)
    assert len(server.requests) == n and "circuit breaker open" in auto.detail and fallback.fired
    server.set_faults()  # the provider answers properly again
    out, result = compact_now(msgs, ctx, ac, instructions="Keep the parser API.")
    assert not result.fired and len(server.requests) == n  # the breaker holds for a manual compaction too
    ac.reset()
    out, result = compact_now(msgs, ctx, ac, instructions="Keep the parser API.")
    assert result.fired and not ac.is_open
    validate(out)
    assert "Keep the parser API." in json.dumps(server.requests[-1].body["messages"][-1])
    assert server.requests[-1].body["messages"][:-1] == json.loads(json.dumps(to_anthropic(msgs)))


# -- failure paths found in review (FakeServer now refuses what the real API refuses) --------------

@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_the_compact_tool_works_mid_turn(providers, server, store, api):
    """The model called ``compact``: its tool_use is not answered yet.  The summary request
    must still be one the API accepts, and the call stays last for the agent to answer."""
    msgs = history()
    call = Message(role="assistant", content=(Text(text="Compacting first."),
                                              ToolUse(id="toolu_compact", name="compact", input={})))
    msgs.append(user("Compact now, then continue."))
    msgs.append(call)
    out, result = compact_now(msgs, ctx_for(store, "manual"), compactor(providers.make(api)))
    assert result.fired, result.detail
    assert out[-1] is call
    answered = [*out, Message(role="user", content=(ToolResult(tool_use_id="toolu_compact", content="done"),))]
    validate(answered)
    providers.make(api).complete(Request(messages=tuple(answered), system=SYSTEM, tools=tuple(TOOLS)))
    assert server.requests[-1].body  # accepted: a 400 would have raised


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_summary_cut_off_by_max_tokens_keeps_the_history(providers, server, store, api):
    msgs = history()
    ac = AutoCompactor(LLMSummarizer(providers.make(api), max_output=100), reattach=ReattachConfig(enabled=False))
    ctx = ctx_for(store)
    out, result = ac(msgs, ctx, ctx.count(msgs))
    assert server.requests[-1].body.get("max_tokens") == 100
    assert out is msgs and not result.fired and "cut off at max_tokens" in result.detail and ac.failures == 1


def test_prompt_too_long_during_compaction_still_quotes_every_user_message(providers, server, store):
    msgs = history(rounds=10, lines=110)
    msgs[5:5] = [Message(role="assistant", content=(Text(text="Two parts read."),)),
                 user("Use tabs, not spaces, in every file you touch.")]
    server.set_faults(max_prompt_tokens=7_000)
    ctx = ctx_for(store)
    out, result = compactor(providers.make("anthropic"), tail_fraction=0.1)(msgs, ctx, ctx.count(msgs))
    assert result.fired, result.detail
    last = server.requests[-1].body["messages"]
    assert all("Use tabs" not in json.dumps(m) for m in last[:-1])  # its round was dropped to fit…
    assert '"Use tabs, not spaces, in every file you touch."' in last[-1]["content"][0]["text"]  # …quoted
