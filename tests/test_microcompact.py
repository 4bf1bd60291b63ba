from __future__ import annotations

import copy
import dataclasses
from datetime import datetime, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import ContextManager, markers
from lossless.config import ContextConfig
from lossless.messages import Image, Message, Text, ToolResult, ToolUse, assistant, user
from lossless.rounds import validate
from lossless.stages.base import StageContext
from lossless.stages.microcompact import microcompact
from lossless.stages.persist import original_text
from lossless.store import ArtifactStore
from lossless.tokens import default_counter

from strategies import histories

NOW = 1_800_000_000.0


def make_ctx(store_root, config: ContextConfig | None = None, now: float | None = None, *, pin: bool = False) -> StageContext:
    """A stage context; unless ``pin``, snip's pinned head is the task alone, so the idle rule's
    choice of results is what a test sees (the pin has its own test)."""
    config = config or ContextConfig()
    if not pin:
        config = dataclasses.replace(config, pin_head_messages=1)
    return StageContext(config=config, counter=default_counter(), store=ArtifactStore(store_root), now=now)


def history(*rounds: tuple[str, int], ts: float | str | None = None) -> list[Message]:
    """One round per (tool, result size); the last assistant message gets ``ts``."""
    msgs = [user("go")]
    for i, (tool, size) in enumerate(rounds):
        call = ToolUse(id=f"t{i}", name=tool, input={})
        msgs += [assistant(call), Message(role="user", content=(ToolResult(tool_use_id=call.id, content=f"{i}" * size),))]
    msgs.append(assistant("done", **({"timestamp": ts} if ts is not None else {})))
    return msgs


def texts(messages):
    return [original_text(r) for m in messages for r in m.tool_results]


def cleared(messages):
    return [t.startswith(markers.CLEARED_PREFIX) for t in texts(messages)]


def _stamp(messages, ts):
    return [m.with_meta(timestamp=ts) if m.role == "assistant" else m for m in messages]


@given(messages=histories(), window=st.sampled_from([4_096, 16_000, 64_000, 200_000]),
       idle=st.booleans(), keep_reads=st.booleans())
def test_microcompact_properties(tmp_path_factory, messages, window, idle, keep_reads):
    config = ContextConfig(window=window, micro_keep_reads=keep_reads)
    ctx = make_ctx(tmp_path_factory.mktemp("store"), config, now=NOW if idle else None)
    if idle:
        messages = _stamp(messages, NOW - 2 * 3600)
    before = copy.deepcopy(messages)
    thinking = [b for m in messages for b in m.content if b.type in ("thinking", "redacted_thinking")]
    tokens = ctx.count(messages)

    out, res = microcompact(messages, ctx, tokens)

    validate(out)
    assert messages == before and all(a.content == b.content for a, b in zip(messages, before))
    out_thinking = [b for m in out for b in m.content if b.type in ("thinking", "redacted_thinking")]
    assert len(out_thinking) == len(thinking) and all(x is y for x, y in zip(out_thinking, thinking))
    assert len(out) == len(messages) and res.tokens_after == ctx.count(out)
    if not res.fired:
        assert out is messages
    else:
        assert res.handles and res.tokens_after < tokens
    names = {u.id: u.name for m in messages for u in m.tool_uses}
    for old, new in zip(messages, out):
        if new is old:
            continue
        assert new.role == "user" and new is not out[-1]
        for a, b in zip(old.content, new.content):
            if b is a:
                continue
            assert isinstance(b, ToolResult) and b.tool_use_id == a.tool_use_id
            text = original_text(b)
            assert text.startswith(markers.CLEARED_PREFIX) and names[a.tool_use_id] in text
            assert not (keep_reads and names[a.tool_use_id] in config.read_tools)
            (handle,) = set(markers.handles_in(text))
            assert handle in res.handles and ctx.store.get(handle) == original_text(a)
    # The most recent compactable calls are never cleared.
    keep = config.micro_idle_keep if idle else config.micro_keep
    recent = [r for m in out for r in m.tool_results if names[r.tool_use_id] in config.compactable_tools][-keep:]
    assert not any(original_text(r).startswith(markers.CLEARED_PREFIX) for r in recent)
    # Idempotent: the output is left alone (same list object).
    again, res2 = microcompact(out, ctx, res.tokens_after)
    assert again is out and not res2.fired


