"""The terminal side of the chat: the prompt, what is printed, the activity line, the
confirmation question, Ctrl-C.

    term = Terminal(interactive=True, history=store / "chat-history", commands=HELP_LINES)
    text = term.prompt()                 # None: the user asked to leave (Ctrl-D, or Ctrl-C twice)
    term.say("text"); term.answer("**Markdown**"); term.note("● bash(…)", "tool"); term.error("…")
    with term.working("thinking") as act:      # a spinner with the seconds elapsed
        act.feed("the answer as it streams")
    confirm = Confirmation(term, yes=False, interactive=True)   # a tools.Confirm

Two faces.  On a terminal that can draw (stdin and stdout a tty, ``TERM`` not ``dumb``, the
``cli`` extra installed) the input is prompt_toolkit's (``editor``: multi-line, history,
completion) and the output rich's (``screen``: Markdown, colour, the spinner).  Anywhere else
— a pipe, a test's streams, ``TERM=dumb`` — it is plain text without an escape code: the
answer is written as it streams, nothing is drawn or redrawn.  Colour is used only on a
terminal and without ``NO_COLOR``.

Ctrl-C at the prompt prints a hint the first time; a second one in a row leaves (exit
status 130).  Ctrl-C while a model call or a tool runs is the agent's to handle
(``KeyboardInterrupt`` reaches it).  A ``script`` (the demo's) types its lines at the prompt
instead of reading them, and leaves after the last.
"""

from __future__ import annotations

import os
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, TextIO

from .tools import ToolFailure

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
EXIT_INTERRUPTED = 130


def plain(text: str) -> str:
    """``text`` without terminal escapes."""
    return _ANSI.sub("", text)


def can_draw(out: TextIO, inp: TextIO | None) -> bool:
    """Whether ``out`` (and ``inp``, when the user types) is a terminal rich and prompt_toolkit can draw on."""
    if os.environ.get("TERM", "") in ("dumb", "unknown") or not _isatty(out) or (inp is not None and not _isatty(inp)):
        return False
    try:
        import prompt_toolkit  # noqa: F401
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class _Plain:
    """The answer written as it streams, on a pipe or a dumb terminal; nothing drawn."""

    def __init__(self, term: Terminal) -> None:
        self.term, self.text = term, ""

    def feed(self, delta: str) -> None:
        if not self.text:
            delta = delta.lstrip()
            if not delta:
                return
        self.text += delta
        self.term.out.write(_printable(delta))
        self.term.out.flush()

    def close(self) -> None:
        if self.text and not self.text.endswith("\n"):
            self.term.out.write("\n")
            self.term.out.flush()

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass


