"""Long-term memory at 1,000 / 10,000 / 100,000 memories: per-message cost, add(), open, memory use.

    python bench/memory_scale.py [--sizes 1000,10000,100000] [--messages 40] [--adds 40] [--json]

For each size a store is generated once (synthetic but realistic memories written
file by file: Zipf-Mandelbrot-distributed words over a 30,000-word vocabulary, names of 2-6
words, one-line descriptions, bodies of 20-150 words in sentences with ordinary
stop words, mixed types, two years of timestamps, some with tags), then measured
side by side in one run, each implementation in its own fresh process on its own
copy of the store:

* ``new``: this checkout (the persistent catalog).
* ``embed``: this checkout with dense retrieval on (``LOSSLESS_EMBED=1``, the ``embed`` extra):
  ``HybridRetriever``, so each message also encodes the query and takes a cosine top-k over every
  memory's vector.  Its ``cold`` includes embedding every memory (once: the vectors persist in
  ``.index/vectors.sqlite3``, and ``warm`` reads them back); run at the ``--embed-sizes`` only.
* ``base``: the code path at the start of this work — main at ``BASE_COMMIT`` —
  run from a detached worktree of that commit (made under the temp dir, removed
  after).  It reads every file per message and rescans on every ``add()``; at
  100,000 it runs only a few repetitions (each takes tens of seconds).

Per implementation: ``cold`` = open + first answer with no index on disk;
``warm`` = a new process's open + first answer with the index there (for ``base``
the same as cold: it keeps nothing); ``message`` = ``inject()`` for one new user
message (retrieve + attach + record use), median; ``add`` = ``store.add()``, median;
``rss`` = the process's peak resident memory.  And the floors, in the ``new``
process: one ``stat`` of every memory file, and one FTS5 query over an in-memory
FTS5 table of the same memories (the fastest a lexical query over all of them gets
with the standard library).
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
BASE_COMMIT = "a664659"
"""main when this work started: retrieval over the 200 most recent memories, a full rescan per add."""
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


# -- the worker: one implementation, one store, one fresh process ---------------------------------------
def worker(impl: str, directory: Path, messages: int, adds: int) -> dict:
    from lossless.memory import MemoryStore, SessionInjector, inject
    from lossless.messages import user

    import lossless

    qs = queries(directory, messages + 2)
    out: dict = {"impl": impl, "src": str(Path(lossless.__file__).parents[1])}
    t = time.perf_counter()
    store = MemoryStore(directory)
    inject([user(qs[0])], store, SessionInjector())
    out["cold_s"] = time.perf_counter() - t
    if impl in ("new", "embed"):
        t = time.perf_counter()
        again = MemoryStore(directory)  # what a new process finds: the index on disk
        inject([user(qs[1])], again, SessionInjector())
        out["warm_s"] = time.perf_counter() - t
        again.catalog.close()
    else:
        out["warm_s"] = out["cold_s"]
    injector, times = SessionInjector(), []
    for q in qs[2:]:
        t = time.perf_counter()
        inject([user(q)], store, injector)
        times.append(time.perf_counter() - t)
    out["message_ms"] = 1000 * statistics.median(times)
    out["message_p90_ms"] = 1000 * sorted(times)[round(0.9 * (len(times) - 1))]
    times = []
    for k in range(adds):
        t = time.perf_counter()
        store.add(name=f"bench new memory {impl} {k}", description=f"added by the bench, number {k}",
                  type="project", body="A new fact the agent learned.")
        times.append(time.perf_counter() - t)
    out["add_ms"] = 1000 * statistics.median(times)
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if impl == "new":
        out.update(floors(directory, qs))
    return out


def floors(directory: Path, qs: list[str]) -> dict:
    from lossless.memory.lexical import query_words, words

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
    matches = [" OR ".join(f'"{w}"' for w in dict.fromkeys(query_words(q))) for q in qs]
    t = time.perf_counter()
    for match in matches:
        if match:
            con.execute("SELECT rowid, bm25(m, 2.0, 1.5, 1.0) AS s FROM m WHERE m MATCH ? ORDER BY s LIMIT 5",
                        (match,)).fetchall()
    return {"floor_stat_all_ms": stat_ms, "floor_fts5_query_ms": 1000 * (time.perf_counter() - t) / len(qs)}


# -- the driver -------------------------------------------------------------------------------------------
def run_worker(impl: str, src: Path, directory: Path, messages: int, adds: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "LOSSLESS_EMBED": "1" if impl == "embed" else "0"}
    cmd = [sys.executable, __file__, "--worker", impl, "--dir", str(directory), "--messages", str(messages),
           "--adds", str(adds)]
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
    ap.add_argument("--base-reps", type=int, default=5, help="messages and adds for the baseline (it is slow)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--embed-sizes", default="1000,10000",
                    help="sizes that also run the embed column (needs the embed extra; embedding 100,000 takes long)")
    ap.add_argument("--worker", choices=("new", "embed", "base"))
    ap.add_argument("--dir", type=Path)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.dir, args.messages, args.adds)))
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="lossless-memscale-") as tmp:
        base_tree = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base_tree), BASE_COMMIT],
                       check=True, capture_output=True)
        try:
            for size in (int(s) for s in args.sizes.split(",")):
                data = Path(tmp) / f"data-{size}"
                t = time.perf_counter()
                generate(data, size)
                gen_s = time.perf_counter() - t
                row = {"size": size, "generate_s": gen_s}
                impls = [("new", ROOT / "src"), ("base", base_tree / "src")]
                if str(size) in args.embed_sizes.split(",") and _has_embed():
                    impls.insert(1, ("embed", ROOT / "src"))
                for impl, src in impls:
                    copy = Path(tmp) / f"{impl}-{size}"
                    shutil.copytree(data, copy)
                    reps = (args.messages, args.adds) if impl != "base" else (args.base_reps, args.base_reps)
                    row[impl] = run_worker(impl, src, copy, *reps)
                    shutil.rmtree(copy)
                shutil.rmtree(data)
                results.append(row)
                print(f"… {size}: done", file=sys.stderr)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)],
                           capture_output=True)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'memories':>9} {'impl':>5} {'message ms':>11} {'p90':>7} {'add ms':>8} {'cold s':>8} {'warm s':>8}"
          f" {'peak RSS MB':>12}")
    for row in results:
        for impl in (i for i in ("new", "embed", "base") if i in row):
            r = row[impl]
            print(f"{row['size']:>9,} {impl:>5} {r['message_ms']:>11.2f} {r['message_p90_ms']:>7.2f} "
                  f"{r['add_ms']:>8.2f} {r['cold_s']:>8.2f} {r['warm_s']:>8.2f} {r['rss_mb']:>12.0f}")
        n = row["new"]
        print(f"{'':>9} floor: one stat per file {n['floor_stat_all_ms']:.2f} ms; one FTS5 query "
              f"{n['floor_fts5_query_ms']:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
