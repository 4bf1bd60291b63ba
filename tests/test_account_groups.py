"""One line and one handle for a call repeated in a range (a file read again, a command run again).

On real mini-swe-agent runs: each ``×N`` line's handle recalls every output of the calls with
that target, whole and oldest first; every other call keeps its own line; the account lists fewer
lines than the range has calls.  (tests/test_accounts.py's property test checks that a group's
text holds only what was output, through merges.)
"""

from __future__ import annotations

import re

import pytest

from lossless import account, markers
from lossless.account.archive import original_text
from lossless.config import ContextConfig
from lossless.dialects.mini_swe import read_trajectory
from lossless.store import ArtifactStore

from conftest import DATA

RUNS = sorted((DATA / "mini-swe-agent").glob("*.traj.json")) if (DATA / "mini-swe-agent").exists() else []
PART = re.compile(r"\n--- output \d+ of \d+ ---\n")


@pytest.mark.skipif(not RUNS, reason="shared data not present: mini-swe-agent runs")
def test_a_repeated_call_is_one_line_whose_handle_holds_each_output(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    groups = 0
    for path in RUNS[:6]:
        messages = list(read_trajectory(path).messages)[1:]
        acc = account.collect(messages, ContextConfig(window=32_000), store)
        acc.commit(store)
        outputs = [(r.tool_use_id, original_text(r)) for m in messages for r in m.tool_results]
        assert len(acc.calls) < len(outputs), path.name
        for line in acc.calls:
            found = re.fullmatch(r"- bash `(.*)` ×(\d+), the last → .* · (sha256:[0-9a-f]{8})", line)
            if not found:
                continue
            groups += 1
            text = store.get(found.group(3))
            head, *parts = PART.split(text)
            assert head.startswith(f"[{found.group(2)} outputs of bash") and len(parts) == int(found.group(2))
            # each part is an output of the range, whole, in the order the calls ran
            k = -1
            for part in parts:
                k = next((j for j in range(k + 1, len(outputs)) if outputs[j][1] == part), len(outputs))
                assert k < len(outputs), (path.name, line[:120])
            assert markers.short(found.group(3)) == found.group(3)
    assert groups >= 3
