"""mini-swe-agent trajectories: the synthetic tool mapping, the exact write-back, real runs."""

from __future__ import annotations

import json

import pytest

from conftest import DATA, data_path
from lossless.dialects.mini_swe import from_mini_swe, read_trajectory, to_mini_swe
from lossless.errors import FormatError, InputError
from lossless.messages import Message, Text, Thinking, ToolResult, ToolUse
from lossless.rounds import group_rounds, validate

ONE = "THOUGHT: look\n\n```bash\nls -la\n```"
TWO = "THOUGHT: two\n\n```bash\nls\n```\n\n```bash\npwd\n```"
OBS = "<returncode>0</returncode>\n<output>\na\nb\n</output>"
RESPONSE = {"id": "gen-1", "model": "gemini", "usage": {"prompt_tokens": 10, "completion_tokens": 2}}

RAW = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "<pr_description>fix it</pr_description>"},
    {"role": "assistant", "content": ONE, "extra": {"response": RESPONSE}},
    {"role": "user", "content": OBS},
    {"role": "assistant", "content": TWO, "extra": {}},
    {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks."},
    {"role": "assistant", "content": "THOUGHT: done\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
]


def test_mapping():
    system, msgs = from_mini_swe(RAW)
    assert system == "You are a helpful assistant."
    task, a0, obs, a1, feedback, a2 = msgs
    assert task.content == (Text(text=RAW[1]["content"]),)
    assert a0.content == (Text(text=ONE), ToolUse(id="mswe-0", name="bash", input={"command": "ls -la"}, extra={"synthetic": True}))
    assert obs.content == (ToolResult(tool_use_id="mswe-0", content=OBS),)
    assert a1.content == (Text(text=TWO),)          # two blocks: text only
    assert feedback.content == (Text(text=RAW[5]["content"]),)
    assert a2.content == (Text(text=RAW[6]["content"]),)  # nothing answers it: no ToolUse
    validate(msgs, "openai")
    assert [r.kind for r in group_rounds(msgs)] == ["user", "round", "round", "user", "round"]


def test_round_trip_is_exact():
    system, msgs = from_mini_swe(RAW)
    assert to_mini_swe(msgs, system) == RAW


def test_calls_take_usage_from_the_raw_response(tmp_path):
    path = tmp_path / "x.traj.json"
    path.write_text(json.dumps({"instance_id": "x__y-1", "info": {}, "messages": RAW}))
    s = read_trajectory(path)
    assert s.format == "mini-swe-agent" and s.dialect == "openai" and s.session_id == "x__y-1"
    assert [c.index for c in s.calls] == [1, 3, 5]
    assert s.calls[0].usage == RESPONSE["usage"] and s.calls[0].message_id == "gen-1" and s.calls[0].model == "gemini"
    assert s.calls[1].usage is None


@pytest.mark.parametrize(
    ("raw", "pattern"),
    [
        ([{"role": "tool", "content": "x"}], r"message 0: role 'tool' is not supported"),
        ([{"role": "user", "content": None}], r"message 0: expected an object with a string 'content'"),
        (["hi"], r"message 0: expected an object"),
    ],
)
def test_bad_messages_are_format_errors(raw, pattern):
    with pytest.raises(FormatError, match=pattern):
        from_mini_swe(raw)


def test_bad_files_are_format_errors(tmp_path):
    path = tmp_path / "x.traj.json"
    path.write_text('{\n  "messages": [\n  oops')
    with pytest.raises(FormatError, match=rf"^{path}:3: not JSON"):
        read_trajectory(path)
    path.write_text('{"info": {}}')
    with pytest.raises(FormatError, match="no top-level 'messages' list"):
        read_trajectory(path)


def test_a_real_tool_call_cannot_be_written_back():
    msg = Message(role="assistant", content=(ToolUse(id="t", name="bash", input={}),))
    with pytest.raises(InputError, match="message 0: a tool_use block"):
        to_mini_swe([msg])
    with pytest.raises(InputError, match="a thinking block"):
        to_mini_swe([Message(role="assistant", content=(Thinking(thinking="x", signature="s"),))])


TRAJECTORIES = sorted(p.name for p in (DATA / "mini-swe-agent").glob("*.traj.json")) or ["absent.traj.json"]


@pytest.mark.parametrize("name", TRAJECTORIES)
def test_real_trajectories_round_trip_and_validate(name):
    path = data_path("mini-swe-agent", name)
    data = json.loads(path.read_text())
    s = read_trajectory(path)
    assert to_mini_swe(s.messages, s.system) == data["messages"]
    validate(s.messages, "openai")
    assert len(s.calls) == data["info"]["model_stats"]["api_calls"]
    assert all(c.usage and c.usage["prompt_tokens"] > 0 for c in s.calls)
    uses = [u for m in s.messages for u in m.tool_uses]
    assert len(uses) > len(s.calls) // 2  # most steps are one well-formed command
    results = {r.tool_use_id for m in s.messages for r in m.tool_results}
    assert results == {u.id for u in uses}
