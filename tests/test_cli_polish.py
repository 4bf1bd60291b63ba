"""What the CLI prints reads as written by a person (issue 19, point 7): counts agree with
their nouns, and ``lossless demo`` is coloured on a terminal and plain everywhere else."""

from __future__ import annotations

import ast
import io
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import ROOT
from lossless.cli._common import counted

pexpect = pytest.importorskip("pexpect")

NOUNS = {"call": "calls", "entry": "entries", "memory": "memories", "day": "days", "match": "matches",
         "box": "boxes", "session": "sessions", "tool result": "tool results"}
COLOUR = re.compile(r"\x1b\[[0-9;]*(3[0-7]|38;[0-9;]+|9[0-7])m")
"""A foreground colour (bold and dim are styles, which NO_COLOR leaves)."""
GAUGE = re.compile(r"turn  2 [█·]{20}  +[\d,]+ tok \(unmanaged +[\d,]+\) +[\d.]+% left · 5 messages")


@given(st.integers(min_value=0, max_value=10**7), st.sampled_from(sorted(NOUNS)))
def test_a_count_agrees_with_its_noun(n, noun):
    text = counted(n, noun)
    assert text == f"{n:,} {noun if n == 1 else NOUNS[noun]}"
    assert "(" not in text


def test_an_irregular_plural_is_given():
    assert counted(2, "child", "children") == "2 children" and counted(1, "child", "children") == "1 child"


def test_no_output_says_s_in_brackets():
    """No f-string outside the chat and memory packages says "call(s)" or "entr(ies)" (the
    words that follow a count); ``http(s)`` is a scheme, not a plural."""
    found = []
    for path in sorted((ROOT / "src" / "lossless").rglob("*.py")):
        if {"chat", "memory"} & set(path.relative_to(ROOT / "src" / "lossless").parts[:-1]):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.JoinedStr):
                for part in node.values:
                    words = re.findall(r"(\w+)\((?:s|es|ies)\)", part.value) if isinstance(part, ast.Constant) else []
                    if set(words) - {"http"}:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {part.value.strip()}")
    assert not found, "\n".join(found)


def demo(env: dict[str, str], tmp: Path) -> str:
    """The first turns of ``lossless demo`` in a real terminal (then Ctrl-C: the rest is the same)."""
    screen = io.StringIO()
    child = pexpect.spawn(sys.executable, ["-m", "lossless.cli", "demo"],
                          env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp), **env},
                          encoding="utf-8", dimensions=(40, 200), timeout=60, logfile=screen)
    child.expect("turn  3")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    return screen.getvalue()


def test_demo_is_coloured_on_a_terminal_and_plain_with_no_color_or_a_pipe(tmp_path):
    coloured = demo({"TERM": "xterm-256color"}, tmp_path)
    no_color = demo({"TERM": "xterm-256color", "NO_COLOR": "1"}, tmp_path)
    piped = subprocess.Popen([sys.executable, "-m", "lossless.cli", "demo"], stdout=subprocess.PIPE, text=True,
                             env={"PATH": "/usr/bin:/bin", "TERM": "xterm-256color", "TMPDIR": str(tmp_path)})
    lines = []
    deadline = time.monotonic() + 60
    while not lines or not lines[-1].startswith("turn  3"):
        assert time.monotonic() < deadline
        lines.append(piped.stdout.readline())
    piped.terminate()
    piped.communicate()
    assert piped.returncode == 128 + signal.SIGTERM  # unwound, not killed outright…
    assert not list(tmp_path.iterdir())  # …so neither Ctrl-C nor SIGTERM leaves the demo's store behind
    plain = "".join(lines)
    assert COLOUR.search(coloured) and not COLOUR.search(no_color) and "\x1b" not in plain
    for text in (coloured, no_color):
        assert GAUGE.search(re.sub(r"\x1b\[[0-9;]*m", "", text).replace("\r\n", "\n"))
    assert GAUGE.search(plain)
    assert "gauge: █ tokens in the context, · free, of the window" in plain


