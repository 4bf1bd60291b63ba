"""Outcome lines keep the line that matters, on the shared real sessions, within the account's budget.

Each rule of ``stages._outcome`` is checked on results found by scanning the data (Claude
Code sessions and mini-swe-agent runs): a failing test run keeps the failing test's name
and its error, a passing one its warning; a search keeps its matches; ``git log`` and
``git commit`` keep their hashes, ``git status`` its branch and files; a file read keeps
its range and the names it defines (its path is the call's target).  Then the
invariants, on every real result and on generated ones: one line, never past the
budget, deterministic, and every fragment verbatim from the output (whitespace runs as
one space, ``…`` where text was cut out) or a marked count or labelled list.
"""

from __future__ import annotations

import re
from functools import lru_cache

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import DATA, data_path
from lossless import account, markers
from lossless.dialects.detect import read_any
from lossless.dialects.mini_swe import read_trajectory
from lossless.messages import result_text
from lossless.account.outcome import outcome, target

LIMIT = account.OUTCOME_CHARS
"""The budget the account gives an outcome: the rules must work inside it."""


@lru_cache(maxsize=None)
def _session(name: str):
    folder = "mini-swe-agent" if name.endswith(".traj.json") else "claude-code"
    path = data_path(folder, name)
    return read_trajectory(path) if folder == "mini-swe-agent" else read_any(path)


def _call(name: str, tool_id: str):
    """(tool use, result text, is_error) of one real call."""
    session = _session(name)
    use = next(u for m in session.messages for u in m.tool_uses if u.id == tool_id)
    result = next(r for m in session.messages for r in m.tool_results if r.tool_use_id == tool_id)
    return use, result_text(result), result.is_error


def _out(name: str, tool_id: str, limit: int = LIMIT) -> str:
    _, text, is_error = _call(name, tool_id)
    return outcome(text, is_error=is_error, limit=limit)


CC1 = "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
CC2 = "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
CC3 = "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"

# (session, call, what the outcome must hold) — each found by scanning the data, read by eye.
KEEPS = [
    # a failing test run: its count, the failing test's name, its error
    ("django__django-11087.traj.json", "mswe-28",  # unittest
     ["FAILED (errors=1, skipped=1)", "ERROR: test_relational_post_delete_signals_happ",
      "DoesNotExist: S matching query does not exist."]),
    ("astropy__astropy-13398.traj.json", "mswe-13",  # pytest, the summary in the tail window
     ["6 failed, 63 passed, 3 skipped", "::test_icrs_cirs", "Error: "]),
    ("pytest-dev__pytest-6197.traj.json", "mswe-32",  # a long test id: its folders go, its name stays
     ["1 failed", "Test_getinitialnodes::test_pkgfile", "IndexError: list index out of range"]),
    ("sphinx-doc__sphinx-9258.traj.json", "mswe-83",  # a collection error
     ["7 warnings, 1 error", "ERROR tests/test_domain_py.py", "SyntaxError: invalid syntax"]),
    (CC2, "toolu_01YPkB4SUEpnJwNNEjdcizME",  # ExUnit
     ["58 tests, 1 failure", "test fixture integration with enriched metadata",
      "Assertion with != failed, both sides are exactly"]),
    (CC2, "toolu_01YRzjaVCfFiyHG4ya1BhC9m",
     ["14 doctests, 127 tests, 12 failures", "test transcript row class mapping", "(RuntimeError) no :secret_"]),
    # a passing run: its count and its warning
    (CC1, "toolu_0181AEpPhB3QjFAtjUhAp9nK", ["15 tests, 0 failures", "warning: function svg_mini/1 is unused"]),
    (CC1, "toolu_01RkxKAkerbN7P6iLvKG8zk8",
     ["14 doctests, 397 tests, 0 failures", "[warning] CoChangeCalculator: cwd /nonexistent/path/abc123"]),
    (CC3, "toolu_015BkXZp7JLoYnD3Wtb2eDn7", ["14 doctests, 297 tests, 0 failures", "[warning] GitLogReader"]),
    # a failure outside tests: the traceback's last line and where it was raised
    ("django__django-15563.traj.json", "mswe-67",
     ["IndexError: tuple index out of range", 'File "…/compiler.py", line 1869, in pre_sql_setup']),
    # a search: its matches, not its pagination note
    (CC1, "toolu_012CLX61iNAvi656rDUMBWtU",
     ["2 matches", "71:Hooks.TranscriptHighlighter = {", "285:Hooks.TranscriptSelection = {"]),
    (CC2, "toolu_017S1DmDdE9xPv2JnXC8qK4y", ["37:[Omitted long matching line]"]),
    (CC1, "toolu_013Mvrz86yEURL1dbiQWD1Lf", ["3 matches", "live_view.ex:219: def handle_event(unquote(event_string)"]),
    ("astropy__astropy-13398.traj.json", "mswe-4", ["774:def test_straight_overhead():"]),
    ("django__django-11138.traj.json", "mswe-7",  # 42 matches: the count and the first ones
     ["42 matches", '196: conn.create_function("django_date_extract", 2, _sqlite_datetime_extract)']),
    # git: hashes, the commit made, the branch and files
    (CC1, "toolu_01AbGh3MtL21f4huMtqCJgXr",
     ["e67e02f feat: live review updates", "b01470c", "28a4080", "8e5ed59", "4ac3489"]),
    (CC2, "toolu_01UAVqxL3Thj98Rd6ejNSrCs", ["9097723", "b9288c2", "3bb8701", "980e43b", "3dbdc9c"]),
    (CC1, "toolu_014d13oYeAkaD59m1TthqEc3",
     ["[spotter-dov 64f1b9a] feat: unified transcript visualization", "12 files changed"]),
    (CC3, "toolu_01X1igZegSQUAERamiQE3k72", ["[spotter-4te a23908c]", "4 files changed, 58 insertions(+)"]),
    (CC1, "toolu_01NnKZYugAthPkYmqe3R3hUR", ["On branch spotter-dov", "modified: .beads/issues.jsonl, .mcp.json"]),
    (CC1, "toolu_017sgySJgamwVXQ2MRcHRvk9", ["8 files changed, 854 insertions(+)", "files: .beads/issues.jsonl"]),
    ("astropy__astropy-13398.traj.json", "mswe-35",  # the submitted diff: the files it changes
     ["diff: astropy/coordinates/builtin_frames/__init__.py",
      "astropy/coordinates/builtin_frames/itrs_observed_transforms.py"]),
    # a file shown: the range and the names it defines (Read, an Edit/Write snippet, nl -ba, cat)
    (CC1, "toolu_01WdfD9cV8AuWAiUsJEdcgAt", ["lines 1–776", "defines: SpotterWeb.SessionLive, mount, terminate"]),
    (CC1, "toolu_012M99HY1qSmzgYFxXLocuVa", ["lines 260–319", "defines: handle_event, jump_to_tool_use"]),
    (CC1, "toolu_01V9MTMBQpmxb79mgn5WvYcH", ["lines 1–100", "highlightTranscriptCode"]),
    (CC1, "toolu_01HALn9BhxTeyUDjbSdSGYyx", ["has been updated.", "lines 1–283", "defines: SpotterWeb.SubagentLive"]),
    ("django__django-11087.traj.json", "mswe-1", ["lines 201–250", "defines: related_objects, instances_with_model"]),
    ("django__django-11087.traj.json", "mswe-29", ["defines: R, get_default_r, S"]),
]


