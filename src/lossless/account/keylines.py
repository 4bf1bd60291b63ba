"""Key lines: the lines of a removed output that its account quotes verbatim under the call's line.

    key_lines(text)   # ((12, 'FAILED tests/test_x.py::test_y - AssertionError: 3 != 4'), (3, 'def parse(src):'), …)

A call's one-line outcome says how it ended (``outcome``); under it, as far as the account's
budget goes, stand lines of the output itself, each as it was (blanks made one space, cut at
``LINE_CHARS``), so the model keeps the line that mattered and not only that there was one.

Which lines, best first:

1. **by rule**: error, failure and warning lines, a traceback's raised line; then lines that
   define a name (``def``, ``class``, ``fn``, …) or name an identifier (a hash, a path, a version);
2. **by rarity**: among lines of one rule, a line whose *shape* (its numbers masked) occurs
   once in the output before one whose shape repeats (a warning printed per test, a row of a
   table), and one line per shape;
3. ties to the earlier line.

A line that carries little is never chosen: shorter than ``MIN_CHARS``, mostly punctuation, a
bare tag or status line (``outcome._meaningful`` drops those).  Only the head and the tail of a
long output are read (``WINDOW``), so the time spent is bounded whatever its size.  The ranking is
deterministic: the same text gives the same lines.  An account shows the first few that its
budget holds, in the order they stand in the output.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from .outcome import WINDOW as _OUTCOME_WINDOW
from .outcome import (_DEF, _DEF_WORDS, _ERROR, _ERROR_FINDERS, _EXCEPTION_NAME, _IDENT_FINDERS, _NOTICE,
                      _NOTICE_FINDERS, _RAISED, _lines_any, _meaningful, _names_ident)

__all__ = ["LINE_CHARS", "MIN_CHARS", "key_lines", "ranked_lines"]

MIN_CHARS = 16
"""A shorter line (``}``, ``return x``, ``OK``) is cheaper to recall than to quote."""
LINE_CHARS = 160
"""A longer line is cut here, with ``…``: its start names what it is."""
WINDOW = 6_000
"""Characters read at each end of a long output (an account shows a few lines of each: the head and
the tail hold most of what is worth quoting, and the time spent stays bounded)."""
MOST = 24
"""Lines ranked per output at most: an account never shows more of one output."""


def ranked_lines(text: str, window: int = WINDOW) -> tuple[tuple[int, str], ...]:
    """The lines of ``text`` worth quoting, best first, each with its place among the output's
    lines (see the module docstring); ``window`` characters are read at each end."""
    # Each line is judged on what would be shown of it (its first ``LINE_CHARS``): a long one costs no more.
    if len(text) > 2 * window:  # a long output: its head and its tail, each cut at a line's end
        head, tail = text[:window], text[-window:]
        text = head[: head.rfind("\n") + 1] + tail[tail.find("\n") + 1:]
    lines = [_cut(" ".join(line[:4 * LINE_CHARS].split())) for line in _meaningful(text, max(window, _OUTCOME_WINDOW))]
    # Letters and digits of every line in one pass in C (no line holds a "\n").
    joined = "\n".join(lines)
    alnum = (joined.encode().translate(None, _NOT_ALNUM_ASCII).split(b"\n") if joined.isascii()
             else _NOT_ALNUM.sub("", joined).split("\n"))
    keep = [line for line, solid in zip(lines, alnum) if len(line) >= MIN_CHARS
            and 2 * len(solid) >= len(line) - line.count(" ") and len(set(line[:40])) >= 6]
    if not keep:
        return ()
    rules = _rules(keep)
    shapes = _DIGITS.sub("#", "\n".join(keep).lower()).split("\n")
    counts = Counter(shapes)
    ranked = sorted((rules.get(k, 2), counts[shapes[k]] > 1, k) for k in range(len(keep)))
    where: dict[str, int] = {}  # each kept line's place among the output's lines (its first, for a repeated line)
    for i, line in enumerate(lines):
        where.setdefault(line, i)
    out: list[tuple[int, str]] = []
    seen_lines: set[str] = set()
    seen_shapes: set[str] = set()
    for _, _, k in ranked:
        line, shape = keep[k], shapes[k]
        if line in seen_lines or shape in seen_shapes:
            continue
        seen_lines.add(line)
        seen_shapes.add(shape)
        out.append((where[line], line))
        if len(out) == MOST:
            break
    return tuple(out)


key_lines = lru_cache(maxsize=2_048)(ranked_lines)
"""``ranked_lines`` of an account's outputs (read ``WINDOW`` at each end), each ranked once however many
compactions carry it.  A stored output is ranked once, by ``ranked_lines`` itself: cached, its
megabytes would stay in memory."""


_NOT_ALNUM = re.compile(r"[^\w\n]+|_+")
_NOT_ALNUM_ASCII = bytes(b for b in range(128) if not chr(b).isalnum() and b != 10)
"""The same for ASCII text, taken out by ``bytes.translate`` (many times faster)."""
_DIGITS = re.compile(r"\d+")
_RAISED_FINDERS = ("Error", "Exception", "Exit", "Interrupt", "Warning", "Failure", "Fault", "Configured",
                   "DoesNotExist", "exceptions.")
"""In every line a raised exception's name (``_EXCEPTION_NAME``) is found in."""


def _rules(lines: list[str]) -> dict[int, int]:
    """Line index → 0 for an error, failure, warning or raised line, 1 for a definition or an identifier
    (the rest: 2).  The candidates are found in the joined lines by literals (``_lines_any``), then each
    checked by its pattern."""
    joined = "\n".join(lines)
    out: dict[int, int] = {}
    for i in _lines_any(joined, (*_ERROR_FINDERS, *_NOTICE_FINDERS, *_RAISED_FINDERS)):
        line = lines[i]
        if _ERROR.search(line) or _NOTICE.search(line) or (
                _RAISED.match(line) and _EXCEPTION_NAME.search(line.split(":", 1)[0])):
            out[i] = 0
    for i in _lines_any(joined, _IDENT_FINDERS):
        if i not in out and _names_ident(lines[i]):
            out[i] = 1
    for i, line in enumerate(lines):
        if i not in out and line.startswith(_DEF_WORDS) and _DEF.match(line):
            out[i] = 1
    return out


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"
