"""The catalog's ranking index: BM25F over a memory's fields, kept in the catalog's SQLite file.

The catalog (``catalog``) calls it inside its write transactions; nothing else needs to::

    engine = Engine()
    engine.put(con, rid, scope, fields, old)    # index a live memory (replacing what it was)
    engine.drop(con, old)                       # take one out
    engine.search(con, "indent tabs", 5, None)  # [(rid, score)], best first

One engine at every size: the same ranking as ``lexical.LexicalIndex``'s BM25F (weighted term
frequencies summed over name, description, body and context; one length normalisation; the
always-positive idf ``log(1 + (N - n + 0.5) / (n + 0.5))``; ``k1 = 0.9, b = 0.4``), so a query
made only of common words scores above zero at 100,000 memories as at 10.  SQLite's FTS5 was
measured as the alternative and not kept as the ranker: its ``bm25()`` clamps the idf of a term
found in half the documents or more to ~0 (a query of common words then ranks nothing), fixes
``k1``/``b`` at 1.2/0.75, and ranks LoCoMo lower (RESULTS §4); Python's ``sqlite3`` cannot give
FTS5 another ranking function.  The postings below are scored by one SQL aggregate, which
measured as fast as an FTS5 query over the same memories (RESULTS §8).

Between queries an engine keeps what it read (``_Cache``) for as long as the rows are unchanged
(the ``key`` the catalog passes: its sequence number): the query words' numbers and frequencies,
each term's score parts, the result rows.  A query of few postings is then summed in Python —
the parts computed by SQLite with the statement's own expression, summed in its order, so the
scores are the statement's to the bit (``tests/test_memory_ranking.py``).  At 1,000 memories a
query whose words were seen before costs less than half; reading a posting into Python costs
about what the statement's ranking of it costs, so a query of many unread postings is left to
the statement.

Tables:

* ``terms(tid, term)``: a stemmed term's number (never reused, so a cached number stays right).
* ``post(tid, rid, sc, tf, dl)``: the term's weighted frequency in memory ``rid`` of scope ``sc``,
  and that memory's weighted length (kept in the posting so a query reads no other table).
* ``df(tid, sc, n)`` and ``scopes(sc, name, n, total)``: document frequencies and lengths per
  scope (``''`` is unscoped), so a store opened with a view ranks with the statistics of the
  memories it sees, exactly as an index of those memories alone would.

Invariant (``tests/test_memory_engine.py``): after any sequence of puts and drops the tables
equal those built from scratch over the live memories, and so do the rankings.
"""

from __future__ import annotations

import heapq
import math
import sqlite3
from array import array
from collections import Counter
from typing import Any, Hashable, NamedTuple, Sequence

from .lexical import DEFAULT_WEIGHTS, RERANK_DEPTH, TIME_BOOST, asks_when, query_words, stem, weighted_terms

K1, B = 0.9, 0.4
FLUSH_AT = 200_000
"""Postings gathered before they are written (about 40 MB of tuples)."""
PY_MAX = 4_000
"""A query whose terms have at most this many postings in all is ranked in Python (``Engine.py_max``)."""
FETCH_MAX = 500
"""Of those, how many it may read from the database (the rest read by an earlier query)."""
CACHED = 50_000
"""Postings an engine keeps between queries (about 6 MB; and a tenth as many result rows)."""

SCHEMA = (
    "CREATE TABLE terms(tid INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE)",
    "CREATE TABLE post(tid INTEGER NOT NULL, rid INTEGER NOT NULL, sc INTEGER NOT NULL, tf REAL NOT NULL,"
    " dl REAL NOT NULL, PRIMARY KEY(tid, rid)) WITHOUT ROWID",
    "CREATE TABLE df(tid INTEGER NOT NULL, sc INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY(tid, sc)) WITHOUT ROWID",
    "CREATE TABLE scopes(sc INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, n INTEGER NOT NULL DEFAULT 0,"
    " total REAL NOT NULL DEFAULT 0)",
)
TABLES = ("terms", "post", "df", "scopes")


class Indexed(NamedTuple):
    """What the catalog keeps in a memory's row to take it out again."""

    sc: int
    dl: float
    fwd: bytes
    """The memory's term numbers (``array('q')``)."""


