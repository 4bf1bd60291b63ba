"""A real agent loop: the official ``anthropic`` SDK for the model, lossless for the context.

    python examples/agent_loop.py                       # offline: a scripted model on a local fake server
    python examples/agent_loop.py --base-url https://api.anthropic.com --model claude-sonnet-4-5

The loop is the one in the README: ``cm.prepare`` before each call, send ``view.messages``,
``cm.observe(response.usage)``, append the assistant turn and the tool results.  Two toy
tools run for real (``read_file`` under one directory, ``run_command`` from a fixed list),
plus lossless's ``recall``, which brings back what a marker moved out of the context.
Offline, the "model" is a script that reads each HTTP request as it leaves the SDK (it sees
exactly what a real model would) and queues its answer on lossless's ``FakeServer``, which
rejects an invalid request with the real API's 400.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anthropic

import lossless
from lossless import ContextManager
from lossless.testing import FakeServer, Faults
from lossless.tools import RECALL_TOOL

SYSTEM = "You are a code reader. Use the tools; when a marker hides something you need, call recall with its handle."
TASK = "Read the Python files in this directory and explain in five bullet points how the modules fit together."
COMMANDS = {"ls -l": ["ls", "-l"], "wc -l *.py": ["wc", "-l"], "grep -rn 'def ' .": ["grep", "-rn", "def ", "."]}
TOOLS = [
    {"name": "read_file", "description": "Read a text file, by path relative to the working directory.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    # Named run_command, not "run": lossless knows tools by name (ContextConfig.compactable_tools).
    {"name": "run_command", "description": "Run one of a few read-only shell commands in the working directory.",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string", "enum": sorted(COMMANDS)}},
                      "required": ["command"]}},
    RECALL_TOOL,
]


def run_tool(name: str, args: dict[str, Any], workdir: Path, cm: ContextManager) -> tuple[str, bool]:
    """(output, is_error) of one tool call; never raises for the model's mistakes."""
    if name == "recall":
        return cm.run_tool("recall", args), False
    if name == "read_file":
        path = (workdir / str(args.get("path", ""))).resolve()
        if not path.is_relative_to(workdir) or not path.is_file():
            return f"error: no file {args.get('path')!r} under the working directory", True
        return path.read_text(errors="replace"), False
    if name == "run_command" and args.get("command") in COMMANDS:
        argv = COMMANDS[args["command"]]
        if argv[0] == "wc":  # expand *.py ourselves: no shell
            argv = argv + sorted(p.name for p in workdir.glob("*.py"))
        try:
            done = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=10, errors="replace")
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"error: {exc}", True
        return (done.stdout + done.stderr) or "(no output)", done.returncode != 0
    return f"error: unknown tool or command {name} {json.dumps(args)}", True


def agent_loop(client: anthropic.Anthropic, model: str, cm: ContextManager, workdir: Path,
               *, max_turns: int = 40, out: Any = print) -> list[dict[str, Any]]:
    """Run the task to the model's final answer; return one record per tool call."""
    history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    calls: list[dict[str, Any]] = []
    for turn in range(1, max_turns + 1):
        view = cm.prepare(history, system=SYSTEM, tools=TOOLS)
        response = client.messages.create(model=model, max_tokens=cm.config.output_tokens, system=SYSTEM,
                                          tools=TOOLS, messages=view.messages)
        cm.observe(response.usage)
        s = view.state
        out(f"turn {turn:2d}: {s.tokens:6,} tokens sent ({s.percent_left:5.1f}% left) · "
            f"reported {response.usage.input_tokens:,} · stages: {', '.join(e.stage for e in view.fired) or '-'}")
        for event in view.fired:
            out(f"         └ {event.stage}: {event.detail}")
        # The SDK's blocks are objects; lossless (and the next request) take the API's dict form.
        content = [block.model_dump(mode="json", exclude_none=True) for block in response.content]
        results = []
        for block in content:
            if block["type"] == "tool_use":
                text, is_error = run_tool(block["name"], block["input"], workdir, cm)
                calls.append({"id": block["id"], "name": block["name"], "input": block["input"], "output": text})
                out(f"         {block['name']}({json.dumps(block['input'])}) → {len(text):,} chars")
                results.append({"type": "tool_result", "tool_use_id": block["id"], "content": text,
                                **({"is_error": True} if is_error else {})})
        history = view.messages + [{"role": "assistant", "content": content}]
        if not results:  # no tool call: the model's final answer
            out("\n" + "".join(b.get("text", "") for b in content))
            return calls
        history.append({"role": "user", "content": results})
    raise RuntimeError(f"no final answer after {max_turns} turns")


