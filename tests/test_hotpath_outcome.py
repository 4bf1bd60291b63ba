"""The literal finders of ``account.outcome`` find every line its per-line rules match, so an account line
never depends on which way a line was found; the status-word gate says what its pattern says."""

from __future__ import annotations

import re

from hypothesis import given, settings, strategies as st

from lossless.account import outcome as o

# What the rules look for, cut into pieces, beside characters that stress the finders: the three letters
# re.I matches outside ASCII ("İ", "ı", "ſ"), line breaks splitlines() cuts at, Unicode digits and spaces.
_ALPHABET = st.sampled_from(list("abcdefxyzABEFGIKLORST0123456789 \t:/.-_[]()<>|*✘→#'\"\n\r") + [
    "error", "Error:", "FAILED ", "ERROR", "FATAL", "fatal", "E ", "E:", "E\t", "E\u2003", "warning:", "WARNING:",
    "WaRnInG:", "warnİng:", "warnıng:", "[warn", "[ERROR]", "[Critical", "[fatal", "not found", ") test", "FAIL",
    "Permission denied", "No such file or directory", ": cannot ", "command not found", "Exception:",
    "ValueError:", "passed", "failed", "failure", "skipped", "deselected", "no tests ran", "test result: ok. ",
    "OK", "Ran 3 tests", "3 passed", "1 failed", "2 tests, 1 failure", "Tests: 1 failed", "exit", "EXIT", "exİt",
    "exıt", "finished with", "FINISHED WITH", "finiſhed with", "changed", "commit ", "diff --git a/x b/y", " | 3",
    " |  Bin", "v1.2.3", "12.3.4", "1.2", "deadbeef1", "1a2b3c4d", "abcdef0", "0123456", "a/b.py", "/x.txt",
    "\u0661", "\u0662.\u0663", "é", "\xa0", "\u2028", "\x0b"])
_TEXT = st.lists(_ALPHABET, max_size=50).map("".join)
_LINES = _TEXT.map(str.splitlines)


def _per_line(rule: object, lines: list[str]) -> set[int]:
    return {i for i, ln in enumerate(lines) if rule(ln)}  # type: ignore[operator]


@settings(max_examples=400, deadline=None)
@given(_LINES)
def test_finders_find_every_line_the_rules_match(lines: list[str]) -> None:
    joined = "\n".join(lines)

    def found(finders: tuple[str | re.Pattern[str], ...]) -> set[int]:
        at = o._lines_any(joined, finders)
        assert at == sorted(set(at))  # ascending, each line once
        assert all(0 <= i < max(1, len(lines)) for i in at)
        return set(at)

    assert _per_line(lambda ln: o._ERROR.search(ln.strip()), lines) <= found(o._ERROR_FINDERS)
    assert _per_line(o._NOTICE.search, lines) <= found(o._NOTICE_FINDERS)
    assert _per_line(o._NOTICE_HINT.search, lines) <= found(o._NOTICE_FINDERS)
    assert _per_line(o._failed_name, lines) <= found(o._FAILED_FINDERS)
    assert _per_line(o._RUN_HINT.search, lines) <= found(o._RUN_FINDERS)
    assert _per_line(o._IDENT.search, lines) <= found(o._IDENT_FINDERS)
    for ln in lines:
        if o._GIT_HINT.search("\n" + ln):
            assert o._any_in("\n" + ln, o._GIT_FINDERS)


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_lines_any_is_the_lines_a_literal_is_in(text: str) -> None:
    lines = text.split("\n")
    for literal in ("E", "error", "/", "ab"):
        assert o._lines_any(text, (literal,)) == [i for i, ln in enumerate(lines) if literal in ln]


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_the_status_word_gate_is_the_pattern(text: str) -> None:
    assert o._status_word_in(text) == (o._STATUS_WORD.search(text) is not None)


@settings(max_examples=400, deadline=None)
@given(_LINES)
def test_shapes_counted_by_their_key_are_the_shapes_line_by_line(lines: list[str]) -> None:
    shapes = o._Shapes(lines)
    expected = [o._shape(ln) for ln in lines]
    for shape in set(expected) | {"#", "", "x#"}:
        assert shapes.count(shape) == expected.count(shape)
    assert [shapes.of(i) for i in range(len(lines))] == expected


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_the_identifier_alternatives_one_by_one_are_the_alternation(line: str) -> None:
    assert o._names_ident(line) == (o._IDENT_IN.search(line) is not None)