class Terms(NamedTuple):
    """A memory's entry in the index before it is written (``Engine.terms_of``)."""

    entry: Indexed
    tids: list[int]
    tfs: list[float]
    """Its weighted frequency of each term of ``tids``."""


class Engine:
    """The ranking index of one catalog connection: caches term and scope numbers (call
    ``forget`` after a rolled-back transaction: a number it handed out may not exist)."""

    def __init__(self, weights: Sequence[float] = DEFAULT_WEIGHTS) -> None:
        self.weights = tuple(weights)
        self._tids: dict[str, int] = {}
        self._scs: dict[str, int] = {}
        self._posts: list[tuple[int, int, int, float, float]] = []
        self._dels: list[tuple[int, int]] = []
        self._df: Counter[tuple[int, int]] = Counter()
        self._docs: dict[int, list[float]] = {}
        self._pending: set[int] = set()
        self._cache = _Cache()
        self.py_max = PY_MAX
        """Postings up to which a query is ranked in Python rather than by SQLite (0: never)."""
        self.fetch_max = FETCH_MAX
        """Postings not yet read that such a query may read (``FETCH_MAX``)."""

    def forget(self) -> None:
        """After a rolled-back transaction: drop the cached numbers and anything not yet flushed."""
        self._tids.clear()
        self._scs.clear()
        self._dels.clear()
        self._posts.clear()
        self._df.clear()
        self._docs.clear()
        self._pending.clear()
        self._cache = _Cache()

    # -- writing ------------------------------------------------------------------------------
    def _scope(self, con: sqlite3.Connection, name: str) -> int:
        sc = self._scs.get(name)
        if sc is None:
            con.execute("INSERT OR IGNORE INTO scopes(name) VALUES (?)", (name,))
            sc = self._scs[name] = con.execute("SELECT sc FROM scopes WHERE name = ?", (name,)).fetchone()[0]
        return sc

    def _term_ids(self, con: sqlite3.Connection, words: Sequence[str]) -> list[int]:
        missing = [w for w in dict.fromkeys(words) if w not in self._tids]
        for start in range(0, len(missing), 500):
            part = missing[start:start + 500]
            con.executemany("INSERT OR IGNORE INTO terms(term) VALUES (?)", ((w,) for w in part))
            marks = ", ".join("?" * len(part))
            self._tids.update((t, i) for i, t in con.execute(f"SELECT tid, term FROM terms WHERE term IN ({marks})",
                                                             part))
        return [self._tids[w] for w in words]

    def terms_of(self, con: sqlite3.Connection, scope: str | None, fields: Sequence[str]) -> Terms:
        """What ``put`` indexes of a memory, before it has a row number (the caller can then write its
        row with its ``Indexed`` in one statement)."""
        tf, dl = weighted_terms(fields, self.weights)
        sc = self._scope(con, scope or "")
        tids = self._term_ids(con, list(tf))
        return Terms(Indexed(sc=sc, dl=dl, fwd=array("q", tids).tobytes()), tids, list(tf.values()))

    def put(self, con: sqlite3.Connection, rid: int, scope: str | None, fields: Sequence[str],
            terms: Terms | None = None) -> Indexed:
        """Index memory ``rid`` (not indexed now: the caller drops its old entry first) — its ``fields``,
        or the ``terms`` already taken of them.  Written at ``flush``, which the caller calls before its
        transaction ends: a batch (a sweep of thousands of files) is inserted in index order, one pass
        over the pages."""
        if rid in self._pending:
            self.flush(con)
        entry, tids, tfs = terms or self.terms_of(con, scope, fields)
        sc, dl = entry.sc, entry.dl
        self._posts.extend((tid, rid, sc, f, dl) for tid, f in zip(tids, tfs))
        self._df.update((tid, sc) for tid in tids)
        doc = self._docs.setdefault(sc, [0, 0.0])
        doc[0] += 1
        doc[1] += dl
        self._pending.add(rid)
        if len(self._posts) > FLUSH_AT:  # a sweep of 100,000 files: memory bounded, still in index order per part
            self.flush(con)
        return entry

    def flush(self, con: sqlite3.Connection) -> None:
        """Write what ``put`` and ``drop`` gathered (in the caller's transaction): the removed postings
        first, then the new ones, each in index order; document frequencies and lengths by their net change."""
        if not self._pending and not self._dels and not self._docs:  # a memory with no terms still counts
            return
        self._dels.sort()
        con.executemany("DELETE FROM post WHERE tid = ? AND rid = ?", self._dels)
        self._posts.sort()
        con.executemany("INSERT INTO post(tid, rid, sc, tf, dl) VALUES (?, ?, ?, ?, ?)", self._posts)
        deltas = sorted((tid, sc, k) for (tid, sc), k in self._df.items() if k)
        con.executemany("INSERT INTO df(tid, sc, n) VALUES (?, ?, ?) ON CONFLICT(tid, sc) DO UPDATE SET n = n + excluded.n",
                        deltas)
        con.executemany("DELETE FROM df WHERE tid = ? AND sc = ? AND n <= 0", ((t, c) for t, c, k in deltas if k < 0))
        con.executemany("UPDATE scopes SET n = n + ?, total = total + ? WHERE sc = ?",
                        ((n, total, sc) for sc, (n, total) in self._docs.items()))
        self._posts.clear()
        self._dels.clear()
        self._df.clear()
        self._docs.clear()
        self._pending.clear()

    def drop(self, con: sqlite3.Connection, rid: int, old: Indexed) -> None:
        """Take memory ``rid`` (indexed as ``old``) out of the index (at ``flush``, before any put)."""
        if rid in self._pending:
            self.flush(con)
        tids = array("q")
        tids.frombytes(old.fwd)
        self._dels.extend((tid, rid) for tid in tids)
        self._df.subtract((tid, old.sc) for tid in tids)
        doc = self._docs.setdefault(old.sc, [0, 0.0])
        doc[0] -= 1
        doc[1] -= old.dl

    # -- reading ------------------------------------------------------------------------------
    def stats(self, con: sqlite3.Connection, scopes: Sequence[str] | None) -> tuple[int, float, tuple[int, ...]]:
        """(memories, summed length, scope numbers) of what a view sees (``scopes`` None: every memory)."""
        seen = None if scopes is None else ("", *scopes)
        where, args = ("", ()) if seen is None else (f" WHERE name IN ({', '.join('?' * len(seen))})", tuple(seen))
        rows = con.execute(f"SELECT sc, n, total FROM scopes{where}", args).fetchall()
        return (sum(r[1] for r in rows), sum(r[2] for r in rows),
                () if seen is None else tuple(r[0] for r in rows))

    def search(self, con: sqlite3.Connection, query: str, limit: int, scopes: Sequence[str] | None,
               stats: tuple[int, float, tuple[int, ...]] | None = None, cols: str = "f.id",
               key: Hashable | None = None) -> list[tuple[Any, ...]]:
        """(score, whether it narrates something in time, *``cols``) of the best memories for ``query``
        among the scopes a view sees (``scopes`` None: every memory; unscoped ones always), best first by
        score — ties are the caller's to order (by id), so it gets every row tied at the cut.
        ``stats`` is ``stats(con, scopes)`` when the caller holds it (it changes only with a write);
        ``cols``, the columns of ``files f`` each result carries after them (its id by default).

        ``key`` names the state of the rows (the catalog's sequence number, which every write of a row
        changes): while it stays the same, the terms, postings and rows this engine read are reused (``_Cache``), and a
        query whose postings number at most ``py_max`` is ranked here rather than by SQLite — the same
        sums in the same order, so the same scores (``tests/test_memory_ranking.py``)."""
        qw = query_words(query)
        if limit <= 0 or not qw:
            return []
        n, total, scs = stats or self.stats(con, scopes)
        if not n:
            return []
        state = None if key is None else (key, None if scopes is None else tuple(scopes), cols)
        if state is None or self._cache.key != state:
            self._cache = _Cache(state)
        cache = self._cache
        qf = Counter(stem(w) for w in qw)
        found = cache.terms(con, list(qf), scopes, scs)
        weights = [(tid, math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * qf[t] * (K1 + 1.0))
                   for t, (tid, df) in found if df]
        if not weights:
            return []
        depth = max(limit, RERANK_DEPTH) if asks_when(query) else limit
        avg = (total / n) or 1.0
        if self._here(cache, found, weights, avg):
            return self._rank_here(cache, con, weights, scopes, scs, avg, depth, cols)
        values = ", ".join("(?, ?)" for _ in weights)
        p_where = "" if scopes is None else f" WHERE p.sc IN ({', '.join('?' * len(scs))})"
        args = (K1 * (1.0 - B), K1 * B / avg, *(x for w in weights for x in w), *scs)
        ranked = (f"SELECT p.rid, sum(q.column2 * p.tf / (p.tf + ? + ? * p.dl)) AS s FROM (VALUES {values}) AS q"
                  f" JOIN post p ON p.tid = q.column1{p_where} GROUP BY p.rid ORDER BY s DESC")
        room = depth + 1
        rows = con.execute(f"SELECT a.s, f.timed, {cols} FROM ({ranked} LIMIT ?) a JOIN files f ON f.rid = a.rid"
                           " ORDER BY a.s DESC", (*args, room)).fetchall()
        if len(rows) == room and rows[-1][0] >= rows[depth - 1][0]:  # ties past the room: all of them
            rows = con.execute(f"SELECT a.s, f.timed, {cols} FROM ({ranked}) a JOIN files f ON f.rid = a.rid"
                               " WHERE a.s >= ? ORDER BY a.s DESC", (*args, rows[depth - 1][0])).fetchall()
        cut = rows[depth - 1][0] if len(rows) >= depth else None
        return [(s, bool(timed), *rest) for s, timed, *rest in rows if cut is None or s >= cut]

    def _here(self, cache: _Cache, found: list[tuple[str, tuple[int, int]]], weights: list[tuple[int, float]],
              avg: float) -> bool:
        """Whether to rank in Python: at most ``py_max`` postings in all, of which at most ``fetch_max``
        not yet read (reading a posting into Python costs about what SQLite's ranking of it costs, so a
        long list is left to SQLite until it is known)."""
        if sum(df for _, (_, df) in found) > self.py_max:
            return False
        b = K1 * B / avg
        unread = sum(df for (_, (_, df)), (tid, w) in zip(found, weights) if not cache.holds(tid, w, b))
        return unread <= self.fetch_max

    def _rank_here(self, cache: _Cache, con: sqlite3.Connection, weights: list[tuple[int, float]], scopes: Sequence[str] | None,
                   scs: tuple[int, ...], avg: float, depth: int, cols: str) -> list[tuple[Any, ...]]:
        """``search``'s ranking statement computed in Python over the postings (few: ``py_max``): the
        terms in the statement's order, each memory's sum in the same order, the same cut and ties."""
        b = K1 * B / avg
        lists = cache.postings(con, weights, b, scopes, scs)
        (tid, w), *rest = weights
        scores = dict(lists[tid, w, b])  # the first term's parts: 0.0 + part is part, to the bit
        get = scores.get
        for tid, w in rest:
            for rid, part in lists[tid, w, b]:
                scores[rid] = get(rid, 0.0) + part
        if len(scores) > depth:
            cut = heapq.nlargest(depth, scores.values())[-1]
            scores = {rid: s for rid, s in scores.items() if s >= cut}
        rows = cache.rows(con, list(scores), cols)
        out = [(s, bool(rows[rid][0]), *rows[rid][1:]) for rid, s in scores.items() if rid in rows]
        out.sort(key=lambda r: -r[0])
        return out


