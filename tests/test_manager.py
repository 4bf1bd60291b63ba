from __future__ import annotations

import copy
import math
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import ContextManager, validate
from lossless.config import ContextConfig
from lossless.dialects.anthropic import from_anthropic, to_anthropic
from lossless.errors import InvalidRequest
from lossless.markers import handles_in
from lossless.messages import Message, Text, ToolResult, ToolUse, block_text
from lossless.rounds import group_rounds
from lossless.store import ArtifactStore
from lossless.transcript import read_entries
from strategies import histories


def rounds_of(history: list[Message]) -> list[list[Message]]:
    """Split a history into what arrives between two model calls."""
    return [history[r.start : r.stop] for r in group_rounds(history)]


def all_text(messages) -> str:
    return "\n".join(block_text(b) for m in messages for b in m.content)


def make_round(i: int, size: int) -> list[dict]:
    tid = f"toolu_{i:05d}"
    return [
        {"role": "assistant", "content": [{"type": "text", "text": f"step {i}"},
                                          {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": f"cat f{i}"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": f"line {i}\n" * size}]},
    ]


def test_dicts_in_dicts_out_and_unchanged_messages_are_the_callers_own(store_dir):
    cm = ContextManager(window=200_000, store=store_dir)
    history = [{"role": "user", "content": "hello"}, *make_round(1, 10)]
    view = cm.prepare(history, system="be brief")
    assert view.messages == history
    assert all(a is b for a, b in zip(view.messages, history))
    assert view.state.tokens > 0 and view.state.percent_left > 99 and not view.state.above_threshold
    assert [e.stage for e in view.events] == ["persist", "snip", "microcompact", "summary"] or view.events


