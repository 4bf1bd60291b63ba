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