class _Cache:
    """What one engine read for one state of the database (``Engine.search``'s ``key``): each stemmed
    term's number and document frequency in the view, the postings of terms ranked in Python, and
    result rows.  Emptied when the key changes — any write of a row, by this connection or another — so it
    never answers from a state gone by; it holds at most ``CACHED`` postings and ``CACHED // 10`` rows."""

    def __init__(self, key: Hashable | None = None) -> None:
        self.key = key
        self._terms: dict[str, tuple[int, int]] = {}
        self._lists: dict[tuple[int, float, float], list[tuple[int, float]]] = {}
        self._held = 0
        self._rows: dict[int, tuple[Any, ...]] = {}

    def terms(self, con: sqlite3.Connection, stems: list[str], scopes: Sequence[str] | None,
              scs: tuple[int, ...]) -> list[tuple[str, tuple[int, int]]]:
        """(stem, (term number, document frequency in the view)) of the ``stems`` found in the view, in
        the order of ``stems``."""
        known = self._terms
        missing = [t for t in stems if t not in known]
        if missing:
            sc_where = "" if scopes is None else f" AND d.sc IN ({', '.join('?' * len(scs))})"
            for t, tid, df in con.execute(f"SELECT t.term, t.tid, (SELECT sum(d.n) FROM df d WHERE d.tid = t.tid{sc_where})"
                                          f" FROM terms t WHERE t.term IN ({', '.join('?' * len(missing))})",
                                          (*scs, *missing)):
                known[t] = (tid, df or 0)
            for t in missing:
                known.setdefault(t, (0, 0))
        return [(t, known[t]) for t in stems if known[t][1]]

    def holds(self, tid: int, w: float, b: float) -> bool:
        return (tid, w, b) in self._lists

    def postings(self, con: sqlite3.Connection, weights: list[tuple[int, float]], b: float,
                 scopes: Sequence[str] | None, scs: tuple[int, ...]) -> dict[tuple[int, float, float], list[tuple[int, float]]]:
        """Each (term number, query weight, length factor ``b``)'s postings in the view: (rid, its part
        of the score) in rid order, the part computed by SQLite with the ranking statement's expression."""
        lists = self._lists
        missing = [(tid, w) for tid, w in weights if (tid, w, b) not in lists]
        if missing:
            got: dict[int, list[tuple[int, float]]] = {tid: [] for tid, _ in missing}
            values = ", ".join("(?, ?)" for _ in missing)
            sc_where = "" if scopes is None else f" WHERE p.sc IN ({', '.join('?' * len(scs))})"
            for tid, rid, part in con.execute(
                    f"SELECT q.column1, p.rid, q.column2 * p.tf / (p.tf + ? + ? * p.dl) FROM (VALUES {values}) AS q"
                    f" JOIN post p ON p.tid = q.column1{sc_where}",
                    (K1 * (1.0 - B), b, *(x for pair in missing for x in pair), *scs)):
                got[tid].append((rid, part))
            size = sum(len(v) for v in got.values())
            if self._held + size > CACHED:  # full: keep only this query's terms
                kept = {(tid, w, b): lists[tid, w, b] for tid, w in weights if (tid, w, b) in lists}
                lists.clear()
                lists.update(kept)
                self._held = sum(len(v) for v in kept.values())
            self._held += size
            lists.update(((tid, w, b), got[tid]) for tid, w in missing)
        return lists

    def rows(self, con: sqlite3.Connection, rids: list[int], cols: str) -> dict[int, tuple[Any, ...]]:
        """(timed, *``cols``) of each memory of ``rids``."""
        rows = self._rows
        missing = [rid for rid in rids if rid not in rows]
        if len(rows) + len(missing) > CACHED // 10:
            rows.clear()
            missing = rids
        for start in range(0, len(missing), 500):
            part = missing[start:start + 500]
            rows.update((r[0], r[1:]) for r in con.execute(
                f"SELECT f.rid, f.timed, {cols} FROM files f WHERE f.rid IN ({', '.join('?' * len(part))})", part))
        return rows

def boost(hits: list[tuple[str, float]], timed: dict[str, bool], query: str, limit: int) -> list[tuple[str, float]]:
    """``hits`` (id, score) of ``Engine.search`` ordered as ``LexicalIndex`` orders them: by score then
    id, the best ``depth``, those that narrate something in time raised for a question about time."""
    hits = sorted(hits, key=lambda kv: (-kv[1], kv[0]))
    if asks_when(query):
        hits = hits[:max(limit, RERANK_DEPTH)]
        up = 1.0 + TIME_BOOST
        hits = sorted(((k, s * up if timed.get(k) else s) for k, s in hits), key=lambda kv: (-kv[1], kv[0]))
    return hits[:limit]