@pytest.mark.parametrize(("name", "tool_id", "kept"), KEEPS)
def test_the_line_that_matters_is_kept_within_the_account_budget(name, tool_id, kept):
    out = _out(name, tool_id)
    assert len(out) <= LIMIT
    for fragment in kept:
        assert fragment in out, (fragment, out)


def test_a_pagination_note_is_not_the_outcome_of_a_search():
    out = _out(CC2, "toolu_017S1DmDdE9xPv2JnXC8qK4y")
    assert "pagination" not in out and "38:[Omitted long matching line]" in out


def test_a_read_line_in_the_account_keeps_its_path_range_and_names():
    session = _session(CC1)
    acc = account.collect(session.messages)
    lines = acc.lines()  # every outcome analysed (a render analyses those its budget reaches)
    path = "/home/USER/projects/spotter-worktrees/spotter-dov/lib/spotter_web/live/subagent_live.ex"
    # read three times whole: one line for the three, the last one's outcome, one handle for all three
    line = next(ln for ln in lines if ln.startswith(f"- Read {path} ×3, the last → "))
    assert "→ ok — lines 1–283; defines: SpotterWeb.SubagentLive, mount, handle_event" in line
    group = next(text for handle, text in acc.blobs.items() if line.endswith(markers.short(handle)))
    assert group.startswith(f"[3 outputs of Read {path}, oldest first]") and "--- output 3 of 3 ---" in group
    assert sum(ln.startswith(f"- Read {path} ") for ln in lines) == 2  # and the read of lines 22–31
    read_with_range = next(ln for ln in lines if "session_live.ex lines 260–319 → " in ln)
    assert "handle_event" in read_with_range and "compute_sync_data" in read_with_range


def test_an_edit_outcome_leaves_the_path_to_the_target():
    use, text, is_error = _call(CC1, "toolu_01RMQKiQJ8KBA1MLN6yPebFt")
    assert target(use.name, use.input).endswith("session_live.ex")
    assert outcome(text, is_error=is_error, limit=LIMIT) == "ok — has been updated successfully."


