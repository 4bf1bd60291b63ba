"""The fast paths of ``account.outcome`` find what the per-line rules they stand for find.

Each shortcut (a search through the joined lines, a literal hint before a regex, the shapes made in
one pass, the tag-only harness regex) must never miss a line the per-line rule matches: the account
line of a call must not depend on which path found it."""

from __future__ import annotations

import re

from hypothesis import given, settings, strategies as st

from lossless.account import outcome as o

# Characters the rules care about, and a few that stress Unicode classes (a Unicode digit, an
# accented letter, a no-break space, a line-boundary character that splitlines() cuts at).
_ALPHABET = st.sampled_from(list("abcdefxyzABEFIKLORST0123456789 \t:/.-_[]()<>|*✘→#'\"") +
                            ["error", "Error:", "FAILED ", "ERROR", "warning:", "[warn", "not found", ") test",
                             "commit ", "changed", "exit", "Permission denied", "No such file or directory", ": cannot ",
                             "command not found", "Exception:", "fatal", "FATAL", "E ", "v1.2.3", "deadbeef1",
                             "Finished with exit code 2", "M ", "?? ", "critical]", "3 passed", "1 failed", "Ran 3 tests",
                             "test result: ok. ", "OK", "2 tests, 1 failure", "diff --git a/x b/y", " | 3", "--",
                             "Found 3 files", "1 file changed", "[main 1a2b3c4] ", "def ", "class ", "export ", "pub(crate) ",
                             "async ", "function* ", "let ", "defmodule ", "\u2003", "1a2b3c4d", "cafe1234", "0123456",
                             "abcdef0", "v1.2.3", "xv1.2", "a/b.py", "/x.txt", "12.3.4", "<returncode>0</returncode>", "<output>", "</output>",
                             "<warning>", "</warning>", "\u0661", "é", "\xa0", "\n", "\r", "agentId: ab (for resuming",
                             "test a::b ... FAILED", "public ", "static ", "int f(", "struct s *g(", "Task<X> ", " ... ", "● ", "● A › b", "›", "rspec ./s.rb:3 # A b", "--- FAIL: T"])
_TEXT = st.lists(_ALPHABET, max_size=40).map("".join)
_LINES = _TEXT.map(str.splitlines)


@settings(max_examples=300, deadline=None)
@given(_LINES)
def test_shapes_in_one_pass_are_the_shapes_line_by_line(lines: list[str]) -> None:
    shapes = o._Shapes(lines)
    assert [shapes.of(i) for i in range(len(lines))] == [o._shape(ln) for ln in lines]
    for ln in lines:
        assert shapes.count(o._shape(ln)) == sum(o._shape(x) == o._shape(ln) for x in lines)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_the_fast_shape_regex_replaces_what_the_plain_one_does(text: str) -> None:
    assert o._SHAPE_FAST.sub("#", text.lower()) == o._SHAPE.sub("#", text.lower())


@settings(max_examples=300, deadline=None)
@given(_LINES)
def test_joined_searches_find_every_line_the_per_line_rules_match(lines: list[str]) -> None:
    joined = "\n".join(lines)

    def found(finders: tuple[str | re.Pattern[str], ...]) -> set[int]:
        return set(o._lines_any(joined, finders))

    errors = {i for i, ln in enumerate(lines) if o._ERROR.search(ln.strip())}
    assert errors <= found(o._ERROR_FINDERS)
    notices = {i for i, ln in enumerate(lines) if o._NOTICE.search(ln)}
    assert notices <= found(o._NOTICE_FINDERS)
    assert {i for i, ln in enumerate(lines) if o._failed_name(ln)} <= found(o._FAILED_FINDERS)
    named = {i for i, ln in enumerate(lines) if o._IDENT.search(ln)}
    assert named == {i for i in found(o._IDENT_FINDERS) if o._IDENT_IN.search(lines[i])}
    for ln in lines:
        s = o._one_line(ln)
        if o._SUMMARY.match(s) or o._VERDICT.match(s) or o._RAN.match(s):
            assert o._RUN_HINT.search(ln)
        if (o._CHANGED.match(ln.strip()) or o._COMMIT.match(ln) or o._COMMITTED.match(ln) or o._DIFF.match(ln)
                or o._STAT.match(ln.strip())):
            assert o._GIT_HINT.search("\n" + ln)
        if o._DEF.match(ln) or o._METHOD.match(ln):
            assert ln.lstrip().startswith(o._DEF_WORDS)
        if o._MATCH.match(ln):
            assert ":" in ln
        if o._CONTEXT.match(ln) or o._FOUND.match(ln.strip()):
            assert "-" in ln or "Found " in ln
    short = sum(1 for ln in lines if o._SHORT_STATUS.match(ln))
    assert short <= len(o._SHORT_STATUS_START.findall("\n" + joined))


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_meaningful_lines_match_the_rules_applied_one_line_at_a_time(text: str) -> None:
    expected = []
    for line in o._HARNESS_BLOCKS.sub("\n", text).splitlines():
        line = o._LINE_NO.sub("", line, count=1)
        if not any(c.isalnum() for c in line) or o._TAG_LINE.match(line):
            continue
        if o._STATUS_HEAD.fullmatch(line.strip()) or o._STATUS_LINE.match(line.strip()):
            continue
        expected.append(line)
    assert o._meaningful(text) == expected


def test_the_alphanumeric_class_is_str_isalnum() -> None:
    chars = [chr(c) for c in range(0x3000)] + ["\U0001d7d8", "\U00010107", "\U0001f600"]
    assert [bool(o._ALNUM.search(c)) for c in chars] == [c.isalnum() for c in chars]
