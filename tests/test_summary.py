"""fallback_summary: a deterministic structured summary, a verbatim tail, everything recallable."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import histories
from test_snip import (
    COUNTERS, assert_thinking_untouched, assert_unchanged, assert_whole_rounds, decode, make_ctx, snapshot,
)

from lossless import markers
from lossless.config import ContextConfig
from lossless.messages import result_text, Message, Text, Thinking, ToolResult, ToolUse, assistant, user
from lossless.rounds import group_rounds, validate
from lossless.account.archive import archive_json
from lossless.stages.summary import fallback_summary
from lossless.store import ArtifactStore

CONFIGS = [
    ContextConfig(window=16_000),
    ContextConfig(window=8_000, tail_fraction=0.1, summary_user_chars=500),
    ContextConfig(window=32_000, tail_fraction=0.5),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> ArtifactStore:
    return ArtifactStore(tmp_path_factory.mktemp("store"))


@given(histories(max_rounds=40), st.sampled_from(CONFIGS), st.sampled_from(["auto", "manual", "reactive"]),
       st.sampled_from(COUNTERS))
def test_summary_properties(store, messages, cfg, trigger, counter):
    ctx = make_ctx(store, cfg, trigger, counter)
    tokens = ctx.count(messages)
    threshold = ctx.budget.threshold
    snap = snapshot(messages)
    out, result = fallback_summary(messages, ctx, tokens)
    assert_unchanged(messages, snap)
    validate(out)
    assert_whole_rounds(out)
    assert_thinking_untouched(messages, out)
    if not result.fired:
        assert out is messages and result.detail
        return

    assert result.tokens_after < tokens
    assert result.tokens_after == ctx.count(out)
    summary, tail = out[0], out[1:]
    assert summary.role == "user" and summary.text.startswith(markers.SUMMARY_OPEN)
    assert summary.text.endswith(markers.SUMMARY_CLOSE)
    # The tail is the input's own last messages, whole rounds.
    assert all(a is b for a, b in zip(tail, messages[len(messages) - len(tail):]))
    covered = len(messages) - len(tail)
    assert group_rounds(messages[covered:]) == group_rounds(tail) and (not tail or covered in
                                                                       {r.start for r in group_rounds(messages)})
    assert result.boundary == {"trigger": trigger, "preTokens": tokens, "postTokens": result.tokens_after,
                               "covered": covered}
    (handle,) = result.handles
    items = result.items
    assert all(h in store for h in items)  # each item's original, one recall away
    assert summary.marker == {"kind": "summary", "handle": handle}
    assert f'handle="{handle}"' in summary.text
    assert decode(store.get(handle)) == messages[:covered]
    assert store.get(handle) == archive_json(messages[:covered])
    # Under the threshold whenever the summary and the last round can fit together.
    last = group_rounds(messages)[-1]
    last_tokens = ctx.count(messages[last.start:last.stop])
    if last_tokens + 1_500 <= threshold:
        assert result.tokens_after <= threshold
    # Deterministic to the byte.
    again, _ = fallback_summary(messages, ctx, tokens)
    assert again == out and again[0].text == summary.text
    # Quiet on its own output once under the threshold.
    if result.tokens_after <= threshold:
        twice, second = fallback_summary(out, make_ctx(store, cfg, counter=counter), result.tokens_after)
        assert twice is out and not second.fired


# -- units ---------------------------------------------------------------------------------------

def _call(i: int, name: str, inp: dict, output: str, *, is_error: bool = False, text: str = "") -> list[Message]:
    use = ToolUse(id=f"toolu_{i:04d}", name=name, input=inp)
    blocks = (text, use) if text else (use,)
    return [assistant(*blocks), Message(role="user", content=(ToolResult(tool_use_id=use.id, content=output,
                                                                          is_error=is_error),))]


INSTRUCTION = "Refactor the parser.\n\n- Keep the public API unchanged.\n- Do NOT touch tests/legacy/."


def _session() -> list[Message]:
    big = "line of output\n" * 4_000
    return [
        user(INSTRUCTION),
        *_call(1, "Read", {"file_path": "src/parser.py"}, big),
        *_call(2, "Bash", {"command": "cat setup.cfg && sed -n '1,40p' src/lexer.py"}, big),
        *_call(3, "Edit", {"file_path": "src/parser.py", "old_string": "a", "new_string": "b"}, "ok"),
        *_call(4, "Write", {"file_path": "src/new_mod.py", "content": "x = 1"}, "ok"),
        *_call(5, "Bash", {"command": "python gen.py > build/out.txt 2>/dev/null"}, "done"),
        *_call(6, "Bash", {"command": "pytest -q"}, "<returncode>1</returncode>\n<output>\nFAILED test_parse\n</output>", is_error=True),
        *_call(7, "Bash", {"command": "ruff check ."}, "Exit code 2\nE501 line too long"),
        *_call(8, "Bash", {"command": "ls"}, "a b c"),
        user("Also use type hints everywhere, please."),
        *_call(9, "TodoWrite", {"todos": [
            {"content": "Split the tokenizer", "status": "completed", "activeForm": "Splitting"},
            {"content": "Fix test_parse", "status": "in_progress", "activeForm": "Fixing"},
            {"content": "Add type hints", "status": "pending", "activeForm": "Adding"},
        ]}, "Todos updated", text="I will track the work."),
        assistant("The parser is split; test_parse still fails on empty input."),
        *_call(10, "Read", {"file_path": "src/util.py"}, big),
        user("Go on."),
        *_call(11, "Bash", {"command": "pytest -q tests/test_parse.py"}, "1 passed"),
    ]


@pytest.fixture
def summarized(store):
    messages = _session()
    ctx = make_ctx(store)
    out, result = fallback_summary(messages, ctx, ctx.count(messages))
    assert result.fired
    validate(out)
    return messages, out, result


def test_below_threshold_returns_the_same_list(store):
    messages = [user("hi"), assistant("hello")]
    out, result = fallback_summary(messages, make_ctx(store), 10)
    assert out is messages and not result.fired


def test_quotes_user_instructions_verbatim(summarized):
    _, out, _ = summarized
    text = out[0].text
    assert INSTRUCTION in text
    assert "Also use type hints everywhere, please." in text
    assert text.index("Refactor the parser") < text.index("Also use type hints")  # oldest first


def test_lists_files_commands_errors_todos(summarized):
    _, out, _ = summarized
    text = out[0].text
    section = lambda header: text.split(header, 1)[1].split("\n## ", 1)[0]  # noqa: E731
    files = section("## Files")
    read = next(line for line in files.splitlines() if line.startswith("- read"))
    for path in ("src/util.py", "setup.cfg", "src/lexer.py"):
        assert path in read
    modified = next(line for line in files.splitlines() if line.startswith("- modified"))
    for path in ("src/parser.py", "src/new_mod.py", "build/out.txt"):
        assert path in modified
    assert "/dev/null" not in modified
    calls = section("## Tool calls")
    assert "- Bash `pytest -q` → exit 1 — FAILED test_parse" in calls
    assert "- Bash `ruff check .` → exit 2 — E501 line too long" in calls
    assert "- Bash `ls` → ok" in calls
    assert "- Read src/parser.py → ok" in calls and "- Edit src/parser.py → ok" in calls
    todos = section("## Open todos")
    assert "- [in_progress] Fix test_parse" in todos and "- [pending] Add type hints" in todos
    assert "Split the tokenizer" not in todos
    assert "test_parse still fails on empty input" in section("## Assistant conclusions")


def test_a_long_items_call_line_names_a_handle_to_its_output_and_a_short_ones_does_not(store, summarized):
    """One handle per output worth a recall of its own (account.ITEM_HANDLE_CHARS and up): one
    recall, the original itself; a short output's line has none (the range's handle holds it)."""
    from lossless.account import ITEM_HANDLE_CHARS

    messages, out, _ = summarized
    lines = [line for line in out[0].text.splitlines() if line.startswith("- ") and " → " in line]
    outputs = {result_text(r) for m in messages for r in m.tool_results}
    assert len(lines) == sum(len(m.tool_results) for m in messages[: -2])
    with_handle = [line for line in lines if " · sha256:" in line]
    assert with_handle
    for line in with_handle:
        handle = line.rsplit(" · ", 1)[1]
        assert store.get(handle) in outputs and len(store.get(handle)) >= ITEM_HANDLE_CHARS
    short = {o for o in outputs if len(o) < ITEM_HANDLE_CHARS}
    assert short and len(with_handle) < len(lines)  # the short ones' lines name none


def test_tail_is_verbatim_and_recall_gives_everything_back(store, summarized):
    messages, out, result = summarized
    assert out[-1] is messages[-1]
    covered = result.boundary["covered"]
    assert out[1:] == messages[covered:]
    assert decode(store.get(result.handles[0])) == messages[:covered]
    assert result.boundary["trigger"] == "auto" and result.boundary["postTokens"] == result.tokens_after


def test_first_and_newest_user_messages_kept_with_a_note(store):
    cfg = ContextConfig(window=16_000, summary_user_chars=300)
    messages = []
    for i in range(12):
        messages.append(user(f"instruction number {i:02d} " + "z" * 40))
        messages += _call(i, "Read", {"file_path": f"f{i}"}, "r" * 6_000)
    ctx = make_ctx(store, cfg)
    out, result = fallback_summary(messages, ctx, ctx.count(messages))
    assert result.fired
    text = out[0].text
    assert "instruction number 00" in text  # the task as first stated is never dropped
    kept = [i for i in range(1, 12) if f"instruction number {i:02d}" in text]
    assert kept and kept == list(range(kept[0], kept[-1] + 1))  # a contiguous newest run
    assert f"[{kept[0] - 1} earlier user messages not shown — recall sha256:" in text


def test_an_earlier_summary_is_carried_forward(store):
    ctx = make_ctx(store)
    first, r1 = fallback_summary(_session(), ctx, ctx.count(_session()))
    grown = list(first)
    for i in range(20, 40):
        grown += _call(i, "Read", {"file_path": f"more{i}.py"}, "q" * 4_000)
    grown += [user("Now write the docs.")]
    second, r2 = fallback_summary(grown, make_ctx(store, trigger="manual"), ctx.count(grown))
    assert r2.fired
    text = second[0].text
    assert INSTRUCTION in text and "Also use type hints everywhere" in text
    assert "- [pending] Add type hints" in text and "src/new_mod.py" in text
    assert text.count(markers.SUMMARY_OPEN) == 1
    # Flat: the first range is listed in context (one recall), never archived inside the second.
    assert r1.handles[0] in text and markers.SUMMARY_OPEN not in store.get(r2.handles[0])
    validate(second)


def test_last_round_over_the_tail_budget_is_still_kept(store):
    messages = [user("task")]
    for i in range(4):
        messages += _call(i, "Read", {"file_path": f"f{i}"}, "r" * 14_000)
    ctx = make_ctx(store)  # threshold 10,800; tail budget 2,700; one round is ~3,500
    out, result = fallback_summary(messages, ctx, ctx.count(messages))
    assert result.fired and out[-2:] == messages[-2:] and result.tokens_after <= ctx.budget.threshold


def test_a_last_round_over_the_budget_leaves_an_empty_tail(store):
    messages = [user("task"), *_call(1, "Read", {"file_path": "a"}, "a" * 60_000)]
    ctx = make_ctx(store)
    out, result = fallback_summary(messages, ctx, ctx.count(messages))
    assert result.fired and len(out) == 1 and out[0].role == "user"
    validate(out)


def test_not_smaller_does_not_fire(store):
    messages = [user("hi"), assistant("hello"), user("more")]
    out, result = fallback_summary(messages, make_ctx(store, trigger="manual"), 100)
    assert out is messages and not result.fired and "not be smaller" in result.detail


def test_thinking_in_the_tail_is_the_same_object(store):
    think = Thinking(thinking="plan", signature="sig")
    use = ToolUse(id="t1", name="Read", input={"file_path": "x"})
    messages = [user("task"), *_call(0, "Read", {"file_path": "big"}, "b" * 60_000),
                Message(role="assistant", content=(think, use)),
                Message(role="user", content=(ToolResult(tool_use_id="t1", content="ok"),))]
    ctx = make_ctx(store)
    out, result = fallback_summary(messages, ctx, ctx.count(messages))
    assert result.fired and out[-2].content[0] is think
    validate(out)


def test_openai_system_messages_stay_first_and_are_archived(store):
    system = Message(role="system", content=(Text(text="You are terse."),))
    note = Message(role="system", content=(Text(text="Reminder: tests live in tests/."),))
    messages = [system, user("task"), *_call(1, "Read", {"file_path": "a"}, "a" * 30_000), note,
                *_call(2, "Read", {"file_path": "b"}, "b" * 30_000), user("next")]
    ctx = make_ctx(store)
    out, result = fallback_summary(messages, ctx, ctx.count(messages))
    assert result.fired and out[0] is system and out[1].marker["kind"] == "summary"
    validate(out, "openai")
    archived = json.loads(store.get(result.handles[0]))
    assert {"role": "system", "content": [{"type": "text", "text": "Reminder: tests live in tests/."}]} in archived


def test_a_model_summary_is_carried_forward_by_the_fallback(store):
    from lossless.compaction.autocompact import summary_message

    model = summary_message(handle="sha256:" + "a" * 24, covered=40, tokens=30_000,
                            summary="1. Primary Request and Intent: port the parser to Rust; keep the CLI flags.")
    cfg = ContextConfig(window=16_000)
    messages = [model]
    for i in range(12):
        messages += _call(i, "Read", {"file_path": f"f{i}"}, "r" * 6_000)
    ctx = make_ctx(store, cfg)
    out, result = fallback_summary(messages, ctx, ctx.count(messages))
    assert result.fired
    assert "port the parser to Rust; keep the CLI flags" in out[0].text
