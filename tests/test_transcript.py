from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lossless.errors import StoreError
from lossless.messages import Image, Message, Text, Thinking, ToolResult, ToolUse, assistant, user
from lossless.transcript import Transcript, read_entries, transcript_path

SRC = Path(__file__).resolve().parents[1] / "src"


def _round(i: int) -> list[Message]:
    call = ToolUse(id=f"toolu_{i}", name="Bash", input={"command": "ls"})
    return [
        assistant(Thinking(thinking="hm", signature="sig"), f"step {i}", call),
        Message(role="user", content=(ToolResult(tool_use_id=call.id, content=f"out {i}\n" * 3),)),
    ]


def test_append_writes_claude_code_entries_chained_by_parent(store_dir):
    with Transcript("s1") as log:
        uuids = log.append([user("hello", timestamp="2026-01-01T00:00:00.000Z"), *_round(1)])
        uuids += log.append(_round(2))
    path = store_dir / "sessions" / "s1" / "transcript.jsonl"
    assert log.path == path == transcript_path("s1")
    read = read_entries(path)
    assert not read.skipped and not read.truncated
    entries = read.entries
    assert [e["uuid"] for e in entries] == uuids
    assert [e["parentUuid"] for e in entries] == [None, *uuids[:-1]]
    assert [e["type"] for e in entries] == ["user", "assistant", "user", "assistant", "user"]
    assert {e["sessionId"] for e in entries} == {"s1"}
    assert entries[0]["timestamp"] == "2026-01-01T00:00:00.000Z"
    assert entries[1]["timestamp"].endswith("Z")
    blocks = entries[1]["message"]["content"]
    assert [b["type"] for b in blocks] == ["thinking", "text", "tool_use"]
    assert blocks[0] == {"type": "thinking", "thinking": "hm", "signature": "sig"}
    assert entries[2]["message"]["content"][0]["tool_use_id"] == "toolu_1"


def test_generated_session_id_and_lazy_open(tmp_path):
    log = Transcript(root=tmp_path)
    assert len(log.session_id) == 36
    assert not log.path.exists()  # nothing written, nothing created
    assert log.append([]) == []
    assert not log.path.exists()
    log.append([user("x")])
    log.close()
    assert log.path.parent.name == log.session_id
    assert len(read_entries(log.path)) == 1


def test_bad_session_id(tmp_path):
    with pytest.raises(StoreError, match="session id"):
        Transcript("../escape", root=tmp_path)


def test_boundary_entry_and_chain_after_it(tmp_path):
    with Transcript("s", root=tmp_path) as log:
        (first,) = log.append([user("task")])
        b = log.boundary("auto", 170_000, 20_000, covered=[first])
        (after,) = log.append([user("summary", lossless={"kind": "summary"})])
    entries = read_entries(log.path).entries
    boundary = entries[1]
    assert boundary["type"] == "system" and boundary["subtype"] == "compact_boundary"
    assert boundary["parentUuid"] is None and boundary["logicalParentUuid"] == first
    assert boundary["uuid"] == b
    assert boundary["compactMetadata"] == {"trigger": "auto", "preTokens": 170_000, "postTokens": 20_000,
                                           "covered": [first]}
    assert entries[2]["parentUuid"] == b and entries[2]["uuid"] == after
    assert entries[2]["isCompactSummary"] is True


def test_reopen_continues_chain(tmp_path):
    with Transcript("s", root=tmp_path) as log:
        uuids = log.append([user("a"), assistant("b")])
    with Transcript("s", root=tmp_path) as again:
        (c,) = again.append([user("c")])
    entries = read_entries(log.path).entries
    assert [e["uuid"] for e in entries] == [*uuids, c]
    assert entries[2]["parentUuid"] == uuids[1]


def test_content_survives_json(tmp_path):
    weird = "naïve 数据 \udcff tab\t nl\n"
    image = Image(source={"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="})
    call = ToolUse(id="t1", name="Read", input={"path": "ü.py"})
    with Transcript("s", root=tmp_path) as log:
        log.append([user(weird), assistant(call),
                    Message(role="user", content=(ToolResult(tool_use_id="t1", content=(Text(text="x"), image),
                                                             is_error=True),))])
    raw = log.path.read_bytes()
    raw.decode("utf-8")  # always valid UTF-8, even with a lone surrogate
    entries = read_entries(log.path).entries
    assert entries[0]["message"]["content"][0]["text"] == weird
    result = entries[2]["message"]["content"][0]
    assert result["is_error"] is True and result["content"][1]["source"]["data"] == "iVBORw0KGgo="


def test_truncated_last_line_is_skipped_and_reported(tmp_path):
    with Transcript("s", root=tmp_path) as log:
        uuids = log.append([user("a"), assistant("b")])
    with open(log.path, "ab") as f:
        f.write(b'{"type": "user", "uuid": "half')
    read = read_entries(log.path)
    assert [e["uuid"] for e in read.entries] == uuids
    assert read.truncated and read.skipped[0][0] == 3 and "truncated last line" in read.skipped[0][1]

    # A writer that reopens the file starts on a fresh line and chains to the last complete entry.
    with Transcript("s", root=tmp_path) as log2:
        (c,) = log2.append([user("c")])
    read = read_entries(log.path)
    assert [e["uuid"] for e in read.entries] == [*uuids, c]
    assert read.entries[-1]["parentUuid"] == uuids[-1]
    assert not read.truncated and [n for n, _ in read.skipped] == [3] and "interrupted" in read.skipped[0][1]


def test_missing_file_is_a_store_error(tmp_path):
    with pytest.raises(StoreError, match="cannot read transcript"):
        read_entries(tmp_path / "nope.jsonl")


WRITER = r"""
import sys
from lossless.messages import user
from lossless.transcript import Transcript
log = Transcript("killed", root=sys.argv[1])
i = 0
while True:
    log.append([user(f"turn {i} " + "x" * (i % 7) * 40_000)])
    i += 1
    if i == 20:
        print("ready", flush=True)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_mid_append_leaves_a_readable_transcript(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    path = transcript_path("killed", tmp_path)
    lines = path.read_bytes().split(b"\n")
    complete, tail = lines[:-1], lines[-1]
    assert len(complete) >= 20
    for raw in complete:
        json.loads(raw)  # every complete line parses
    read = read_entries(path)
    assert len(read.entries) == len(complete)
    assert read.truncated == (tail != b"")
    assert [n for n, _ in read.skipped] == ([len(lines)] if tail else [])
    entries = read.entries
    assert all(e["parentUuid"] == p["uuid"] for p, e in zip(entries, entries[1:]))


def test_system_message_is_logged_as_is(tmp_path):
    with Transcript("s", root=tmp_path) as log:
        log.append([Message(role="system", content=(Text(text="be brief"),)), user("hi")])
    entries = read_entries(log.path).entries
    assert entries[0]["type"] == "system" and entries[0]["message"]["content"][0]["text"] == "be brief"


def test_round_trips_through_the_claude_code_reader(tmp_path):
    from lossless.dialects.claude_code import read_session

    history = [user("task"), *_round(1), *_round(2), assistant("done")]
    with Transcript("s", root=tmp_path) as log:
        log.append(history)
    session = read_session(log.path)
    assert [(m.role, m.content) for m in session.messages] == [(m.role, m.content) for m in history]
