"""The PostgreSQL store beside the directory store at 10,000 and 100,000 memories.

    python bench/store_pg.py [--sizes 10000,100000] [--queries 60] [--writes 100] [--json]

For each size one set of memories is generated (``memory_scale.generate``: the same synthetic,
realistic memories as the memory bench), loaded into a directory store (the files themselves)
and into a fresh database on a throwaway PostgreSQL server (``tests/pg_kit.py``; the Debian
binaries, loopback TCP, with PostgreSQL's default durability — fsync and synchronous commit on — as
the directory store fsyncs each file it writes), then both are measured side by side in the same
process, alternating query by query:

* ``retrieval`` — ``recall_memories(query, store, limit=5)`` for a user message (lexical:
  BM25F/FTS5 in the directory store, weighted ``tsvector`` in PostgreSQL), median and p90 ms;
* ``add`` — ``store.memory.add()`` (redaction, render, change log, index), median ms and adds/s;
* ``recall`` — ``artifacts.get_bytes(handle)`` of a 10 KB artifact, median ms;
* ``put`` — ``artifacts.put()`` of a new 10 KB artifact, median ms.

Ratios are PostgreSQL over directory: above 1 the database is slower.  The database is on the
same machine, so its figures carry one loopback round trip per statement and no network.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from memory_scale import generate, queries  # noqa: E402  (the memory bench's generator, reused)


def _median_ms(times: list[float]) -> float:
    return 1000 * statistics.median(times)


def _p90_ms(times: list[float]) -> float:
    return 1000 * sorted(times)[round(0.9 * (len(times) - 1))]


def load_pg(dir_store, pg_store, batch: int = 2000) -> float:
    """Every memory of the directory store into the database (``restore``: text and stamps kept),
    ``batch`` per transaction; seconds taken."""
    t = time.perf_counter()
    ids = [m.id for m in dir_store.memory.memories()]
    for k in range(0, len(ids), batch):
        with pg_store.memory.lock():
            for mid in ids[k:k + batch]:
                pg_store.memory.restore(dir_store.memory.text_of(mid), mid, run="bench-load")
    return time.perf_counter() - t


def measure(size: int, n_queries: int, n_writes: int, server, tmp: Path) -> dict:
    from lossless.memory import recall_memories
    from lossless.storage import open_store

    root = tmp / f"dir-{size}"
    t = time.perf_counter()
    generate(root / "memory", size)
    row: dict = {"size": size, "generate_s": time.perf_counter() - t}
    d = open_store(str(root))
    t = time.perf_counter()
    d.memory.search("warm the catalog", 1)  # the cold open: the catalog built from the files
    row["dir_open_s"] = time.perf_counter() - t
    p = open_store(server.create_db())
    row["pg_load_s"] = load_pg(d, p)
    qs = queries(root / "memory", n_queries + 2)
    for s in (d, p):  # one warm-up each
        recall_memories(qs[0], s.memory, limit=5)
        recall_memories(qs[1], s.memory, limit=5)
    rt: dict[str, list[float]] = {"dir": [], "pg": []}
    for q in qs[2:]:
        for name, s in (("dir", d), ("pg", p)):
            t = time.perf_counter()
            recall_memories(q, s.memory, limit=5)
            rt[name].append(time.perf_counter() - t)
    rng = random.Random(size)
    blobs = [rng.randbytes(10_000) for _ in range(n_writes)]
    handles = {name: [s.artifacts.put(b) for b in blobs[: n_writes // 2]] for name, s in (("dir", d), ("pg", p))}
    add: dict[str, list[float]] = {"dir": [], "pg": []}
    put: dict[str, list[float]] = {"dir": [], "pg": []}
    get: dict[str, list[float]] = {"dir": [], "pg": []}
    for k in range(n_writes):
        for name, s in (("dir", d), ("pg", p)):
            t = time.perf_counter()
            s.memory.add(name=f"bench {name} {k}", description=f"a fact the bench adds, number {k}",
                         type="project", body="A new fact the agent learned.")
            add[name].append(time.perf_counter() - t)
            t = time.perf_counter()
            s.artifacts.put(blobs[k] + b"new")
            put[name].append(time.perf_counter() - t)
            h = handles[name][k % len(handles[name])]
            t = time.perf_counter()
            s.artifacts.get_bytes(h)
            get[name].append(time.perf_counter() - t)
    for name in ("dir", "pg"):
        row[name] = {"retrieval_ms": _median_ms(rt[name]), "retrieval_p90_ms": _p90_ms(rt[name]),
                     "add_ms": _median_ms(add[name]), "adds_per_s": len(add[name]) / sum(add[name]),
                     "recall_ms": _median_ms(get[name]), "put_ms": _median_ms(put[name])}
    row["ratio"] = {k: row["pg"][k] / row["dir"][k] for k in ("retrieval_ms", "add_ms", "recall_ms", "put_ms")}
    p.close()
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--writes", type=int, default=100)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from pg_kit import PgServer, why_unavailable

    reason = why_unavailable()
    if reason:
        print(f"store_pg: {reason}", file=sys.stderr)
        return 2
    server = PgServer.start(durable=True)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="lossless-storepg-") as tmp:
            os.environ["LOSSLESS_HOME"] = str(Path(tmp) / "local")
            for size in (int(s) for s in args.sizes.split(",")):
                results.append(measure(size, args.queries, args.writes, server, Path(tmp)))
                print(f"… {size}: done", file=sys.stderr)
    finally:
        server.stop()
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'memories':>9} {'store':>5} {'retrieval ms':>13} {'p90':>7} {'add ms':>7} {'adds/s':>7} "
          f"{'recall ms':>10} {'put ms':>7}")
    for row in results:
        for name in ("dir", "pg"):
            r = row[name]
            print(f"{row['size']:>9,} {name:>5} {r['retrieval_ms']:>13.2f} {r['retrieval_p90_ms']:>7.2f} "
                  f"{r['add_ms']:>7.2f} {r['adds_per_s']:>7.0f} {r['recall_ms']:>10.3f} {r['put_ms']:>7.2f}")
        q = row["ratio"]
        print(f"{'':>9} pg/dir: retrieval {q['retrieval_ms']:.2f}×, add {q['add_ms']:.2f}×, recall "
              f"{q['recall_ms']:.2f}×, put {q['put_ms']:.2f}× (dir open {row['dir_open_s']:.1f} s, "
              f"pg load {row['pg_load_s']:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
