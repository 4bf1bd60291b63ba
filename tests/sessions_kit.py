"""Session files for the tests of ``lossless sessions``/``report`` and of resuming: the real
Claude Code sessions in ``../shared/data`` when they are there, and synthetic ones — a
Claude Code session and a Codex CLI rollout — written in each agent's own format.

    lines = claude_session(rounds=6)                  # JSONL lines of a Claude Code session
    lines = codex_rollout(sid, calls=3)               # JSONL lines of a Codex CLI rollout
    real_claude_code("short.jsonl")                   # Path, or None on a fresh clone
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "claude-code"
CC_ID = "5e55a0c1-0000-4000-8000-00000000000a"
"""The synthetic Claude Code session's id."""
CX_ID = "0199a213-81c0-7800-8aa1-bbab2a035a53"
"""The synthetic Codex CLI rollout's id."""


def fake_home(tmp_path: Path, monkeypatch: Any) -> Path:
    """An empty ``$HOME`` under ``tmp_path``, with neither agent's folder moved elsewhere."""
    home = tmp_path / "home"
    home.mkdir()
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    return home


def real_claude_code(name: str) -> Path | None:
    path = DATA / name
    return path if path.is_file() else None


def _stamp(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def claude_session(*, rounds: int = 6, result_chars: int = 4_000, model: str = "claude-sonnet-4-5-20250929",
                   sid: str = CC_ID, cwd: str = "/work/app",
                   start: datetime = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc),
                   split: bool = True) -> list[str]:
    """A Claude Code session: a prompt, ``rounds`` Read calls each answered with
    ``result_chars`` of file text, and a closing answer.  Each response is written as
    Claude Code writes it — one line per block sharing ``message.id`` (when ``split``),
    usage repeated — and its usage grows with the context."""
    t = start
    entries: list[dict[str, Any]] = []
    parent: str | None = None
    n = 0

    def add(kind: str, message: dict[str, Any], **extra: Any) -> None:
        nonlocal parent, n, t
        n += 1
        t += timedelta(seconds=7)
        uid = f"00000000-0000-4000-8000-{n:012d}"
        entries.append({"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": cwd,
                        "sessionId": sid, "version": "2.1.38", "gitBranch": "main", "type": kind,
                        "message": message, "uuid": uid, "timestamp": _stamp(t), **extra})
        parent = uid

    context = 9_000

    def respond(i: int, blocks: list[dict[str, Any]], stop: str) -> None:
        nonlocal context
        usage = {"input_tokens": 3, "cache_creation_input_tokens": 1_200, "cache_read_input_tokens": context,
                 "output_tokens": 60}
        parts = [[b] for b in blocks] if split else [blocks]
        for part in parts:
            add("assistant", {"model": model, "id": f"msg_{sid[:8]}_{i:03d}", "type": "message", "role": "assistant",
                              "content": part, "stop_reason": stop, "stop_sequence": None, "usage": usage},
                requestId=f"req_{sid[:8]}_{i:03d}")
        context += 1_200 + result_chars // 4

    add("user", {"role": "user", "content": "Read the source files one by one and tell me what each does."})
    for i in range(rounds):
        tid = f"toolu_{sid[:8]}_{i:03d}"
        respond(i, [{"type": "text", "text": f"Reading part {i}."},
                    {"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": f"{cwd}/src/part{i}.py"}}],
                "tool_use")
        body = "".join(f"{k:>5}→value_{i}_{k} = compute({k}, 'part {i}')\n" for k in range(result_chars // 40))
        add("user", {"role": "user", "content": [{"tool_use_id": tid, "type": "tool_result", "content": body}]},
            toolUseResult={"type": "text", "file": {"filePath": f"{cwd}/src/part{i}.py"}})
    respond(rounds, [{"type": "text", "text": f"All {rounds} parts compute values; part 0 starts it."}], "end_turn")
    return [json.dumps(e) for e in entries]


def codex_rollout(sid: str = "0199a213-81c0-7800-8aa1-bbab2a035a53", *, calls: int = 3, cwd: str = "/work/acme",
                  model: str = "gpt-5-codex", start: datetime = datetime(2026, 3, 3, 14, 0, tzinfo=timezone.utc),
                  window: int = 272_000, repeat_counts: bool = True) -> list[str]:
    """A Codex CLI rollout (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) in the format
    of ``codex-rs``'s ``RolloutLine``: ``session_meta``, ``turn_context``, ``response_item``
    (message, reasoning, function_call, function_call_output) and ``event_msg`` lines, a
    ``token_count`` event after each response with the running total (written twice when
    ``repeat_counts``, as Codex does: the repeat adds nothing)."""
    t = start
    lines: list[dict[str, Any]] = []

    def add(kind: str, payload: dict[str, Any]) -> None:
        nonlocal t
        t += timedelta(seconds=3)
        lines.append({"timestamp": _stamp(t), "type": kind, "payload": payload})

    add("session_meta", {"id": sid, "timestamp": _stamp(start), "cwd": cwd, "originator": "codex_cli_rs",
                         "cli_version": "0.46.0", "instructions": None, "git": {"branch": "main"}})
    add("response_item", {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": f"<environment_context>\n  <cwd>{cwd}</cwd>\n</environment_context>"}]})
    add("turn_context", {"cwd": cwd, "approval_policy": "on-request", "sandbox_policy": {"mode": "workspace-write"},
                         "model": model, "effort": "medium", "summary": "auto"})
    add("response_item", {"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": "How many lines has each log?"}]})
    add("event_msg", {"type": "user_message", "message": "How many lines has each log?", "images": []})
    total = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0, "reasoning_output_tokens": 0,
             "total_tokens": 0}
    prompt = 4_000

    def count(output: int) -> None:
        nonlocal prompt
        cached = prompt - 900 if total["input_tokens"] else 0
        last = {"input_tokens": prompt, "cached_input_tokens": cached, "output_tokens": output,
                "reasoning_output_tokens": output // 2, "total_tokens": prompt + output}
        for key in total:
            total[key] += last[key]
        event = {"type": "token_count", "info": {"total_token_usage": dict(total), "last_token_usage": last,
                                                 "model_context_window": window}, "rate_limits": None}
        for _ in range(2 if repeat_counts else 1):
            add("event_msg", event)
        prompt += 900

    for i in range(calls - 1):
        add("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Counting**"}],
                              "content": None, "encrypted_content": "gAAAAB" + "x" * 40})
        add("response_item", {"type": "function_call", "name": "shell", "call_id": f"call_{i}",
                              "arguments": json.dumps({"command": ["bash", "-lc", f"wc -l log{i}.txt"]})})
        count(40)
        add("response_item", {"type": "function_call_output", "call_id": f"call_{i}",
                              "output": json.dumps({"output": f"{100 * (i + 1)} log{i}.txt\n",
                                                    "metadata": {"exit_code": 0, "duration_seconds": 0.1}})})
    add("response_item", {"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": "Each log has a hundred lines more."}]})
    count(25)
    return [json.dumps(line) for line in lines]


def write_codex(home: Path, lines: list[str], sid: str, day: str = "2026/03/03") -> Path:
    folder = home / ".codex" / "sessions" / day
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rollout-{day.replace('/', '-')}T14-00-00-{sid}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_claude(home: Path, lines: list[str], sid: str, folder: str = "-work-app") -> Path:
    path = home / ".claude" / "projects" / folder / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