def test_keeps_three_most_recent_and_clears_all_older_at_once(tmp_path):
    cfg = ContextConfig(window=16_000)  # threshold ~11.5k; trigger ~6.9k; batch minimum 1,280 tokens
    ctx = make_ctx(tmp_path, cfg)
    msgs = history(*[("Read", 6_000)] * 6)
    tokens = ctx.count(msgs)
    assert tokens > 0.6 * ctx.budget.threshold
    out, res = microcompact(msgs, ctx, tokens)
    assert res.fired and cleared(out) == [True, True, True, False, False, False]
    assert "cleared 3 older tool results" in res.detail and "tokens" in res.detail
    assert res.tokens_after == ctx.count(out) and res.saved > 2_500
    assert all(out[i] is msgs[i] for i in (0, 1, 3, 5, 7, 8, 9, 10, 11, 12, 13))
    assert "Read result" in texts(out)[0] and ctx.store.get(res.handles[0]) == "0" * 6_000


def test_below_trigger_does_nothing(tmp_path):
    ctx = make_ctx(tmp_path, ContextConfig(window=200_000))
    msgs = history(*[("Read", 4_000)] * 6)
    out, res = microcompact(msgs, ctx, ctx.count(msgs))
    assert out is msgs and not res.fired and "trigger" in res.detail


def test_batch_minimum(tmp_path):
    cfg = ContextConfig(window=16_000, micro_min_batch_fraction=0.08, micro_trigger_fraction=0.6)
    ctx = make_ctx(tmp_path, cfg)
    minimum = cfg.micro_min_batch_fraction * cfg.window  # 1,280 tokens ≈ 5,100 characters
    small = history(*[("Bash", 1_000)] * 5 + [("Bash", 20_000)])  # 2 old results of 1k chars: ~500 tokens
    out, res = microcompact(small, ctx, 10_000)
    assert out is small and not res.fired and "batch too small" in res.detail
    big = history(*[("Bash", 3_000)] * 3 + [("Bash", 1_000)] * 3)  # 3 old results of 3k chars: ~2,250 tokens
    out, res = microcompact(big, ctx, 10_000)
    assert res.fired and cleared(out) == [True] * 3 + [False] * 3
    assert -(res.tokens_after - res.tokens_before) > minimum * 0.5


def test_idle_rule_keeps_five_whatever_the_batch(tmp_path):
    msgs = history(*[("Grep", 800)] * 8, ts="2026-01-01T10:00:00.000Z")
    at = 1_767_261_600.0  # 2026-01-01T10:00:00Z
    fresh = make_ctx(tmp_path, ContextConfig(), now=at + 59 * 60)
    out, res = microcompact(msgs, fresh, 1_000)
    assert out is msgs and not res.fired
    cold = make_ctx(tmp_path, ContextConfig(), now=at + 61 * 60)
    out, res = microcompact(msgs, cold, 1_000)
    assert res.fired and cleared(out) == [True] * 3 + [False] * 5 and "idle 61 min" in res.detail
    # By default the head snip pins (the task and the first two rounds of work) stays too.
    pinned, res_pinned = microcompact(msgs, make_ctx(tmp_path, ContextConfig(), now=at + 61 * 60, pin=True), 1_000)
    assert res_pinned.fired and cleared(pinned) == [False, False, True] + [False] * 5
    again, res2 = microcompact(out, cold, res.tokens_after)  # still idle: nothing left to clear
    assert again is out and not res2.fired
    # Unix timestamps work too; no timestamp or no ``now`` means no idle rule.
    msgs_unix = history(*[("Grep", 800)] * 8, ts=at)
    assert microcompact(msgs_unix, cold, 1_000)[1].fired
    assert not microcompact(history(*[("Grep", 800)] * 8), cold, 1_000)[1].fired
    assert not microcompact(msgs, make_ctx(tmp_path), 1_000)[1].fired


def test_keep_reads(tmp_path):
    rounds = [("Read", 4_000), ("Bash", 4_000), ("Read", 4_000), ("Grep", 4_000)] + [("Bash", 400)] * 3
    msgs = history(*rounds, ts=0.0)
    out, _ = microcompact(msgs, make_ctx(tmp_path, ContextConfig(micro_idle_keep=3), now=NOW), 0)
    assert cleared(out) == [True] * 4 + [False] * 3
    cfg = ContextConfig(micro_idle_keep=3, micro_keep_reads=True)
    out, _ = microcompact(msgs, make_ctx(tmp_path, cfg, now=NOW), 0)
    assert cleared(out) == [False, True, False, True] + [False] * 3


