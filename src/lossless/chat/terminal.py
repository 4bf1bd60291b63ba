"""The terminal side of the chat: the prompt, what is printed, the confirmation question, Ctrl-C.

    term = Terminal(interactive=sys.stdin.isatty())
    text = term.prompt()                 # None: the user asked to leave (Ctrl-D, or Ctrl-C twice)
    term.say("answer"); term.note("context …"); term.error("…")
    confirm = Confirmation(term, yes=False, interactive=True)   # a tools.Confirm

Ctrl-C at the prompt prints a hint the first time; a second one in a row leaves (exit
status 130).  Ctrl-C while a model call or a tool runs is the agent's to handle
(``KeyboardInterrupt`` reaches it).  Colour is used only on a terminal, without
``NO_COLOR``, and never changes the text (a recording strips nothing but escapes).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from typing import TextIO

from .tools import ToolFailure

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
EXIT_INTERRUPTED = 130


def plain(text: str) -> str:
    """``text`` without terminal escapes."""
    return _ANSI.sub("", text)


class Terminal:
    def __init__(self, *, interactive: bool, out: TextIO | None = None, inp: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.inp = inp or sys.stdin
        self.interactive = interactive
        self.colour = (interactive and self.out.isatty() and "NO_COLOR" not in os.environ
                       and os.environ.get("TERM") != "dumb")
        self.interrupts = 0
        if interactive:
            try:
                import readline  # noqa: F401 - line editing and history for input(), where the platform has it
            except ImportError:
                pass

    # -- output ---------------------------------------------------------------
    def say(self, text: str = "") -> None:
        self._print(text)

    def note(self, text: str) -> None:
        """A status or notice line (dim on a colour terminal; on stderr in a ``-p`` run, whose
        stdout is the answer alone)."""
        self._print(f"\x1b[2m{text}\x1b[0m" if self.colour else text, side=True)

    def error(self, text: str) -> None:
        self._print(f"\x1b[31m{text}\x1b[0m" if self.colour else text, side=True)

    def _print(self, text: str, *, side: bool = False) -> None:
        out = sys.stderr if side and not self.interactive else self.out
        print(text.encode("utf-8", "backslashreplace").decode("utf-8"), file=out, flush=True)

    # -- input ----------------------------------------------------------------
    def prompt(self) -> str | None:
        """The user's next line; None when they leave.  Sets ``exit_status`` to 130 after two Ctrl-C."""
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

    exit_status = 0

    def ask(self, question: str) -> str:
        """A one-letter answer to ``question`` (lower case); "" on end of input."""
        try:
            return self._input(question).strip().lower()[:1]
        except EOFError:
            return ""

    def _input(self, prompt: str) -> str:
        if self.inp is sys.stdin and self.out is sys.stdout:
            return input(prompt)
        self.out.write(prompt)
        self.out.flush()
        line = self.inp.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")


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