def test_invalid_input_names_the_message_and_tool_id(store_dir):
    cm = ContextManager(window=200_000, store=store_dir)
    bad = [{"role": "user", "content": "go"},
           {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_x", "name": "Bash", "input": {}}]},
           {"role": "user", "content": "no result"}]
    with pytest.raises(InvalidRequest) as exc:
        cm.prepare(bad)
    assert exc.value.index == 1 and exc.value.tool_id == "toolu_x"
    assert "repair" in str(exc.value)


@pytest.mark.parametrize("adopt", [True, False])
def test_long_loop_stays_under_budget_valid_and_recallable(store_dir, adopt):
    cfg = ContextConfig(window=32_000)
    cm = ContextManager(config=cfg, store=store_dir, session_id="loop")
    mine = [{"role": "user", "content": "Keep the public API stable. Find the slow handler."}]
    sent = mine
    for i in range(120):
        new = make_round(i, 50 + (i * 37) % 900)
        mine = mine + new
        view = cm.prepare((sent + new) if adopt else mine)
        sent = view.messages
        validate(from_anthropic(view.messages))
        assert view.state.tokens < cfg.budget.threshold, (i, view.state)
        assert view.messages[0]["role"] == "user"
    # every handle in what was sent recalls content that was really in the history
    store = ArtifactStore(store_dir)
    results = {b["content"] for m in mine if isinstance(m["content"], list) for b in m["content"]
               if b["type"] == "tool_result"}
    handles = [h for m in from_anthropic(sent) for h in handles_in(all_text([m]))]
    assert handles
    for h in handles:
        original = store.get(h)
        if original in results:
            continue
        moved = json.loads(original)  # a snip or summary: the messages it replaced, as they were
        assert all(m in mine for m in moved if m.get("role") == "assistant")
    # the transcript holds every message exactly once, as it entered
    entries = read_entries(store_dir / "sessions" / "loop" / "transcript.jsonl").entries
    msgs = [e for e in entries if e.get("type") in ("user", "assistant")]
    assert len(msgs) == len(mine)
    assert [e["message"]["content"] for e in msgs][-1] == mine[-1]["content"]
    cm.close()


def test_both_ways_of_keeping_history_give_the_same_requests(store_dir, tmp_path):
    outs = []
    for adopt, root in ((True, store_dir), (False, tmp_path / "other")):
        cm = ContextManager(window=16_000, store=root, transcript=False)
        mine = [{"role": "user", "content": "task"}]
        sent, seq = mine, []
        for i in range(60):
            new = make_round(i, 40 + (i * 53) % 500)
            mine = mine + new
            view = cm.prepare((sent + new) if adopt else mine)
            sent = view.messages
            seq.append(json.dumps(view.messages, sort_keys=True))
        outs.append(seq)
    assert outs[0] == outs[1]


def test_prefix_is_byte_identical_between_compactions(store_dir):
    cm = ContextManager(window=64_000, store=store_dir, transcript=False)
    history = [{"role": "user", "content": "task"}]
    prev = None
    quiet = 0
    for i in range(150):
        history = history + make_round(i, 120)
        view = cm.prepare(history)
        cur = [json.dumps(m, sort_keys=True) for m in view.messages]
        if prev is not None and not view.fired:
            assert cur[: len(prev)] == prev
            quiet += 1
        prev = cur
    fired_turns = 150 - quiet
    assert quiet > 0 and fired_turns < 150 // 4  # batches: the prefix changes on a minority of turns


def test_observe_calibrates_the_next_estimate(store_dir):
    cm = ContextManager(window=200_000, store=store_dir, transcript=False)
    history = [{"role": "user", "content": "hello there"}]
    view = cm.prepare(history)
    cm.observe({"input_tokens": 10, "cache_creation_input_tokens": 5000, "cache_read_input_tokens": 0})
    history = view.messages + make_round(1, 5)
    nxt = cm.prepare(history)
    appended = sum(cm.counter.count_message(m) for m in nxt.neutral[1:])
    assert nxt.state.calibrated
    assert nxt.state.tokens == 5010 + appended


@given(st.integers(1, 15_000), st.integers(0, 3))
def test_a_report_under_half_of_what_was_sent_does_not_anchor_the_estimate(tmp_path_factory, reported, extra):
    """A provider that under-reports (one leaving cached tokens out) would otherwise make the next
    request look small and switch compaction off; a report at least half the raw count anchors, and
    so does one short of it by at most a twentieth of the window (a small request)."""
    cm = ContextManager(window=32_000, store=tmp_path_factory.mktemp("s"), transcript=False)
    view = cm.prepare([{"role": "user", "content": "hello there " * 2_000}] + [m for i in range(extra) for m in make_round(i, 200)])
    raw = sum(cm.counter.count_message(m) for m in view.neutral)
    cm.observe({"input_tokens": reported})
    nxt = cm.prepare(view.messages + make_round(9, 5))
    appended = sum(cm.counter.count_message(m) for m in nxt.neutral[len(view.neutral):])
    if reported >= raw / 2 or raw - reported <= 32_000 // 20:
        assert nxt.state.calibrated and nxt.state.tokens == reported + appended
    else:
        assert not nxt.state.calibrated and nxt.state.tokens == raw + appended


@settings(max_examples=25)
@given(histories(min_rounds=5, max_rounds=40), st.sampled_from([16_000, 32_000, 64_000]))
def test_live_pipeline_properties(tmp_path_factory, history, window):
    root = tmp_path_factory.mktemp("store")
    cfg = ContextConfig(window=window)
    cm = ContextManager(config=cfg, store=root, transcript=False)
    store = ArtifactStore(root)
    sent: list[Message] = []
    pieces = rounds_of(history)
    frozen = copy.deepcopy(history)
    for piece in pieces:
        view = cm.prepare(sent + piece)
        out = view.neutral
        validate(out)
        last_round_tokens = sum(cm.counter.count_message(m) for m in piece)
        if last_round_tokens < cfg.budget.threshold // 3:
            assert view.state.tokens <= cfg.budget.threshold
        for e in view.events:
            for h in e.handles:
                assert store.get(h)  # resolves
        sent = out
    assert history == frozen
    # a second run on an output already under budget changes nothing
    if view.state.tokens < cfg.budget.threshold * 0.5:
        again = cm.prepare(sent)
        assert again.neutral == sent and not again.fired


def test_neutral_messages_in_neutral_out(store_dir):
    cm = ContextManager(window=200_000, store=store_dir, transcript=False)
    h = [Message(role="user", content=(Text(text="hi"),)),
         Message(role="assistant", content=(ToolUse(id="t1", name="Bash", input={}),)),
         Message(role="user", content=(ToolResult(tool_use_id="t1", content="x"),))]
    view = cm.prepare(h)
    assert view.messages == h and all(isinstance(m, Message) for m in view.messages)
    assert to_anthropic(view.neutral)[0]["content"][0]["text"] == "hi"


@settings(max_examples=12, deadline=None)
@given(st.floats(0.9, 1.6), st.integers(0, 1_000))
def test_a_compaction_lands_in_its_band_in_the_providers_tokens(tmp_path_factory, ratio, seed):
    """A provider that counts ``ratio`` times lossless's estimate (Claude: 1.14-1.58x): the
    estimate is calibrated by its reports, and what a stage removes is counted in the same units —
    counted raw, the excess stayed behind and a snip at 1.4 landed near 42 % of the threshold."""
    import random

    rng = random.Random(seed)
    cm = ContextManager(window=64_000, store=tmp_path_factory.mktemp("s"), transcript=False)
    history: list = [{"role": "user", "content": "Fix the failing tests."}]
    landings = []
    for turn in range(200):  # 19-35 snips at any ratio
        history += make_round(turn, rng.choice([150, 300, 600]))
        view = cm.prepare(history)
        sent = math.ceil(ratio * sum(cm.counter.count_message(m) for m in view.neutral))  # the provider's count
        if any(e.fired and e.stage == "snip" for e in view.events):
            landings.append(sent / cm.budget.threshold)
        cm.observe({"input_tokens": sent})
        history = view.messages
    assert landings
    assert all(0.5 <= x <= 0.72 for x in landings), (ratio, seed, [round(x, 3) for x in landings])


@settings(max_examples=10, deadline=None)
@given(st.floats(0.55, 0.8), st.floats(0.05, 0.2), st.sampled_from([40, 80, 150]))
def test_a_report_in_the_providers_units_after_a_compaction_is_believed(tmp_path_factory, plain, dense, size):
    """A server whose tokenizer counts ``plain`` of lossless's estimate for ordinary text and far less
    for an account (hex handles, paths: llama.cpp's SmolLM2 at a 2k window reported 0.47 of the raw
    count for the request after its first snip).  Judged against the raw count, that report was not
    believed; the next request was then estimated from the stale report and compacted again, on the
    request right after.  Judged in the provider's units, it is believed, and compactions stay apart."""
    from lossless import account

    cm = ContextManager(window=4_096, store=tmp_path_factory.mktemp("s"), transcript=False)
    history: list = [{"role": "user", "content": "Fix the failing tests."}]
    fired = []
    for turn in range(80):
        history += make_round(turn, size)
        view = cm.prepare(history)
        if any(e.fired and e.stage in ("snip", "fallback_summary", "microcompact") for e in view.events):
            fired.append(turn)
        sent = sum(math.ceil((dense if account.is_account(m) else plain) * cm.counter.count_message(m))
                   for m in view.neutral)
        assert cm.observe({"input_tokens": sent}), (turn, sent)
        history = view.messages
    assert len(fired) >= 2 and all(b - a > 1 for a, b in zip(fired, fired[1:])), fired
