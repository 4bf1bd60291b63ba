"""Lexical ranking over (name, description, body) documents, with field weights.

``LexicalIndex(docs).search(query, limit)`` returns ``(doc index, score)`` pairs,
best first, higher is better.  Two backends give the same interface:

* ``"fts5"``: SQLite FTS5 with the porter stemmer, ranked by ``bm25()`` with one
  weight per column.  Fast on large corpora.
* ``"python"``: a BM25F-style scorer in pure Python (weighted term frequencies,
  length-normalised, always-positive idf) with a light suffix stemmer.

``"auto"`` picks FTS5 when the interpreter's SQLite has it and the corpus has at
least ``FTS5_MIN_DOCS`` documents.  Below that FTS5's idf (clamped to ~0 for a
term found in half the documents or more) cannot tell a match from noise in a
store of a handful of memories, so the pure-Python scorer is used.

Queries lose their stop words; only documents sharing at least one content term
with the query are ever returned, so "nothing relevant" is a possible answer.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections import Counter, defaultdict
from functools import lru_cache
from typing import Literal, Sequence

Backend = Literal["auto", "fts5", "python"]
FTS5_MIN_DOCS = 64
DEFAULT_WEIGHTS = (2.0, 1.5, 1.0)

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves also been get got i'm it's let's like maybe really s t don doesn didn isn
    wasn aren weren won wouldn shouldn couldn ll ve re d m o y yeah oh hey hi ok okay wow""".split()
)
_WORD = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light English suffix stripper (plurals, -ing, -ed, -ly): enough to join word forms."""
    w = word
    if len(w) <= 3 or w.isdigit():
        return w
    for suffix, repl, min_len in (("ies", "y", 5), ("sses", "ss", 5), ("ness", "", 7), ("ment", "", 8),
                                  ("ingly", "", 8), ("edly", "", 7), ("ing", "", 6), ("ly", "", 6),
                                  ("ed", "", 5), ("es", "", 6), ("s", "", 4)):
        if w.endswith(suffix) and len(w) >= min_len:
            if suffix == "s" and w.endswith(("ss", "us", "is")):
                return w
            w = w[: len(w) - len(suffix)] + repl
            break
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    return w


def words(text: str) -> list[str]:
    """Lowercase alphanumeric words without stop words."""
    return [w for w in _WORD.findall(text.lower().replace("'", "")) if w not in STOP_WORDS]


def terms(text: str) -> list[str]:
    return [stem(w) for w in words(text)]


def fts5_available() -> bool:
    try:
        con = sqlite3.connect(":memory:")
        con.execute("CREATE VIRTUAL TABLE t USING fts5(a, tokenize='porter unicode61')")
        con.close()
        return True
    except sqlite3.Error:
        return False


_FTS5 = None


def _has_fts5() -> bool:
    global _FTS5
    if _FTS5 is None:
        _FTS5 = fts5_available()
    return _FTS5


class LexicalIndex:
    """An immutable index over ``docs`` = ``(name, description, body)`` triples."""

    def __init__(self, docs: Sequence[tuple[str, str, str]], *, weights: tuple[float, float, float] = DEFAULT_WEIGHTS,
                 backend: Backend = "auto", k1: float = 1.2, b: float = 0.75) -> None:
        self.size = len(docs)
        self.weights = weights
        self.k1, self.b = k1, b
        if backend == "auto":
            backend = "fts5" if self.size >= FTS5_MIN_DOCS and _has_fts5() else "python"
        self.backend: Backend = backend
        if backend == "fts5":
            self._build_fts5(docs)
        else:
            self._build_python(docs)

    # -- FTS5 ------------------------------------------------------------------
    def _build_fts5(self, docs: Sequence[tuple[str, str, str]]) -> None:
        con = sqlite3.connect(":memory:", check_same_thread=False)
        con.execute("CREATE VIRTUAL TABLE m USING fts5(name, description, body, tokenize='porter unicode61')")
        con.executemany("INSERT INTO m(rowid, name, description, body) VALUES (?, ?, ?, ?)",
                        ((i, " ".join(words(n)), " ".join(words(d)), " ".join(words(t)))
                         for i, (n, d, t) in enumerate(docs)))
        self._con = con

    def _search_fts5(self, query_words: Sequence[str], limit: int) -> list[tuple[int, float]]:
        match = " OR ".join(f'"{w}"' for w in dict.fromkeys(query_words))
        wn, wd, wb = self.weights
        rows = self._con.execute(
            f"SELECT rowid, bm25(m, {wn}, {wd}, {wb}) AS s FROM m WHERE m MATCH ? ORDER BY s LIMIT ?",
            (match, limit),
        ).fetchall()
        return [(int(r), -float(s)) for r, s in rows]

    # -- pure Python -----------------------------------------------------------
    def _build_python(self, docs: Sequence[tuple[str, str, str]]) -> None:
        postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        lengths: list[float] = []
        self._forward: list[Counter[str]] = []
        for i, fields in enumerate(docs):
            tf: Counter[str] = Counter()
            length = 0.0
            for weight, text in zip(self.weights, fields):
                ts = terms(text)
                length += weight * len(ts)
                for t in ts:
                    tf[t] += weight
            lengths.append(length)
            self._forward.append(tf)
            for t, f in tf.items():
                postings[t].append((i, f))
        self._postings = dict(postings)
        self._lengths = lengths
        self._avg = (sum(lengths) / len(lengths)) if lengths else 1.0

    def idf(self, term: str) -> float:
        n = len(self._postings.get(term, ()))
        return math.log(1.0 + (self.size - n + 0.5) / (n + 0.5))

    def _search_python(self, query_terms: Counter[str] | dict[str, float], limit: int) -> list[tuple[int, float]]:
        scores: dict[int, float] = defaultdict(float)
        k1, b, avg = self.k1, self.b, self._avg or 1.0
        for term, qw in query_terms.items():
            plist = self._postings.get(term)
            if not plist:
                continue
            idf = self.idf(term) * qw
            for doc, f in plist:
                norm = f + k1 * (1.0 - b + b * self._lengths[doc] / avg)
                scores[doc] += idf * f * (k1 + 1.0) / norm
        return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]

    # -- public ------------------------------------------------------------------
    def search(self, query: str, limit: int = 10, *, expand: int = 0, feedback_docs: int = 3) -> list[tuple[int, float]]:
        """The best ``limit`` documents for ``query``.

        ``expand > 0`` adds that many pseudo-relevance-feedback terms (the most
        distinctive terms of the first ``feedback_docs`` hits) at half weight and
        searches again; the python backend only.
        """
        if self.size == 0 or limit <= 0:
            return []
        if self.backend == "fts5":
            qw = words(query)
            return self._search_fts5(qw, limit) if qw else []
        q: dict[str, float] = dict(Counter(terms(query)))
        if not q:
            return []
        hits = self._search_python(q, max(limit, feedback_docs))
        if expand > 0 and hits:
            q = self._expand(q, [d for d, _ in hits[:feedback_docs]], expand)
            hits = self._search_python(q, limit)
        return hits[:limit]

    def _expand(self, q: dict[str, float], docs: list[int], n: int) -> dict[str, float]:
        gain: dict[str, float] = defaultdict(float)
        for doc in docs:
            for term, f in self._forward[doc].items():
                if term not in q and len(self._postings[term]) <= self.size // 4 + 1:
                    gain[term] += f
        best = sorted(gain.items(), key=lambda kv: -kv[1] * self.idf(kv[0]))[:n]
        return {**q, **{t: 0.5 for t, _ in best}}
