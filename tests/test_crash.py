"""kill -9 in the middle of writing: everything a call returned survives, and the next opener reads it all.

A real subprocess appends to one session's transcript and writes artifacts until it
is killed with SIGKILL at a random moment; the next run resumes the same session.
After the loop: every entry whose ``append`` returned is readable, every artifact
whose ``put`` returned recalls byte-identical, ``lossless inspect`` reads the
session (torn lines in the middle skipped with a warning), and no temporary file
of a killed writer survives the next opening of the store.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless.cli import main
from lossless.dialects._json import torn
from lossless.dialects.claude_code import read_session
from lossless.store import ArtifactStore
from lossless.transcript import read_entries, transcript_path

SRC = Path(__file__).resolve().parents[1] / "src"
KILLS = 20

WRITER = r"""
import sys
from lossless.messages import assistant, user
from lossless.store import ArtifactStore
from lossless.transcript import Transcript

root, run = sys.argv[1], int(sys.argv[2])
store = ArtifactStore(root)
log = Transcript("crash", root=root)

def content(run, i):
    size = 1 + (run * 7919 + i * 104729) % 800_000
    return (f"run {run} item {i} " * (size // 16 + 1))[:size].encode()

i = 0
while True:
    data = content(run, i)
    handle = store.put(data)
    print("A", run, i, handle, flush=True)
    (uuid,) = log.append([(user if i % 2 == 0 else assistant)(data.decode())])
    print("T", uuid, flush=True)
    if i == 0:
        print("ready", flush=True)
    i += 1
"""


def content(run: int, i: int) -> bytes:  # the writer's content, regenerated to compare
    size = 1 + (run * 7919 + i * 104729) % 800_000
    return (f"run {run} item {i} " * (size // 16 + 1))[:size].encode()


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _run_and_kill(root: Path, run: int, rnd: random.Random) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root), str(run)], stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        lines = []
        seen_append = False
        while not seen_append:  # wait until the writer has returned from one append (however loaded the
            line = proc.stdout.readline().decode()  # machine), then let it run a random while
            assert line, "the writer died before its first append returned"
            lines.append(line)
            seen_append = line.startswith("T ")
        time.sleep(rnd.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        lines += proc.stdout.read().decode().splitlines(keepends=True)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    return [ln for ln in lines if ln.endswith("\n")]  # a report cut by the kill was never a return


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_kill_9_loop_loses_nothing_that_returned(tmp_path):
    root = tmp_path / "store"
    rnd = random.Random(14)
    returned_uuids: list[str] = []
    returned_artifacts: list[tuple[int, int, str]] = []
    for run in range(KILLS + 1):
        if run == KILLS:
            # SIGKILL rarely lands inside one write() of a line, so the last crash is made certain: what a
            # writer killed mid-line leaves (a prefix of its entry), then one more writer resumes the session.
            # That writer opened the file as every writer does: after a line the last kill tore, on a fresh line.
            with open(transcript_path("crash", root), "ab+") as f:
                f.seek(0, os.SEEK_END)
                if f.tell() and (f.seek(-1, os.SEEK_END), f.read(1))[1] != b"\n":
                    f.write(b"\n")
                f.write(json.dumps({"type": "user", "uuid": "torn", "message": {"content": "x" * 99}}).encode()[:60])
        for line in _run_and_kill(root, run, rnd):
            kind, *rest = line.split()
            if kind == "T":
                returned_uuids.append(rest[0])
            elif kind == "A":
                returned_artifacts.append((int(rest[0]), int(rest[1]), rest[2]))
    assert len(returned_uuids) >= KILLS and returned_artifacts

    path = transcript_path("crash", root)
    read = read_entries(path)
    found = {e["uuid"] for e in read.entries}
    assert set(returned_uuids) <= found, "an entry whose append returned is missing"
    assert all("interrupted" in why for _, why in read.skipped), read.skipped  # only torn lines, no other damage

    artifacts_dir = root / "artifacts"
    leftovers = [p for p in artifacts_dir.iterdir() if p.name.endswith(".tmp")]
    store = ArtifactStore(root)  # reopening sweeps what the killed writers left
    assert sorted(store.swept) == sorted(leftovers)
    assert not [p for p in artifacts_dir.iterdir() if p.name.endswith(".tmp")]
    for run, i, handle in returned_artifacts:
        assert store.get_bytes(handle) == content(run, i)

    code, out, err = cli("inspect", str(path), "--json")
    assert code == 0, err
    torn = [n for n, why in read.skipped if "interrupted" in why]
    assert torn and "truncated line skipped" in err  # at least the certain one, in the middle of the file
    assert err.count("truncated") == len(torn) and all(f"{path}:{n}:" in err for n in torn)
    session = read_session(path)
    assert json.loads(out)["messages"] == len(session.messages) > 0
    # The live branch runs through every entry that returned: a resumed writer chains to the last whole entry.
    on_branch = {u for m in session.messages for u in m.meta.get("uuids", (m.meta["uuid"],))}
    assert set(returned_uuids) <= on_branch


def test_a_torn_line_in_the_middle_is_skipped_by_every_reader(tmp_path):
    from lossless.messages import user
    from lossless.transcript import Transcript

    with Transcript("s", root=tmp_path) as log:
        first = log.append([user("before the crash")])
    with open(log.path, "ab") as f:  # what a writer killed mid-line leaves
        f.write(json.dumps({"type": "user", "uuid": "torn", "message": {"content": "cut"}}).encode()[:33])
    with Transcript("s", root=tmp_path) as log:  # the resume
        after = log.append([user("after the crash")])
    read = read_entries(log.path)
    assert [e["uuid"] for e in read.entries] == first + after and not read.truncated
    assert [n for n, _ in read.skipped] == [2]
    session = read_session(log.path)
    assert [m.text for m in session.messages] == ["before the crash", "after the crash"]
    [warning] = session.warnings
    assert warning.startswith(f"{log.path}:2: truncated line skipped (not JSON (")
    for argv in (["inspect", str(log.path)], ["replay", str(log.path), "--window", "16000"],
                 ["compact", str(log.path), "--window", "16000", "-o", str(tmp_path / "o.json"),
                  "--store", str(tmp_path)]):
        code, _, err = cli(*argv)
        assert code == 0 and f"{log.path}:2: truncated line skipped" in err, (argv, err)


def test_a_damaged_line_in_the_middle_is_still_refused(tmp_path):
    from lossless.messages import user
    from lossless.transcript import Transcript

    with Transcript("s", root=tmp_path) as log:
        log.append([user("one")])
    with open(log.path, "ab") as f:
        f.write(b'{"type": "user", "uuid": "x"} trailing junk\n')
    with Transcript("s", root=tmp_path) as log:
        log.append([user("two")])
    code, _, err = cli("inspect", str(log.path))
    assert code == 2 and f"{log.path}:2: not JSON (Extra data" in err and err.count("\n") == 1
    assert read_entries(log.path).skipped[0][0] == 2  # the library lists it and reads on


# -- what counts as torn ------------------------------------------------------------
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(["\\", '"', "\n", "😀", "\udc80", "é", "数"])),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60)
@given(entry=st.dictionaries(st.text(max_size=6), JSON_VALUES, min_size=1, max_size=4),
       ascii_only=st.booleans(), cut=st.floats(0, 1, exclude_max=True))
def test_every_proper_prefix_of_an_entry_is_torn_and_the_whole_line_is_not(entry, ascii_only, cut):
    line = json.dumps(entry, ensure_ascii=ascii_only, separators=(",", ":")).encode("utf-8", "surrogatepass")
    if not ascii_only and b"\xed" in line:
        return  # a lone surrogate is only written escaped (transcript._encode)
    prefix = line[: 1 + int(cut * (len(line) - 1))]  # at least "{", never the whole line
    assert torn(prefix), prefix
    assert not torn(line)


@pytest.mark.parametrize("damaged", [b'{"a": 1} junk', b'{"a": 1}}', b'{"a": 1, oops: 2}', b"[1, 2", b"plain text",
                                     b'{"a": "\xff"}', b'{"a": tx}'])
def test_damage_a_cut_cannot_explain_is_not_torn(damaged):
    assert not torn(damaged)


def test_every_cut_of_a_real_session_line_is_torn():
    from conftest import data_path

    lines = data_path("claude-code", "short.jsonl").read_bytes().splitlines()
    line = max(lines[:6], key=len)  # a few KB of real JSON: escapes, unicode, numbers, nulls
    assert all(torn(line[:n]) for n in range(1, len(line))) and not torn(line)


# -- the group commit: a kill between a batch's writes and its sync ----------------------------------
PREPARER = r"""
import json, os, re, signal, sys
import lossless.store as store_module
from lossless import ContextManager
from lossless.config import ContextConfig

root, kill_at = sys.argv[1], int(sys.argv[2])
batches = 0
sync = store_module.sync_into_place

def sync_or_die(moves, directory, started=None):
    global batches
    batches += bool(moves)
    if moves and batches == kill_at:  # every file of the batch written (its sync perhaps under way), none in place
        print("K", *[final.name for _, final in moves], flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    sync(moves, directory, started)

store_module.sync_into_place = sync_or_die
config = ContextConfig(window=16_000, persist_chars=3_000, persist_shell_chars=3_000)
cm = ContextManager(config=config, store=root, session_id="batch-crash")
history = [{"role": "user", "content": "Read every module."}]
for i in range(12):
    tid = f"toolu_{i:04d}"
    history += [{"role": "assistant", "content": [{"type": "tool_use", "id": tid, "name": "Read", "input": {"n": i}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid,
                                              "content": f"module {i} line\n" * (300 + 40 * i)}]}]
    view = cm.prepare(history)
    print("V", *sorted(set(re.findall(r"sha256:[0-9a-f]{8,24}", json.dumps(view.messages)))), flush=True)
print("done", flush=True)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_kill_between_a_batchs_writes_and_its_sync_never_leaves_an_unreadable_handle_in_a_view(tmp_path):
    """Each run replays the same history through a new manager (the same artifacts again) and is
    killed inside its ``kill_at``-th group commit, its files written but not in place: every handle in
    every view a ``prepare`` returned reads back exactly, and nothing of a killed batch has its name."""
    root = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    in_views: set[str] = set()
    killed: list[str] = []
    for kill_at in (1, 3, 6):
        out = subprocess.run([sys.executable, "-c", PREPARER, str(root), str(kill_at)], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == -signal.SIGKILL, out.stderr
        lines = out.stdout.splitlines()
        assert lines[-1].startswith("K "), lines  # killed in the commit, not before nor after
        names = lines[-1].split()[1:]
        leftovers = {p.name for p in (root / "artifacts").iterdir() if p.name.endswith(".tmp")}
        assert {n for n in names if not (root / "artifacts" / n).exists()}, "the kill landed after the renames"
        assert all(any(t.startswith(f".{n}.") for t in leftovers) for n in names if not (root / "artifacts" / n).exists())
        killed += names
        in_views |= {h for line in lines if line.startswith("V ") for h in line.split()[1:]}
    # what a killed batch had staged was written again by the next run, and came back in its views
    assert any(k.startswith(h.split(":")[1]) for k in killed for h in in_views)
    store = ArtifactStore(root)  # the next opener sweeps the killed batch's temporary files
    assert store.swept and not [p for p in (root / "artifacts").iterdir() if p.name.endswith(".tmp")]
    for handle in in_views:
        data = store.get_bytes(handle)  # present, and its bytes hash to its handle (get_bytes checks)
        assert data
