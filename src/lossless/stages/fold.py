"""Fold: an older tool result gives up the runs of lines that a later result shows again.

    folded = fold(messages, start, ctx)     # Folded(messages, saved, blobs, results)

A file read twice, a test suite run after each edit, a ``grep`` repeated with one more
pattern: in a long session a large share of what tool outputs hold is a line that a later
output holds too (on the shared sessions 11–17 % of Claude Code's output characters, 20–64 %
of mini-swe-agent's).  Kept twice, those lines spend the budget the recent work needs.

When snip fires, every result from ``start`` on (never the pinned head, whose cached prefix
stays, nor the last message, which the model has not seen) is compared line by line with the
results after it, and with the inputs of its own and later calls: a file read and then written
whole, or a write tool that answers with the file it was given, repeats the model's own words,
and a call's input is never folded (such a run's line names the call).  Each run of lines that
a later result repeats — line numbers of a read (``12→``, ``cat -n``) and surrounding spaces
aside, lines too short to say anything carried along — becomes one ``markers.fold_run`` line;
what only this result said stays verbatim, in place, as do its first and last lines (a return
code, a summary).  The result's text starts with ``markers.folded``, naming the handle of its
whole original text, so one recall gives it back: nothing is lost, and the context holds each
repeated line once, where it is newest.

A folded result is a marker: persist and a later fold leave it alone; micro-compact may
clear it, pointing at the same original.  Pure: the originals to store are returned
(``blobs``) and written by the caller only if it fires.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Container, Sequence

from .. import markers
from ..messages import Message, ToolResult, ToolUse
from ..account.archive import is_marked, original_text, text_chars, with_text
from ..account.outcome import target
from ..account.text import one_line
from ..store import handle_for
from .base import StageContext

__all__ = ["Folded", "fold", "fold_text"]

MIN_RESULT_CHARS = 600
"""Results shorter than this are left whole: the marker's header alone is ~40 tokens."""
MIN_SAVED_CHARS = 400
"""A fold must take out at least this many characters (and a fifth of the result)."""
MIN_RUN_CHARS = 120
"""A run shorter than this stays verbatim: its marker line would hardly be shorter."""
_TRIVIAL_ALNUM = 6
"""A line with fewer letters and digits than this (blank, a brace, a fence) says nothing on its own."""
_NUMBERED = re.compile(r"^\s*\d+(?:→|\t)")
_MEMO = "fold"
_INPUT_MEMO = "fold-input"
WHERE_CHARS = 48
"""The most of a call's target a run line shows (a path, a command's start)."""


@dataclass(frozen=True, slots=True)
class Folded:
    messages: list[Message]
    saved: int
    """Tokens the folds took out (the request's count falls by this much)."""
    blobs: dict[str, tuple[int, str]]
    """Handle → (message index, whole original text) of each folded result, for the caller to
    store (those of results it keeps)."""
    results: int


def key(line: str) -> str:
    """A line as folding compares it: without a read's line-number prefix, stripped."""
    numbered = _NUMBERED.match(line)
    return (line[numbered.end():] if numbered else line).strip()


_SAYS_SOMETHING = re.compile(rf"[^\W_](?:[\W_]*[^\W_]){{{_TRIVIAL_ALNUM - 1}}}")


def _trivial(k: str) -> bool:
    """Fewer than ``_TRIVIAL_ALNUM`` letters and digits in its first 64 characters."""
    return _SAYS_SOMETHING.search(k, 0, 64) is None


def _fold_run(lines: int, first: str) -> str:
    return markers.fold_run(lines)


