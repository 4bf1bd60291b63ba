"""Long-term memory at 1,000 / 10,000 / 100,000 memories: per-message cost, add(), open, memory use.

    python bench/memory_scale.py [--sizes 1000,10000,100000] [--messages 40] [--adds 40] [--json]
    python bench/memory_scale.py --floors 1000     # what a first-sight query and an add cost at the least

For each size a store is generated once (synthetic but realistic memories written
file by file: Zipf-Mandelbrot-distributed words over a 30,000-word vocabulary, names of 2-6
words, one-line descriptions, bodies of 20-150 words in sentences with ordinary
stop words, mixed types, two years of timestamps, some with tags), then measured
side by side in one run, each implementation in its own fresh process on its own
copy of the store:

* ``new``: this checkout (one ranking engine on disk, ``memory/engine.py``).
* ``embed``: this checkout with ``LOSSLESS_EMBED=1``: each ``add()`` embeds its memory (the cost per add).
* ``before``: main at ``BASE_COMMIT`` (``--before``), run from a detached worktree.

Per implementation, and in the same process the honest baselines: ``search`` = ``store.search``
over realistic queries (each asked just before by ``inject``, as the message it is: what a store
keeps between queries holds its words), ``first`` = ``store.search`` of messages not asked before, and ``common`` = ``recall_memories`` over queries made only of the store's
commonest words, each beside one SQLite FTS5 query over an FTS5 table of the same memories
(``floors``, ``fts5_query``: each query beside its FTS5 query, interleaved), with the hits each
keeps (FTS5's past a relevance floor of 0.01); ``message`` =
``inject()`` for one new user message; ``warm`` = a new process's open + first answer with the index
on disk; ``cold`` = the same with no index; ``add`` = ``store.add()`` beside one durable write of a
file of the same size on the same disk (written, fsync'ed, renamed); ``bulk`` = another program
rewrites ``--bulk`` memories (a copy renamed over each), then the first query and the next 20 beside
the steady-state message.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import os
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE_COMMIT = "869833a"
"""main before one engine (issue 21): BM25F in the process below 20,000 memories, FTS5 above, 256 files
re-read per query after a bulk write, the dense side embedding the store on its first query."""
TYPES = ("user", "feedback", "project", "reference")
STOP = ("the", "a", "to", "and", "of", "in", "we", "it", "is", "for", "on", "with", "that", "this", "when", "use")
ASKS = ("can you remind me about", "what did we decide on", "how do we handle", "where is the", "fix the",
        "why does the", "let's look at", "what's the status of")


def vocabulary(n: int = 30_000, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    syl = [c + v for c in "bcdfghklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou", "ar", "en", "il")]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syl) for _ in range(rng.choice((1, 2, 2, 3, 3, 4)))))
    return sorted(words, key=lambda w: (len(w), w))  # short words are the frequent ones, as in English


class Text:
    """Zipf-Mandelbrot (s = 1.07, q = 10) over the vocabulary: a few words everywhere, most words
    rare.  The stop words are drawn apart (``STOP``), so the vocabulary's head is content words:
    q = 10 gives its most common word 1.5 % of the content words, as on LoCoMo's dialog turns,
    where the commonest content word ("great") is in 20 % of the turns."""

    def __init__(self, seed: int) -> None:
        self.words = vocabulary()
        self.cum = list(itertools.accumulate(1.0 / (r + 11) ** 1.07 for r in range(len(self.words))))
        self.rng = random.Random(seed)

    def word(self) -> str:
        return self.words[bisect.bisect(self.cum, self.rng.random() * self.cum[-1])]

    def words_(self, n: int, stop: float = 0.0) -> list[str]:
        return [self.rng.choice(STOP) if self.rng.random() < stop else self.word() for _ in range(n)]

    def sentence(self) -> str:
        ws = self.words_(self.rng.randint(6, 16), stop=0.35)
        return " ".join(ws).capitalize() + "."


def memory_file(t: Text, i: int) -> str:
    rng = t.rng
    name = " ".join(t.words_(rng.randint(2, 6))).capitalize()
    desc = " ".join(t.words_(rng.randint(6, 14), stop=0.3)).capitalize()
    body = " ".join(t.sentence() for _ in range(rng.randint(2, 10)))
    day = 1_700_000_000 + rng.randrange(2 * 365 * 86400)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(day))
    tags = f"tags: [{', '.join(t.words_(3))}]\n" if rng.random() < 0.2 else ""
    return (f"---\nname: {name}\ndescription: {desc}\ntype: {rng.choice(TYPES)}\ncreated: '{stamp}'\n"
            f"updated: '{stamp}'\n{tags}---\n\n{body}\n")


def generate(directory: Path, size: int) -> None:
    directory.mkdir(parents=True)
    t = Text(seed=size)
    for i in range(size):
        path = directory / f"m{i:06d}.md"
        text = memory_file(t, i)
        path.write_text(text)
        stamp = time.mktime(time.strptime(text.split("updated: '", 1)[1][:19], "%Y-%m-%dT%H:%M:%S"))
        os.utime(path, (stamp, stamp))  # last written when last updated, as in a store kept for two years


def queries(directory: Path, n: int, seed: int = 9) -> list[str]:
    """User messages about stored memories (a few of their words among ordinary ones) and about nothing."""
    rng = random.Random(seed)
    names = sorted(p.name for p in directory.glob("m*.md"))
    out = []
    for k in range(n):
        if k % 5 == 4:
            out.append(f"{rng.choice(ASKS)} the weekly sync, thanks")
            continue
        text = (directory / rng.choice(names)).read_text().split("---", 2)[2].split()
        picked = rng.sample(text, min(len(text), rng.randint(2, 5)))
        out.append(f"{rng.choice(ASKS)} {' '.join(w.strip('.').lower() for w in picked)}?")
    return out


def common_queries(directory: Path, n: int = 12) -> list[str]:
    """Queries made only of the commonest content words of the store (each in half the memories or
    more at every size): the case FTS5's clamped idf cannot rank."""
    from lossless.memory.lexical import words

    counts: dict[str, int] = {}
    for p in sorted(directory.glob("m*.md"))[:2000]:
        for w in set(words(p.read_text().split("---", 2)[2])):
            counts[w] = counts.get(w, 0) + 1
    head = [w for w, _ in sorted(counts.items(), key=lambda kv: -kv[1])[:8]]
    return [" ".join(head[i % 8] for i in range(k, k + 2 + k % 2)) for k in range(n)]


