"""``lossless chat``'s file tools against a swapper: a directory of the working tree is swapped
for a symlink to a directory outside, over and over, while the model reads and the user's
approved writes land.  No read returns the outside file, no write lands outside."""

from __future__ import annotations

import itertools
import os
import sys
import threading

import pytest

from lossless.chat.tools import Toolbox, Workspace

pytestmark = pytest.mark.skipif(not hasattr(os, "O_NOFOLLOW"), reason="needs O_NOFOLLOW (POSIX)")


@pytest.fixture
def swapped(tmp_path):
    root = (tmp_path / "work").resolve()
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "notes.txt").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("OUTSIDE-SECRET\n")
    stop = threading.Event()
    swaps = [0]
    aside = itertools.count()

    def swap() -> None:
        while not stop.is_set():
            os.rename(root / "sub", root / "sub.real")
            try:
                os.symlink(outside, root / "sub")
                os.unlink(root / "sub")
            except FileExistsError:
                pass  # a write made sub in the gap (it did not exist then): set it aside below
            while True:
                try:
                    os.rename(root / "sub.real", root / "sub")
                    break
                except OSError:
                    os.rename(root / "sub", root / f"sub.made{next(aside)}")
            swaps[0] += 1

    thread = threading.Thread(target=swap, daemon=True)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns often: the race window is a few bytecodes wide
    thread.start()
    try:
        yield Toolbox(Workspace(root), lambda kind, what: True), outside
    finally:
        stop.set()
        thread.join(5)
        sys.setswitchinterval(interval)
    assert swaps[0] > 10  # the race was really run


def test_racing_reads_never_return_an_outside_file(swapped):
    """Before: about one read in 75 returned the outside file."""
    box, _ = swapped
    results = [box.run("read_file", {"path": "sub/notes.txt"}) for _ in range(1_500)]
    results += [box.run("grep", {"pattern": "SECRET|inside", "path": "sub"}) for _ in range(300)]
    results += [box.run("edit_file", {"path": "sub/notes.txt", "old_string": "inside", "new_string": "inside"})
                for _ in range(300)]
    assert not [text for text, _ in results if "OUTSIDE" in text]
    assert sum(not error for _, error in results) > 100  # most calls still work


def test_racing_approved_writes_never_land_outside(swapped):
    """Before: a write approved while ``sub`` was a link landed in the outside directory."""
    box, outside = swapped
    results = []
    for i in range(8_000):  # at least 1,500 racing writes, more on a loaded machine until 100 went through
        results.append(box.run("write_file", {"path": f"sub/new{i % 5}.txt", "content": "written"}))
        if i >= 1_500 and sum(not error for _, error in results) > 100:
            break
    results += [box.run("edit_file", {"path": "sub/notes.txt", "old_string": "inside", "new_string": "inside"})
                for _ in range(300)]
    assert sorted(os.listdir(outside)) == ["notes.txt"]
    assert (outside / "notes.txt").read_text() == "OUTSIDE-SECRET\n"
    assert sum(not error for _, error in results) > 100