def test_a_terminated_chat_demo_removes_its_generated_project(tmp_path):
    """SIGTERM (a `timeout`, a closed terminal) unwinds `lossless chat --provider demo` as Ctrl-C does:
    the project it generated in a temporary directory goes, and the exit code says which signal."""
    child = subprocess.Popen([sys.executable, "-m", "lossless.cli", "chat", "--provider", "demo"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path), "LOSSLESS_DEMO_PACE": "1"})
    deadline = time.monotonic() + 60
    while not any(tmp_path.iterdir()):  # the project exists: the demo is under way
        assert time.monotonic() < deadline and child.poll() is None
        time.sleep(0.05)
    time.sleep(0.5)
    child.terminate()
    _, err = child.communicate(timeout=60)
    assert child.returncode == 128 + signal.SIGTERM
    assert "Traceback" not in err
    assert not list(tmp_path.iterdir())


def test_a_summary_of_one_message_says_one_message(tmp_path):
    """The count in what the model reads agrees with its noun too: one stored message is
    "1 earlier message", not "1 earlier messages"."""
    from lossless import ContextManager

    document = {"type": "document", "title": "big", "source": {"type": "text", "media_type": "text/plain",
                                                                "data": "doc " * 3000}}
    cm = ContextManager(window=2048, store=str(tmp_path), dialect="anthropic")
    view = cm.prepare([{"role": "user", "content": [document, {"type": "text", "text": "summarise"}]}])
    text = view.messages[0]["content"][0]["text"]
    assert [e.stage for e in view.fired] == ["fallback_summary"]
    assert "This replaces 1 earlier message (about" in text and "summarise" in text


TABLE = """
from lossless.cli._common import Out
Out().table("2 sessions", ("last active", "agent", "id", "project", "model", "messages", "tokens", "peak context", "cost"), [
    ("2026-12-02 13:00", "claude-code", "4d5611e5", "/home/someone/work/a-project", "claude-sonnet-4-6", "1,608",
     "1,234,567", "120,000", "$12.34"),
    ("2026-12-01 09:12", "mini-swe-agent", "ae4a77f8", "/srv/checkouts/another", "gpt-4o", "95", "98,765", "31,000",
     "$0.12"),
])
"""


def test_ids_and_numbers_stay_whole_at_an_80_column_terminal(tmp_path):
    """A narrow terminal folds the free text (a project's path) and names (a model's) first, never an
    id, a number or a date a person reads off the table or copies into the next command."""
    screen = io.StringIO()
    child = pexpect.spawn(sys.executable, ["-c", TABLE], env={"PATH": "/usr/bin:/bin", "TERM": "xterm-256color",
                                                               "TMPDIR": str(tmp_path), "NO_COLOR": "1"},
                          encoding="utf-8", dimensions=(40, 80), timeout=30, logfile=screen)
    child.expect(pexpect.EOF)
    child.close()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue()).replace("\r\n", "\n")
    assert max(len(line) for line in text.splitlines()) <= 80
    for whole in ("4d5611e5", "ae4a77f8", "1,234,567", "98,765", "120,000", "$12.34", "2026-12-02"):
        assert whole in text, text
    assert "/hom" in text and "ject" in text  # the path is still there, folded over lines


cell = st.one_of(st.from_regex(r"[0-9a-f]{8}", fullmatch=True), st.from_regex(r"[\d,]{1,11}", fullmatch=True),
                 st.text(alphabet="abc /-", min_size=0, max_size=50))


@given(st.integers(min_value=1, max_value=9).flatmap(lambda n: st.tuples(
    st.lists(st.text(alphabet="ab ", min_size=1, max_size=14), min_size=n, max_size=n),
    st.lists(st.lists(cell, min_size=n, max_size=n), min_size=1, max_size=6))), st.integers(min_value=20, max_value=240))
def test_a_table_layout_fits_its_width_and_keeps_whole_what_it_says_it_keeps(table, width):
    from lossless.cli._common import _column_widths

    headers, rows = table
    layout, boxed = _column_widths(headers, rows, width)
    if layout is None:
        return  # rich's own layout: the table fits as it is, or nothing would
    n = len(headers)
    assert sum(w for w, _ in layout) + (3 * n + 1 if boxed else 2 * n - 2) <= width
    for i, (w, whole) in enumerate(layout):
        assert w >= 1
        if whole:
            assert all(" " not in r[i] and len(r[i]) <= w for r in rows)