class ScriptedModel:
    """The offline model: called on every request before it is sent (an httpx event hook), it
    reads the messages and queues its answer on the fake server — list the directory, grep it,
    read every file two at a time, then recall the handle of the latest marker it sees."""

    def __init__(self, server: FakeServer, workdir: Path) -> None:
        files = sorted(p.name for p in workdir.glob("*.py"))
        self.server, self.n = server, 0
        self.plan: list[list[tuple[str, dict[str, Any]]]] = [
            [("run_command", {"command": "ls -l"}), ("run_command", {"command": "wc -l *.py"})],
            [("run_command", {"command": "grep -rn 'def ' ."})],
            *([("read_file", {"path": f}) for f in files[i:i + 2]] for i in range(0, len(files), 2)),
        ]
        self.recalled = False

    def __call__(self, request: Any) -> None:  # an httpx Request, as the SDK builds it
        if request.url.path.endswith("/v1/messages"):
            self.server.enqueue(self.answer(json.loads(request.content)["messages"]))

    def answer(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]] | str:
        if self.plan:
            return [{"type": "text", "text": "Next step."}, *map(self._use, self.plan.pop(0))]
        handles = re.findall(r'handle=\\?"?(sha256:[0-9a-f]{24})', json.dumps(messages))  # a marker names it
        if handles and not self.recalled:
            self.recalled = True
            return [self._use(("recall", {"handle": handles[-1], "limit": 20_000}))]
        return "Done: the modules are a pipeline of stages behind ContextManager (scripted answer)."

    def _use(self, call: tuple[str, dict[str, Any]]) -> dict[str, Any]:
        self.n += 1
        return {"type": "tool_use", "id": f"toolu_{self.n:04d}", "name": call[0], "input": call[1]}


def offline(server: FakeServer, cm: ContextManager, workdir: Path, out: Any = print) -> list[dict[str, Any]]:
    """The loop against ``server`` with the scripted model answering (main's default)."""
    hook = ScriptedModel(server, workdir)
    http = anthropic.DefaultHttpxClient(event_hooks={"request": [hook]})
    with anthropic.Anthropic(base_url=server.base_url, api_key="offline", max_retries=0, http_client=http) as client:
        return agent_loop(client, "fake-model", cm, workdir, out=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="a real Anthropic-compatible endpoint (default: offline fake server)")
    parser.add_argument("--model", default="claude-sonnet-4-5")
    parser.add_argument("--window", type=int, default=16_000, help="context window to manage (small: stages fire)")
    parser.add_argument("--dir", type=Path, default=Path(lossless.__file__).parent, help="directory the tools see")
    parser.add_argument("--store", help="lossless store (default: a temporary directory)")
    args = parser.parse_args(argv)
    workdir = args.dir.resolve()
    with tempfile.TemporaryDirectory(prefix="agent-loop-") as tmp, \
            ContextManager(window=args.window, max_output=args.window // 4, store=args.store or tmp) as cm:
        if args.base_url:  # the API key comes from ANTHROPIC_API_KEY, as the SDK reads it
            with anthropic.Anthropic(base_url=args.base_url) as client:
                agent_loop(client, args.model, cm, workdir)
            return 0
        # The fake refuses, like the API, any request above the window (by its own count).
        with FakeServer(Faults(max_prompt_tokens=args.window)) as server:
            offline(server, cm, workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
