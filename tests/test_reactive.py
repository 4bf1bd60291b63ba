"""Reactive compaction: after "prompt too long", make room well under the limit and retry once."""

from __future__ import annotations

from typing import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import histories
from test_snip import COUNTERS, Chars4, assert_unchanged, assert_whole_rounds, decode, snapshot

from lossless.compaction import LLMSummarizer, call_with_recovery, recover
from lossless.config import ContextConfig
from lossless.errors import ContextTooLong
from lossless.messages import Message, Text, ToolResult, ToolUse, assistant, user
from lossless.providers import Request
from lossless.rounds import group_rounds, validate
from lossless.stages.base import StageContext
from lossless.store import ArtifactStore
from lossless.testing import FakeProvider, FakeServer

CFG = ContextConfig(window=200_000)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> ArtifactStore:
    return ArtifactStore(tmp_path_factory.mktemp("store"))


def ctx_for(store, counter=None, cfg=CFG, **kw) -> StageContext:
    return StageContext(config=cfg, counter=counter or Chars4(), store=store, **kw)


def history(rounds: int = 20, size: int = 2_000) -> list[Message]:
    msgs = [user("Refactor the storage layer.")]
    for i in range(rounds):
        uses = (ToolUse(id=f"a{i}", name="Bash", input={"command": f"step {i}"}),
                ToolUse(id=f"b{i}", name="Read", input={"path": f"f{i}.py"}))
        msgs.append(Message(role="assistant", content=(Text(text=f"Step {i}."), *uses)))
        msgs.append(Message(role="user", content=tuple(ToolResult(tool_use_id=u.id, content="y" * size) for u in uses)))
    msgs.append(assistant("Halfway there."))
    msgs.append(user("Continue."))
    return msgs


@pytest.mark.parametrize("with_model", [True, False])
def test_recover_lands_well_under_the_limit_with_whole_rounds(store, with_model):
    msgs = history()
    ctx = ctx_for(store)
    tokens = ctx.count(msgs)
    error = ContextTooLong(f"prompt is too long: {tokens} tokens > 15000 maximum", tokens=tokens, limit=15_000)
    summarizer = LLMSummarizer(FakeProvider(), counter=Chars4()) if with_model else None
    snap = snapshot(msgs)
    out, result = recover(msgs, error, ctx, summarizer)
    assert_unchanged(msgs, snap)
    validate(out)
    assert_whole_rounds(out)
    assert result.fired and result.stage == "reactive" and result.boundary["trigger"] == "reactive"
    assert result.tokens_after == ctx.count(out) <= 0.75 * 15_000
    assert out[-1] is msgs[-1] and out[-2] is msgs[-2]  # the last rounds stay verbatim
    assert ("with the model" in result.detail) == with_model and "15,000" in result.detail
    covered = result.boundary["covered"]
    assert decode(store.get(result.handles[0])) == msgs[:covered]


def test_recover_converts_the_providers_count_to_ours(store):
    msgs = history()
    ctx = ctx_for(store)
    tokens = ctx.count(msgs)
    # The provider counts twice what we do: the target in our units is half its limit.
    error = ContextTooLong("too long", tokens=2 * tokens, limit=30_000)
    out, result = recover(msgs, error, ctx)
    assert result.fired and result.tokens_after <= 0.75 * 15_000


def test_recover_without_numbers_shrinks_below_the_current_size(store):
    msgs = history()
    ctx = ctx_for(store)
    tokens = ctx.count(msgs)
    out, result = recover(msgs, ContextTooLong("context length exceeded"), ctx)
    assert result.fired and result.tokens_after <= 0.75 * tokens and "no numbers given" in result.detail
    validate(out)


def test_a_failing_model_summary_falls_back_to_the_deterministic_one(store):
    msgs = history()
    ctx = ctx_for(store)
    error = ContextTooLong("too long", tokens=ctx.count(msgs), limit=15_000)
    out, result = recover(msgs, error, ctx, LLMSummarizer(FakeProvider([RuntimeError("down")]), counter=Chars4()))
    assert result.fired and "model summary failed (RuntimeError: down)" in result.detail
    assert out[0].text.startswith("<lossless-summary") and 'source="model"' not in out[0].text
    validate(out)