def _median_ms(times: list[float]) -> float:
    return 1000 * statistics.median(times)


# -- the worker: one implementation, one store, one fresh process ---------------------------------------
def worker(impl: str, directory: Path, messages: int, adds: int, bulk: int) -> dict:
    from lossless.memory import MemoryStore, SessionInjector, inject, recall_memories
    from lossless.messages import user

    import lossless

    qs = queries(directory, messages + 2)
    cq = common_queries(directory)
    out: dict = {"impl": impl, "src": str(Path(lossless.__file__).parents[1])}
    t = time.perf_counter()
    store = MemoryStore(directory)
    inject([user(qs[0])], store, SessionInjector())
    out["cold_s"] = time.perf_counter() - t
    store.catalog.close()
    t = time.perf_counter()
    store = MemoryStore(directory)  # what a new process finds: the index on disk
    inject([user(qs[1])], store, SessionInjector())
    out["warm_s"] = time.perf_counter() - t
    fts5, stat_ms = floors(directory)
    out["floor_stat_all_ms"] = stat_ms
    injector, times, search, floor = SessionInjector(), [], [], []
    for q in qs[2:]:  # each query beside its FTS5 query, interleaved: a loaded machine slows both alike
        t = time.perf_counter()
        inject([user(q)], store, injector)
        times.append(time.perf_counter() - t)
        t = time.perf_counter()
        store.search(q, 5)
        search.append(time.perf_counter() - t)
        floor.extend(spent for spent, _ in fts5_query(fts5, q))
    out["message_ms"] = _median_ms(times)
    out["message_p90_ms"] = 1000 * sorted(times)[round(0.9 * (len(times) - 1))]
    out["search_ms"] = _median_ms(search)
    out["floor_fts5_query_ms"] = _median_ms(floor)
    times, found, floor, kept = [], [], [], []
    for q in cq:
        t = time.perf_counter()
        hits = recall_memories(q, store)
        times.append(time.perf_counter() - t)
        found.append(len(hits))
        for spent, n in fts5_query(fts5, q):
            floor.append(spent)
            kept.append(n)
    out["common_ms"] = _median_ms(times)
    out["common_hits"] = statistics.mean(found)
    out["floor_fts5_common_ms"] = _median_ms(floor)
    out["floor_fts5_common_hits"] = statistics.mean(kept)
    times, floor = [], []
    for q in queries(directory, messages, seed=10):  # messages not asked before: what a store keeps does not hold them
        t = time.perf_counter()
        store.search(q, 5)
        times.append(time.perf_counter() - t)
        floor.extend(spent for spent, _ in fts5_query(fts5, q))
    out["search_first_ms"] = _median_ms(times)
    out["floor_fts5_first_ms"] = _median_ms(floor)
    times, syncs = [], []
    for k in range(adds):
        t = time.perf_counter()
        m = store.add(name=f"bench new memory {impl} {k}", description=f"added by the bench, number {k}",
                      type="project", body="A new fact the agent learned.")
        times.append(time.perf_counter() - t)
        syncs.append(_one_fsync(directory, store.path_for(m.id).read_bytes()))
    out["add_ms"] = _median_ms(times)
    out["fsync_ms"] = _median_ms(syncs)
    out.update(_bulk(directory, store, qs, bulk))
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _one_fsync(directory: Path, data: bytes) -> float:
    """The floor of a durable write on this disk: a new file of ``data`` written, fsync'ed, renamed —
    beside the store, not in it (a file created in the store's directory is a change the store sees)."""
    tmp, dest = directory.parent / ".bench-floor.tmp", directory.parent / ".bench-floor"
    t = time.perf_counter()
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, dest)
    spent = time.perf_counter() - t
    dest.unlink()
    return spent