def test_never_clears_tiny_markers_non_compactable_or_last_message(tmp_path):
    ctx = make_ctx(tmp_path, ContextConfig(micro_keep=0, micro_idle_keep=0), now=NOW)
    persisted = markers.persisted(handle="sha256:" + "a" * 24, chars=99_999, lines=9, preview="p" * 500, tool="Read")
    msgs = history(("Read", 299), ("TodoWrite", 5_000), ("Read", 5_000), ("Read", 5_000), ts=0.0)
    msgs[4] = Message(role="user", content=(ToolResult(tool_use_id="t1", content="x" * 5_000),))
    msgs[6] = Message(role="user", content=(ToolResult(tool_use_id="t2", content=persisted),))
    msgs = _stamp(msgs[:-1], 0.0)  # the history ends with the newest results: the model has not seen them yet
    out, res = microcompact(msgs, ctx, 0)
    assert out is msgs and not res.fired and "no old tool result" in res.detail
    # ...while the same history answered by the model is cleared (the last result now seen).
    out, res = microcompact(_stamp([*msgs, assistant("ok")], 0.0), ctx, 0)
    assert cleared(out) == [False, False, False, True]


def test_images_stay_and_errors_are_cleared(tmp_path):
    img = Image(source={"type": "base64", "media_type": "image/png", "data": "AAAA"})
    msgs = history(("Read", 10), ("Bash", 10), ts=0.0)
    msgs[2] = Message(role="user", content=(ToolResult(tool_use_id="t0", content=(Text(text="a" * 900), img)),))
    msgs[4] = Message(role="user", content=(ToolResult(tool_use_id="t1", content="E" * 900, is_error=True),))
    ctx = make_ctx(tmp_path, ContextConfig(micro_idle_keep=0), now=NOW)
    out, res = microcompact(msgs, ctx, 0)
    first, second = out[2].tool_results[0], out[4].tool_results[0]
    assert first.content[1] is img and first.content[0].text.startswith(markers.CLEARED_PREFIX)
    assert second.is_error and second.content.startswith(markers.CLEARED_PREFIX)
    assert sorted(ctx.store.get(h) for h in res.handles) == ["E" * 900, "a" * 900]


@settings(deadline=None, max_examples=40)
@given(age_minutes=st.floats(61, 60 * 24 * 60), iso=st.booleans(), rounds=st.integers(8, 14),
       gaps=st.lists(st.floats(1, 59 * 60), min_size=4, max_size=8))
def test_old_timestamps_do_not_make_a_warm_cache_cold_on_every_call(tmp_path_factory, age_minutes, iso, rounds, gaps):
    """A recorded session replayed, or an agent whose timestamps are naive local time read as UTC: the
    last assistant message looks idle on every call.  The idle rule may clear once; after that the
    manager's own previous call, minutes ago, says the cache is warm, so it does not clear again on
    the next calls (it would change the cached prefix on every request)."""
    clock = [NOW]
    stamp = NOW - age_minutes * 60
    ts = datetime.fromtimestamp(stamp, timezone.utc).isoformat() if iso else stamp

    def grown(n):
        msgs = history(*[("Grep", 800)] * n)
        return [m.with_meta(timestamp=ts) if m.role == "assistant" else m for m in msgs]

    cm = ContextManager(window=200_000, store=str(tmp_path_factory.mktemp("store")), transcript=False,
                        clock=lambda: clock[0])
    first = cm.prepare(grown(rounds))
    assert [e.stage for e in first.events if e.fired] == ["microcompact"]  # idle, by the timestamps alone
    history_ = list(first.neutral)
    for k, gap in enumerate(gaps):
        clock[0] += gap
        extra = grown(rounds + k + 1)[-3:]  # one more round and the closing answer, as old as the rest
        history_ = history_[:-1] + extra
        view = cm.prepare(history_)
        assert not view.fired, (k, [e.detail for e in view.fired])
        history_ = list(view.neutral)
    # A real pause longer than the idle window: the cache is cold, and the rule fires again.
    clock[0] += 61 * 60
    history_ = history_[:-1] + grown(rounds + len(gaps) + 6)[-13:]
    assert [e.stage for e in cm.prepare(history_).fired] == ["microcompact"]
