"""What the chat tests share: a scripted model on the fake server, and `lossless chat` in a pty."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from conftest import ROOT

READ_ITEM = re.compile(r"read_file (\S+) → ok\b.*· (sha256:[0-9a-f]{8,24})")
"""A read in a summary's account: its path and the handle of its output."""


def texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    out = []
    for b in content or []:
        if b.get("type") == "text":
            out.append(b["text"])
        elif b.get("type") == "tool_result":
            c = b.get("content")
            out.extend([c] if isinstance(c, str) else [x.get("text", "") for x in c or []])
    return out


def is_main(body: dict[str, Any]) -> bool:
    """A request of the chat's own loop (not a summary, notes or memory side call)."""
    system = body.get("system")
    system = system if isinstance(system, str) else " ".join(b.get("text", "") for b in system or [])
    said = texts(body["messages"][-1])
    # A summary request ends with the instruction to write a <summary>; a request whose context
    # a compaction just replaced ends with the summary itself, which is the loop's own.
    asks_summary = any("<summary>" in t for t in said) and not (said and said[0].startswith("<lossless-summary"))
    return system.startswith("You are lossless chat") and not asks_summary


class SeedsModel:
    """The seeds' "try it", played as the model: glob **/*.py, read one file per call until
    the context shows a compaction (a summary, or snip's placeholder), then answer; recall a handle when asked to;
    run a slow command when asked to; otherwise answer briefly."""

    def __init__(self, workdir: Path, after: int = 3) -> None:
        self.workdir, self.after = workdir, after
        self.files: list[str] = []
        self.compacted_at: int | None = None
        self.read: list[str] = []
        self.n = 0
        self.recalled: tuple[str, str] | None = None
        self.slow_command = "sleep 8"

    def __call__(self, api: str, body: dict[str, Any]) -> Any:
        if not is_main(body):
            return None  # the fake's own answers: the deterministic summary, a short reply
        messages = body["messages"]
        request = next(t for m in reversed(messages) if m["role"] == "user" for t in texts(m)
                       if not any(b.get("type") == "tool_result" for b in m["content"] if isinstance(b, dict))) \
            if any(m["role"] == "user" for m in messages) else ""
        last = messages[-1]
        answering_tools = isinstance(last["content"], list) and any(
            b.get("type") == "tool_result" for b in last["content"])
        if "Read every Python file" in request:
            return self._reading(messages, last, answering_tools)
        if "recall" in request and not answering_tools:
            reads = [r for m in messages for t in texts(m) for r in READ_ITEM.findall(t)]
            self.recalled = reads[0]  # (path, handle) of the earliest read the summaries name
            return [self._use("recall", {"handle": self.recalled[1]})]
        if "slow" in request and not answering_tools:
            return [self._use("bash", {"command": self.slow_command})]
        if "write" in request and not answering_tools:
            return [self._use("write_file", {"path": "notes.txt", "content": "hello\n"})]
        if answering_tools:
            result = last["content"][0]
            return f"Done ({'error' if result.get('is_error') else 'ok'}): {str(result.get('content'))[:60]}"
        return f"Noted: {request[:60]}"

    def _reading(self, messages: list[dict[str, Any]], last: dict[str, Any], answering: bool) -> Any:
        if not answering:
            return [{"type": "text", "text": "Listing the files."}, self._use("glob", {"pattern": "**/*.py"})]
        if not self.files:  # smallest first: the context grows in small steps through each state
            listed = last["content"][0]["content"].split("\n")
            self.files = sorted(listed, key=lambda p: ((self.workdir / p).stat().st_size, p))
        if self.compacted_at is None and any(t.startswith(("<lossless-summary", "[lossless: snipped"))
                                             for m in messages for t in texts(m)):
            self.compacted_at = len(self.read)
        done = self.compacted_at is not None and len(self.read) >= self.compacted_at + self.after
        if done or len(self.read) == len(self.files):
            return f"Read {len(self.read)} files; the context was compacted after {self.compacted_at}."
        path = self.files[len(self.read)]
        self.read.append(path)
        return [self._use("read_file", {"path": path})]

    def _use(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        return {"type": "tool_use", "id": f"toolu_chat_{self.n:04d}", "name": name, "input": params}


def copy_sources(dest: Path) -> Path:
    """A working directory holding a copy of this repository's ``src/`` (real Python files)."""
    work = dest / "repo"
    shutil.copytree(ROOT / "src", work / "src", ignore=shutil.ignore_patterns("__pycache__"))
    return work


def chat_command(server_url: str, *args: str, drawn: bool = False) -> tuple[str, list[str], dict[str, str]]:
    """``lossless chat`` against the fake server: on a dumb terminal (plain text), or ``drawn``
    on an xterm in colour (rich and prompt_toolkit; pexpect does not answer prompt_toolkit's
    cursor-position requests, so it is told not to send them)."""
    env = {**os.environ, "ANTHROPIC_API_KEY": "test", "TERM": "dumb", "NO_COLOR": "1", "COLUMNS": "200",
           "PYTHONUNBUFFERED": "1"}
    if drawn:
        env.update(TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1")
        del env["NO_COLOR"], env["COLUMNS"]
    env.pop("LOSSLESS_HOME", None)
    env.pop("LOSSLESS_DEMO_PACE", None)
    argv = ["-m", "lossless.cli", "chat", "--provider", "anthropic", "--base-url", server_url,
            "--model", "claude-sonnet-4-5", *args]
    return sys.executable, argv, env


def bodies(server: Any) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.path.endswith("/v1/messages") and is_main(r.body)]


def dump(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False)