def test_a_smaller_budget_keeps_the_first_fragments():
    for limit in (30, 60, 90):
        out = _out("django__django-11087.traj.json", "mswe-28", limit)
        assert out.startswith("exit 1 — FAILED (errors=1") and len(out) <= limit


# -- invariants ------------------------------------------------------------------------------

_SUMMARY = re.compile(r"\d+ (?:matches|files|entries)|lines \d+–\d+|\d+ lines of \d+–\d+|no output|no message")
_LISTED = re.compile(r"((?:\d+ )?[A-Za-z?!][\w ?!]*): (.+?)(?: \(\+\d+ more\))?")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _verbatim(piece: str, flat: str) -> bool:
    """Every stretch of ``piece`` between ``…`` marks is in the output."""
    return all(chunk.strip() in flat for chunk in piece.split("…"))


def _fragment_ok(fragment: str, flat: str) -> bool:
    if _verbatim(fragment, flat) or _SUMMARY.fullmatch(fragment):
        return True
    m = _LISTED.fullmatch(fragment)
    return bool(m) and all(_verbatim(item, flat) for item in m.group(2).split(", "))


def _quotes_verbatim(out: str, text: str) -> bool:
    """The detail splits at ``; `` into fragments that each quote ``text`` (a fragment may hold ``; `` itself)."""
    detail = out.split(" — ", 1)[1] if " — " in out else ""
    if not detail:
        return True
    flat = _flat(text)
    pieces = detail.split("; ")
    reach = [True] + [False] * len(pieces)
    for i in range(len(pieces)):
        for j in range(i + 1, len(pieces) + 1):
            if reach[i] and not reach[j] and _fragment_ok("; ".join(pieces[i:j]), flat):
                reach[j] = True
    return reach[-1]


def _check(text: str, is_error: bool, limit: int) -> str:
    out = outcome(text, is_error=is_error, limit=limit)
    assert out == outcome(text, is_error=is_error, limit=limit)
    assert len(out) <= limit and len(out.splitlines()) <= 1 and out == out.strip()
    assert _quotes_verbatim(out, text), out
    return out


def _all_real_results():
    if not DATA.exists():
        pytest.skip("shared data not present")
    paths = sorted((DATA / "claude-code").rglob("*.jsonl")) + sorted((DATA / "mini-swe-agent").glob("*.traj.json"))
    for path in paths:
        session = read_trajectory(path) if path.name.endswith(".traj.json") else read_any(path)
        for m in session.messages:
            for r in m.tool_results:
                yield result_text(r), r.is_error


def test_every_real_outcome_is_one_verbatim_line_within_its_budget():
    seen = 0
    for text, is_error in _all_real_results():
        for limit in (24, 60, LIMIT, 160):
            out = _check(text, is_error, limit)
            if limit >= 24:
                assert re.match(r"(exit -?\d+|error|timed out|ok|interrupted)\b", out), out
        seen += 1
    assert seen > 1_500


_LINES = st.sampled_from([
    "FAILED tests/test_a.py::test_x - AssertionError: 1 != 2", "E   ValueError: bad value", "E   AssertionError:",
    "=== 2 failed, 3 passed in 0.5s ===", "Ran 4 tests in 0.1s", "FAILED (failures=1)", "OK", "ERROR: test_y (m.T)",
    "  1) test renders the page (AppTest)", "     test/app_test.exs:12", "     ** (RuntimeError) boom",
    "12 tests, 1 failure", "Traceback (most recent call last):", '  File "/a/b/c.py", line 3, in f',
    "KeyError: 'k'", "warning: unused variable x", "12:00:01.5 [warning] slow; query", "a · b", "commit " + "ab12" * 10,
    "    feat: a subject", "e67e02f fix: a thing", "[main 1a2b3c4] subject", " 2 files changed, 3 insertions(+)",
    "On branch main", "\tmodified:   src/a.py", "?? new.txt", "src/a.py:12:def f():", "7:    return x",
    "diff --git a/x.py b/x.py", "     1→def top(a):", "     2→class Box:", "   10\tconst X = 1",
    "def g():", "class K:", "src/dir/file.py", "No matches found", "…", "; ", "", "plain words here",
])


@given(st.lists(_LINES | st.text(max_size=40), max_size=25), st.sampled_from(["", "<returncode>1</returncode>\n",
       "<returncode>0</returncode>\n", "Exit code 2\n"]), st.booleans(), st.integers(1, 200))
def test_generated_outcomes_are_one_verbatim_line_within_budget(lines, head, is_error, limit):
    _check(head + "\n".join(lines), is_error, limit)


@given(st.text(max_size=300), st.booleans(), st.integers(-5, 40))
def test_any_text_and_any_budget(text, is_error, limit):
    out = outcome(text, is_error=is_error, limit=limit)
    assert len(out) <= max(limit, 0) and "\n" not in out