class Terminal:
    def __init__(self, *, interactive: bool, out: TextIO | None = None, inp: TextIO | None = None,
                 history: Path | None = None, commands: Mapping[str, str] | None = None,
                 script: Sequence[str] | None = None, pace: float = 0.0) -> None:
        self.out = out or sys.stdout
        self.inp = inp or sys.stdin
        self.interactive = interactive
        self.script = list(script) if script is not None else None
        self.pace = pace
        self.fancy = interactive and can_draw(self.out, None if script is not None else self.inp)
        self.colour = self.fancy and "NO_COLOR" not in os.environ
        self.interrupts = 0
        self.exit_status = 0
        self._activity: Any = None
        self._read: Callable[[str], str] | None = None
        self.screen: Any = None
        if self.fancy:
            from .screen import Screen

            self.screen = Screen(self.out, colour=self.colour)
            if script is None:
                from .editor import editor

                self._read = editor(history=history, commands=commands or {})
        elif interactive and script is None:
            try:
                import readline  # noqa: F401 - line editing and history for input(), where the platform has it
            except ImportError:
                pass
            if _isatty(self.out) and _isatty(self.inp) and os.environ.get("TERM", "") not in ("dumb", "unknown"):
                self.note("plain text: pip install 'lossless[cli]' for Markdown, a spinner, history and completion")

    # -- output ---------------------------------------------------------------
    def say(self, text: str = "") -> None:
        if self.screen is not None:
            self.screen.line(text)
        else:
            self._print(text)

    def answer(self, text: str) -> None:
        """The model's answer: Markdown, rendered on a terminal that can draw."""
        if self.screen is not None:
            self.screen.markdown(text)
        else:
            self._print(text)

    def note(self, text: str, kind: str = "dim") -> None:
        """A status or notice line (``kind`` styles it on a terminal: "tool", "notice", "status",
        "warning", "memory"…; on stderr in a ``-p`` run, whose stdout is the answer alone)."""
        if self.screen is not None:
            self.screen.line(text, kind)
        else:
            self._print(text, side=True)

    def error(self, text: str) -> None:
        self.note(text, "error")

    def _print(self, text: str, *, side: bool = False) -> None:
        out = sys.stderr if side and not self.interactive else self.out
        print(_printable(text), file=out, flush=True)

    @contextmanager
    def working(self, label: str) -> Iterator[Any]:
        """While the model or a tool works: a spinner with the seconds elapsed on a terminal that
        can draw; the answer's text, fed as it streams, shown as it comes (``feed``)."""
        if self.screen is not None:
            with self.screen.activity(label) as activity:
                self._activity = activity
                try:
                    yield activity
                finally:
                    self._activity = None
            return
        plain_activity = _Plain(self)
        try:
            yield plain_activity
        finally:
            plain_activity.close()

    @property
    def streams(self) -> bool:
        """Whether an answer is shown as it streams (not in a ``-p`` run: stdout is the final answer alone)."""
        return self.interactive

    # -- input ----------------------------------------------------------------
    def prompt(self) -> str | None:
        """The user's next input; None when they leave.  Sets ``exit_status`` to 130 after two Ctrl-C."""
        while True:
            try:
                line = self._input("> ")
            except KeyboardInterrupt:
                self.interrupts += 1
                if self.interrupts >= 2:
                    self._print("")
                    self.exit_status = EXIT_INTERRUPTED
                    return None
                self._print("\n(Ctrl-C again to leave, or /exit; Ctrl-C during an answer stops it)")
                continue
            except EOFError:
                self._print("")
                return None
            self.interrupts = 0
            if line.strip():
                return line.strip()

    def ask(self, question: str) -> str:
        """A one-letter answer to ``question`` (lower case); "" on end of input."""
        activity = self._activity
        if activity is not None:
            activity.pause()
        try:
            if self._read is not None:
                from .editor import ask

                return ask(question).strip().lower()[:1]
            return self._input(question, typed=False).strip().lower()[:1]
        except EOFError:
            return ""
        finally:
            if activity is not None:
                activity.resume()

    def _input(self, prompt: str, *, typed: bool = True) -> str:
        if self.script is not None and typed:
            return self._type(prompt)
        if self._read is not None:
            return self._read(prompt)
        if self.inp is sys.stdin and self.out is sys.stdout:
            return input(prompt)
        self.out.write(prompt)
        self.out.flush()
        line = self.inp.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    def _type(self, prompt: str) -> str:
        """The script's next line, typed at the prompt (a key at a time on a terminal that can draw)."""
        assert self.script is not None
        if not self.script:
            raise EOFError
        line = self.script.pop(0)
        self.out.write(prompt)
        self.out.flush()
        for ch in line if self.pace > 0 else [line]:
            time.sleep(0.03 * self.pace)
            self.out.write(ch)
            self.out.flush()
        time.sleep(0.3 * self.pace)
        self.out.write("\n")
        self.out.flush()
        return line


def _printable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass
class Confirmation:
    """A ``tools.Confirm``: asks ``[y]es / [n]o / [a]lways for this session`` for the shell and
    for writes — or allows everything (``--yes``), or, in a run with no one to ask (``-p``),
    refuses with a result that tells the model why (it never waits on input)."""

    terminal: Terminal
    yes: bool = False
    interactive: bool = True
    always: set[str] = field(default_factory=set)

    def __call__(self, kind: str, what: str) -> bool:
        if self.yes or kind in self.always:
            return True
        if not self.interactive:
            raise ToolFailure(f"not run: this {'command' if kind == 'shell' else 'change'} needs the user's "
                              "confirmation and this run cannot ask for it (lossless chat -p); the user can "
                              "allow it with --yes. Say what you would have done instead.")
        label = "run" if kind == "shell" else "allow"
        while True:
            answer = self.terminal.ask(f"{label}: {what}\n  [y]es / [n]o / [a]lways for this session? ")
            if answer in ("y", "n", "a", ""):
                break
        if answer == "a":
            self.always.add(kind)
        return answer in ("y", "a")