def _bulk(directory: Path, store, qs: list[str], n: int) -> dict:
    """Another program rewrites ``n`` memories (a sync, a ``git pull``: a copy renamed over each), then
    the store answers: the first query (it reads what changed), and the next ones against steady state."""
    from lossless.memory import SessionInjector, inject
    from lossless.messages import user

    names = sorted(p.name for p in directory.glob("m*.md"))[:n]
    for name in names:
        path = directory / name
        text = path.read_text().replace("\n---\n\n", "\n---\n\nRevised elsewhere. ", 1)
        tmp = directory / f"{name}.sync"
        tmp.write_text(text)
        os.replace(tmp, path)
    injector = SessionInjector()
    t = time.perf_counter()
    inject([user(qs[2])], store, injector)
    first = time.perf_counter() - t
    times = []
    for q in qs[3:23]:
        t = time.perf_counter()
        inject([user(q)], store, injector)
        times.append(time.perf_counter() - t)
    return {"bulk_files": len(names), "bulk_first_ms": 1000 * first, "bulk_next_ms": _median_ms(times),
            "bulk_next_max_ms": 1000 * max(times)}


def floors(directory: Path) -> tuple[sqlite3.Connection, float]:
    """An FTS5 table of the same memories (same fields) for ``fts5_query``; and the time of one ``stat``
    of every memory file (ms)."""
    from lossless.memory.lexical import words

    t = time.perf_counter()
    with os.scandir(directory) as it:
        for e in it:
            if e.name.endswith(".md"):
                e.stat()
    stat_ms = 1000 * (time.perf_counter() - t)
    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE m USING fts5(f0, f1, f2, tokenize='porter unicode61')")
    rows = []
    for p in directory.glob("m*.md"):
        _, head, body = p.read_text().split("---", 2)
        fields = dict(line.split(": ", 1) for line in head.strip().splitlines() if ": " in line)
        rows.append((" ".join(words(fields.get("name", ""))), " ".join(words(fields.get("description", ""))),
                     " ".join(words(body))))
    con.executemany("INSERT INTO m VALUES (?, ?, ?)", rows)
    return con, stat_ms


