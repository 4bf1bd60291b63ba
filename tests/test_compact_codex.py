"""``lossless compact ROLLOUT --codex`` writes a Codex CLI session that ``codex resume`` loads.

The copy is two lines: the source's ``session_meta`` under a new id, and one ``compacted``
line — what Codex's own compaction writes — whose ``replacement_history`` is the compacted
conversation as Codex's Responses items.  Here: what the file holds, on synthetic rollouts
(a custom tool's call stays a custom tool's call; the context Codex sends again on resume is
not kept twice; every call is answered), and the one-line errors.  ``test_codex_cli.py``
resumes such a copy with the real Codex CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lossless.cli import main
from lossless.dialects.codex import read_rollout
from lossless.dialects.responses import problems_responses
from lossless.rounds import validate
from sessions_kit import CX_ID, codex_rollout, fake_home, write_codex

NEW_ID = "3f0c2a8e-5d7b-4e1a-9c44-0a1b2c3d4e5f"


def _big_rollout(calls: int, output_chars: int) -> list[str]:
    """``codex_rollout``'s lines with larger outputs and an ``apply_patch`` (a custom tool) call last."""
    lines = [json.loads(x) for x in codex_rollout(CX_ID, calls=calls)]
    for line in lines:
        p = line["payload"]
        if line["type"] == "response_item" and p.get("type") == "function_call_output":
            n = int(p["call_id"].split("_")[1])
            p["output"] = "\n".join(f"log{n} line {k}: value {k * 7919 % 10007}" for k in range(output_chars // 30))
    end = next(i for i, x in enumerate(lines) if x["type"] == "response_item" and x["payload"].get("role") == "assistant")
    patch = "*** Begin Patch\n*** Update File: log0.txt\n@@\n-old\n+new\n*** End Patch"
    extra = [{"timestamp": lines[end]["timestamp"], "type": "response_item",
              "payload": {"type": "custom_tool_call", "status": "completed", "call_id": "call_patch",
                          "name": "apply_patch", "input": patch}},
             {"timestamp": lines[end]["timestamp"], "type": "response_item",
              "payload": {"type": "custom_tool_call_output", "call_id": "call_patch",
                          "output": "Success. Updated the following files:\nM log0.txt"}}]
    return [json.dumps(x) for x in lines[:end] + extra + lines[end:]]


def _copy(path: Path) -> tuple[dict, dict]:
    meta, compacted, *rest = [json.loads(x) for x in path.read_text().splitlines()]
    assert rest == []
    return meta, compacted


def test_the_copy_is_the_source_meta_and_one_compacted_line(tmp_path, monkeypatch, capsys):
    home = fake_home(tmp_path, monkeypatch)
    src = write_codex(home, _big_rollout(calls=14, output_chars=6_000), CX_ID)
    out = tmp_path / f"rollout-2026-03-04T10-00-00-{NEW_ID}.jsonl"
    assert main(["compact", str(src), "--codex", "-o", str(out), "--window", "16000",
                 "--store", str(tmp_path / "store"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stages"] and report["tokens_after"] < 16_000 < report["tokens_before"]
    assert report["resume"].startswith(f"cd /work/acme && codex resume {NEW_ID}")
    assert f"once it is under {home / '.codex' / 'sessions'} as rollout-…-{NEW_ID}.jsonl" in report["resume"]  # -o put it elsewhere
    meta, compacted = _copy(out)
    source_meta = json.loads(src.read_text().splitlines()[0])
    assert meta["type"] == "session_meta" and meta["payload"]["id"] == NEW_ID
    assert {k: v for k, v in meta["payload"].items() if k not in ("id", "timestamp")} == \
        {k: v for k, v in source_meta["payload"].items() if k not in ("id", "timestamp")}
    items = compacted["payload"]["replacement_history"]
    assert compacted["type"] == "compacted" and compacted["payload"]["message"].startswith("[lossless compact]")
    assert problems_responses(items) == []
    texts = [json.dumps(i) for i in items]
    assert sum("<environment_context>" in t for t in texts) == 0  # Codex sends its own again on resume
    assert any("How many lines has each log?" in t for t in texts)  # the user's question, verbatim
    assert any("[lossless:" in t for t in texts)  # the account of what moved, with its handle
    patch = [i for i in items if i.get("call_id") == "call_patch"]
    assert [i["type"] for i in patch] == ["custom_tool_call", "custom_tool_call_output"]
    assert patch[0]["name"] == "apply_patch" and patch[0]["input"].startswith("*** Begin Patch")
    assert all(i["type"] != "message" or isinstance(i["content"], list) for i in items)
    # lossless reads its own copy back: the compacted conversation, valid, the boundary its start
    again = read_rollout(out)
    validate(list(again.messages), "openai")
    assert len(again.boundaries) == 1 and again.session_id == NEW_ID


def test_without_o_the_copy_goes_where_codex_finds_it(tmp_path, monkeypatch, capsys):
    home = fake_home(tmp_path, monkeypatch)
    src = write_codex(home, _big_rollout(calls=10, output_chars=6_000), CX_ID)
    assert main(["compact", CX_ID[:8], "--codex", "--window", "16000", "--store", str(tmp_path / "s")]) == 0
    said = capsys.readouterr().out
    written = sorted(p for p in (home / ".codex" / "sessions").rglob("rollout-*.jsonl") if p != src)
    assert len(written) == 1
    new_id = _copy(written[0])[0]["payload"]["id"]
    assert written[0].name.endswith(f"-{new_id}.jsonl") and new_id != CX_ID
    assert f"carry on in Codex: cd /work/acme && codex resume {new_id}\n" in said


def test_codex_needs_a_codex_rollout_and_not_claude_code_too(tmp_path, monkeypatch, capsys):
    fake_home(tmp_path, monkeypatch)
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]))
    assert main(["compact", str(chat), "--codex"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(chat) in err and "Codex CLI rollout" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_:
        main(["compact", str(chat), "--codex", "--claude-code"])
    assert exit_.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_sessions_counts_the_copys_conversation_and_not_its_compaction_as_codexs(tmp_path, monkeypatch, capsys):
    from lossless.sessions import find_sessions

    home = fake_home(tmp_path, monkeypatch)
    write_codex(home, _big_rollout(calls=10, output_chars=6_000), CX_ID)
    assert main(["compact", CX_ID, "--codex", "--window", "16000", "--store", str(tmp_path / "s")]) == 0
    capsys.readouterr()
    original, copy = sorted(find_sessions(["codex"]), key=lambda s: s.id != CX_ID)
    assert original.id == CX_ID and copy.id != CX_ID
    assert copy.compactions == 0 and copy.calls == ()  # lossless compacted it; nothing is spent until it resumes
    assert 0 < copy.messages < original.messages
