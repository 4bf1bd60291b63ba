"""Bad and awkward input through the CLI, as a user meets it: one line naming the file, exit 2."""

from __future__ import annotations

import json

import pytest

from lossless.cli import main
from lossless.dialects.anthropic import from_anthropic
from lossless.rounds import validate


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert err.startswith("lossless: error:") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)


COMMANDS = (["inspect"], ["replay", "--window", "16000"], ["compact", "--window", "16000", "-o", "OUT"])


def commands(f, tmp_path):
    for cmd in COMMANDS:
        yield [cmd[0], str(f), *(str(tmp_path / "o.json") if a == "OUT" else a for a in cmd[1:])]


@pytest.mark.parametrize("kind", ["list", "jsonl"])
def test_json_nested_too_deeply_is_one_line(tmp_path, capsys, kind):
    f = tmp_path / ("deep.json" if kind == "list" else "deep.jsonl")
    deep = "[" * 100_000 + "]" * 100_000
    if kind == "list":
        f.write_text(deep)
    else:
        first = {"type": "user", "uuid": "a", "parentUuid": None, "message": {"role": "user", "content": "hi"}}
        f.write_text(json.dumps(first) + "\n" + '{"type": "user", "x": ' + deep + "}\n" + json.dumps(first) + "\n")
    for argv in commands(f, tmp_path):
        code, _, err = run(capsys, *argv)
        one_line_error(code, err, str(f), "nested")


def unanswered(tmp_path):
    f = tmp_path / "unanswered.json"
    f.write_text(json.dumps([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
        {"role": "user", "content": "and then?"},
        {"role": "assistant", "content": "done"},
    ]))
    return f


def test_an_invalid_history_names_the_file_index_and_id_and_says_how_to_repair(tmp_path, capsys):
    f = unanswered(tmp_path)
    code, out, _ = run(capsys, "inspect", str(f), "--json")
    assert code == 0 and json.loads(out)["messages"] == 4  # looking at a broken file is fine
    for argv in commands(f, tmp_path):
        if argv[0] == "inspect":
            continue
        code, _, err = run(capsys, *argv)
        one_line_error(code, err, str(f), "message 1", "toolu_1", "--repair")


def test_repair_is_explicit_and_reported(tmp_path, capsys):
    f, o = unanswered(tmp_path), tmp_path / "o.json"
    code, out, err = run(capsys, "replay", str(f), "--window", "16000", "--repair", "--json")
    assert code == 0 and "repaired" in err and json.loads(out)["calls"] == 2
    code, _, err = run(capsys, "compact", str(f), "--window", "16000", "-o", str(o), "--repair", "--store", str(tmp_path / "s"))
    assert code == 0, err
    assert "repaired" in err and "toolu_1" in err
    fixed = from_anthropic(json.loads(o.read_text()))
    validate(fixed)
    assert fixed[2].tool_results[0].is_error


def test_compact_reports_a_truncated_last_line(tmp_path, capsys):
    line = {"type": "user", "uuid": "a", "parentUuid": None, "sessionId": "s", "message": {"role": "user", "content": "hi"}}
    f = tmp_path / "cut.jsonl"
    f.write_text(json.dumps(line) + "\n" + json.dumps(line)[:30])
    code, _, err = run(capsys, "compact", str(f), "--window", "16000", "-o", str(tmp_path / "o.json"), "--store", str(tmp_path / "s"))
    assert code == 0 and "truncated" in err and str(f) in err


def test_a_bad_system_field_names_the_file_once(tmp_path, capsys):
    f = tmp_path / "sys.json"
    f.write_text(json.dumps({"system": 5, "messages": [{"role": "user", "content": "hi"}]}))
    code, _, err = run(capsys, "inspect", str(f))
    one_line_error(code, err, "'system'")
    assert err.count(str(f)) == 1, err


def test_binary_garbage_is_named_without_printing_the_bytes(tmp_path, capsys):
    f = tmp_path / "garbage.bin"
    f.write_bytes(bytes(range(128, 256)) * 8 + b"\n")
    code, _, err = run(capsys, "inspect", str(f))
    one_line_error(code, err, str(f), "not a Claude Code JSONL")
    assert "\ufffd" not in err and "\x00" not in err


def test_replay_of_a_plain_message_list_replays_each_assistant_turn(tmp_path, capsys):
    msgs = [{"role": "user", "content": "Fix it."}]
    for i in range(30):
        tid = f"toolu_{i:03d}"
        msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": f"t{i}"}}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": f"out {i}\n" * 400}]})
    f = tmp_path / "list.json"
    f.write_text(json.dumps(msgs))
    code, out, err = run(capsys, "replay", str(f), "--window", "16000", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["calls"] == 30 and report["over_window_calls"] == 0 and report["invalid_requests"] == 0
    assert report["unmanaged_over_window_calls"] > 0 and report["stages"]


@pytest.mark.parametrize("value", ["-5", "0", "abc", "1.5"])
def test_a_window_that_is_not_a_positive_whole_number_is_refused_with_the_rule_it_breaks(capsys, value):
    """-5 was told "expected a whole number ≥ 0", and 0 then "> 0"."""
    with pytest.raises(SystemExit) as exc:
        main(["inspect", "x.jsonl", "--window", value])
    assert exc.value.code == 2
    assert f"argument --window: expected a whole number > 0, not {value!r}" in capsys.readouterr().err
