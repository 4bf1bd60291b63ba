"""Concurrency across machines, as processes: 8 writers in two separate process pools, each
with its own connection, write 25 memories each while a consolidation runs; nothing is lost
and nothing torn.  The consolidation lock is an advisory lock that dies with its holder."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import time

import pytest

from lossless.storage import open_store
from lossless.storage.postgres.consolidate import PgConsolidator

WRITERS_PER_POOL = 4
PER_WRITER = 25


class GatedMerge:
    """A provider that, once asked, says the lock is held and waits to be let go, then merges the seeds."""

    def __init__(self, held, go):
        self.held, self.go = held, go

    def complete(self, request):
        from lossless.messages import Text
        from lossless.providers.base import Response

        self.held.set()
        self.go.wait(60)
        actions = {"actions": [{"op": "merge", "ids": ["seed-a", "seed-b"], "body": "merged seeds"}]}
        return Response(content=(Text(text=json.dumps(actions)),))


def _write(args):
    url, home, pool, k = args
    os.environ["LOSSLESS_HOME"] = home
    store = open_store(url)
    ids = []
    for i in range(PER_WRITER):
        m = store.memory.add(name=f"{pool} {k} {i}", description=f"written by {pool}/{k}", type="project",
                             body=f"body of {pool}/{k}/{i}\n" * 20)
        ids.append(m.id)
    store.close()
    return ids


def _consolidate(url, home, held, go, out):
    os.environ["LOSSLESS_HOME"] = home
    store = open_store(url)
    result = PgConsolidator(store.memory, GatedMerge(held, go)).run()
    out.put((result.status, result.error))
    store.close()


def _hold_lock(url, home, held):
    os.environ["LOSSLESS_HOME"] = home
    store = open_store(url)
    c = PgConsolidator(store.memory, None)
    assert c._acquire() is not None
    held.set()
    time.sleep(120)


def test_eight_writers_in_two_pools_during_a_consolidation_lose_nothing(pg_url, tmp_path, monkeypatch):
    home = str(tmp_path / "local")
    monkeypatch.setenv("LOSSLESS_HOME", home)
    store = open_store(pg_url)
    for name in ("seed a", "seed b"):
        store.memory.add(name=name, description="a seed the consolidation merges", type="project", body=name)
    ctx = mp.get_context("spawn")
    held, go, out = ctx.Event(), ctx.Event(), ctx.Queue()
    consolidation = ctx.Process(target=_consolidate, args=(pg_url, home, held, go, out))
    consolidation.start()
    try:
        assert held.wait(60), "the consolidation never asked its model"
        with ctx.Pool(WRITERS_PER_POOL) as a, ctx.Pool(WRITERS_PER_POOL) as b:
            ra = a.map_async(_write, [(pg_url, home, "a", k) for k in range(WRITERS_PER_POOL)])
            rb = b.map_async(_write, [(pg_url, home, "b", k) for k in range(WRITERS_PER_POOL)])
            # while the first run holds the lock, a second (another machine's) is refused
            assert PgConsolidator(store.memory, GatedMerge(ctx.Event(), ctx.Event())).run().status == "locked"
            go.set()
            written = [i for ids in ra.get(120) + rb.get(120) for i in ids]
        status, error = out.get(timeout=60)
    finally:
        go.set()
        consolidation.join(60)
    assert status == "applied", error
    assert len(written) == len(set(written)) == 2 * WRITERS_PER_POOL * PER_WRITER
    by_id = {m.id: m for m in store.memory.memories()}
    for mid in written:
        pool, k, i = mid.split("-")
        assert by_id[mid].body == (f"body of {pool}/{k}/{i}\n" * 20).strip("\n")  # whole, not torn
    seeds = [m for i, m in by_id.items() if i.startswith("seed-")]
    assert len(seeds) == 1 and seeds[0].body == "merged seeds"
    adds = [c["id"] for c in store.memory.changes() if c["op"] == "add"]
    assert sorted(adds) == sorted(written + ["seed-a", "seed-b"])
    assert len(by_id) == len(written) + 1
    store.close()


def test_the_consolidation_lock_dies_with_its_holder(pg_url, tmp_path, monkeypatch):
    home = str(tmp_path / "local")
    monkeypatch.setenv("LOSSLESS_HOME", home)
    store = open_store(pg_url)
    ctx = mp.get_context("spawn")
    held = ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(pg_url, home, held))
    holder.start()
    try:
        assert held.wait(60)
        c = PgConsolidator(store.memory, None)
        assert c._acquire() is None
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(30)
        for _ in range(100):  # the server notices the closed connection at once; allow it a moment
            prior = c._acquire()
            if prior is not None:
                break
            time.sleep(0.1)
        assert prior is not None
        c._release(success=True, prior=prior)
        assert c.last_consolidated() > 0
    finally:
        if holder.is_alive():
            holder.kill()
        holder.join(10)
    store.close()


@pytest.mark.parametrize("n", [3])
def test_concurrent_transcript_appends_to_one_session_never_share_a_seq(pg_url, tmp_path, monkeypatch, n):
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "local"))
    stores = [open_store(pg_url) for _ in range(n)]

    def append(k):
        for i in range(20):
            stores[k].transcripts.append_entries("shared", [{"uuid": f"{k}-{i}-0"}, {"uuid": f"{k}-{i}-1"}])

    with ThreadPoolExecutor(n) as pool:
        list(pool.map(append, range(n)))
    entries = stores[0].transcripts.entries("shared")
    assert len(entries) == n * 40
    uuids = [e["uuid"] for e in entries]
    for k in range(n):  # each writer's entries in its order, each append's pair adjacent
        mine = [u for u in uuids if u.startswith(f"{k}-")]
        assert mine == [f"{k}-{i}-{j}" for i in range(20) for j in range(2)]
        for i in range(20):
            at = uuids.index(f"{k}-{i}-0")
            assert uuids[at + 1] == f"{k}-{i}-1"
    for s in stores:
        s.close()


def test_session_end_consolidates_through_the_database_lock(pg_url, tmp_path, monkeypatch):
    from lossless.memory import lifecycle
    from lossless.testing import FakeProvider

    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "local"))
    store = open_store(pg_url)
    c = lifecycle.consolidator_for(store.memory, FakeProvider(default='{"actions": []}'))
    assert isinstance(c, PgConsolidator)
    assert c.gate() == "few-sessions"  # no session yet: counted from the transcript rows
    for k in range(c.config.min_sessions):
        store.transcripts.append_entries(f"s{k}", [{"uuid": f"u{k}"}])
    c._last_check = None  # the per-process throttle, not under test here
    assert c.gate() is None
    c._last_check = None
    assert c.maybe_run().status == "nothing-to-do"
    assert c.last_consolidated() > 0 and c.gate() == "too-soon"
    store.close()