def fts5_query(con: sqlite3.Connection, q: str) -> list[tuple[float, int]]:
    """One FTS5 query for the words of ``q`` (the same query words the store ranks): [(seconds, hits a
    relevance floor of 0.01 keeps)], or [] when ``q`` has no query word."""
    from lossless.memory.lexical import query_words

    match = " OR ".join(f'"{w}"' for w in dict.fromkeys(query_words(q)))
    if not match:
        return []
    t = time.perf_counter()
    hits = con.execute("SELECT rowid, bm25(m, 2.0, 1.5, 1.0) AS s FROM m WHERE m MATCH ? ORDER BY s LIMIT 5",
                       (match,)).fetchall()
    return [(time.perf_counter() - t, sum(1 for _, s in hits if -s >= 0.01))]


# -- floors: what a first-sight query and an add cost at the least (``--floors``) -------------------------
def query_floors(directory: Path, n: int = 100, seed: int = 4) -> dict:
    """Medians (ms) of first-sight queries by kind, each beside its FTS5 query: words found in no
    memory, one word found in one memory, two words found in 20-60 memories each.  Every query's
    words are new to the process (nothing kept between queries holds them)."""
    from lossless.memory import MemoryStore, SessionInjector, inject
    from lossless.memory.lexical import stem, words
    from lossless.messages import user

    store = MemoryStore(directory)
    inject([user("hello there")], store, SessionInjector())
    fts5, _ = floors(directory)
    df: dict[str, int] = {}
    for p in sorted(directory.glob("m*.md")):
        for w in set(words(p.read_text().split("---", 2)[2])):
            df[w] = df.get(w, 0) + 1
    plain = sorted(w for w in df if w.isalpha() and stem(w) == w)
    rng = random.Random(seed)
    rare = [w for w in plain if df[w] == 1]
    rare = rng.sample(rare, min(n, len(rare)))
    mid = [w for w in plain if 20 <= df[w] <= 60]
    mid = rng.sample(mid, min(2 * n, len(mid) - len(mid) % 2))
    kinds = {"no word found": [f"what about the qqz{i}x plan" for i in range(n)],
             "one word, 1 memory": [f"remind me about {w}" for w in rare],
             "two words, 20-60 memories each": [f"remind me about {a} {b}" for a, b in zip(mid[::2], mid[1::2])]}
    out = {}
    for kind, qs in kinds.items():
        mine, theirs = [], []
        for q in qs:
            t = time.perf_counter()
            store.search(q, 5)
            mine.append(time.perf_counter() - t)
            theirs.extend(spent for spent, _ in fts5_query(fts5, q))
        out[kind] = (_median_ms(mine), _median_ms(theirs))
    return out


def add_floors(directory: Path, ram: Path | None, adds: int = 200) -> dict:
    """Medians (ms), each beside one durable write: ``add()`` on this disk; the same adds with the store
    on ``ram`` (a RAM file system: what is left is CPU and system calls); and an add's file and SQLite
    work alone (``_add_io``: the memory file written, synced, renamed; ``MEMORY.md`` staged and
    swapped in; a change-log line; one transaction of a row, ten postings and frequencies)."""
    from lossless.memory import MemoryStore

    def adds_on(where: Path) -> tuple[float, float]:
        store = MemoryStore(where)
        store.add(name="warm", description="warm", type="project", body="x")
        times, syncs = [], []
        for k in range(adds):
            t = time.perf_counter()
            m = store.add(name=f"floor memory {k}", description=f"added by the bench, number {k}", type="project",
                          body="A new fact the agent learned.")
            times.append(time.perf_counter() - t)
            syncs.append(_one_fsync(where, store.path_for(m.id).read_bytes()))
        store.catalog.close()
        return _median_ms(times), _median_ms(syncs)

    with tempfile.TemporaryDirectory(dir=ram) as held:
        copy = Path(held) / "store"
        if ram is not None:
            shutil.copytree(directory, copy)  # the same store, before this disk's adds
        out = {"add on this disk": adds_on(directory)}
        if ram is not None:
            out["add on a RAM file system"] = adds_on(copy)
    out["the add's file and SQLite work alone"] = _add_io(directory, adds)
    return out