def fold_text(text: str, later: Container[str], keys: Sequence[str] | None = None,
              run: Callable[[int, str], str] = _fold_run) -> tuple[str, int, int] | None:
    """``text`` with its runs of lines found in ``later`` folded: (body, lines, lines folded),
    or None when folding would not save ``MIN_SAVED_CHARS`` and a fifth of the text.  Each run
    becomes ``run(its lines, the key of its first line)``."""
    lines = text.split("\n")
    n = len(lines)
    if n < 5:
        return None
    if keys is None or len(keys) != n:
        keys = [key(line) for line in lines]
    trivial = [_trivial(k) for k in keys]
    out: list[str] = []
    folded = saved = 0
    i = 1
    out.append(lines[0])
    while i < n - 1:
        if trivial[i] or keys[i] not in later:
            out.append(lines[i])
            i += 1
            continue
        # A run: consecutive lines each repeated later or too short to matter, from a repeated one.
        j = i
        substantive = 0
        while j < n - 1 and (trivial[j] or keys[j] in later):
            substantive += not trivial[j]
            j += 1
        end = j
        while end > i and trivial[end - 1]:  # short lines at its end stay where they are
            end -= 1
        chars = sum(len(lines[k]) + 1 for k in range(i, end))
        if substantive >= 2 and chars >= MIN_RUN_CHARS:
            line = run(end - i, keys[i])
            out.append(line)
            folded += end - i
            saved += chars - len(line) - 1
        else:
            out.extend(lines[i:end])
        out.extend(lines[end:j])
        i = j
    if n > 1:
        out.append(lines[-1])
    if saved < max(MIN_SAVED_CHARS, len(text) // 5):
        return None
    return "\n".join(out), n, folded


def _strings(value: object) -> list[str]:
    """Every string in a call's input, however nested (without recursion: any depth the JSON
    parser accepted is walked), in order."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
    return out


def input_keys(message: Message) -> tuple[tuple[ToolUse, list[str]], ...]:
    """Each call of an assistant ``message`` with the keys of its input's lines (cached on it):
    what a file written, an edit or a heredoc shows the model in its own words."""
    cached = message._memo.get(_INPUT_MEMO)
    if cached is None:
        cached = tuple((u, [key(line) for s in _strings(u.input) for line in s.split("\n")])
                       for u in message.tool_uses)
        message._memo[_INPUT_MEMO] = cached
    return cached


def give(given: dict[str, ToolUse], message: Message) -> None:
    """Map each line key the inputs of an assistant ``message``'s calls show to its call."""
    for use, keys in input_keys(message):
        given.update(dict.fromkeys(keys, use))


def where(use: ToolUse | None, shell: frozenset[str]) -> str:
    """A call as a run line names it: a shell command in backticks, else the tool and its target."""
    if use is None:
        return ""
    aim = one_line(target(use.name, use.input), WHERE_CHARS)
    if not aim:
        return use.name
    return f"`{aim}`" if use.name in shell else f"{use.name} {aim}"


def _message_keys(m: Message) -> tuple[list[str], ...]:
    """Each result's lines as folding compares them, in order (cached on the message)."""
    cached = m._memo.get(_MEMO)
    if cached is None:
        cached = tuple([key(line) for line in original_text(b).split("\n")]
                       for b in m.content if isinstance(b, ToolResult))
        m._memo[_MEMO] = cached
    return cached


class _Later:
    """The lines shown after a result: by later results (``lines``) and by the inputs of its own
    and later calls (``given``: key → the call), which a fold names."""

    __slots__ = ("lines", "given", "shell", "inputs")

    def __init__(self, shell: frozenset[str]) -> None:
        self.lines: set[str] = set()
        self.given: dict[str, ToolUse] = {}
        self.shell = shell
        self.inputs = False

    def __contains__(self, k: object) -> bool:
        return k in self.lines or k in self.given

    def __bool__(self) -> bool:
        return bool(self.lines or self.given)

    def run(self, n: int, first: str) -> str:
        if first in self.lines:
            return markers.fold_run(n)
        self.inputs = True
        return markers.echo_run(n, where(self.given.get(first), self.shell), given=True)


def fold(messages: Sequence[Message], start: int, ctx: StageContext) -> Folded:
    """Fold every result in ``messages[start:-1]`` against the results after it and the inputs of
    its own and later calls (a file written whole after it was read, or shown back by the write)."""
    out = list(messages)
    later = _Later(ctx.config.shell_tools)
    blobs: dict[str, tuple[int, str]] = {}
    saved = folded_results = 0
    count = ctx.counter.count_message
    for i in range(len(messages) - 1, max(start, 0) - 1, -1):
        m = messages[i]
        if m.role != "user" or not m.tool_results:
            continue  # (an assistant message's inputs are taken with its results, below)
        if i and messages[i - 1].role == "assistant":
            give(later.given, messages[i - 1])
        keys = _message_keys(m)
        results = [j for j, b in enumerate(m.content) if isinstance(b, ToolResult)]
        blocks = list(m.content)
        changed = False
        for j, own in zip(reversed(results), reversed(keys)):
            b = blocks[j]
            assert isinstance(b, ToolResult)
            if i < len(messages) - 1 and later and text_chars(b) >= MIN_RESULT_CHARS and not is_marked(b):
                text = original_text(b)
                later.inputs = False
                done = fold_text(text, later, own, run=later.run)
                if done is not None:
                    body, n, repeated = done
                    handle = handle_for(text.encode("utf-8", "surrogatepass"))
                    blobs.setdefault(handle, (i, text))  # the same text folded twice: kept where it is newest
                    blocks[j] = with_text(b, markers.folded(handle=handle, lines=n, repeated=repeated, body=body,
                                                            inputs=later.inputs))
                    changed = True
                    folded_results += 1
            later.lines.update(own)
        if changed:
            new = m.with_content(blocks)
            saved += count(m) - count(new)
            out[i] = new
    return Folded(out, saved, blobs, folded_results)
