"""Accounts read right on real shell-driven runs (the mini-swe-agent trajectories).

The fallback summary of each run, at a small window, must: keep the task's end (its
submit instruction) and the task whole when it fits the generous budget; list every
file edited with ``sed -i`` or written through a heredoc as modified and no heredoc
word as a file; show the exit status on every shell line; quote the harness's
repeated reminder once, with a count.
"""

from __future__ import annotations

import re

import pytest

from lossless import account
from lossless.config import ContextConfig
from lossless.dialects.mini_swe import read_trajectory
from lossless.messages import Text
from lossless.account.shell import shell_files
from lossless.stages.base import StageContext
from lossless.stages.summary import fallback_summary
from lossless.store import ArtifactStore
from lossless.tokens import default_counter

from conftest import DATA

RUNS = sorted((DATA / "mini-swe-agent").glob("*.traj.json")) if (DATA / "mini-swe-agent").exists() else []
KEYWORDS = {"sys", "import", "for", "if", "def", "print", "from", "return", "in", "with", "as"}


@pytest.fixture(scope="module")
def summaries(tmp_path_factory):
    if not RUNS:
        pytest.skip("shared data not present: mini-swe-agent runs")
    store = ArtifactStore(tmp_path_factory.mktemp("real"))
    out = []
    for path in RUNS:
        session = read_trajectory(path)
        ctx = StageContext(config=ContextConfig(window=32_000), counter=default_counter(), store=store,
                           trigger="manual")
        msgs = list(session.messages)
        new, result = fallback_summary(msgs, ctx, ctx.count(msgs))
        assert result.fired, path.name
        covered = result.boundary["covered"]
        out.append((path.name, msgs[:covered], new[0].text))
    return out


def test_the_task_is_whole_or_keeps_its_end(summaries):
    for name, replaced, text in summaries:
        task = replaced[0].text.strip()
        tail = task[-200:]
        assert tail in text, f"{name}: the end of the task (its submit instruction) is missing"
        if len(task) <= account.TASK_MIN_CHARS:
            assert task in text, name


def test_sed_and_heredoc_edits_are_modified_and_heredoc_words_are_not_files(summaries):
    seds = 0
    for name, replaced, text in summaries:
        files = next((ln for ln in text.splitlines() if ln.startswith("- modified")), "")
        listed = set(files.split(": ", 1)[1].split(", ")) if files else set()
        for m in replaced:
            for use in m.tool_uses:
                command = use.input.get("command", "")
                for line in command.splitlines():
                    sed = re.match(r"\s*sed -i(?:\S*)? .*'\s+(\S+)\s*$", line)
                    if sed and re.fullmatch(r"[\w./-]+\.\w+", sed.group(1)):
                        assert sed.group(1) in listed or "older" in files, f"{name}: sed -i on {sed.group(1)}"
                        seds += 1
        read = next((ln for ln in text.splitlines() if ln.startswith("- read")), "")
        names = set(read.split(": ", 1)[1].split(", ")) if read else set()
        assert not (names | listed) & KEYWORDS, f"{name}: shell words listed as files"
    assert seds > 50  # the runs edit mostly with sed -i


def test_every_shell_line_shows_its_exit_status(summaries):
    checked = 0
    for name, _, text in summaries:
        for line in text.splitlines():
            if line.startswith("- bash `") and " → " in line:
                outcome = line.split(" → ", 1)[1]
                assert re.match(r"(exit -?\d+|timed out|interrupted|ok|error)\b", outcome), f"{name}: {line[:120]}"
                checked += 1 if outcome.startswith("exit") else 0
    assert checked > 100  # the runs' observations all carry <returncode>


def test_a_repeated_reminder_is_quoted_once_with_a_count(summaries):
    for name, replaced, text in summaries:
        users = [m.text.strip() for m in replaced if m.role == "user" and not m.tool_results
                 and any(isinstance(b, Text) for b in m.content)]
        repeated = {u for u in users if users.count(u) > 1}
        for u in repeated:
            quoted = text.count(u[:120])
            assert quoted <= 1, f"{name}: a repeated message is quoted {quoted} times"


def test_shell_files_on_a_heredoc_write():
    reads, writes = shell_files("cat <<'EOF' > fix.py\nimport sys\nfor x in sys.argv: print(x)\nEOF\npython fix.py")
    assert writes == ["fix.py"] and not set(reads) & KEYWORDS


def test_conclusions_drop_the_reasoning_label_and_the_lines_that_say_nothing(summaries):
    """Every mini-swe-agent turn opens its reasoning with ``THOUGHT:``: a format, not words, so no
    conclusion in an account starts with it; and a short one that names nothing ("Now run the
    reproduction script.") is left out, since the call under it is listed anyway — while one that
    names code, a path or a number stays."""
    listed = 0
    for name, _, text in summaries:
        section = text.split(account.H_CONCLUSIONS, 1)[1].split("\n## ", 1)[0] if account.H_CONCLUSIONS in text else ""
        lines = [line[2:] for line in section.splitlines() if line.startswith("- ")]
        listed += len(lines)
        assert not [c for c in lines if c.upper().startswith("THOUGHT")], name
        assert all(len(c) >= account.SAYS_NOTHING_BELOW or account._NAMES.search(c) or c.startswith("[")
                   for c in lines), name
    assert listed > len(summaries)  # the runs do conclude things


@pytest.mark.parametrize("text, kept", [
    ("THOUGHT: Run reproduction script.", ""),
    ("THOUGHT: Now let's verify the change.", ""),
    ("Done.", ""),
    ("THOUGHT: Let's see the context around line 261.", "Let's see the context around line 261."),
    ("THOUGHT: Building again with `index_base.rst`.", "Building again with `index_base.rst`."),
    ("Thought: the bug is in query.py", "the bug is in query.py"),
    ("Check SessionLive and parse_into now", "Check SessionLive and parse_into now"),
    ("THOUGHT: I made the mistake of running several commands at once. I will combine them.",
     "I made the mistake of running several commands at once. I will combine them."),
])
def test_a_conclusion_keeps_what_names_something(text, kept):
    assert account.conclusion_of(text) == kept
