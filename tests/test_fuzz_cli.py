"""Bad input through every CLI command that reads a file: exit 0 or 2, and on 2 exactly one line, never a traceback.

Two halves: a fixed table of the bad-input families (each named, each run through
``inspect``, ``replay`` and ``compact``, plus ``recall``/``--store`` junk), and
hypothesis mutations of a real Claude Code session and of synthetic JSON histories
(truncation, byte flips, wrong types, surrogates, deep nesting).  Inputs that could
hang (a FIFO) run as real subprocesses under a timeout.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import DATA, data_path
from lossless.cli import main

SRC = Path(__file__).resolve().parents[1] / "src"
SHORT = DATA / "claude-code" / "short.jsonl"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def check(code: int, err: str, *needles: str) -> None:
    """The contract: 0, or 2 with exactly one line on stderr; never a traceback."""
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err, err
    if code == 2:
        assert err.startswith("lossless: error:") and err.count("\n") == 1, err
        for needle in needles:
            assert needle in err, (needle, err)


def every_reader(f: Path, work: Path) -> list[list[str]]:
    return [
        ["inspect", str(f)],
        ["inspect", str(f), "--json"],
        ["replay", str(f), "--window", "16000"],
        ["compact", str(f), "--window", "16000", "-o", str(work / "out.json"), "--store", str(work / "store")],
    ]


def through_every_reader(f: Path, work: Path, *needles: str) -> list[tuple[int, str]]:
    results = []
    for argv in every_reader(f, work):
        code, _, err = run(*argv)
        check(code, err, *needles)
        results.append((code, err))
    return results


# -- the fixed table ----------------------------------------------------------------
def cc(uuid: str, parent: str | None, etype: str = "user", **fields) -> dict:
    entry = {"type": etype, "uuid": uuid, "parentUuid": parent, "sessionId": "s", "isSidechain": False,
             "message": {"role": etype, "content": "hi" if etype == "user" else [{"type": "text", "text": "ok"}]}}
    entry.update(fields)
    return entry


def jsonl(*entries) -> bytes:
    return b"".join((e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n" for e in entries)


USE = {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "ls"}}
BAD_FILES: dict[str, bytes] = {
    "empty": b"",
    "white space only": b"  \n\n\t\n",
    "not UTF-8": b'[{"role": "user", "content": "caf\xe9"}]',
    "raw surrogate bytes": b'[{"role": "user", "content": "a\xed\xa0\x80b"}]',
    "raw surrogate bytes in JSONL": jsonl(cc("a", None), b'{"type": "user", "uuid": "b", "x": "\xed\xa0\x80"}', cc("c", "a")),
    "NUL bytes": b"\x00" * 64,
    "UTF-8 BOM before a bad file": b"\xef\xbb\xbf" + json.dumps([{"role": "wizard", "content": "hi"}]).encode(),
    "UTF-16": "\ufeff".encode("utf-16-le") + json.dumps([{"role": "user", "content": "hi"}]).encode("utf-16-le"),
    "top level number": b"5",
    "top level string": b'"messages"',
    "top level null": b"null",
    "list of non-objects": b"[1, 2, 3]",
    "list of lists": b'[[{"role": "user"}]]',
    "object without messages": b'{"role": "user", "content": "hi"}',
    "messages not a list": b'{"messages": {"role": "user"}}',
    "unknown role": json.dumps([{"role": "wizard", "content": "hi"}]).encode(),
    "role of the wrong type": json.dumps([{"role": ["user"], "content": "hi"}]).encode(),
    "content a number": json.dumps([{"role": "user", "content": 5}]).encode(),
    "content an object": json.dumps([{"role": "user", "content": {"text": "hi"}}]).encode(),
    "block not an object": json.dumps([{"role": "user", "content": ["hi"]}]).encode(),
    "block without a type": json.dumps([{"role": "user", "content": [{"text": "hi"}]}]).encode(),
    "text of the wrong type": json.dumps([{"role": "user", "content": [{"type": "text", "text": 7}]}]).encode(),
    "tool input a string": json.dumps([{"role": "user", "content": "x"}, {"role": "assistant", "content": [
        {**USE, "input": "ls"}]}]).encode(),
    "tool_result content a number": json.dumps([{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": 3}]}]).encode(),
    "system of the wrong type": json.dumps({"system": {"x": 1}, "messages": [{"role": "user", "content": "hi"}]}).encode(),
    "openai tool_calls not a list": json.dumps([{"role": "system", "content": "s"}, {"role": "assistant", "content": None,
                                                "tool_calls": {"id": 1}}]).encode(),
    "openai arguments not a string": json.dumps([{"role": "user", "content": "q"}, {"role": "assistant", "content": None,
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}]).encode(),
    "mini-swe content not a string": json.dumps({"info": {}, "messages": [{"role": "system", "content": ["x"]}]}).encode(),
    "mini-swe usage not a count": json.dumps({"info": {}, "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "extra": {"response": {"usage": {"prompt_tokens": "many"}}}}]}).encode(),
    "deeply nested list": b"[" * 50_000 + b"]" * 50_000,
    "huge line of junk": b"{" + b"x" * 3_000_000,
    "CC entry not an object": jsonl(cc("a", None), [1, 2]),
    "CC message a string": jsonl(cc("a", None, message="hello")),
    "CC message a list": jsonl(cc("a", None, message=["hello"])),
    "CC message without content": jsonl(cc("a", None, message={"role": "user"})),
    "CC content a number": jsonl(cc("a", None, message={"role": "user", "content": 1})),
    "CC parentUuid a list": jsonl(cc("a", None), cc("b", ["a"])),
    "CC parentUuid loops": jsonl(cc("a", "b"), cc("b", "a")),
    "CC usage a string": jsonl(cc("a", None), cc("b", "a", "assistant", message={
        "role": "assistant", "id": "m", "content": [{"type": "text", "text": "ok"}], "usage": "lots"})),
    "CC usage tokens a string": jsonl(cc("a", None), cc("b", "a", "assistant", message={
        "role": "assistant", "id": "m", "content": [{"type": "text", "text": "ok"}], "usage": {"input_tokens": "9"}})),
    "CC message id a number": jsonl(cc("a", None), cc("b", "a", "assistant", message={
        "role": "assistant", "id": 5, "content": [{"type": "text", "text": "ok"}]})),
    "CC compactMetadata a string": jsonl(cc("a", None), {**cc("b", None, "system"), "subtype": "compact_boundary",
                                                          "logicalParentUuid": "a", "compactMetadata": "auto"}),
    "CC preTokens a string": jsonl(cc("a", None), {**cc("b", None, "system"), "subtype": "compact_boundary",
                                                    "logicalParentUuid": "a", "compactMetadata": {"preTokens": "9"}}),
    "CC corrupt line in the middle": jsonl(cc("a", None), b'{"type": "user", oops}', cc("c", "a")),
    "CC tool_result without id": jsonl(cc("a", None, message={"role": "user", "content": [
        {"type": "tool_result", "content": "x"}]})),
}

# Inputs that must be read (exit 0), with what the warning or output must say.
GOOD_FILES: dict[str, tuple[bytes, str]] = {
    "escaped lone surrogate in a list": (b'[{"role": "user", "content": "a \\ud800 b"}, {"role": "assistant", "content": "ok"}]', ""),
    "escaped lone surrogate in JSONL": (jsonl(cc("a", None, message={"role": "user", "content": "x \udc80 y"})), ""),
    "torn line in the middle of a resumed session": (
        jsonl(cc("a", None), json.dumps(cc("b", "a", "assistant")).encode()[:40], cc("c", "a", "assistant")),
        "truncated line skipped",
    ),
    "deeply nested tool input": (
        json.dumps([{"role": "user", "content": "q"}]).encode()[:-1]
        + b', {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {"a": '
        + b"[" * 900 + b"]" * 900 + b'}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", '
        + b'"content": "ok"}]}, {"role": "assistant", "content": "done"}]',
        "",
    ),
    "torn last line": (jsonl(cc("a", None)) + json.dumps(cc("b", "a")).encode()[:25], "truncated last line skipped"),
    "Claude Code call left unanswered by an interrupt": (
        jsonl(cc("a", None), cc("b", "a", "assistant", message={"role": "assistant", "id": "m", "content": [USE]}),
              cc("c", "b")),
        "'toolu_9'",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_each_bad_input_family_is_one_line_and_exit_2(tmp_path, name):
    f = tmp_path / "input.json"
    f.write_bytes(BAD_FILES[name])
    results = through_every_reader(f, tmp_path, str(f))
    assert all(code == 2 for code, _ in results), (name, results)
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("name", sorted(GOOD_FILES))
def test_awkward_but_valid_input_is_read_with_a_warning(tmp_path, name):
    data, warning = GOOD_FILES[name]
    f = tmp_path / "input.json"
    f.write_bytes(data)
    for code, err in through_every_reader(f, tmp_path):
        assert code == 0, (name, err)
        assert warning in err, (name, warning, err)
        if warning:
            assert str(f) in err
    out = (tmp_path / "out.json").read_bytes()
    out.decode("utf-8")  # valid UTF-8 even when the input held a lone surrogate
    if b"\\ud800" in data:
        assert b"\\ud800" in out  # kept, as the same escape


def test_a_json_list_with_an_unanswered_call_is_refused_unless_repair(tmp_path):
    f = tmp_path / "list.json"
    f.write_text(json.dumps([{"role": "user", "content": "q"}, {"role": "assistant", "content": [USE]},
                             {"role": "user", "content": "next"}, {"role": "assistant", "content": "ok"}]))
    *_, (code, err) = through_every_reader(f, tmp_path, "message 1", "toolu_9", "--repair")
    assert code == 2
    code, _, err = run("compact", str(f), "--window", "16000", "-o", str(tmp_path / "o.json"),
                       "--store", str(tmp_path / "s"), "--repair")
    assert code == 0 and "toolu_9" in err and "message 2" in err


@pytest.mark.parametrize("kind", ["directory", "device", "missing", "dangling link"])
def test_a_path_that_is_not_a_regular_file_is_one_line(tmp_path, kind):
    f = {"directory": tmp_path, "device": Path(os.devnull), "missing": tmp_path / "nope.json",
         "dangling link": tmp_path / "link.json"}[kind]
    if kind == "dangling link":
        f.symlink_to(tmp_path / "gone")
    work = tmp_path / "w"
    work.mkdir()
    for code, _ in through_every_reader(f, work, str(f)):
        assert code == 2


def subprocess_cli(*argv: str, timeout: float = 20) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-m", "lossless.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    for argv in every_reader(fifo, tmp_path):
        done = subprocess_cli(*argv)  # the timeout is the guard: a blocked open() never returns
        check(done.returncode, done.stderr, str(fifo), "named pipe")
        assert done.returncode == 2


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_fifo_planted_as_an_artifact_is_refused_without_hanging(tmp_path):
    store = tmp_path / "store"
    (store / "artifacts").mkdir(parents=True)
    handle = "sha256:" + "ab" * 12
    os.mkfifo(store / "artifacts" / handle[7:])
    done = subprocess_cli("recall", handle, "--store", str(store))
    check(done.returncode, done.stderr, "not a regular file")
    assert done.returncode == 2


# -- recall and --store junk --------------------------------------------------------
def test_recall_prints_the_exact_bytes_even_when_they_are_not_text(tmp_path):
    from lossless.store import ArtifactStore

    data = b"caf\xe9 \xed\xa0\x80 \x00 end"
    handle = ArtifactStore(tmp_path).put(data)
    done = subprocess.run([sys.executable, "-m", "lossless.cli", "recall", handle, "--store", str(tmp_path)],
                          capture_output=True, timeout=20, env={**os.environ, "PYTHONPATH": str(SRC)})
    assert done.returncode == 0 and done.stdout == data, done.stderr


@pytest.mark.parametrize("junk", ["a file", "artifacts is a file", "missing", "artifact tampered", "bad handle"])
def test_recall_with_a_junk_store_or_handle_is_one_line(tmp_path, junk):
    from lossless.store import ArtifactStore

    store = tmp_path / "store"
    handle = ArtifactStore(store).put("the original")
    if junk == "a file":
        store = tmp_path / "plain"
        store.write_text("x")
    elif junk == "artifacts is a file":
        store = tmp_path / "other"
        store.mkdir()
        (store / "artifacts").write_text("x")
    elif junk == "missing":
        store = tmp_path / "nowhere"
    elif junk == "artifact tampered":
        path = store / "artifacts" / handle[7:]
        path.chmod(0o600)
        path.write_text("changed")
    else:
        handle = "sha256:xyz"
    code, out, err = run("recall", handle, "--store", str(store))
    check(code, err)
    assert code == 2 and out == "", err


def test_compact_with_a_store_that_is_a_file_is_one_line(tmp_path):
    msgs = [{"role": "user", "content": "q"}]
    for i in range(12):
        msgs += [{"role": "assistant", "content": [{**USE, "id": f"t{i}"}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "x" * 60_000}]}]
    f = tmp_path / "big.json"
    f.write_text(json.dumps(msgs))
    junk = tmp_path / "junk"
    junk.write_text("not a store")
    code, _, err = run("compact", str(f), "--window", "16000", "-o", str(tmp_path / "o.json"), "--store", str(junk))
    check(code, err, str(junk))
    assert code == 2 and junk.read_text() == "not a store"


# -- generated mutations ------------------------------------------------------------
def _mutate(data: bytes, how: str, rnd: random.Random) -> bytes:
    if not data:
        return data
    at = rnd.randrange(len(data))
    match how:
        case "truncate":
            return data[:at]
        case "flip":
            return data[:at] + bytes([data[at] ^ (1 << rnd.randrange(8))]) + data[at + 1:]
        case "drop line":
            lines = data.split(b"\n")
            del lines[rnd.randrange(len(lines))]
            return b"\n".join(lines)
        case "tear line":  # a crash mid-append, then a resume that starts a fresh line
            lines = data.split(b"\n")
            k = rnd.randrange(len(lines))
            lines[k] = lines[k][: rnd.randrange(len(lines[k]) + 1)]
            return b"\n".join(lines)
        case "surrogate":
            return data[:at] + rnd.choice([b"\\ud800", b"\\udfff", b"\xed\xa0\x80", b"\\u"]) + data[at:]
        case "deep":
            n = rnd.choice([10, 1_000, 30_000])
            return data[:at] + b"[" * n + b"]" * n + data[at:]
    raise AssertionError(how)


def _wrong_types(value, rnd: random.Random):
    """The JSON value with one randomly chosen node replaced by a value of another type."""
    replacement = rnd.choice([None, 0, -1, 1.5, True, "", "x", [], {}, [None], {"type": None}])
    nodes = []

    def walk(v, setter):
        nodes.append(setter)
        if isinstance(v, dict):
            for k in list(v):
                walk(v[k], lambda new, v=v, k=k: v.__setitem__(k, new))
        elif isinstance(v, list):
            for i in range(len(v)):
                walk(v[i], lambda new, v=v, i=i: v.__setitem__(i, new))

    box = [value]
    walk(value, lambda new: box.__setitem__(0, new))
    rnd.choice(nodes)(replacement)
    return box[0]


HOWS = ["truncate", "flip", "drop line", "tear line", "surrogate", "deep", "wrong type"]


def _synthetic_list(rnd: random.Random) -> list:
    msgs: list = [{"role": "user", "content": "fix the test"}]
    for i in range(rnd.randrange(1, 5)):
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": f"step {i}"},
                                                      {**USE, "id": f"toolu_{i}"}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                                  "content": "out\n" * rnd.randrange(1, 50)}]})
    msgs.append({"role": "assistant", "content": "done"})
    return msgs


def _fuzz_once(data: bytes, how: str, seed: int, jsonl_lines: bool) -> None:
    rnd = random.Random(seed)
    if how == "wrong type":
        if jsonl_lines:
            lines = data.split(b"\n")
            k = rnd.randrange(len(lines) - 1)
            lines[k] = json.dumps(_wrong_types(json.loads(lines[k]), rnd)).encode()
            bad = b"\n".join(lines)
        else:
            bad = json.dumps(_wrong_types(json.loads(data), rnd)).encode()
    else:
        bad = _mutate(data, how, rnd)
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        f = work / ("in.jsonl" if jsonl_lines else "in.json")
        f.write_bytes(bad)
        through_every_reader(f, work)


@settings(max_examples=25)
@given(how=st.sampled_from(HOWS), seed=st.integers(0, 2**32))
def test_mutated_real_claude_code_session(how, seed):
    if not SHORT.exists():
        data_path("claude-code", "short.jsonl")  # skips cleanly
    _fuzz_once(SHORT.read_bytes(), how, seed, jsonl_lines=True)


@settings(max_examples=25)
@given(how=st.sampled_from(HOWS), seed=st.integers(0, 2**32), openai=st.booleans())
def test_mutated_synthetic_json_history(how, seed, openai):
    msgs = _synthetic_list(random.Random(seed))
    if openai:
        msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "fix the test"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"cmd\": \"ls\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "a\nb\n"}, {"role": "assistant", "content": "done"}]
    _fuzz_once(json.dumps(msgs).encode(), how, seed, jsonl_lines=False)


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path):
    from lossless.store import ArtifactStore

    handle = ArtifactStore(tmp_path).put("x" * 100_000)
    read_end, write_end = os.pipe()
    os.close(read_end)  # what `| head` has done by the time the command writes: every write is EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "lossless.cli", "recall", handle, "--store", str(tmp_path)],
                              stdout=write_end, stderr=subprocess.PIPE, timeout=20,
                              env={**os.environ, "PYTHONPATH": str(SRC)})
    finally:
        os.close(write_end)
    assert done.returncode == 0 and done.stderr == b"", done.stderr


@pytest.mark.parametrize("option", [["inspect", "--window", "0"], ["inspect", "--top", "-3"],
                                    ["replay", "--window", "16000", "--unseen-tokens", "-100"]])
def test_an_impossible_option_value_is_a_usage_error(tmp_path, option):
    f = tmp_path / "in.json"
    f.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as info:
        main([*option[:1], str(f), *option[1:]])
    assert info.value.code == 2 and "Traceback" not in err.getvalue()
    assert f"argument {option[-2]}" in err.getvalue()
