"""A batch's artifacts are written and synced in the background: what a batch promises stays — every
handle durable at its end, readable within it, nothing left behind when it fails."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lossless.errors import StoreError
from lossless.store import ArtifactStore, handle_for


def _temps(store: ArtifactStore) -> list[str]:
    return [n for n in os.listdir(store.dir) if n.endswith(".tmp")] if store.dir.is_dir() else []


def test_a_batch_puts_every_artifact_in_place_at_its_end(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    texts = [f"artifact {i}\n" * (i + 1) for i in range(40)]
    with store.batch():
        handles = [store.put(t) for t in texts]
        assert [store.get(h) for h in handles] == texts  # readable before the end, from the batch
        store.put(texts[0])  # twice in one batch: one file
    assert sorted(os.listdir(store.dir)) == sorted(h.split(":", 1)[1] for h in handles)
    assert [store.get(h) for h in handles] == texts
    assert all(oct(os.stat(store.dir / h.split(":", 1)[1]).st_mode & 0o777) == "0o600" for h in handles)
    with store.batch():  # stored already: nothing written again
        assert store.put(texts[1]) == handles[1]
    assert not _temps(store)


def test_a_failed_write_fails_the_batch_and_leaves_nothing(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    store.put("first")  # makes artifacts/
    planted = store.dir / handle_for(b"planted").split(":", 1)[1]
    planted.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StoreError, match="symlink"):
        with store.batch():
            other = store.put("another artifact")
            store.put("planted")
    assert not _temps(store)
    assert other not in store  # the batch committed nothing
    assert not (tmp_path / "elsewhere").exists()


def test_an_exception_in_the_batch_removes_its_files(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    store.put("first")
    with pytest.raises(KeyError):
        with store.batch():
            handles = [store.put(f"text {i}" * 500) for i in range(20)]
            raise KeyError("a stage failed")
    assert not _temps(store)
    assert not any(h in store for h in handles)
