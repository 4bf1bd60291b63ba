"""LLMSummarizer and AutoCompactor with FakeProvider: the request, PTL retries, every failure, the breaker."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import histories
from test_snip import (
    COUNTERS, Chars4, assert_thinking_untouched, assert_unchanged, assert_whole_rounds, decode, snapshot,
)

from lossless import markers, pipeline
from lossless.compaction import (
    COMPACT_TOOL, AutoCompactor, Hooks, LLMSummarizer, ReattachConfig, compact_instructions, compact_now,
)
from lossless.compaction.summarizer import OMITTED_NOTE, drop_oldest
from lossless.config import ContextConfig
from lossless.errors import CompactionError, ContextTooLong, Overloaded
from lossless.messages import Message, Text, Thinking, ToolResult, ToolUse, assistant, user
from lossless.providers import Response
from lossless.rounds import group_rounds, validate
from lossless.stages.base import StageContext
from lossless.account.archive import archive_json
from lossless.stages.summary import fallback_summary
from lossless.store import ArtifactStore
from lossless.testing import SECTIONS, FakeProvider, build_summary
from lossless.testing.summaries import malformed_summary

CFG = ContextConfig(window=16_000)  # threshold 10,800 with Chars4
SYSTEM = "You are a careful coding agent."
TOOLS = [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> ArtifactStore:
    return ArtifactStore(tmp_path_factory.mktemp("store"))


def history(rounds: int = 9, size: int = 4_800, *, path: str = "src/f{i}.py") -> list[Message]:
    msgs = [user("Please fix the bug in src/app.py and keep the public API unchanged.")]
    for i in range(rounds):
        tid = f"toolu_{i:03d}"
        msgs.append(Message(role="assistant", content=(
            Text(text=f"Reading file {i}."), ToolUse(id=tid, name="Read", input={"file_path": path.format(i=i)}))))
        msgs.append(Message(role="user", content=(ToolResult(tool_use_id=tid, content="x = 1\n" * (size // 6)),)))
    msgs.append(assistant("Done reading; the bug is in parse()."))
    return msgs


def ctx_for(store, cfg=CFG, trigger="auto", **kw) -> StageContext:
    return StageContext(config=cfg, counter=Chars4(), store=store, trigger=trigger, system=SYSTEM, tools=TOOLS, **kw)


def compactor(fake, **kw) -> AutoCompactor:
    kw.setdefault("reattach", ReattachConfig(enabled=False))
    return AutoCompactor(LLMSummarizer(fake, counter=Chars4()), **kw)


def summary_of(request) -> str:
    return build_summary([("user", "Fix src/app.py"), ("assistant", "Working on it.")])


# -- the summary request ---------------------------------------------------------------------

def test_summary_request_repeats_the_prefix_and_appends_one_instruction(store):
    msgs = history()
    fake = FakeProvider()
    ctx = ctx_for(store)
    out, result = compactor(fake)(msgs, ctx, ctx.count(msgs))
    assert result.fired
    (req,) = fake.requests
    assert req.purpose == "summary" and req.system == SYSTEM and list(req.tools) == TOOLS
    assert req.messages[:-1] == tuple(msgs) and all(a is b for a, b in zip(req.messages, msgs))
    last = req.messages[-1]
    assert last.role == "user" and "<summary>" in last.text and "up to and excluding message" in last.text
    assert 0 < req.max_tokens <= 20_000 and req.max_tokens <= CFG.window - ctx.count(msgs)


def test_prompt_too_long_drops_oldest_rounds_and_retries_at_most_three_times():
    msgs = history(rounds=8, size=600)
    too_long = ContextTooLong("prompt is too long: 9000 tokens > 5000 maximum", tokens=9_000, limit=5_000)
    fake = FakeProvider([too_long, too_long, summary_of])
    result = LLMSummarizer(fake, counter=Chars4()).summarize(msgs)
    assert result.calls == 3 and result.omitted > 0 and "Primary Request" in result.text
    sizes = [len(r.messages) for r in fake.requests]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1]
    for req in fake.requests:
        assert req.messages[0].role == "user"
        validate(req.messages[:-1])
    assert fake.requests[-1].messages[0] is msgs[0]  # the first request is pinned when small
    assert "left out of this request" in fake.requests[-1].messages[-1].text

    never = FakeProvider([too_long] * 10)
    with pytest.raises(ContextTooLong):
        LLMSummarizer(never, counter=Chars4()).summarize(msgs)
    assert len(never.requests) == 4  # the first try and three retries


def test_prompt_too_long_for_up_to_cuts_the_verbatim_part_first():
    msgs = history(rounds=6, size=600)
    fake = FakeProvider([ContextTooLong("too long"), summary_of])
    result = LLMSummarizer(fake, counter=Chars4()).summarize(msgs, mode="up_to", point=9)
    first, second = fake.requests
    assert second.messages[:-1] == first.messages[:9] and result.omitted == 0  # the cached prefix is kept
    assert "whole conversation" in second.messages[-1].text


def test_window_budget_trims_before_calling():
    msgs = history(rounds=10, size=1_200)
    fake = FakeProvider()
    LLMSummarizer(fake, counter=Chars4(), max_output=2_000).summarize(msgs, window=3_000)
    (req,) = fake.requests
    counter = Chars4()
    assert sum(counter.count_message(m) for m in req.messages) <= 3_000
    assert req.max_tokens <= 2_000 and req.messages[0].role == "user"


def test_a_tool_call_instead_of_a_summary_is_an_error():
    answer = Response(content=(ToolUse(id="t", name="Read", input={"file_path": "x"}),), stop_reason="tool_use")
    with pytest.raises(CompactionError, match="called a tool"):
        LLMSummarizer(FakeProvider([answer])).summarize(history(2, 60))


def test_drop_oldest_keeps_rounds_whole_and_the_first_message_a_user_message():
    msgs = history(rounds=10, size=600)
    counter = Chars4()
    out, dropped = drop_oldest(msgs, None, counter)
    assert dropped == 4 and out[0] is msgs[0] and out[1].text == OMITTED_NOTE
    validate(out)
    again, more = drop_oldest(out, 10**9, counter)  # as much as possible: the last round stays
    assert again[-1] is msgs[-1] and more > 0 and again[0].role == "user"
    validate(again)
    big_first = [user("x" * 40_000), *msgs[1:]]  # a huge first message is not pinned
    out, _ = drop_oldest(big_first, 1, counter)
    assert out[0].text == OMITTED_NOTE


# -- auto-compaction ---------------------------------------------------------------------------

def test_auto_compaction_replaces_the_head_with_one_summary_and_keeps_a_tail(store):
    msgs = history()
    ctx = ctx_for(store)
    tokens = ctx.count(msgs)
    out, result = compactor(FakeProvider())(msgs, ctx, tokens)
    validate(out)
    summary, tail = out[0], out[1:]
    (handle,) = result.handles
    assert summary.role == "user" and summary.marker == {"kind": "summary", "handle": handle}
    assert summary.text.startswith(markers.SUMMARY_OPEN) and summary.text.endswith(markers.SUMMARY_CLOSE)
    assert 'source="model"' in summary.text and "1. Primary Request and Intent" in summary.text
    assert "<analysis>" not in summary.text
    covered = len(msgs) - len(tail)
    assert all(a is b for a, b in zip(tail, msgs[covered:])) and tail
    assert decode(store.get(handle)) == msgs[:covered] and store.get(handle) == archive_json(msgs[:covered])
    assert result.boundary == {"trigger": "auto", "preTokens": tokens, "postTokens": result.tokens_after,
                               "covered": covered}
    assert result.tokens_after == ctx.count(out) < ctx.budget.threshold


def test_below_the_threshold_nothing_happens(store):
    msgs = history(rounds=2, size=60)
    fake = FakeProvider()
    ctx = ctx_for(store)
    out, result = compactor(fake)(msgs, ctx, ctx.count(msgs))
    assert out is msgs and not result.fired and "below the threshold" in result.detail and not fake.requests


def test_openai_system_messages_stay_first(store):
    msgs = [Message(role="system", content=(Text(text="sys"),)), *history()]
    ctx = ctx_for(store)
    out, result = compactor(FakeProvider())(msgs, ctx, ctx.count(msgs))
    assert result.fired and out[0] is msgs[0] and out[1].marker["kind"] == "summary"
    validate(out, "openai")


FAILURES = {
    "provider error": Overloaded("provider overloaded (529: Overloaded); retry later", status=529),
    "unexpected exception": RuntimeError("connection pool exhausted"),
    "empty": "",
    "malformed": malformed_summary([]),
    "bigger than the input": "<summary>\n" + "\n".join(f"{i}. {name}:\n" + "detail " * 2_000
                                                       for i, name in enumerate(SECTIONS, 1)) + "\n</summary>",
    "error text": "Error generating summary",
}


@pytest.mark.parametrize("answer", FAILURES.values(), ids=FAILURES.keys())
def test_a_failure_never_replaces_history(store, answer):
    msgs = history()
    snap = snapshot(msgs)
    ctx = ctx_for(store)
    ac = compactor(FakeProvider([answer]))
    out, result = ac(msgs, ctx, ctx.count(msgs))
    assert out is msgs and not result.fired and "history kept" in result.detail
    assert_unchanged(msgs, snap)
    assert ac.failures == 1 and not ac.is_open


def test_breaker_opens_after_three_failures_and_the_fallback_takes_over(store):
    msgs = history()
    fake = FakeProvider([""] * 3)
    ac = compactor(fake)
    ctx = ctx_for(store)
    tokens = ctx.count(msgs)
    stages = (("autocompact", ac), ("summary", fallback_summary))
    for n in range(3):
        out, (auto, fallback) = pipeline.run(msgs, ctx, tokens, stages)
        assert not auto.fired and fallback.fired and ac.failures == n + 1
    assert ac.is_open and "circuit breaker now open" in auto.detail
    calls = len(fake.requests)
    out, (auto, fallback) = pipeline.run(msgs, ctx, tokens, stages)
    assert len(fake.requests) == calls  # no more model calls
    assert not auto.fired and "circuit breaker open" in auto.detail and fallback.fired
    validate(out)
    # With the breaker open a manual compaction does not ask the model either (the
    # deterministic summary makes room instead); only reset() closes the breaker.
    calls = len(fake.requests)
    out, result = compact_now(msgs, ctx, ac, "keep the API")
    assert not result.fired and "circuit breaker open" in result.detail and len(fake.requests) == calls
    assert ac.is_open and ac.failures == 3
    ac.failures = 3
    ac.reset()
    assert not ac.is_open


def test_success_resets_the_failure_count(store):
    msgs = history()
    ac = compactor(FakeProvider(["", ""]))
    ctx = ctx_for(store)
    for _ in range(2):
        ac(msgs, ctx, ctx.count(msgs))
    assert ac.failures == 2
    _, result = ac(msgs, ctx, ctx.count(msgs))
    assert result.fired and ac.failures == 0


def test_no_compaction_loop_when_the_result_is_still_above_the_threshold(store):
    msgs = history(rounds=40, size=1_200)
    fake = FakeProvider()
    ac = compactor(fake, tail_fraction=0.99)  # a huge verbatim tail: the result stays above the threshold
    ctx = ctx_for(store)
    stages = (("autocompact", ac), ("summary", fallback_summary))
    out, (auto, fallback) = pipeline.run(msgs, ctx, ctx.count(msgs), stages)
    assert auto.fired and auto.tokens_after > ctx.budget.threshold and "still above the threshold" in auto.detail
    assert fallback.fired and fallback.tokens_after <= ctx.budget.threshold  # the fallback makes room this turn
    # Next turn: the context is above the threshold again by a little; auto-compact does not fire again.
    grown = [*msgs, user("one more thing")]
    calls = len(fake.requests)
    out2, result = ac(grown, ctx, auto.tokens_after + 100)
    assert out2 is grown and not result.fired and "not compacting again" in result.detail
    assert len(fake.requests) == calls and ac.failures == 0
    # Once back under the threshold the guard is cleared.
    ac(grown, ctx, 10)
    assert ac._guard is None


def test_hooks_add_instructions_and_see_every_result(store):
    seen = []
    hooks = Hooks(pre=(lambda messages, trigger: f"Preserve schema decisions ({trigger}).", lambda m, t: None),
                  post=(seen.append,))
    fake = FakeProvider(["", build_summary([("user", "x")])])
    ac = compactor(fake, hooks=hooks)
    msgs = history()
    ctx = ctx_for(store)
    ac(msgs, ctx, ctx.count(msgs))
    ac(msgs, ctx, ctx.count(msgs))
    assert [r.fired for r in seen] == [False, True]
    assert "Preserve schema decisions (auto)." in fake.requests[0].messages[-1].text


def test_compact_tool_definition():
    assert COMPACT_TOOL["name"] == "compact"
    assert COMPACT_TOOL["input_schema"]["properties"]["instructions"]["type"] == "string"
    json.dumps(COMPACT_TOOL)
    assert compact_instructions({"instructions": "  keep X "}) == "keep X"
    assert compact_instructions({}) is None and compact_instructions(None) is None


def test_compact_method_builds_its_own_context(tmp_path):
    ac = AutoCompactor(LLMSummarizer(FakeProvider(), counter=Chars4()), config=CFG, counter=Chars4(),
                       store=ArtifactStore(tmp_path), reattach=ReattachConfig(enabled=False))
    out, result = ac.compact(history(), instructions="keep it", system=SYSTEM, tools=TOOLS)
    assert result.fired and result.boundary["trigger"] == "manual"
    validate(out)


# -- re-attachment -----------------------------------------------------------------------------

def test_reattach_rereads_recent_files_and_instructions_from_disk(store, tmp_path):
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (project / "CLAUDE.md").write_text("Always run the tests with -q.\n")
    (project / "AGENTS.md").write_text(SYSTEM)  # already in the system prompt: not repeated
    for i in range(8):
        (project / "src" / f"f{i}.py").write_text(f"value_{i} = 'on disk'\n")
    (project / "src" / "f6.py").write_text("changed_after_the_read = True\n")
    (project / "src" / "f7.py").unlink()  # missing: skipped
    (tmp_path / "secret.txt").write_text("outside the project")
    msgs = history(rounds=10, size=4_800)
    outside = Message(role="assistant", content=(ToolUse(id="toolu_out", name="Read",
                                                         input={"file_path": str(tmp_path / "secret.txt")}),))
    msgs[1:1] = [outside, Message(role="user", content=(ToolResult(tool_use_id="toolu_out", content="s"),)),
                 assistant("ok")]
    cfg = ReattachConfig(root=project)
    ctx = ctx_for(store)
    out, result = compactor(FakeProvider(), reattach=cfg)(msgs, ctx, ctx.count(msgs))
    text = out[0].text
    assert result.fired and "re-attached 5 files and 1 instruction file:" in result.detail
    assert '<instructions path="CLAUDE.md">\nAlways run the tests with -q.' in text
    assert 'path="AGENTS.md"' not in text and "outside the project" not in text and '<file path="src/f7.py"' not in text
    assert "changed_after_the_read = True" in text  # read again from disk, not from the history
    attached = [f"src/f{i}.py" for i in range(10) if f'<file path="src/f{i}.py"' in text]
    assert len(attached) == 5
    assert result.tokens_after == ctx.count(out)
    validate(out)


def test_reattach_skips_files_still_in_the_tail_and_caps_each_file(store, tmp_path):
    (tmp_path / "big.py").write_text("line = 'abcdefgh'\n" * 5_000)
    (tmp_path / "same.py").write_text("print('same')\n")
    msgs = [user("Look at the code.")]
    for i, (name, body) in enumerate([("big.py", "old"), ("same.py", "old"), ("pad", "x = 1\n" * 3_000),
                                      ("pad", "x = 1\n" * 3_000), ("same.py", "     1→print('same')\n")]):
        msgs += [Message(role="assistant", content=(ToolUse(id=f"t{i}", name="Read", input={"path": name}),)),
                 Message(role="user", content=(ToolResult(tool_use_id=f"t{i}", content=body),))]
    msgs.append(assistant("ok"))
    cfg = ReattachConfig(root=tmp_path, max_tokens_per_file=500, instruction_files=())
    ctx = ctx_for(store, ContextConfig(window=12_000))
    out, result = compactor(FakeProvider(), reattach=cfg, tail_fraction=0.2)(msgs, ctx, ctx.count(msgs))
    text = out[0].text
    assert result.fired and out[-3].tool_uses[0].input == {"path": "same.py"}  # the re-read is in the tail
    assert '<file path="big.py" truncated="true">' in text and 'path="same.py"' not in text
    assert Chars4().count_text(text.split('<file path="big.py" truncated="true">')[1]) < 600


@pytest.mark.parametrize("window", [16_000, 32_000])
def test_reattach_takes_a_share_of_the_threshold_on_small_windows(store, tmp_path, window):
    """The seeds' 50,000-token budget is for 200k windows: on a small one the re-read files would
    fill the context right back up to the threshold, and the next turn would compact again."""
    from lossless.compaction.autocompact import REATTACH_FRACTION

    for i in range(9):
        (tmp_path / f"f{i}.py").write_text(f"value_{i} = 'a line of code on disk'\n" * 400)
    cfg = ContextConfig(window=window)
    ctx = ctx_for(store, cfg)
    msgs = history(rounds=9, size=window // 2, path="f{i}.py")
    tokens = ctx.count(msgs)
    out, result = compactor(FakeProvider(), reattach=ReattachConfig(root=tmp_path, instruction_files=()))(
        msgs, ctx, tokens)
    assert result.fired and "re-attached" in result.detail
    attached = out[0].text.split("<file path=", 1)
    assert len(attached) == 2  # some file came back...
    assert Chars4().count_text("<file path=" + attached[1]) <= REATTACH_FRACTION * cfg.budget.threshold + 50
    assert result.tokens_after < min(tokens, cfg.budget.threshold)  # ...within its share, never growing the context
    validate(out)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=st.integers(2, 9), size=st.integers(600, 6_000), lines=st.integers(5, 600),
       window=st.sampled_from([16_000, 32_000]), tail=st.sampled_from([0.1, 0.3, 0.5]))
def test_reattach_keeps_at_least_half_of_what_the_summary_freed(store, tmp_path, rounds, size, lines, window, tail):
    """Re-read files never give back more than half of a compaction's saving: with all of it allowed, a
    /compact of a short context re-read the file it had just summarised and saved 2 tokens of 8,764."""
    for i in range(rounds):
        (tmp_path / f"f{i}.py").write_text(f"value_{i} = 'a line of code on disk'\n" * lines)
    cfg = ContextConfig(window=window)
    msgs = history(rounds=rounds, size=size, path="f{i}.py")
    ctx = ctx_for(store, cfg, trigger="manual")
    tokens = ctx.count(msgs)
    bare = compactor(FakeProvider(), tail_fraction=tail)(msgs, ctx, tokens)[1]
    assume(bare.fired)  # a history too short for a summary to be smaller is kept as it is
    out, result = compactor(FakeProvider(), tail_fraction=tail,
                            reattach=ReattachConfig(root=tmp_path, instruction_files=()))(msgs, ctx, tokens)
    assert bare.fired and result.fired
    freed = tokens - bare.tokens_after
    assert result.tokens_after - bare.tokens_after <= freed // 2
    assert result.tokens_after == ctx.count(out)
    validate(out)


# -- properties ---------------------------------------------------------------------------------

PROP_CONFIGS = [ContextConfig(window=16_000), ContextConfig(window=8_000, tail_fraction=0.1),
                ContextConfig(window=32_000, tail_fraction=0.5)]


@given(histories(max_rounds=30), st.sampled_from(PROP_CONFIGS), st.sampled_from(["auto", "manual", "reactive"]),
       st.sampled_from(COUNTERS))
def test_compaction_properties(store, messages, cfg, trigger, counter):
    ctx = StageContext(config=cfg, counter=counter, store=store, trigger=trigger)
    tokens = ctx.count(messages)
    snap = snapshot(messages)
    ac = AutoCompactor(LLMSummarizer(FakeProvider(), counter=counter), reattach=ReattachConfig(enabled=False))
    out, result = ac(messages, ctx, tokens)
    assert_unchanged(messages, snap)
    validate(out)
    assert_whole_rounds(out)
    assert_thinking_untouched(messages, out)
    if not result.fired:
        assert out is messages and result.detail
        return
    summary, tail = out[0], out[1:]
    assert summary.role == "user" and summary.marker["kind"] == "summary"
    covered = len(messages) - len(tail)
    assert all(a is b for a, b in zip(tail, messages[covered:]))
    assert covered in {r.start for r in group_rounds(messages)} | {len(messages)}
    (handle,) = result.handles
    assert decode(store.get(handle)) == messages[:covered]
    assert result.tokens_after == ctx.count(out) < tokens
    assert result.boundary["covered"] == covered and result.boundary["trigger"] == trigger


def test_thinking_and_parallel_calls_in_the_tail_survive(store):
    msgs = history(rounds=9, size=4_800)
    msgs += [
        user("Now check both."),
        Message(role="assistant", content=(Thinking(thinking="two reads", signature="sig-1"),
                                           ToolUse(id="p1", name="Read", input={"path": "a"}),
                                           ToolUse(id="p2", name="Grep", input={"pattern": "b"}))),
        Message(role="user", content=(ToolResult(tool_use_id="p1", content="a"),
                                      ToolResult(tool_use_id="p2", content="[interrupted]", is_error=True))),
        assistant("Both checked."),
    ]
    ctx = ctx_for(store)
    out, result = compactor(FakeProvider())(msgs, ctx, ctx.count(msgs))
    assert result.fired
    validate(out)
    assert out[-3] is msgs[-3] and out[-3].content[0] is msgs[-3].content[0]


def test_rate_limits_are_retried_by_the_providers_policy(store):
    from lossless.errors import RateLimited
    from lossless.providers import RetryPolicy, with_retries

    sleeps: list[float] = []
    fake = FakeProvider([RateLimited("slow down", status=429, retry_after=2), Overloaded("busy", status=529)])
    provider = with_retries(fake, RetryPolicy(max_attempts=3, sleep=sleeps.append, jitter=0))
    ac = AutoCompactor(LLMSummarizer(provider, counter=Chars4()), reattach=ReattachConfig(enabled=False))
    msgs = history()
    ctx = ctx_for(store)
    out, result = ac(msgs, ctx, ctx.count(msgs))
    assert result.fired and len(fake.requests) == 3 and sleeps[0] == 2 and ac.failures == 0
    validate(out)


# -- failure paths found in review -------------------------------------------------------------

def test_a_pending_tool_call_stays_out_of_the_summary_request_and_last_in_the_result(store):
    """The agent's own ``compact`` call is not answered yet when it compacts: the summary
    request must not carry that unanswered tool_use (the API refuses it), and the call
    must stay last so the agent can answer it."""
    msgs = history()
    pending = Message(role="assistant", content=(ToolUse(id="toolu_compact", name="compact",
                                                         input={"instructions": "keep the API"}),))
    msgs.append(user("Now compact, please."))
    msgs.append(pending)
    fake = FakeProvider()
    out, result = compact_now(msgs, ctx_for(store), compactor(fake), instructions="keep the API")
    assert result.fired, result.detail
    (request,) = fake.requests
    assert pending not in request.messages
    validate(request.messages)  # every tool_use answered, no orphan
    assert out[-1] is pending and out[-2] is msgs[-2]
    validate([*out, Message(role="user", content=(ToolResult(tool_use_id="toolu_compact", content="done"),))])


def test_a_summary_cut_off_at_max_tokens_never_replaces_history(store):
    cut = build_summary([("user", "Fix src/app.py")]).split("8. Current Work")[0]  # seven sections, no tail
    answer = Response(content=(Text(text=cut),), stop_reason="max_tokens")
    msgs = history()
    snap = snapshot(msgs)
    ac = compactor(FakeProvider([answer]))
    ctx = ctx_for(store)
    out, result = ac(msgs, ctx, ctx.count(msgs))
    assert out is msgs and not result.fired and "cut off at max_tokens" in result.detail and ac.failures == 1
    assert_unchanged(msgs, snap)


def test_user_messages_dropped_to_fit_are_quoted_in_the_request():
    """"Prompt is too long" during compaction must not make the summary forget what the user said."""
    msgs = [user("Fix the parser. Never touch the public API, and always use pytest -q.")]
    for i in range(8):
        use = ToolUse(id=f"t{i}", name="Read", input={"file_path": f"f{i}"})
        msgs.append(Message(role="assistant", content=(use,)))
        msgs.append(Message(role="user", content=(ToolResult(tool_use_id=f"t{i}", content="y" * 2_400),)))
        if i == 1:
            msgs.append(assistant("Read two files."))
            msgs.append(user("Also: do not rename parse_file, other code imports it."))
    msgs.append(assistant("The bug is in parse()."))
    too_long = ContextTooLong("prompt is too long: 9000 tokens > 3000 maximum", tokens=9_000, limit=3_000)
    fake = FakeProvider([too_long, summary_of])
    result = LLMSummarizer(fake, counter=Chars4()).summarize(msgs)
    asked = fake.requests[-1]
    assert result.omitted > 0
    assert all(m.text != "Also: do not rename parse_file, other code imports it." for m in asked.messages)
    instruction = asked.messages[-1].text
    assert '"Also: do not rename parse_file, other code imports it."' in instruction
    assert "list them in section 6" in instruction
    assert asked.messages[0] is msgs[0]  # the pinned first request is in the request, not quoted again
    assert instruction.count("Never touch the public API") == 0


def test_quoted_user_messages_are_budgeted():
    from lossless.compaction.summarizer import CARRY_TOKENS

    summarizer = LLMSummarizer(FakeProvider(), counter=Chars4())
    quotes = summarizer._quotes([user("log line\n" * 5_000), *[user(f"instruction {i} " * 40) for i in range(100)]])
    assert quotes[0].endswith("[…]") and len(quotes) > 2
    assert sum(Chars4().count_text(q) for q in quotes) <= CARRY_TOKENS


def test_a_since_summary_quotes_only_dropped_messages_of_its_own_scope():
    msgs = [user("Old episode: set up CI."), assistant("On it."), user("Old request two: add a badge.")]
    for i in range(4):
        msgs.append(Message(role="assistant", content=(ToolUse(id=f"o{i}", name="Bash", input={"c": i}),)))
        msgs.append(Message(role="user", content=(ToolResult(tool_use_id=f"o{i}", content="z" * 2_000),)))
    msgs.append(assistant("CI is set up, badge added."))
    point = len(msgs)
    msgs.append(user("New episode: speed up the parser."))
    for i in range(3):
        msgs.append(Message(role="assistant", content=(ToolUse(id=f"n{i}", name="Read", input={"p": i}),)))
        msgs.append(Message(role="user", content=(ToolResult(tool_use_id=f"n{i}", content="w" * 400),)))
    fake = FakeProvider()
    LLMSummarizer(fake, counter=Chars4(), max_output=500).summarize(msgs, mode="since", point=point, window=2_000)
    sent = fake.requests[-1].messages
    assert all(m.text != "Old request two: add a badge." for m in sent)  # dropped to fit…
    assert "Old request two" not in sent[-1].text  # …but context before the point, not the episode's own
