"""The chat on a real terminal, drawn with rich: styled lines, answers as Markdown, and the
activity line — a spinner with the seconds elapsed while the model or a tool works, the
answer's text appearing under it as it streams.

    screen = Screen(sys.stdout, colour=True)
    screen.line("● read_file(path=\"a.py\")", "tool")
    with screen.activity("thinking") as act:     # spinner: "⠋ thinking · 3s"
        for delta in deltas:
            act.feed(delta)                        # the answer so far, rendered as Markdown
    screen.markdown("# Done\n\n**all** of it")

Only ``terminal.Terminal`` builds one, and only when stdout is a terminal that can draw
(not a pipe, not ``TERM=dumb``): everywhere else the chat prints plain text.  The answer is
printed for good one Markdown block at a time, as each block ends (a blank line outside a
code fence), so the live region holds only the block being written and a long answer
scrolls as any output does.  ``NO_COLOR`` keeps the layout and drops the colours.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Heading, Markdown
from rich.segment import Segment
from rich.spinner import Spinner
from rich.text import Text
from rich.theme import Theme

Kind = Literal["plain", "dim", "tool", "outcome", "notice", "status", "warning", "error", "memory", "user"]

THEME = Theme({
    "chat.plain": "", "chat.dim": "dim", "chat.tool": "bold cyan", "chat.outcome": "dim",
    "chat.notice": "magenta", "chat.status": "dim", "chat.warning": "yellow", "chat.error": "bold red",
    "chat.memory": "green", "chat.user": "bold", "chat.spinner": "cyan",
})


class _LeftHeading(Heading):
    """Headings flush left, as a chat reads them (rich centres a level-one heading)."""

    LEVEL_ALIGN: ClassVar[dict[str, Any]] = {f"h{n}": "left" for n in range(1, 7)}


class _Markdown(Markdown):
    elements: ClassVar[dict[str, Any]] = {**Markdown.elements, "heading_open": _LeftHeading}


def markdown(text: str) -> Markdown:
    return _Markdown(text, code_theme="ansi_dark", hyperlinks=False, justify="default")


def settled(text: str) -> int:
    """Where the finished Markdown blocks of ``text`` end: after its last blank line outside
    a code fence (0 when no block has ended yet).  What comes after may still change."""
    end, fenced, pos = 0, False, 0
    for line in text.splitlines(keepends=True):
        pos += len(line)
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
        elif not stripped and not fenced and line.endswith("\n") and pos < len(text):
            end = pos
    return end


def elapsed(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole}s" if whole < 60 else f"{whole // 60}m {whole % 60:02d}s"


class _Tail:
    """The last lines of a renderable that fit the screen under the spinner (the live region
    must never be taller than the terminal, or it cannot be redrawn in place)."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self.renderable, options.update(height=None), pad=False)
        keep = max(1, console.size.height - 3)
        for line in lines[-keep:]:
            yield from line
            yield Segment.line()


class Activity:
    """The live region of one model call or tool run: a spinner with the seconds elapsed, and
    the answer's unfinished block above it.  ``pause`` / ``resume`` give the screen back for a
    question (the shell's confirmation)."""

    def __init__(self, screen: Screen, label: str) -> None:
        self.screen, self.label = screen, label
        self.text = ""
        self.shown = 0
        """Characters of ``text`` already printed for good."""
        self.started = time.monotonic()
        self.spinner = Spinner("dots", style="chat.spinner")
        self.live = Live(console=screen.console, get_renderable=self._render, refresh_per_second=10,
                         transient=True, redirect_stdout=False, redirect_stderr=False)

    def __enter__(self) -> Activity:
        self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.stop()
        self._print(len(self.text))  # on Ctrl-C too: what was shown stays on the screen

    def feed(self, delta: str) -> None:
        self.text += delta
        end = settled(self.text)
        if end > self.shown:
            self._print(end)

    def pause(self) -> None:
        self.live.stop()

    def resume(self) -> None:
        self.live.start()

    def _print(self, end: int) -> None:
        block = self.text[self.shown:end]
        if block.strip():
            if self.screen.answering:
                self.screen.console.print()  # the blank line between two blocks of one answer
            self.screen.console.print(markdown(block))
            self.screen.answering = True
        self.shown = end

    def _render(self) -> RenderableType:
        line = Text(f"{self.label} · {elapsed(time.monotonic() - self.started)}", style="chat.dim")
        line.append("  (Ctrl-C stops)", style="chat.dim")
        self.spinner.update(text=line)
        tail = self.text[self.shown:]
        return Group(_Tail(markdown(tail)), self.spinner) if tail.strip() else self.spinner


class Screen:
    def __init__(self, out: Any, *, colour: bool) -> None:
        self.console = Console(file=out, theme=THEME, no_color=not colour, highlight=False, emoji=False,
                               force_terminal=True, soft_wrap=False)
        self.answering = False
        """Whether the last thing printed was part of an answer (a block that needs a blank line after it)."""

    def line(self, text: str, kind: Kind = "plain") -> None:
        self.console.print(Text(text, style=f"chat.{kind}"))
        self.answering = False

    def markdown(self, text: str) -> None:
        self.console.print(markdown(text))
        self.answering = False

    def activity(self, label: str) -> Activity:
        self.answering = False
        return Activity(self, label)
