"""``bench/heldout.py`` lays out the sessions ``../shared/data`` does not hold, as the benches read them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted((DATA / "mini-swe-agent").glob("*.traj.json")) if (DATA / "mini-swe-agent").exists() else []


@pytest.mark.skipif(len(RUNS) < 4, reason="shared data not present: mini-swe-agent runs")
def test_heldout_links_what_shared_data_lacks_and_samples_the_runs_that_pass_the_window(tmp_path):
    spotter, mswe, shared, out = (tmp_path / n for n in ("spotter", "mswe", "shared", "out"))
    transcripts = spotter / "test" / "fixtures" / "transcripts"
    transcripts.mkdir(parents=True)
    (transcripts / "long.jsonl").write_text("{}\n" * 1_200)
    (transcripts / "fixture.jsonl").write_text("{}\n" * 10)  # a test fixture, not a working session
    (transcripts / "known.jsonl").write_text("{}\n" * 1_200)
    trajs = mswe / "swebench_results" / "run" / "trajs"
    for path in RUNS[:4]:
        (trajs / path.stem).mkdir(parents=True)
        shutil.copy(path, trajs / path.stem / path.name)
    (shared / "claude-code").mkdir(parents=True)
    (shared / "mini-swe-agent").mkdir(parents=True)
    (shared / "claude-code" / "known.jsonl").write_text("")
    (shared / "mini-swe-agent" / RUNS[0].name).write_text("")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "heldout.py"), "--spotter", str(spotter),
                           "--mini-swe-agent", str(mswe), "--out", str(out), "--shared", str(shared),
                           "--window", "16000", "--sample", "2"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (out / "all" / "claude-code").iterdir()) == ["long.jsonl"]
    linked = sorted(p.name for p in (out / "all" / "mini-swe-agent").iterdir())
    assert linked == sorted(p.name for p in RUNS[1:4])  # the one shared data holds is left out
    assert all((out / "all" / "mini-swe-agent" / n).resolve().read_bytes() == (DATA / "mini-swe-agent" / n).read_bytes()
               for n in linked)
    sample = sorted(p.name for p in (out / "sample" / "mini-swe-agent").iterdir())
    assert len(sample) == 2 and set(sample) <= set(linked)
    again = subprocess.run(done.args, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and sorted(p.name for p in (out / "sample" / "mini-swe-agent").iterdir()) == sample


def test_heldout_says_so_when_it_finds_nothing(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "heldout.py"), "--spotter", str(tmp_path / "a"),
                           "--mini-swe-agent", str(tmp_path / "b"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.strip().startswith("heldout: no session found under")
