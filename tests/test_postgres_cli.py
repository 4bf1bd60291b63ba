"""The CLI pointed at one database: compact puts its artifacts there, recall finds them from
anywhere, the memory commands read and write rows."""

from __future__ import annotations

import json

from lossless.cli import main
from lossless.storage import open_store
from test_cli import write_session


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compact_then_recall_through_the_database(pg_url, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    f, o = tmp_path / "s.json", tmp_path / "out.json"
    write_session(f)
    code, out, _ = run(capsys, "compact", str(f), "--window", "16000", "-o", str(o), "--store", pg_url, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["handles"] and report["store"].startswith("postgresql://127.0.0.1:")
    assert not (tmp_path / ".lossless" / "artifacts").exists()  # nothing went to a local directory
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("LOSSLESS_STORE", pg_url)
    for h in report["handles"]:
        code, text, _ = run(capsys, "recall", h)
        assert code == 0 and text


def test_memory_commands_on_the_database(pg_url, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "local"))
    code, out, err = run(capsys, "memory", "--store", pg_url, "add", "--name", "Deploy on Fridays",
                         "--description", "the team deploys on Fridays", "--type", "project", "--body", "Never on Mondays.")
    assert code == 0, err
    code, out, _ = run(capsys, "memory", "--store", pg_url, "show", "deploy-on-fridays")
    assert code == 0 and "Never on Mondays." in out and "type: project" in out
    monkeypatch.setenv("LOSSLESS_STORE", pg_url)
    code, out, _ = run(capsys, "memory", "search", "when", "does", "the", "team", "deploy")
    assert code == 0 and "deploy-on-fridays" in out
    code, out, _ = run(capsys, "memory", "index")
    assert code == 0 and "Deploy on Fridays" in out
    code, out, _ = run(capsys, "memory", "rm", "deploy-on-fridays")
    assert code == 0
    assert open_store(pg_url).memory.memories() == ()
    code, out, _ = run(capsys, "memory", "consolidate", "--provider", "fake")
    assert code == 0


def test_the_proxy_keeps_transcripts_and_artifacts_in_the_database(pg_url, tmp_path, monkeypatch):
    from proxy_kit import proxied
    from test_proxy_anthropic import _agent, _client

    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "local"))
    with proxied(tmp_path, store=pg_url) as (srv, proxy):
        _agent(srv, _client(proxy), 24, stream=False)
        stats = proxy.stats()
    (conv,) = stats["conversations"]
    assert conv["handles"] >= 1
    store = open_store(pg_url)
    (session,) = store.transcripts.sessions()
    assert len(store.transcripts.entries(session)) >= 24
    from lossless.storage.move import handles

    assert len(handles(store)) >= 1
    assert not (tmp_path / "store").exists()
    store.close()


def test_mcp_serves_the_database(pg_url, tmp_path, monkeypatch):
    """``lossless mcp --store postgresql://…``: recall, memories (in a view) and context_stats all
    come from the database — a session written by an agent elsewhere is reported here."""
    from lossless import ContextManager
    from lossless.mcp import Toolbox
    from lossless.messages import Message, Text, ToolResult, ToolUse

    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "local"))
    cm = ContextManager(window=16_000, store=pg_url, session_id="agent-1")
    history = [Message(role="user", content=(Text(text="Read the log."),))]
    for i in range(12):
        tid = f"toolu_{i:03d}"
        history = [*history,
                   Message(role="assistant", content=(ToolUse(id=tid, name="Bash", input={"command": f"cat log{i}"}),)),
                   Message(role="user", content=(ToolResult(tool_use_id=tid, content=f"line {i}\n" * 3_000),))]
        history = cm.prepare(history).neutral
    cm.close()
    box = Toolbox.open(pg_url, project="acme", agent="reviewer")
    stats = box.call("context_stats", {})
    assert stats.data["session"] == "agent-1" and stats.data["handles"]["count"] > 0
    assert stats.data["handles"]["recallable"] == stats.data["handles"]["count"]
    handle = stats.data["handles"]["listed"][0]["handle"]
    assert "line" in box.call("recall", {"handle": handle}).text
    box.call("memory_add", {"name": "Log rotation", "description": "logs rotate daily", "type": "project",
                            "body": "b"})
    other = Toolbox.open(pg_url, project="other")
    assert "log-rotation" not in {m["id"] for m in other.call("memory_list", {}).data["memories"]}
    assert "log-rotation" in {m["id"] for m in box.call("memory_list", {}).data["memories"]}
    monkeypatch.setenv("LOSSLESS_STORE", pg_url)
    assert Toolbox.open().call("context_stats", {"session": "agent-1"}).data["session"] == "agent-1"
