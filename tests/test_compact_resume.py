"""``lossless compact SESSION --claude-code`` writes a session the real Claude Code CLI resumes.

A fake ``~/.claude/projects`` holds one session — a real one from ``../shared/data``
when it is there, else a synthetic one — rewritten to a project folder of this test;
``lossless compact <id> --claude-code`` under a small window writes a compacted copy
under a new id; ``claude -p … --resume <new id>`` (npm ``@anthropic-ai/claude-code``,
headless, offline against ``FakeServer``) carries on from it.  The request Claude Code
sends is the compacted conversation, with the new prompt after it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from claude_code_kit import cache_dir, install_claude_code, run_claude
from lossless.cli import main
from lossless.dialects.anthropic import from_anthropic
from lossless.dialects.claude_code import project_folder, read_session
from lossless.rounds import validate
from lossless.testing import FakeServer
from sessions_kit import claude_session, real_claude_code

WINDOW = 40_000


@pytest.fixture(scope="module")
def claude() -> Path:
    binary, why = install_claude_code(cache_dir())
    if binary is None:
        pytest.skip(f"Claude Code CLI unavailable: {why}")
    return binary


def _source(home: Path, project: Path, kind: str) -> tuple[str, Path]:
    """A session in ``home``'s Claude Code projects folder, run (by its lines) in ``project``."""
    folder = home / ".claude" / "projects" / project_folder(str(project))
    folder.mkdir(parents=True)
    if kind == "real":
        real = real_claude_code("tool_heavy.jsonl")
        if real is None:
            pytest.skip("../shared/data is absent (a fresh clone): the synthetic session stands in")
        lines = real.read_text(encoding="utf-8").splitlines()
    else:
        lines = claude_session(rounds=12, result_chars=9_000)
    sid = "5e55a0c1-0000-4000-8000-000000000001"
    entries = []
    for line in lines:
        entry = json.loads(line)
        if "cwd" in entry:
            entry["cwd"] = str(project)
        if "sessionId" in entry:
            entry["sessionId"] = sid
        entries.append(json.dumps(entry))
    path = folder / f"{sid}.jsonl"
    path.write_text("\n".join(entries) + "\n", encoding="utf-8")
    return sid, path


@pytest.mark.parametrize("kind", ["real", "synthetic"])
def test_claude_resumes_the_session_compact_wrote(claude, kind, tmp_path, monkeypatch, capsys):
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    sid, source = _source(home, project, kind)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.chdir(tmp_path)

    assert main(["compact", sid[:8], "--claude-code", "--window", str(WINDOW), "--json",
                 "--store", str(tmp_path / "store")]) == 0
    report = json.loads(capsys.readouterr().out)
    written = Path(report["output"])
    new_id = written.stem
    assert written.parent == source.parent and new_id != sid
    assert report["resume"] == f"cd {project} && claude --resume {new_id}"
    assert report["stages"] and report["tokens_after"] < report["tokens_before"]
    compacted = read_session(written)  # our own reader takes it back as a valid conversation
    validate(compacted.messages)
    assert len(compacted.messages) == report["messages_after"]

    with FakeServer() as srv:
        run = run_claude(claude, srv.base_url, project, home, "Carry on where we left off.",
                         "--resume", new_id, "--model", "claude-sonnet-4-5")
        posts = [r for r in srv.requests if r.method == "POST" and r.body.get("tools")]
        errors = srv.errors
    assert errors == []
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    assert run.result["is_error"] is False
    (body,) = [r.body for r in posts][:1]
    sent = body["messages"]
    validate(from_anthropic(sent))
    text = json.dumps(sent)
    assert len(sent) >= len(compacted.messages)  # the whole compacted conversation, then the new prompt
    assert "Carry on where we left off." in json.dumps(sent[-1])
    # what lossless left in place of what it removed reached the model, with its handles
    handles = report["handles"]
    assert handles and any(h in text for h in handles)
    # and every tool call lossless kept is still paired with its result
    kept = {b["id"] for m in sent if m["role"] == "assistant" for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_use"}
    expected = {b.id for m in compacted.messages for b in m.content if b.type == "tool_use"}
    assert kept == expected
