"""``lossless chat --provider demo``: the chat at work with no key and no network.

    work = make_project(Path(tmp))                  # a small generated Python package
    app = App(settings_for(work), DemoModel(pace=1.0), Terminal(interactive=True, script=INPUTS, pace=1.0))
    app.run()

A scripted model plays a session on a project generated in a temporary directory: the chat's
real tools list and read its files (smallest first) into a small window until lossless
compacts the context on its own, the model answers in Markdown, then recalls a file it read
that left the context — back byte for byte through its handle — and the user looks
at ``/context``, compacts with an instruction and asks ``/cost``.  Everything but the model is
the real chat: the pipeline, the store, the transcript, the tools.  Lossless's own calls
(the summaries) get the deterministic answers of ``lossless.testing``.

``pace`` slows the model and the typing to a speed a person can follow (1.0 on a terminal;
``LOSSLESS_DEMO_PACE`` overrides it, 0 runs at full speed).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Generator

from ..markers import SNIPPED_PREFIX, SUMMARY_OPEN
from ..messages import Message, Text, ToolUse
from ..providers.base import Request, Response, Usage
from ..testing.fake_provider import FakeProvider
from ..tokens import default_counter

WINDOW = 16_000
MAX_OUTPUT = 4_000
MODULES = 16

INPUTS = (
    "Read every Python file in this project, one by one, and tell me what it does.",
    "/context",
    "What did inventory/family_03.py say, exactly?",
    "/compact keep the list of files read",
    "/cost",
)
"""What the demo's user types, in order; the session ends after the last."""

_ASKED = re.compile(r"What did (\S+) say\b")
"""The user's question about one file the model read."""
_READ_ITEM = re.compile(r"read_file (\S+) → ok\b.*· (sha256:[0-9a-f]{8,24})")
"""A read in a summary's account of tool calls: its path and the handle of its output."""


def make_project(root: Path) -> Path:
    """A small deterministic package under ``root/project``: modules of growing size, real Python."""
    work = root / "project"
    pkg = work / "inventory"
    pkg.mkdir(parents=True)
    (work / "README.md").write_text("# inventory\n\nStock levels, orders and reports for a parts store.\n")
    (pkg / "__init__.py").write_text('"""Inventory: stock levels, orders and reports.\n\nEach family module '
                                     'takes ordered parts out of stock in steps, never below zero."""\n')
    for i in range(1, MODULES):
        lines = [f'"""Family {i}: the steps that take family-{i} parts out of stock."""', "",
                 "from __future__ import annotations", ""]
        for j in range(3 + i):
            lines += [
                "",
                f"def family_{i}_step_{j}(stock: dict[str, int], order: list[str]) -> dict[str, int]:",
                f'    """Step {j} of family {i}: take each ordered part out of stock, never below zero."""',
                "    left = dict(stock)",
                "    for part in order:",
                f"        left[part] = max(0, left.get(part, 0) - {j + 1})",
                "    return left",
            ]
        (pkg / f"family_{i:02d}.py").write_text("\n".join(lines) + "\n")
    return work


