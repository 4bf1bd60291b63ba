"""Collapse: oldest finished episodes into short summaries, recent ones verbatim."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import histories
from test_snip import (
    COUNTERS, Chars4, assert_thinking_untouched, assert_unchanged, assert_whole_rounds, decode, snapshot,
)

from lossless import markers, pipeline
from lossless.compaction import AutoCompactor, Collapser, LLMSummarizer, ReattachConfig, episodes
from lossless.config import ContextConfig
from lossless.errors import Overloaded
from lossless.messages import Message, Text, ToolResult, ToolUse, assistant, user
from lossless.rounds import validate
from lossless.stages.base import StageContext
from lossless.stages.microcompact import microcompact
from lossless.stages.persist import persist
from lossless.stages.snip import snip
from lossless.stages.summary import fallback_summary
from lossless.store import ArtifactStore
from lossless.testing import FakeProvider, build_summary

CFG = ContextConfig(window=16_000)  # threshold 10,800: collapse from 9,720 down to 7,560


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> ArtifactStore:
    return ArtifactStore(tmp_path_factory.mktemp("store"))


def ctx_for(store, trigger="auto", cfg=CFG, counter=None) -> StageContext:
    return StageContext(config=cfg, counter=counter or Chars4(), store=store, trigger=trigger)


def episode(n: int, rounds: int = 3, size: int = 2_200) -> list[Message]:
    msgs = [user(f"Task {n}: update module m{n}.")]
    for r in range(rounds):
        tid = f"t{n}_{r}"
        msgs.append(Message(role="assistant", content=(Text(text=f"Working on m{n}, step {r}."),
                                                      ToolUse(id=tid, name="Bash", input={"command": f"make {r}"}))))
        msgs.append(Message(role="user", content=(ToolResult(tool_use_id=tid, content="ok\n" * (size // 3)),)))
    msgs.append(assistant(f"Task {n} done."))
    return msgs


def session(n: int = 6, **kw) -> list[Message]:
    return [m for i in range(n) for m in episode(i, **kw)]


def collapser(fake, **kw) -> Collapser:
    return Collapser(LLMSummarizer(fake, counter=Chars4()), **kw)


def test_episodes_are_user_requests_and_the_rounds_serving_them():
    msgs = session(3)
    assert [(e.start, e.stop) for e in episodes(msgs)] == [(0, 8), (8, 16)]  # the newest is never listed
    assert [(e.start, e.stop) for e in episodes(msgs, keep=2)] == [(0, 8)]
    # A summary marker is a boundary that is never collapsed again; a snip placeholder is not a request.
    marker = Message(role="user", content=(Text(text=f'{markers.SUMMARY_OPEN} handle="x">…'),),
                     meta={"lossless": {"kind": "collapse", "handle": "x"}})
    snipped = user(f"{markers.SNIPPED_PREFIX} 4 earlier messages]")
    msgs = [marker, *episode(1)[:3], snipped, *episode(1)[3:], *episode(2)]
    assert [(e.start, e.stop) for e in episodes(msgs)] == [(1, 10)]  # the placeholder does not split episode 1
    msgs = [*episode(0), marker, *episode(1), *episode(2)]
    assert [(e.start, e.stop) for e in episodes(msgs)] == [(0, 8), (9, 17)]


def test_collapse_summarises_oldest_episodes_until_under_the_target(store):
    msgs = session()
    fake = FakeProvider()
    ctx = ctx_for(store)
    tokens = ctx.count(msgs)
    assert tokens > 0.9 * ctx.budget.threshold
    snap = snapshot(msgs)
    out, result = collapser(fake)(msgs, ctx, tokens)
    assert_unchanged(msgs, snap)
    validate(out)
    assert result.fired and result.tokens_after == ctx.count(out) <= 0.7 * ctx.budget.threshold
    assert result.boundary is None
    collapsed = [m for m in out if (m.marker or {}).get("kind") == "collapse"]
    assert len(collapsed) == len(result.handles) == len(fake.requests) >= 1
    # Oldest first, in place, each recalling its episode exactly; the rest verbatim.
    for i, (m, handle) in enumerate(zip(collapsed, result.handles)):
        assert out[i] is m and 'scope="episode"' in m.text and m.marker["handle"] == handle
        assert decode(store.get(handle)) == msgs[8 * i: 8 * i + 8]
    assert all(a is b for a, b in zip(out[len(collapsed):], msgs[8 * len(collapsed):]))
    # Each request is the conversation up to the end of the episode plus one instruction.
    first = fake.requests[0]
    assert first.messages[:-1] == tuple(msgs[:8]) and "from message 1 on" in first.messages[-1].text
    assert "Keep it short" in first.messages[-1].text
    second = fake.requests[1]
    assert second.messages[0] is out[0] and "from message 2 on" in second.messages[-1].text


def test_below_the_trigger_or_not_auto_nothing_happens(store):
    msgs = session(2)
    fake = FakeProvider()
    c = collapser(fake)
    ctx = ctx_for(store)
    out, result = c(msgs, ctx, ctx.count(msgs))
    assert out is msgs and not result.fired and "collapse trigger" in result.detail
    out, result = c(session(), ctx_for(store, "manual"), 20_000)
    assert not result.fired and "normal calls only" in result.detail and not fake.requests


def test_a_failed_call_stops_collapsing_and_keeps_that_episode(store):
    msgs = session()
    fake = FakeProvider([build_summary([("user", "Task 0")]), Overloaded("overloaded", status=529)])
    c = collapser(fake, target_fraction=0.2)
    ctx = ctx_for(store)
    out, result = c(msgs, ctx, ctx.count(msgs))
    validate(out)
    assert result.fired and len(result.handles) == 1 and "stopped at messages 1-8" in result.detail
    assert "Overloaded" in result.detail and c.failures == 0
    assert all(a is b for a, b in zip(out[1:], msgs[8:]))


def test_bad_summaries_count_towards_the_breaker(store):
    msgs = session()
    fake = FakeProvider(["", "<summary>1. Primary Request</summary>", RuntimeError("x")])
    c = collapser(fake)
    ctx = ctx_for(store)
    for expected in ("empty", "malformed", "RuntimeError"):
        out, result = c(msgs, ctx, ctx.count(msgs))
        assert out is msgs and not result.fired and expected in result.detail
    assert c.is_open
    out, result = c(msgs, ctx, ctx.count(msgs))
    assert not result.fired and "off for this session" in result.detail and len(fake.requests) == 3
    c.reset()
    assert not c.is_open


def test_the_whole_pipeline_with_collapse_and_auto_compact(store):
    fake = FakeProvider()
    summarizer = LLMSummarizer(fake, counter=Chars4())
    stages = (("persist", persist), ("snip", snip), ("microcompact", microcompact),
              ("collapse", Collapser(summarizer)),
              ("autocompact", AutoCompactor(summarizer, reattach=ReattachConfig(enabled=False))),
              ("summary", fallback_summary))
    msgs = session(8)
    ctx = ctx_for(store, cfg=ContextConfig(window=16_000, snip_trigger_fraction=1.5, micro_trigger_fraction=1.5))
    out, results = pipeline.run(msgs, ctx, ctx.count(msgs), stages)
    validate(out)
    fired = {r.stage for r in results if r.fired}
    assert fired == {"collapse"} and results[-1].tokens_after <= 0.7 * ctx.budget.threshold


@given(histories(max_rounds=30), st.sampled_from([ContextConfig(window=8_000), ContextConfig(window=16_000)]),
       st.sampled_from(COUNTERS))
def test_collapse_properties(store, messages, cfg, counter):
    ctx = ctx_for(store, cfg=cfg, counter=counter)
    tokens = ctx.count(messages)
    snap = snapshot(messages)
    out, result = Collapser(LLMSummarizer(FakeProvider(), counter=counter))(messages, ctx, tokens)
    assert_unchanged(messages, snap)
    validate(out)
    assert_whole_rounds(out)
    assert_thinking_untouched(messages, out)
    if not result.fired:
        assert out is messages
        return
    assert result.tokens_after == ctx.count(out) < tokens
    for handle in result.handles:
        assert decode(store.get(handle))
    # The newest episode is verbatim.
    last_request = max(i for i, m in enumerate(messages) if m.role == "user" and not m.tool_results and m.text.strip())
    newest = messages[last_request:]
    assert all(a is b for a, b in zip(out[len(out) - len(newest):], newest))
