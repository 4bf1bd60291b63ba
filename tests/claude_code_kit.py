"""Running the real Claude Code CLI in tests: install it once, run it headless or at a
pseudo-terminal, and script the model it talks to through ``FakeServer``'s responder.

    binary, why = install_claude_code(cache / "claude-code")   # None and the reason when npm fails
    run = run_claude(binary, srv.base_url, project, home, "Read the notes.", "--model", "claude-sonnet-4-5")
    run.result["result"]                                        # the --output-format json answer

Claude Code runs with ``HOME`` in a temp dir and telemetry off; nothing of the
developer's own Claude setup leaks in.

What Claude Code 2.1 sends (seen against the fake; the fake answers all of it):
``HEAD /`` first (a connectivity check), then ``POST /v1/messages?beta=true``, always
streamed, with ``x-api-key``, ``anthropic-version: 2023-06-01`` and ``anthropic-beta``
(``claude-code-20250219``, ``interleaved-thinking-…``, ``context-management-…``,
``prompt-caching-scope-…``; newer models add ``context-1m-…``, ``effort-…`` and
``mid-conversation-system-…``).  The body: ``max_tokens`` 32k (Sonnet 4.5) or 64k
(the default model; ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` lowers it), ``thinking``
``enabled`` with a budget (Sonnet 4.5) or ``adaptive``, ``context_management``
(``clear_thinking``, keep all), ``output_config.effort``, ``metadata.user_id``, system
blocks with ``cache_control`` (a billing-header text block first), a breakpoint on
the last user block, a ``<system-reminder>`` in the first user message, 24 tools by
default (``--tools Read,Bash`` narrows them) and, for newer models with the agent and
skill tools, a ``role: "system"`` message after the first.  Headless (``-p``) makes
no side calls; interactive mode names the session with one (no tools, thinking
disabled, ``output_config.format`` a JSON schema for ``{"title": …}``).  No
``count_tokens``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from filelock import FileLock

PACKAGE = "@anthropic-ai/claude-code@^2.1"
FLAGS = ("--output-format", "json", "--tools", "Read,Bash", "--allowedTools", "Read,Bash", "--max-turns", "40")


def cache_dir() -> Path:
    root = os.environ.get("LOSSLESS_TEST_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                   "lossless-tests")
    return Path(root) / "claude-code"


def _version(binary: Path) -> str | None:
    try:
        proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def install_claude_code(target: Path) -> tuple[Path | None, str]:
    """The ``claude`` binary under ``target`` (installed there when missing or broken),
    or None and the reason the install failed (``install_npm``)."""
    return install_npm(target, PACKAGE, "claude", "Claude Code")


def install_npm(target: Path, package: str, name: str, label: str) -> tuple[Path | None, str]:
    """The ``name`` binary of npm ``package`` under ``target`` (installed there when missing or
    broken), or None and the reason the install failed.  A lock keeps concurrent test sessions
    from installing over each other; the install goes to a sibling directory first and
    is renamed into place, so a half-finished one is never used."""
    binary = target / "node_modules" / ".bin" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock", timeout=300):
        if _version(binary):
            return binary, ""
        npm = shutil.which("npm")
        if npm is None:
            return None, f"npm is not installed ({label} comes from the npm registry)"
        staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
        try:
            proc = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(staging), package],
                                  capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            shutil.rmtree(staging, ignore_errors=True)
            return None, f"npm install {package} timed out"
        if proc.returncode != 0 or not _version(staging / "node_modules" / ".bin" / name):
            shutil.rmtree(staging, ignore_errors=True)
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return None, f"npm install {package} failed: {last}"
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
        return binary, ""


@dataclass(frozen=True)
class Run:
    proc: subprocess.CompletedProcess[str]
    home: Path

    @property
    def result(self) -> dict[str, Any]:
        """The ``--output-format json`` result object (fails the test with stderr if absent)."""
        assert self.proc.stdout.strip(), f"no output; exit {self.proc.returncode}; stderr: {self.proc.stderr[-2000:]}"
        return json.loads(self.proc.stdout.strip().splitlines()[-1])

    def transcripts(self) -> list[Path]:
        """Claude Code's own session logs under the temp HOME."""
        return sorted((self.home / ".claude" / "projects").glob("*/*.jsonl"))