class DemoModel:
    """The demo's model: plays the script on the chat's own requests, answers lossless's
    (summaries, notes) as ``FakeProvider`` does.  A ``Provider`` that streams."""

    def __init__(self, *, pace: float = 0.0) -> None:
        self.pace = pace
        self.side = FakeProvider()
        self.counter = default_counter()
        self.files: list[str] = []
        self.read: list[str] = []
        self.compacted_after: int | None = None
        self.summaries: set[str] = set()
        """The summaries seen in the context while reading: one per compaction."""
        self.calls = 0
        self.task = ""
        """The user's request being worked on: what the script plays next depends on it."""

    def complete(self, request: Request) -> Response:
        if request.purpose != "chat" or not _system(request).startswith("You are lossless chat"):
            return self.side.complete(request)
        content = self._answer(list(request.messages))
        c = self.counter
        usage = Usage(input_tokens=sum(c.count_message(m) for m in request.messages) + c.count_system(request.system)
                      + c.count_tools(request.tools),
                      output_tokens=sum(c.count_text(b.text) for b in content if isinstance(b, Text)))
        stop = "tool_use" if any(isinstance(b, ToolUse) for b in content) else "end_turn"
        return Response(content=content, stop_reason=stop, usage=usage, model="demo")

    def stream(self, request: Request) -> Generator[str, None, Response]:
        """The answer a word at a time, after a pause to think (both scaled by ``pace``)."""
        response = self.complete(request)
        time.sleep(0.5 * self.pace)
        for piece in re.findall(r"\S+\s*|\s+", response.text):
            time.sleep(0.03 * self.pace)
            yield piece
        return response

    # -- the script ------------------------------------------------------------
    def _answer(self, messages: list[Message]) -> tuple[Any, ...]:
        last = messages[-1]
        if not last.tool_results:  # the user asked something new (a compaction keeps their last words whole)
            self.task = last.text
        request = self.task
        if request.startswith("Read every Python file"):
            return self._reading(messages, last)
        asked = _ASKED.match(request)
        if asked:
            path = asked.group(1)
            if last.tool_results:
                return (Text(text=_quoted(str(last.tool_results[0].content))),)
            kept = _verbatim(messages, path)
            if kept is not None:
                return (Text(text=_quoted(kept, recalled=False)),)
            handle = next((h for p, h in (r for m in messages for r in _READ_ITEM.findall(m.text)) if p == path), None)
            if handle is None:
                return (Text(text=f"I did not read `{path}`: it is neither in my context nor in the account of what "
                                  "left it."),)
            return (Text(text=f"`{path}` is no longer in my context; its handle brings it back."),
                    self._use("recall", {"handle": handle}))
        return (Text(text="This is the demo's scripted model: it only plays its script. `lossless chat` with "
                          "`ANTHROPIC_API_KEY` set (or `--provider openai`) talks to a real one."),)

    def _reading(self, messages: list[Message], last: Message) -> tuple[Any, ...]:
        results = last.tool_results
        if not results:
            return (Text(text="I'll list the Python files, then read them one by one."),
                    self._use("glob", {"pattern": "**/*.py"}))
        if not self.files:
            self.files = str(results[0].content).split("\n")
        summaries = {m.text[:120] for m in messages if m.text.startswith((SUMMARY_OPEN, SNIPPED_PREFIX))}
        if summaries - self.summaries and self.compacted_after is None:
            self.compacted_after = len(self.read)
        self.summaries |= summaries
        if len(self.read) < len(self.files):
            path = self.files[len(self.read)]
            self.read.append(path)
            return (self._use("read_file", {"path": path}),)
        return (Text(text=_overview(self.read, self.compacted_after, len(self.summaries))),)

    def _use(self, name: str, params: dict[str, Any]) -> ToolUse:
        self.calls += 1
        return ToolUse(id=f"toolu_demo_{self.calls:04d}", name=name, input=params)


def _system(request: Request) -> str:
    system = request.system
    return system if isinstance(system, str) else " ".join(str(b.get("text", "")) for b in system or ())


def _overview(read: list[str], compacted_after: int | None, compactions: int) -> str:
    families = [p for p in read if "family_" in p]
    times = "once" if compactions == 1 else "twice" if compactions == 2 else f"{compactions} times"
    compacted = (f"My context filled up as I read: lossless **compacted it {times}**, first after "
                 f"{compacted_after} files. The files read in between now stand as an account of what left, each "
                 "one still recallable by its handle; the first and the latest are still here verbatim."
                 if compacted_after is not None else "Everything I read still fits in my context.")
    return (f"## What `inventory` does\n\n"
            f"It keeps a parts store's **stock levels**: each family module takes ordered parts out of stock in "
            f"steps, never below zero.\n\n"
            f"- `inventory/__init__.py`: the package and what it is for\n"
            f"- {len(families)} family modules, `{families[0]}` to `{families[-1]}`, each a few steps longer than "
            f"the last\n\n"
            f"{compacted}")


def _verbatim(messages: list[Message], path: str) -> str | None:
    """The output of a read of ``path`` still in the context as it came (the pinned first rounds,
    the recent ones), or None."""
    reads = {b.id for m in messages for b in m.tool_uses if b.name == "read_file" and b.input.get("path") == path}
    for m in messages:
        for r in m.tool_results:
            if r.tool_use_id in reads and isinstance(r.content, str) and not r.content.startswith("[lossless"):
                return r.content
    return None


def _quoted(text: str, *, recalled: bool = True) -> str:
    lines = text.splitlines()
    shown = "\n".join(lines[:8]) + ("\n…" if len(lines) > 8 else "")
    if not recalled:
        return (f"It is still in my context, verbatim ({len(text):,} characters):\n\n```python\n{shown}\n```")
    return (f"Recalled from its handle, byte for byte ({len(text):,} characters):\n\n```python\n{shown}\n```\n\n"
            "Nothing was read again from the disk: lossless kept the original when it compacted.")
