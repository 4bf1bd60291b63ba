"""Key lines: the lines of a removed output that its account quotes verbatim under the call's line.

    key_lines(text)   # ((12, 'FAILED tests/test_x.py::test_y - AssertionError: 3 != 4'), (3, 'def parse(src):'), …)

A call's one-line outcome says how it ended (``outcome``); under it, as far as the account's
budget goes, stand lines of the output itself, each as it was (blanks made one space, cut at
``LINE_CHARS``), so the model keeps the line that mattered and not only that there was one.

Which lines, best first:

1. **by rule**: error, failure and warning lines, a traceback's raised line; then lines that
   define a name (``def``, ``class``, ``fn``, …) or name an identifier (a hash, a path, a version);
2. **by rarity**: among lines of one rule, a line whose *shape* (numbers and hex runs masked) occurs
   once in the output before one whose shape repeats (a warning printed per test, a row of a
   table), and one line per shape;
3. ties to the earlier line.

A line that carries little is never chosen: shorter than ``MIN_CHARS``, mostly punctuation, a
bare tag or status line (``outcome._meaningful`` drops those and reads only the head and tail
windows of a long output, so the time spent is bounded whatever its size).  The ranking is
deterministic: the same text gives the same lines.  An account shows the first few that its
budget holds, in the order they stand in the output.
"""

from __future__ import annotations

from functools import lru_cache

from .outcome import _DEF, _ERROR, _NOTICE, _RAISED, _EXCEPTION_NAME, _meaningful, _names_ident, _shapes

__all__ = ["LINE_CHARS", "MIN_CHARS", "key_lines"]

MIN_CHARS = 16
"""A shorter line (``}``, ``return x``, ``OK``) is cheaper to recall than to quote."""
LINE_CHARS = 160
"""A longer line is cut here, with ``…``: its start names what it is."""
MOST = 24
"""Lines ranked per output at most: an account never shows more of one output."""


@lru_cache(maxsize=2_048)  # a removed output is ranked once however many compactions carry it
def key_lines(text: str) -> tuple[tuple[int, str], ...]:
    """The lines of ``text`` worth quoting, best first, each with its place among the output's
    lines (see the module docstring)."""
    lines = [" ".join(line.split()) for line in _meaningful(text)]
    keep = [i for i, line in enumerate(lines) if _informative(line)]
    if not keep:
        return ()
    shapes = _shapes(lines)
    ranked: list[tuple[int, int, int]] = []
    for i in keep:
        line = lines[i]
        ranked.append((_rule(line), shapes.count(shapes.of(i)) > 1, i))
    ranked.sort()
    out: list[tuple[int, str]] = []
    seen_lines: set[str] = set()
    seen_shapes: set[str] = set()
    for _, _, i in ranked:
        shape = shapes.of(i)
        if lines[i] in seen_lines or shape in seen_shapes:
            continue
        seen_lines.add(lines[i])
        seen_shapes.add(shape)
        out.append((i, _cut(lines[i])))
        if len(out) == MOST:
            break
    return tuple(out)


def _informative(line: str) -> bool:
    """Long enough, and mostly letters and digits (not a rule, a table border, a row of dots)."""
    if len(line) < MIN_CHARS:
        return False
    solid = len(line) - line.count(" ")
    return sum(c.isalnum() for c in line) * 2 >= solid and len(set(line)) >= 6


def _rule(line: str) -> int:
    """0 for an error, failure, warning or raised line; 1 for a definition or an identifier; 2 otherwise."""
    if _ERROR.search(line) or _NOTICE.search(line):
        return 0
    if _RAISED.match(line) and _EXCEPTION_NAME.search(line.split(":", 1)[0]):
        return 0
    if _DEF.match(line) or _names_ident(line):
        return 1
    return 2


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"