def claude_env(base_url: str, home: Path) -> dict[str, str]:
    """A clean environment: nothing of the developer's own Claude setup leaks in."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
            "ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": "test", "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}


def run_claude(claude: Path, base_url: str, project: Path, home: Path, prompt: str, *flags: str,
               timeout: float = 90, env: Mapping[str, str] | None = None) -> Run:
    home.mkdir(exist_ok=True)
    proc = subprocess.run([str(claude), "-p", prompt, *FLAGS, *flags], env={**claude_env(base_url, home), **(env or {})},
                          cwd=project, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return Run(proc, home)


# -- scripting the model ------------------------------------------------------------
Step = Callable[[dict[str, Any]], list[dict[str, Any]]]


def step_of(body: Mapping[str, Any]) -> int:
    """How many assistant turns the request carries: the index of the answer it wants."""
    return sum(1 for m in body.get("messages") or [] if isinstance(m, Mapping) and m.get("role") == "assistant")


def tool_use(n: int, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{n:02d}_{name.lower()}", "name": name, "input": arguments}


def thinking(text: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": "sig-" + hashlib.sha256(text.encode()).hexdigest()[:16]}


class Script:
    """A responder playing the model: the main conversation (recognised by its ``Read``
    tool) gets ``steps[step_of(body)]``; any other request (a side call) gets None,
    the fake's default."""

    def __init__(self, *steps: Step) -> None:
        self.steps = steps

    def __call__(self, api: str, body: dict[str, Any]) -> list[dict[str, Any]] | None:
        if not any(t.get("name") == "Read" for t in body.get("tools") or []):
            return None
        step = step_of(body)
        if step >= len(self.steps):
            return [{"type": "text", "text": f"script exhausted at step {step}"}]
        return self.steps[step](body)


def tool_results(body: Mapping[str, Any]) -> dict[str, str]:
    """tool_use_id → the text of its tool_result, over the whole request."""
    out = {}
    for message in body.get("messages") or []:
        for block in message["content"] if isinstance(message.get("content"), list) else []:
            if block.get("type") == "tool_result":
                content = block.get("content")
                out[block["tool_use_id"]] = content if isinstance(content, str) else "".join(
                    c.get("text", "") for c in content or [] if isinstance(c, Mapping))
    return out


def last_result_ids(body: Mapping[str, Any]) -> list[str]:
    """The tool_use ids the request's last message answers (its tail, never compacted)."""
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content") if isinstance(last, Mapping) else None
    return [b["tool_use_id"] for b in content if b.get("type") == "tool_result"] if isinstance(content, list) else []



# -- a pseudo-terminal ------------------------------------------------------------------
class Terminal:
    """A pseudo-terminal running a command: type into it, wait until its screen shows a text."""

    ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-Za-z]|\x1b[=>]")

    def __init__(self, argv: list[str], env: Mapping[str, str], cwd: Path) -> None:
        import fcntl
        import struct
        import termios

        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a TUI draws nothing at 0x0
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=dict(env), cwd=cwd,
                                     start_new_session=True)
        os.close(slave)
        self.raw = b""

    def screen(self) -> str:
        return self.ANSI.sub(b"", self.raw).decode("utf-8", "replace")

    def shows(self, text: str) -> bool:
        """Whether ``text`` (spaces ignored: a TUI moves the cursor instead of writing them) is on screen."""
        return text.replace(" ", "") in self.screen().replace(" ", "")

    def wait_for(self, text: str, timeout: float = 30) -> None:
        import select
        import time

        deadline = time.monotonic() + timeout
        while not self.shows(text):
            left = deadline - time.monotonic()
            assert left > 0, f"{text!r} never appeared; the screen ends with: {self.screen()[-1500:]!r}"
            if select.select([self.master], [], [], min(left, 0.2))[0]:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # the other side closed: the command has exited
                    chunk = b""
                assert chunk, f"exited before {text!r} appeared: {self.screen()[-1500:]!r}"
                self.raw += chunk

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self, timeout: float = 30) -> int:
        """Wait for the command to exit (it was told to), then release the terminal; its exit code."""
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.kill()

    def kill(self) -> None:
        """Stop the command now if it still runs, and release the terminal (idempotent)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.master >= 0:
            os.close(self.master)
            self.master = -1