def test_nothing_removable_is_reported_not_faked(store):
    msgs = [user("Hello.")]
    ctx = ctx_for(store)
    out, result = recover(msgs, ContextTooLong("too long", tokens=30_000, limit=10_000), ctx)
    assert not result.fired and out == msgs and "nothing could be removed" in result.detail


@given(histories(max_rounds=30), st.sampled_from(COUNTERS), st.integers(2_000, 60_000), st.booleans())
def test_recover_properties(store, messages, counter, limit, with_model):
    ctx = ctx_for(store, counter)
    tokens = ctx.count(messages)
    snap = snapshot(messages)
    summarizer = LLMSummarizer(FakeProvider(), counter=counter) if with_model else None
    out, result = recover(messages, ContextTooLong("too long", tokens=tokens + 1, limit=limit), ctx, summarizer)
    assert_unchanged(messages, snap)
    validate(out)
    assert_whole_rounds(out)
    if result.fired:
        assert result.tokens_after < tokens
        for handle in result.handles:
            assert handle in ctx.store
        tail = [m for m in out if any(m is o for o in messages)]
        assert group_rounds(tail) == group_rounds(messages[len(messages) - len(tail):]) or not tail


# -- call_with_recovery, through the real SDKs ------------------------------------------------------

@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as srv:
        yield srv


def sdk_provider(api: str, server: FakeServer):
    pytest.importorskip(api)
    from lossless.providers import AnthropicProvider, OpenAIProvider, RetryPolicy

    retry = RetryPolicy(max_attempts=1)
    if api == "anthropic":
        return AnthropicProvider("claude-test", api_key="k", base_url=server.base_url, retry=retry)
    return OpenAIProvider("gpt-test", api_key="k", base_url=server.openai_base_url, retry=retry)


@pytest.mark.parametrize(("api", "style"), [("anthropic", "native"), ("openai", "native"), ("openai", "llamacpp"),
                                            ("openai", "vllm")])
def test_call_with_recovery_compacts_and_retries_once(server, store, api, style):
    server.set_faults(max_prompt_tokens=6_000, too_long_style=style)
    msgs = history(rounds=12, size=1_500)
    ctx = ctx_for(store)
    with sdk_provider(api, server) as provider:
        summarizer = LLMSummarizer(provider, counter=Chars4())
        got = call_with_recovery(provider, lambda m: Request(messages=tuple(m), max_tokens=500), msgs, ctx, summarizer)
    assert got.compaction is not None and got.compaction.fired
    assert got.response.text.startswith("Fake reply to: Continue.")
    validate(got.messages)
    assert got.messages[-1] is msgs[-1]
    normal = [r for r in server.requests if "<summary>" not in str(r.body["messages"][-1])]
    assert len(normal) == 2  # the failed call and the one retry


def test_call_with_recovery_passes_through_when_it_fits(server, store):
    msgs = history(rounds=2, size=100)
    with sdk_provider("anthropic", server) as provider:
        got = call_with_recovery(provider, lambda m: Request(messages=tuple(m)), msgs, ctx_for(store))
    assert got.compaction is None and got.messages == msgs and len(server.requests) == 1


def test_still_too_long_after_reactive_compaction_is_a_clear_error(server, store):
    server.set_faults(max_prompt_tokens=3_000)
    msgs = history(rounds=6, size=1_500)
    huge_system = "Rules. " * 3_000  # cannot be compacted: the retry fails again
    with sdk_provider("anthropic", server) as provider:
        with pytest.raises(ContextTooLong, match=r"still too long after reactive compaction: \d+ > 3000") as info:
            call_with_recovery(provider, lambda m: Request(messages=tuple(m), system=huge_system), msgs,
                               ctx_for(store, system=huge_system))
    assert info.value.limit == 3_000 and isinstance(info.value.__cause__, ContextTooLong)


def test_no_room_to_make_is_a_clear_error(store):
    fake = FakeProvider([ContextTooLong("prompt is too long: 90000 tokens > 50000 maximum", tokens=90_000,
                                        limit=50_000)])
    with pytest.raises(ContextTooLong, match="could not make room"):
        call_with_recovery(fake, lambda m: Request(messages=tuple(m)), [user("x" * 100)], ctx_for(store))
    assert len(fake.requests) == 1
