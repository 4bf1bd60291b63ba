"""``lossless demo``: a long, realistic session run through a small window, offline.

The session is built from this package's own files: real file reads (with line
numbers, as coding agents show them) and real command outputs (run with a time
limit), with parallel tool calls, in the shape an agent loop produces.  Each turn
goes through ``ContextManager.prepare`` under a small window; the demo prints what
each stage did, a token gauge, and recalls one moved item to show it comes back
byte for byte.

On a terminal the lines are coloured (rich; ``NO_COLOR`` is respected); piped, or
without rich, they are the same text, plain.  The gauge draws the window as
``inspect`` and ``top`` do: ``█`` tokens in the context, ``·`` free room.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ._common import Out, counted, positive, unwinding_on_termination

USED, FREE = "█", "·"

TASK = (
    "Audit the lossless package: read its modules, run a few commands to see how it is laid out, "
    "and tell me where the context pipeline could lose data. Do not change any public API."
)


def register(sub: Any) -> None:
    s = sub.add_parser("demo", help="run a realistic session through a small window, offline")
    s.add_argument("--window", type=positive, default=24_000, metavar="TOKENS",
                   help="the context window the session runs under (default 24000: small, so every stage fires)")
    s.add_argument("--store", type=Path, help="keep the demo's store here (default: a temporary directory)")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return run_demo(window=args.window, store=args.store, out=Out())


def _numbered(text: str) -> str:
    return "\n".join(f"{i:6}→{line}" for i, line in enumerate(text.splitlines(), 1))


def _run(cmd: list[str], cwd: Path) -> tuple[str, int]:
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=20, errors="replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}", 1
    return (p.stdout + p.stderr), p.returncode


def build_steps(pkg: Path) -> list[list[tuple[str, dict[str, Any], str, bool]]]:
    """Each step is one assistant turn: a list of (tool, input, result, is_error)."""
    files = sorted(p for p in pkg.rglob("*.py") if "__pycache__" not in p.parts)
    root = pkg.parent
    commands = [
        ["ls", "-la", str(pkg)],
        ["wc", "-l", *map(str, files)],
        ["grep", "-rn", "def ", str(pkg)],
        [sys.executable, "-c", "import lossless, sys; print(lossless.__version__, sys.version)"],
        ["grep", "-rn", "-c", "import", str(pkg)],
        ["cat", *map(str, files)],
    ]
    steps: list[list[tuple[str, dict[str, Any], str, bool]]] = []
    ci = 0
    for i in range(0, len(files), 2):
        pair = files[i : i + 2]
        steps.append([("Read", {"file_path": str(f)}, _numbered(f.read_text(errors="replace")), False) for f in pair])
        if i % 4 == 0 and ci < len(commands):
            cmd = commands[ci]
            ci += 1
            out, code = _run(cmd, root)
            shown = " ".join(c if len(c) < 60 else "…/" + Path(c).name for c in cmd[:6])
            steps.append([("Bash", {"command": shown}, out or "(no output)", code != 0)])
    return steps


def run_demo(*, window: int = 24_000, store: Path | None = None, out: Any) -> int:
    import lossless

    pkg = Path(lossless.__file__).resolve().parent
    tmp = None
    with unwinding_on_termination():  # a SIGTERM (`timeout`, a closed terminal) still removes the temporary store
        if store is None:
            tmp = tempfile.TemporaryDirectory(prefix="lossless-demo-")
            store = Path(tmp.name)
        try:
            return _demo(pkg, window, store, out, temporary=tmp is not None)
        finally:
            if tmp is not None:
                tmp.cleanup()


def _demo(pkg: Path, window: int, store: Path, out: Any, *, temporary: bool = False) -> int:
    from ..manager import ContextManager
    from ..messages import Message, Text, ToolResult, ToolUse
    from ..store import ArtifactStore

    # Each run its own session: a second run into the same --store must not append to the first's
    # transcript (its tool ids repeat, so the file would no longer read as one conversation).
    session_id = "demo"
    if (store / "sessions" / session_id).exists():
        session_id = f"demo-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    cm = ContextManager(window=window, store=str(store), session_id=session_id)
    out.segments([("lossless demo", "bold"), (f" — a session built from {pkg}, under a {window:,}-token window", "")])
    b = cm.budget
    out.segments([(f"budget: effective {b.effective:,} · auto-compact threshold {b.threshold:,} · "
                   f"warning {b.warning:,} · blocking {b.blocking:,}", "dim")])
    out.segments([(f"gauge: {USED} tokens in the context, {FREE} free, of the window; green below the warning, "
                   "yellow below the threshold, red past it", "dim")])
    history: list[Message] = [Message(role="user", content=(Text(text=TASK),))]
    originals: dict[str, str] = {}
    moved: list[tuple[str, str]] = []
    raw_tokens = cm.counter.count_message(history[0])
    n = 0
    for turn, step in enumerate(build_steps(pkg), 1):
        uses, results = [], []
        for tool, args, result, err in step:
            n += 1
            tid = f"toolu_demo_{n:03d}"
            uses.append(ToolUse(id=tid, name=tool, input=args))
            results.append(ToolResult(tool_use_id=tid, content=result, is_error=err))
            originals[tid] = result
        names = ", ".join(f"{t} {Path(str(a.get('file_path', ''))).name or a.get('command', '')}"[:60] for t, a, _, _ in step)
        turn_msgs = [Message(role="assistant", content=(Text(text=f"Next: {names}."), *uses)),
                     Message(role="user", content=tuple(results))]
        raw_tokens += sum(cm.counter.count_message(m) for m in turn_msgs)
        history = history + turn_msgs
        view = cm.prepare(history)
        history = view.neutral
        fired = view.fired
        tokens = view.state.tokens
        colour = "red" if tokens >= b.threshold else "yellow" if tokens >= b.warning else "green"
        used, free = _gauge(tokens, window)
        out.segments([(f"turn {turn:2d} ", ""), (used, colour), (free, "dim"), (f" {tokens:6,} tok", "bold"),
                      (f" (unmanaged {raw_tokens:7,})", "dim"),
                      (f" {view.state.percent_left:5.1f}% left · {counted(len(history), 'message')}", "")])
        for e in fired:
            out.segments([("         └ ", "dim"), (e.stage, "magenta"), (f": {e.detail}", "")])
            moved.extend((e.stage, h) for h in e.handles)
    cm.close()
    out.line("")
    out.segments([(f"{counted(len(moved), 'item')} moved out of the context", "bold"),
                   ("; every one is recallable by handle.", "")])
    if moved:
        stage, handle = next(((s, h) for s, h in moved if s == "persist"), moved[0])
        text = ArtifactStore(store).get(handle)
        match = next((tid for tid, o in originals.items() if o == text), None)
        out.segments([(f"recall({handle})", "cyan"), (f" → {len(text):,} characters, from the {stage} stage; ", ""),
                      (f"identical to the original result of {match}." if match
                       else "a JSON record of the moved messages.", "green")])
        out.line("first lines: " + " | ".join(text.splitlines()[:3])[:200])
    transcript = store / "sessions" / session_id / "transcript.jsonl"
    if transcript.exists():
        entries = len(transcript.read_bytes().splitlines())
        out.line(f"transcript: {counted(entries, 'entry')} in {transcript}, appended as messages entered")
    if temporary:
        out.line("(a temporary store, removed now; `lossless demo --store DIR` keeps it to try `lossless recall`)")
    return 0


def _gauge(tokens: int, window: int, width: int = 20) -> tuple[str, str]:
    """The used and the free cells of the window."""
    filled = min(width, round(width * tokens / window))
    return USED * filled, FREE * (width - filled)
