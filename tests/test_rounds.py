from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.errors import InvalidRequest
from lossless.messages import Message, Text, Thinking, ToolResult, ToolUse
from lossless.rounds import INTERRUPTED, group_rounds, problems, repair, validate
from strategies import histories


def u(*blocks):
    return Message(role="user", content=tuple(Text(text=b) if isinstance(b, str) else b for b in blocks))


def a(*blocks):
    return Message(role="assistant", content=tuple(Text(text=b) if isinstance(b, str) else b for b in blocks))


def call(i, name="Bash"):
    return ToolUse(id=f"t{i}", name=name, input={"command": "ls"})


def res(i, text="ok"):
    return ToolResult(tool_use_id=f"t{i}", content=text)


@given(histories())
def test_rounds_partition_the_history(h):
    rounds = group_rounds(h)
    assert [m for r in rounds for m in h[r.start : r.stop]] == h
    for r in rounds:
        if r.kind == "round":
            assert h[r.start].role == "assistant"
            ids = {x.id for x in h[r.start].tool_uses}
            if ids:  # every call is answered inside its own round
                assert r.stop - r.start == 2 and {x.tool_use_id for x in h[r.start + 1].tool_results} == ids


@given(histories(), st.data())
def test_removing_whole_middle_rounds_stays_valid(h, data):
    rounds = group_rounds(h)
    if len(rounds) < 3:
        return
    i = data.draw(st.integers(1, len(rounds) - 2))
    r = rounds[i]
    validate(h[: r.start] + h[r.stop :])


@pytest.mark.parametrize(
    ("history", "needle", "index", "tool_id"),
    [
        ([a("hi")], "first message must come from the user", 0, None),
        ([u("go"), a(call(1)), u("no result")], "no tool_result", 1, "t1"),
        ([u("go"), a("x"), u(res(9))], "answers no tool_use", 2, "t9"),
        ([u("go"), a(call(1)), u("text first", res(1))], "must come first", 2, None),
        ([u("go"), a(call(1)), u(res(1)), a(call(1)), u(res(1))], "not unique", 3, "t1"),
        ([u("go"), a(Thinking(thinking="hm", signature="")), u("x")], "no signature", 1, None),
        ([u("go"), a("   ")], "empty or only white space", 1, None),
        ([u("go"), Message(role="assistant", content=())], "no content", 1, None),
        ([u("go"), a(call(1))], "no tool_result", 1, "t1"),
    ],
)
def test_validate_names_index_and_id(history, needle, index, tool_id):
    with pytest.raises(InvalidRequest) as exc:
        validate(history)
    assert needle in str(exc.value)
    assert exc.value.index == index
    assert exc.value.tool_id == tool_id


def test_cache_breakpoints_are_limited():
    cc = {"type": "ephemeral"}
    h = [u(Text(text="a", cache_control=cc), Text(text="b", cache_control=cc)), a(Text(text="c", cache_control=cc)),
         u(Text(text="d", cache_control=cc), Text(text="e", cache_control=cc))]
    with pytest.raises(InvalidRequest, match="at most 4"):
        validate(h)


def test_openai_rules_allow_system_messages_and_check_answers():
    sys_msg = Message(role="system", content=(Text(text="be brief"),))
    validate([sys_msg, u("go"), a(call(1)), u(res(1))], "openai")
    assert problems([sys_msg, u("go"), a(call(1)), u("next")], "openai")[0].tool_id == "t1"
    assert any("system message inside" in str(p) for p in problems([sys_msg, u("go")], "anthropic"))


def test_repair_answers_interrupted_calls_and_drops_orphans():
    h = [a(call(1), call(2)), u(res(2), res(7), "and then?"), a("   ", "done")]
    before = copy.deepcopy(h)
    fixed, notes = repair(h)
    assert h == before  # explicit, and never in place
    validate(fixed)
    assert fixed[0].role == "user"
    results = {r.tool_use_id: r for r in fixed[2].tool_results}
    assert results["t1"].content == INTERRUPTED and results["t1"].is_error
    assert "t7" not in results
    assert any("orphan" in n for n in notes) and any("interrupted" in n for n in notes)


@given(histories(), st.data())
def test_repair_makes_any_damaged_history_valid(h, data):
    damaged = list(h)
    for _ in range(data.draw(st.integers(1, 3))):
        if len(damaged) > 1:
            del damaged[data.draw(st.integers(0, len(damaged) - 1))]
    fixed, _notes = repair(damaged)
    if fixed:
        validate(fixed)


@given(histories())
def test_repair_leaves_valid_histories_alone(h):
    fixed, notes = repair(h)
    assert fixed == h and notes == []
