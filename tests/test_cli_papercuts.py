"""The paper cuts a new user met in the CLI (issue 12), one test each."""

from __future__ import annotations

import json

import pytest

from lossless.cli import build_parser, main
from lossless.markers import counted, snipped
from lossless.testing import FakeServer
from conftest import data_path
from test_picture import write_session


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_argument_of_inspect_replay_and_compact_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and "replay" in a.choices).choices
    for name in ("inspect", "replay", "compact", "recall"):
        missing = [a.dest for a in sub[name]._actions if a.dest != "help" and not a.help]
        assert not missing, f"{name}: {missing}"
    text = sub["replay"].format_help()
    assert "Claude Code JSONL" in text and "context window, in tokens" in text


def test_cost_has_a_unit(tmp_path, capsys):
    f = write_session(tmp_path / "s.json", n_rounds=3)
    _, out, _ = run(capsys, "replay", str(f), "--window", "16000")
    assert "input cost with caching (base-input-token units)" in out
    _, out, _ = run(capsys, "replay", str(f), "--window", "16000", "--json")
    assert json.loads(out)["cost_unit"].startswith("base-input-token units")


def test_one_call_is_not_one_calls(tmp_path, capsys):
    f = tmp_path / "one.json"
    f.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]))
    _, out, _ = run(capsys, "replay", str(f), "--window", "16000")
    assert "1 call replayed" in out
    assert "(1 round," in snipped(handle="sha256:" + "0" * 24, messages=2, rounds=1, tokens=10)
    assert counted(1, "round") == "1 round" and counted(0, "round") == "0 rounds"


@pytest.mark.parametrize("history", [
    # an unanswered call followed by a plain user message: a request the API refuses
    [{"role": "user", "content": "hi"},
     {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
     {"role": "user", "content": "go on"}],
    # an orphan result after the last assistant message
    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"},
     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "zz", "content": "x"}]}],
])
def test_replay_refuses_an_invalid_history_as_compact_does(tmp_path, capsys, history):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(history))
    code, out, err = run(capsys, "replay", str(f), "--window", "16000")
    assert code == 2 and not out and err.count("\n") == 1
    assert "message " in err and ("'t1'" in err or "'zz'" in err) and "--repair" in err
    code, _, c_err = run(capsys, "compact", str(f), "--window", "16000", "-o", str(tmp_path / "o.json"))
    assert code == 2 and c_err.split(" — ")[0] == err.split(" — ")[0]
    code, out, err = run(capsys, "replay", str(f), "--window", "16000", "--repair")
    assert code == 0 and "repaired" in err


def test_compact_into_a_directory_names_it_not_a_temporary_file(tmp_path, capsys):
    f = write_session(tmp_path / "s.json", n_rounds=2)
    (tmp_path / "out").mkdir()
    (tmp_path / "file").write_text("x")
    for target in (tmp_path / "out", tmp_path / "file" / "o.json"):
        code, _, err = run(capsys, "compact", str(f), "--window", "16000", "-o", str(target))
        assert code == 2 and err.count("\n") == 1 and str(target) in err and ".tmp" not in err


def test_a_handle_is_recalled_from_anywhere_in_the_project(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("LOSSLESS_HOME", raising=False)
    project = tmp_path / "project"
    (project / "src" / "deep").mkdir(parents=True)
    f = write_session(project / "s.json", n_rounds=30)
    monkeypatch.chdir(project)
    code, out, _ = run(capsys, "compact", str(f), "--window", "16000", "-o", "o.json", "--json")
    report = json.loads(out)
    assert code == 0 and report["handles"] and report["store"] == str((project / ".lossless").resolve())
    handle = report["handles"][0]
    monkeypatch.chdir(project / "src" / "deep")  # a folder below the one the session ran in
    code, out, _ = run(capsys, "recall", handle)
    assert code == 0 and out
    monkeypatch.chdir(tmp_path)  # outside the project: the compact output says which store to name
    code, _, err = run(capsys, "recall", handle)
    assert code == 2 and "--store" in err
    _, text, _ = run(capsys, "compact", str(f), "--window", "16000", "-o", str(project / "o2.json"),
                     "--store", str(project / ".lossless"))
    assert f"lossless recall HANDLE --store {project / '.lossless'}" in text
    code, again, _ = run(capsys, "recall", handle, "--store", str(project / ".lossless"))
    assert code == 0 and again == out


def test_compact_takes_instructions_for_the_model(tmp_path, capsys):
    f = write_session(tmp_path / "s.json", n_rounds=4)  # small: only --instructions makes it compact
    code, _, err = run(capsys, "compact", str(f), "--window", "200000", "-o", str(tmp_path / "o.json"),
                       "--instructions", "keep the API decisions")
    assert code == 2 and "--summarizer llm" in err
    with FakeServer() as server:
        code, out, err = run(capsys, "compact", str(f), "--window", "200000", "-o", str(tmp_path / "o.json"),
                             "--store", str(tmp_path / "st"), "--summarizer", "llm", "--provider", "openai",
                             "--model", "m", "--base-url", server.base_url + "/v1",
                             "--instructions", "keep the API decisions", "--json")
        sent = json.dumps([r.body for r in server.requests])
    assert code == 0, err
    assert "keep the API decisions" in sent
    report = json.loads(out)
    assert report["messages_after"] < report["messages_before"] and report["summary_calls"] >= 1


def test_replay_infers_the_unseen_overhead_by_default_and_says_so(capsys):
    f = data_path("claude-code", "subagent.jsonl")
    code, out, _ = run(capsys, "replay", str(f), "--window", "30000")
    assert code == 0
    assert "inferred from the first recorded usage" in out
    # At 30k the inferred overhead leaves no room: a summary fires on most calls, and the output says so.
    assert "a summary fired on" in out and "of 12 calls" in out
    code, out, _ = run(capsys, "replay", str(f), "--window", "30000", "--unseen-tokens", "0")
    assert "inferred" not in out and "a summary fired on" not in out


def test_percent_left_is_of_the_window(tmp_path):
    from lossless import ContextManager

    history = [{"role": "user", "content": "word " * 3_000}, {"role": "assistant", "content": "ok"}]
    with ContextManager(window=24_000, store=str(tmp_path)) as cm:
        state = cm.prepare(history).state
    assert 0 < state.tokens < state.threshold < state.window == 24_000
    assert state.percent_left == round(100 * (24_000 - state.tokens) / 24_000, 1)
    assert state.percent_left > 100 * (state.threshold - state.tokens) / state.threshold  # not the old reading


def test_compact_says_when_what_the_file_does_not_show_leaves_no_room(tmp_path, capsys):
    f = data_path("claude-code", "tool_heavy.jsonl")  # ~26k of system prompt and tools it does not show
    code, out, err = run(capsys, "compact", str(f), "--window", "16000", "-o", str(tmp_path / "o.json"),
                         "--store", str(tmp_path / "s"))
    assert code == 0 and "over the 16,000-token window" in err and "--unseen-tokens 0" in err
    code, out, err = run(capsys, "compact", str(f), "--window", "16000", "-o", str(tmp_path / "o.json"),
                         "--store", str(tmp_path / "s"), "--unseen-tokens", "0")
    assert code == 0 and "over the" not in err
