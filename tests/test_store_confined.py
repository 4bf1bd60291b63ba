"""The store stays inside itself: planted symlinks are refused, files are private, crashed writers' temp files go.

Each planted link points at a directory or file outside the store; the test then
checks that nothing was written there, nothing was read through it, and the error
is one line naming the link.
"""

from __future__ import annotations

import os
import stat
import time

import pytest

from lossless.cli import main
from lossless.errors import StoreError
from lossless.messages import user
from lossless.store import ArtifactStore, handle_for, sweep_temps
from lossless.transcript import Transcript, read_entries

pytestmark = pytest.mark.skipif(not hasattr(os, "O_NOFOLLOW"), reason="needs O_NOFOLLOW (POSIX)")


@pytest.fixture
def outside(tmp_path):
    """A directory outside the store, with a file in it that must not change."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret").write_text("keep me")
    return d


def snapshot(d):
    return {p.relative_to(d): p.read_bytes() if p.is_file() else None for p in sorted(d.rglob("*"))}


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_files_are_0600_in_directories_0700(tmp_path):
    root = tmp_path / "store"
    with Transcript("s", root=root) as log:
        log.append([user("hello")])
    handle = ArtifactStore(root).put("the original")
    assert mode(root) == mode(root / "sessions") == mode(root / "sessions" / "s") == 0o700
    assert mode(root / "artifacts") == 0o700
    assert mode(log.path) == 0o600
    assert mode(root / "artifacts" / handle[7:]) == 0o600


@pytest.mark.parametrize("planted", ["transcript.jsonl", "sessions/<id>", "sessions"])
def test_a_transcript_is_never_written_through_a_link(tmp_path, outside, planted):
    root = tmp_path / "store"
    before = snapshot(outside)
    if planted == "transcript.jsonl":
        (root / "sessions" / "s").mkdir(parents=True)
        link = root / "sessions" / "s" / "transcript.jsonl"
        link.symlink_to(outside / "secret")
    elif planted == "sessions/<id>":
        (root / "sessions").mkdir(parents=True)
        link = root / "sessions" / "s"
        link.symlink_to(outside)
    else:
        root.mkdir()
        link = root / "sessions"
        link.symlink_to(outside)
    log = Transcript("s", root=root)
    with pytest.raises(StoreError) as info:
        log.append([user("this must not leave the store")])
    assert str(link) in str(info.value) and "\n" not in str(info.value)
    assert snapshot(outside) == before


def test_a_link_that_stays_inside_the_store_is_followed(tmp_path):
    root = tmp_path / "store"
    (root / "elsewhere").mkdir(parents=True)
    (root / "sessions").symlink_to(root / "elsewhere")
    with Transcript("s", root=root) as log:
        log.append([user("kept")])
    assert len(read_entries(root / "elsewhere" / "s" / "transcript.jsonl")) == 1


def test_an_artifacts_dir_that_leads_outside_is_neither_written_nor_read_nor_swept(tmp_path, outside):
    root = tmp_path / "store"
    root.mkdir()
    (root / "artifacts").symlink_to(outside)
    # A file outside that looks like a crashed writer's temp file: opening the store must not delete it.
    stale = outside / f".{'ab' * 12}.999999999.abcdefgh.tmp"
    stale.write_text("not ours")
    os.utime(stale, (0, 0))
    before = snapshot(outside)
    store = ArtifactStore(root)
    assert store.swept == []
    with pytest.raises(StoreError, match="leads out of the store"):
        store.put("content")
    data = b"planted"
    (outside / handle_for(data)[7:]).write_bytes(data)
    with pytest.raises(StoreError, match="leads out of the store"):
        store.get(handle_for(data))
    assert snapshot(outside) == {**before, (outside / handle_for(data)[7:]).relative_to(outside): data}


def test_an_artifact_that_is_a_link_is_not_read_or_overwritten(tmp_path, outside, capsys):
    root = tmp_path / "store"
    data = b"keep me"
    handle = handle_for(data)  # the link even carries the right content: it is still refused
    (root / "artifacts").mkdir(parents=True)
    link = root / "artifacts" / handle[7:]
    link.symlink_to(outside / "secret")
    store = ArtifactStore(root)
    with pytest.raises(StoreError, match="symlink"):
        store.get(handle)
    with pytest.raises(StoreError, match="symlink"):
        store.put(data)
    assert (outside / "secret").read_text() == "keep me" and link.is_symlink()
    assert main(["recall", handle, "--store", str(root)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and str(link) in err


def test_a_transcript_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    root = tmp_path / "store"
    (root / "sessions" / "s").mkdir(parents=True)
    os.mkfifo(root / "sessions" / "s" / "transcript.jsonl")
    with pytest.raises(StoreError, match="not a regular file"):
        Transcript("s", root=root).append([user("x")])


def test_reopening_sweeps_temp_files_of_dead_writers_and_old_ones_only(tmp_path):
    store = ArtifactStore(tmp_path)
    store.put("something")
    d = tmp_path / "artifacts"
    dead = d / f".{'cd' * 12}.{_dead_pid()}.k3j4h5g6.tmp"
    mine = d / f".{'ef' * 12}.{os.getpid()}.a1b2c3d4.tmp"  # a write in progress in a live process
    old = d / f".{'12' * 12}.x8y7z6w5.tmp"  # no pid in the name: only age tells
    young = d / f".{'34' * 12}.q1w2e3r4.tmp"
    unrelated = d / ".notes.txt"
    for p in (dead, mine, old, young, unrelated):
        p.write_text("partial")
    an_hour_ago = time.time() - 3700
    os.utime(old, (an_hour_ago, an_hour_ago))
    again = ArtifactStore(tmp_path)
    assert sorted(again.swept) == sorted([dead, old])
    assert mine.exists() and young.exists() and unrelated.exists()
    assert sweep_temps(d) == []  # nothing more to do: the live writer's and the young file stay


def _dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("sid", ["a/b", "a\x00b", "..", ".", "x" * 300, "\ud800", "a\\b"])
def test_a_session_id_that_is_not_one_path_component_is_refused(tmp_path, sid):
    with pytest.raises(StoreError, match="session id"):
        Transcript(sid, root=tmp_path)
    assert not (tmp_path / "sessions").exists()


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_compact_refuses_an_output_that_is_not_a_regular_file(tmp_path, capsys, kind):
    import json

    f = tmp_path / "in.json"
    f.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    out = tmp_path / "out"
    if kind == "directory":
        out.mkdir()
    else:
        os.mkfifo(out)
    assert main(["compact", str(f), "--window", "16000", "-o", str(out), "--store", str(tmp_path / "s")]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and str(out) in err and "-o" in err
    assert out.is_dir() if kind == "directory" else stat.S_ISFIFO(os.stat(out).st_mode)


def _worktree(tmp_path):
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def test_a_store_made_in_a_git_working_tree_ignores_itself(tmp_path, monkeypatch):
    """Before: ``./.lossless`` inside a checkout had no .gitignore, and ``git add -A`` staged its
    transcripts, a tool output's secret verbatim.  Every door makes the folder: artifacts,
    transcripts, memory, the proxy's key."""
    import subprocess

    from lossless.memory import MemoryStore
    from lossless.proxy import ProxySettings
    from lossless.proxy.server import tenant_secret

    repo = _worktree(tmp_path)
    stores = {"artifacts": repo / "a" / ".lossless", "transcript": repo / ".lossless",
              "memory": repo / "m" / ".lossless", "proxy": repo / "p" / ".lossless"}
    ArtifactStore(stores["artifacts"]).put("AKIA-SECRET-0123")
    Transcript("s1", stores["transcript"]).append([user("my key is AKIA-SECRET-0123")])
    MemoryStore(stores["memory"] / "memory").add(name="tabs", description="indentation", type="user", body="tabs")
    tenant_secret(ProxySettings(store=stores["proxy"]))
    for name, root in stores.items():
        assert (root / ".gitignore").read_text().splitlines()[-1] == "*", name
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    staged = subprocess.run(["git", "-C", str(repo), "diff", "--cached", "--name-only"], capture_output=True,
                            text=True, check=True).stdout
    assert ".lossless" not in staged

    elsewhere = tmp_path / "plain" / ".lossless"
    ArtifactStore(elsewhere).put("x")
    assert not (elsewhere / ".gitignore").exists()  # outside a working tree nothing is written
