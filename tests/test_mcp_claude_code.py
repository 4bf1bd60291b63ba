"""Claude Code as the MCP client: the real CLI, headless against the fake server, with
`lossless mcp` in its `--mcp-config`.  The scripted model calls lossless's tools through
Claude Code, and the requests Claude Code sends back carry what the server answered.

The CLI is installed (once, cached) by the Claude Code harness (claude_code_kit); this module
skips when the install is unavailable, saying why.  Claude Code connects to MCP servers while it
starts, so a request may come before lossless's tools are listed (on a loaded machine): the
scripted model then waits with a short `sleep` and goes on once the tools are there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import claude_code_kit as cc
from lossless.mcp import Toolbox
from lossless.testing import FakeServer

pytest.importorskip("mcp")

PREFIX = "mcp__lossless__"
KEY = "sk-ant-api03-" + "Qw7e" * 12


@pytest.fixture(scope="module")
def claude() -> Path:
    binary, why = cc.install_claude_code(cc.cache_dir())
    if binary is None:
        pytest.skip(f"Claude Code CLI unavailable: {why}")
    return binary


def _lossless() -> str:
    beside = Path(sys.executable).parent / "lossless"
    return str(beside) if beside.exists() else "lossless"


def _use(n: int, tool: str, **arguments) -> list[dict]:
    return [{"type": "tool_use", "id": f"toolu_{n:02d}", "name": PREFIX + tool, "input": arguments}]


def _results(requests) -> dict[str, dict]:
    """tool_use_id → the tool_result block Claude Code sent back for it."""
    return {b["tool_use_id"]: b for r in requests if isinstance(r.body, dict)
            for m in r.body.get("messages") or [] if isinstance(m.get("content"), list)
            for b in m["content"] if b.get("type") == "tool_result"}


def _text(block: dict) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)


def test_claude_code_calls_lossless_tools_over_mcp(claude, tmp_path):
    store, home, project = tmp_path / "store", tmp_path / "home", tmp_path / "project"
    project.mkdir()
    home.mkdir()
    box = Toolbox.open(store)
    handle = box.artifacts.put("".join(f"{i:04d} the build log line\n" for i in range(800)))
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"lossless": {"command": _lossless(),
                                                               "args": ["mcp", "--store", str(store)]}}}))
    tools = ",".join(PREFIX + s for s in ("recall", "memory_add", "memory_view"))
    script: list[Any] = [_use(1, "recall", handle=handle, offset=1_000, limit=200),
                         _use(2, "memory_add", name="Release key", description="How releases are signed",
                              type="reference", body=f"Sign releases with RELEASE_KEY={KEY}."),
                         _use(3, "memory_view", id="../../etc/passwd"),
                         "All done."]
    waits: list[int] = []

    def model(api: str, body: dict) -> Any:
        names = {t.get("name") for t in body.get("tools") or []}
        if not names:
            return None  # a side request (no tools): the fake's default answer
        if PREFIX + "recall" not in names:  # lossless mcp not connected yet: wait for it
            waits.append(len(waits) + 1)
            return [{"type": "tool_use", "id": f"toolu_wait_{len(waits)}", "name": "Bash",
                     "input": {"command": "sleep 1", "description": "wait"}}]
        return script.pop(0) if script else "All done."

    with FakeServer(responder=model) as server:
        proc = subprocess.run(
            [str(claude), "-p", "Read back the build log and note the release key.", "--output-format", "json",
             "--model", "claude-sonnet-4-5", "--mcp-config", str(config), "--strict-mcp-config",
             "--allowedTools", tools + ",Bash(sleep 1)", "--max-turns", "20"],
            env=cc.claude_env(server.base_url, home), cwd=project, capture_output=True, text=True,
            timeout=180, stdin=subprocess.DEVNULL)
        requests = [r for r in server.requests if r.path == "/v1/messages"
                    and PREFIX + "recall" in {t.get("name") for t in r.body.get("tools") or []}]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(waits) < 15 and not script  # every scripted step ran
    assert json.loads(proc.stdout.strip().splitlines()[-1])["result"] == "All done."
    offered = {t["name"] for t in requests[0].body["tools"] if t["name"].startswith(PREFIX)}
    assert offered == {PREFIX + s for s in ("recall", "memory_search", "memory_view", "memory_add", "memory_list",
                                            "context_stats")}
    results = _results(requests)
    expected = box.call("recall", {"handle": handle, "offset": 1_000, "limit": 200}).text
    assert _text(results["toolu_01"]) == expected and not results["toolu_01"].get("is_error")
    on_disk = (store / "memory" / "release-key.md").read_text()
    assert KEY not in on_disk and "[REDACTED:" in on_disk
    assert "redacted" in _text(results["toolu_02"]) and KEY not in _text(results["toolu_02"])
    refused = results["toolu_03"]
    assert refused.get("is_error") and "invalid memory id" in _text(refused) and "\n" not in _text(refused).strip()
