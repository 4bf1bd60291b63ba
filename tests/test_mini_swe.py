"""mini-swe-agent trajectories: the synthetic tool mapping, the exact write-back, real runs."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
        ([{"role": "tool", "content": "x"}], r"message 0: a tool message needs a string 'tool_call_id'"),
        ([{"role": "robot", "content": "x"}], r"message 0: role 'robot' is not supported"),
        ([{"role": "user", "content": 5}], r"message 0: content must be a string, a list or null, not int"),
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


def test_a_real_tool_call_is_written_back_as_a_tool_calling_model_writes_it():
    msg = Message(role="assistant", content=(ToolUse(id="t", name="bash", input={"command": "ls"}),))
    assert to_mini_swe([msg]) == [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "t", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]}]
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


# -- mini-swe-agent v2 (trajectory_format mini-swe-agent-1.1) ------------------------------------
def _v2_toolcall(rounds: int, parallel_every: int, *, ended: str | None = "Submitted") -> dict:
    """A v2 run of a tool-calling model, as its ``save()`` writes it: litellm's message dumps with
    ``extra``, ``role: "tool"`` observations, the submit call unanswered, then the exit message."""
    msgs: list[dict] = [{"role": "system", "content": "You are a helpful assistant that can use bash."},
                        {"role": "user", "content": "Please solve this issue: trailing commas are dropped."}]
    for i in range(rounds):
        ids = [f"call_{i}_{k}" for k in range(2 if parallel_every and i % parallel_every == 0 else 1)]
        calls = [{"function": {"arguments": json.dumps({"command": f"sed -n 1,40p src/m{i}_{k}.py"}), "name": "bash"},
                  "id": cid, "type": "function"} for k, cid in enumerate(ids)]
        msgs.append({"content": None if i % 2 else f"THOUGHT: module {i}", "role": "assistant", "tool_calls": calls,
                     "function_call": None, "provider_specific_fields": {"refusal": None},
                     "extra": {"actions": [{"command": "x", "tool_call_id": c} for c in ids], "cost": 0.001,
                               "response": {"id": f"r{i}", "model": "gpt-5-mini",
                                            "usage": {"prompt_tokens": 800 + 400 * i, "completion_tokens": 40}}}})
        for cid in ids:
            out = "\n".join(f"{cid}: line {n} of the output" for n in range(30))
            msgs.append({"role": "tool", "tool_call_id": cid, "content": f"<returncode>0</returncode>\n<output>\n{out}\n</output>",
                         "extra": {"raw_output": out, "returncode": 0, "timestamp": 1.0 + i}})
    msgs.append({"content": "Submitting.", "role": "assistant", "tool_calls": [
        {"function": {"arguments": '{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}', "name": "bash"},
         "id": "call_end", "type": "function"}], "extra": {"response": {"id": "r-end", "model": "gpt-5-mini"}}})
    if ended:
        msgs.append({"role": "exit", "content": "diff --git a/src/m.py b/src/m.py",
                     "extra": {"exit_status": ended, "submission": "diff --git a/src/m.py b/src/m.py"}})
    return {"info": {"mini_version": "2.0.0", "exit_status": ended}, "messages": msgs,
            "trajectory_format": "mini-swe-agent-1.1", "instance_id": "demo__demo-1"}


@given(st.integers(1, 12), st.sampled_from([0, 2, 3]), st.sampled_from(["Submitted", "LimitsExceeded"]))
def test_a_v2_tool_calling_run_reads_as_real_tool_calls_and_writes_back_exactly(rounds, parallel_every, ended):
    from lossless.dialects.mini_swe import trajectory_session

    data = _v2_toolcall(rounds, parallel_every, ended=ended)
    s = trajectory_session(data)
    assert s.system == data["messages"][0]["content"]
    assert to_mini_swe(s.messages, s.system) == data["messages"]
    validate(s.messages, "openai")  # the submit call is answered by the exit message's content
    last = s.messages[-1].content
    assert all(isinstance(b, ToolResult) and b.content == "diff --git a/src/m.py b/src/m.py" for b in last)
    assert last[0].is_error == (ended != "Submitted")
    calls = [u for m in s.messages for u in m.tool_uses]
    assert len(calls) == 1 + sum(2 if parallel_every and i % parallel_every == 0 else 1 for i in range(rounds))
    assert [c.usage["prompt_tokens"] for c in s.calls if c.usage] == [800 + 400 * i for i in range(rounds)]
    assert len(s.calls) == rounds + 1


def test_a_v2_run_cut_before_its_exit_keeps_its_pending_call():
    from lossless.dialects.mini_swe import trajectory_session

    data = _v2_toolcall(3, 0, ended=None)
    s = trajectory_session(data)
    assert to_mini_swe(s.messages, s.system) == data["messages"]
    assert s.messages[-1].tool_uses and s.messages[-1].tool_uses[0].id == "call_end"


def test_a_v2_text_model_run_reads_its_fenced_commands():
    raw = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"},
           {"role": "assistant", "content": "THOUGHT: look\n\n```mswea_bash_command\nls -la\n```", "extra": {}},
           {"role": "user", "content": OBS, "extra": {"returncode": 0}},
           {"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}}]
    system, msgs = from_mini_swe(raw)
    assert msgs[1].tool_uses[0].input == {"command": "ls -la"} and msgs[2].content[0].tool_use_id == "mswe-0"
    assert to_mini_swe(msgs, system) == raw


def test_a_v2_run_through_inspect_replay_and_compact(tmp_path, capsys, monkeypatch):
    from lossless.cli import main

    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "s"))
    path = tmp_path / "demo__demo-1.traj.json"
    path.write_text(json.dumps(_v2_toolcall(40, 4)))
    assert main(["inspect", str(path)]) == 0
    assert "demo__demo-1.traj.json: " in capsys.readouterr().out
    assert main(["replay", str(path), "--window", "8000", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["calls"] == 41 and report["invalid_requests"] == 0 and report["over_window_calls"] == 0
    assert report["stages"]  # 40 rounds of ~400 tokens do not fit 8,000 tokens unmanaged: something fired
    assert main(["compact", str(path), "--window", "8000", "-o", str(tmp_path / "c.json")]) == 0
    compacted = json.loads((tmp_path / "c.json").read_text())
    assert all(d.get("role") != "exit" for d in compacted)
    assert main(["inspect", str(tmp_path / "c.json")]) == 0  # the compacted run reads back as OpenAI chat


def test_a_v2_responses_model_run_reads_as_tool_calls_with_its_usage():
    """A Responses API model's turn is its whole response object (``object: "response"``, its
    ``output`` items); observations are ``function_call_output`` items."""
    from lossless.dialects.mini_swe import trajectory_session

    msgs: list[dict] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Please solve this issue: X"}]
    for i in range(3):
        msgs.append({"id": f"resp_{i}", "object": "response", "model": "gpt-5", "status": "completed",
                     "usage": {"input_tokens": 500 + 100 * i, "output_tokens": 20},
                     "output": [{"type": "reasoning", "id": f"rs_{i}", "summary": []},
                                {"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": "bash",
                                 "arguments": json.dumps({"command": f"ls src/{i}"})}],
                     "extra": {"actions": [{"command": f"ls src/{i}", "tool_call_id": f"call_{i}"}], "cost": 0.01}})
        msgs.append({"type": "function_call_output", "call_id": f"call_{i}", "output": f"<returncode>0</returncode>\n{i}",
                     "extra": {"returncode": 0}})
    msgs.append({"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}})
    s = trajectory_session({"messages": msgs, "trajectory_format": "mini-swe-agent-1.1", "info": {}})
    assert s.system == "sys"
    assert [u.input for m in s.messages for u in m.tool_uses] == [{"command": f"ls src/{i}"} for i in range(3)]
    assert [c.usage["input_tokens"] for c in s.calls] == [500, 600, 700] and {c.model for c in s.calls} == {"gpt-5"}
    validate(s.messages, "openai")