def _add_io(directory: Path, n: int) -> tuple[float, float]:
    import random as random_

    con = sqlite3.connect(directory / ".index" / "catalog.sqlite3", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    tids = [r[0] for r in con.execute("SELECT tid FROM terms")]
    index = (directory / "MEMORY.md").read_bytes()
    body = b"x" * 420
    rng = random_.Random(1)
    from lossless.memory._fs import _exchange

    def stage(path: Path, data: bytes) -> str:  # as the store writes MEMORY.md (``_fs.stage``, ``_fs.place``)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
        os.write(fd, data)
        os.close(fd)
        return name

    def place(name: str, path: Path) -> None:
        if not _exchange(name, path):
            os.replace(name, path)
        if os.path.exists(name):
            os.unlink(name)

    times, syncs = [], []
    for i in range(n):
        t = time.perf_counter()
        staged = stage(directory / "MEMORY.md", index)
        tmp = directory / f".io{i}.md.1.x.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, body)
        os.fsync(fd)
        os.close(fd)
        os.replace(tmp, directory / f"io{i}.md")
        fd = os.open(directory / ".changes.jsonl", os.O_WRONLY | os.O_APPEND)
        os.write(fd, body * 2 + b"\n")
        os.close(fd)
        place(staged, directory / "MEMORY.md")
        con.execute("BEGIN IMMEDIATE")
        rid = con.execute("INSERT INTO files(id, seq, state, mtime_ns, size, ino, checked_ns, recheck_ns, name,"
                          " description, type, body, created, updated, extra, updated_ts, created_ts, superseded,"
                          " timed, sc, dl, fwd) VALUES (?, ?, 1, ?, 420, ?, ?, ?, 'n', 'd', 'project', ?, 'c', 'u',"
                          " '{}', ?, ?, 0, 0, 1, 20.0, ?) RETURNING rid",
                          (f"io{i}", 10**9 + i, time.time_ns(), i, time.time_ns(), time.time_ns(), "b" * 300,
                           time.time(), time.time(), b"\0" * 80)).fetchone()[0]
        terms = sorted(rng.sample(tids, 10))
        con.executemany("INSERT INTO post(tid, rid, sc, tf, dl) VALUES (?, ?, 1, 1.0, 20.0)", [(x, rid) for x in terms])
        con.executemany("INSERT INTO df(tid, sc, n) VALUES (?, 1, 1) ON CONFLICT(tid, sc) DO UPDATE SET n = n + 1",
                        [(x,) for x in terms])
        con.execute("UPDATE scopes SET n = n + 1, total = total + 20 WHERE sc = 1")
        con.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", [("io", str(i)), ("io2", "[1, 2]")])
        con.execute("COMMIT")
        times.append(time.perf_counter() - t)
        syncs.append(_one_fsync(directory, body))
    con.close()
    return _median_ms(times), _median_ms(syncs)


def run_floors(size: int, ram: Path | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="lossless-memfloors-") as tmp:
        data = Path(tmp) / "store"
        generate(data, size)
        return {"size": size, "queries": query_floors(data), "adds": add_floors(data, ram)}


# -- the driver -------------------------------------------------------------------------------------------
def run_worker(impl: str, src: Path, directory: Path, messages: int, adds: int, bulk: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "LOSSLESS_EMBED": "1" if impl == "embed" else "0"}
    cmd = [sys.executable, __file__, "--worker", impl, "--dir", str(directory), "--messages", str(messages),
           "--adds", str(adds), "--bulk", str(bulk)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _has_embed() -> bool:
    sys.path.insert(0, str(ROOT / "src"))
    from lossless.errors import ConfigError
    from lossless.memory.embed import model_dir

    try:
        model_dir()
    except ConfigError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--messages", type=int, default=40)
    ap.add_argument("--adds", type=int, default=40)
    ap.add_argument("--bulk", type=int, default=10_000, help="memories another program rewrites (at most the size)")
    ap.add_argument("--before", default=BASE_COMMIT, help="the commit the `before` column runs (a detached worktree)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--embed-sizes", default="1000",
                    help="sizes that also run the embed column (LOSSLESS_EMBED=1: each add embeds its memory)")
    ap.add_argument("--floors", type=int, metavar="SIZE",
                    help="only the floors at SIZE memories: first-sight queries by kind, and an add beside its parts")
    ap.add_argument("--ram", type=Path, default=Path("/dev/shm") if os.path.isdir("/dev/shm") else None,
                    help="a RAM file system for --floors (an add there is its CPU and system calls)")
    ap.add_argument("--worker", choices=("new", "embed", "before"))
    ap.add_argument("--dir", type=Path)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.dir, args.messages, args.adds, args.bulk)))
        return 0
    if args.floors:
        sys.path.insert(0, str(ROOT / "src"))
        report = run_floors(args.floors, args.ram)
        if args.json:
            print(json.dumps(report, indent=2))
            return 0
        for kind, (mine, theirs) in report["queries"].items():
            print(f"first-sight query, {kind:32} store {1000 * mine:6.1f} µs  FTS5 {1000 * theirs:5.1f} µs"
                  f"  {mine / theirs:4.1f}x")
        for kind, (mine, sync) in report["adds"].items():
            print(f"{kind:40} {mine:6.3f} ms  one durable write {sync:6.3f} ms  {mine / sync:5.2f}x")
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="lossless-memscale-") as tmp:
        before_tree = Path(tmp) / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before_tree), args.before],
                       check=True, capture_output=True)
        try:
            for size in (int(s) for s in args.sizes.split(",")):
                data = Path(tmp) / f"data-{size}"
                t = time.perf_counter()
                generate(data, size)
                row = {"size": size, "generate_s": time.perf_counter() - t}
                impls = [("new", ROOT / "src"), ("before", before_tree / "src")]
                if str(size) in args.embed_sizes.split(",") and _has_embed():
                    impls.insert(1, ("embed", ROOT / "src"))
                for impl, src in impls:
                    copy = Path(tmp) / f"{impl}-{size}"
                    shutil.copytree(data, copy)
                    row[impl] = run_worker(impl, src, copy, args.messages, args.adds, min(args.bulk, size))
                    shutil.rmtree(copy)
                shutil.rmtree(data)
                results.append(row)
                print(f"… {size}: done", file=sys.stderr)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before_tree)],
                           capture_output=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'memories':>9} {'impl':>6} {'search/FTS5':>11} {'first/FTS5':>10} {'common/FTS5':>11} {'hits':>5} {'FTS5 hits':>9}"
          f" {'message ms':>10} {'warm ms':>8} {'add/fsync':>9} {'bulk 1st/steady':>15} {'next/steady':>11}"
          f" {'cold s':>7} {'RSS MB':>7}")
    for row in results:
        for impl in (i for i in ("new", "embed", "before") if i in row):
            r = row[impl]
            first = r["search_first_ms"] / r["floor_fts5_first_ms"] if "search_first_ms" in r else float("nan")
            print(f"{row['size']:>9,} {impl:>6} {r['search_ms'] / r['floor_fts5_query_ms']:>11.2f} {first:>10.2f}"
                  f" {r['common_ms'] / r['floor_fts5_common_ms']:>11.2f} {r['common_hits']:>5.1f}"
                  f" {r['floor_fts5_common_hits']:>9.1f} {r['message_ms']:>10.2f} {1000 * r['warm_s']:>8.1f}"
                  f" {r['add_ms'] / r['fsync_ms']:>9.1f} {r['bulk_first_ms'] / r['message_ms']:>15.0f}"
                  f" {r['bulk_next_ms'] / r['message_ms']:>11.2f} {r['cold_s']:>7.2f} {r['rss_mb']:>7.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
