"""Lexical ranking over (name, description, body[, context]) documents, with field weights.

``LexicalIndex(docs).search(query, limit)`` returns ``(doc index, score)`` pairs,
best first, higher is better.  Two backends give the same interface:

* ``"python"``: BM25F in pure Python — weighted term frequencies summed over the
  fields, one length normalisation, an always-positive idf, and a light suffix
  stemmer.  ``k1 = 0.9, b = 0.4`` are Anserini's defaults, not tuned here.
* ``"fts5"``: SQLite FTS5 with the porter stemmer, ranked by ``bm25()`` with one
  weight per column (its k1 and b are fixed at 1.2 and 0.75).

``"auto"`` is the pure-Python BM25F at every size: the ranking a memory store's
persistent index (``engine``) computes too.  Measured on LoCoMo
(``bench/memory_retrieval.py``) BM25F ranks better than FTS5, whose idf is also
clamped to ~0 for a term found in half the documents or more: it cannot tell a
match from noise in a store of a handful of memories, nor rank a query of common
words in a large one.  ``"fts5"`` stays as the reference the benches compare with.

Both backends share the query side:

* Stop words go, and so do ``QUERY_STOP_WORDS`` — question words and verbs so
  common in requests ("what", "kind", "use", "need", …) that matching them alone
  says nothing.  Only documents sharing a remaining term are ever returned, so
  "nothing relevant" is a possible answer.
* A question about time (one that starts "when…", "how long…", "what year…")
  ranks documents that narrate something in time ("yesterday", "last week",
  "ago", a weekday, an ISO date) up by ``TIME_BOOST``: the answer to "when" is
  usually such a sentence.

The optional fourth field, ``context``, is text around the document that is not
part of it — for a dialog turn, the neighbouring turns — at a low weight.
"""

from __future__ import annotations

import heapq
import math
import re
import sqlite3
from collections import Counter, defaultdict
from functools import lru_cache
from typing import Literal, Sequence

Backend = Literal["auto", "fts5", "python"]
DEFAULT_WEIGHTS = (2.0, 1.5, 1.0, 0.5)
"""name, description, body, context."""
TIME_BOOST = 0.3
RERANK_DEPTH = 100

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
QUERY_STOP_WORDS = frozenset("whose kind use using used make made want need needs get".split())
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
"""Kana, CJK ideographs and Hangul syllables: scripts written without spaces between words."""
_WORD = re.compile(f"[{_CJK}]+|[^\\W_{_CJK}]+")
"""A run of letters and digits of any script (``[a-z0-9]`` for ASCII text, as it always was), or a
run of CJK characters, which ``words`` cuts into overlapping pairs."""
_ASCII_WORD = re.compile(r"[a-z0-9]+")
_WHEN = re.compile(r"^\W*(?:(?:since )?when|how long|(?:in |on )?(?:what|which) (?:date|day|time|year|month|week))\b",
                   re.I)
_TIME_WORDS = frozenset(
    """yesterday today tonight tomorrow ago last next weekend week weeks month months year years recently lately
    soon earlier later monday tuesday wednesday thursday friday saturday sunday""".split())
_TOKEN = re.compile(r"\w+")
_DATE = re.compile(r"\b\d{4}-\d\d-\d\d\b")


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
    """Lowercase words of letters and digits, in any script, without stop words.  A run of CJK
    characters (no spaces between its words) gives its overlapping pairs of characters, so
    "用户偏好" is found by "偏好": the usual way to index those scripts without a dictionary."""
    if text.isascii():  # the same words, found faster
        return [w for w in _ASCII_WORD.findall(text.lower().replace("'", "")) if w not in STOP_WORDS]
    found = _WORD.findall(text.lower().replace("'", ""))
    out: list[str] = []
    for w in found:
        if len(w) > 2 and _IS_CJK(w[0]):
            out.extend(w[i:i + 2] for i in range(len(w) - 1))
        elif w not in STOP_WORDS:
            out.append(w)
    return out


_IS_CJK = re.compile(f"[{_CJK}]").match


def query_words(text: str) -> list[str]:
    """The words of a query that can tell memories apart (``words`` minus ``QUERY_STOP_WORDS``)."""
    return [w for w in words(text) if w not in QUERY_STOP_WORDS]


def terms(text: str) -> list[str]:
    return [stem(w) for w in words(text)]


def weighted_terms(fields: Sequence[str], weights: Sequence[float]) -> tuple[dict[str, float], float]:
    """A document's weighted term frequencies (floats, so not a Counter) and its weighted length:
    each field's terms count its weight."""
    tf: dict[str, float] = defaultdict(float)
    length = 0.0
    for weight, text in zip(weights, fields):
        ts = terms(text)
        length += weight * len(ts)
        for t in ts:
            tf[t] += weight
    return tf, length


def asks_when(query: str) -> bool:
    """Whether ``query`` is a question about time: it starts "when", "how long", "what year"…
    ("Remind me when the build fails" is not)."""
    return bool(_WHEN.search(query))


def mentions_time(text: str) -> bool:
    """Whether ``text`` places something in time (a relative expression, a weekday, an ISO date)."""
    # A set lookup per word: twice as fast as one alternation of these words searched case-blind,
    # and the same answer (``\w+`` tokens are what ``\b`` bounds).
    return not _TIME_WORDS.isdisjoint(_TOKEN.findall(text.lower())) or bool(_DATE.search(text))


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
    """An immutable index over ``docs``: tuples of up to ``len(weights)`` fields
    (name, description, body, context); missing fields are empty."""

    def __init__(self, docs: Sequence[Sequence[str]], *, weights: Sequence[float] = DEFAULT_WEIGHTS,
                 backend: Backend = "auto", k1: float = 0.9, b: float = 0.4, time_boost: float = TIME_BOOST) -> None:
        self.size = len(docs)
        self.weights = tuple(weights)
        self.k1, self.b, self.time_boost = k1, b, time_boost
        fields = [tuple(d[: len(self.weights)]) + ("",) * (len(self.weights) - len(d)) for d in docs]
        # The document's own text (not its context) decides whether it speaks of a time.
        self._timed = [any(mentions_time(f) for f in fs[:3]) for fs in fields]
        if backend == "auto":
            backend = "python"
        self.backend: Backend = backend
        if backend == "fts5":
            self._build_fts5(fields)
        else:
            self._build_python(fields)

    # -- FTS5 ------------------------------------------------------------------
    def _build_fts5(self, docs: list[tuple[str, ...]]) -> None:
        cols = [f"f{i}" for i in range(len(self.weights))]
        con = sqlite3.connect(":memory:", check_same_thread=False)
        con.execute(f"CREATE VIRTUAL TABLE m USING fts5({', '.join(cols)}, tokenize='porter unicode61')")
        con.executemany(f"INSERT INTO m(rowid, {', '.join(cols)}) VALUES (?{', ?' * len(cols)})",
                        ((i, *(" ".join(words(f)) for f in fs)) for i, fs in enumerate(docs)))
        self._con = con

    def _search_fts5(self, query_words: Sequence[str], limit: int) -> list[tuple[int, float]]:
        match = " OR ".join(f'"{w}"' for w in dict.fromkeys(query_words))
        weights = ", ".join(f"{w:g}" for w in self.weights)
        rows = self._con.execute(
            f"SELECT rowid, bm25(m, {weights}) AS s FROM m WHERE m MATCH ? ORDER BY s LIMIT ?", (match, limit)
        ).fetchall()
        return [(int(r), -float(s)) for r, s in rows]

    # -- pure Python -----------------------------------------------------------
    def _build_python(self, docs: list[tuple[str, ...]]) -> None:
        postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        lengths: list[float] = []
        self._forward: list[dict[str, float]] = []
        for i, fields in enumerate(docs):
            tf, length = weighted_terms(fields, self.weights)
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

    def _search_python(self, query_terms: dict[str, float], limit: int) -> list[tuple[int, float]]:
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
        return heapq.nsmallest(limit, ((d, s) for d, s in scores.items()), key=lambda kv: (-kv[1], kv[0]))

    # -- public ------------------------------------------------------------------
    def search(self, query: str, limit: int = 10, *, expand: int = 0, feedback_docs: int = 3) -> list[tuple[int, float]]:
        """The best ``limit`` documents for ``query``.

        ``expand > 0`` adds that many pseudo-relevance-feedback terms (the most
        distinctive terms of the first ``feedback_docs`` hits) at half weight and
        searches again; the python backend only.
        """
        qw = query_words(query)
        if self.size == 0 or limit <= 0 or not qw:
            return []
        timed = self.time_boost > 0 and asks_when(query)
        depth = max(limit, RERANK_DEPTH) if timed else limit
        if self.backend == "fts5":
            hits = self._search_fts5(qw, depth)
        else:
            q: dict[str, float] = dict(Counter(stem(w) for w in qw))
            hits = self._search_python(q, max(depth, feedback_docs))
            if expand > 0 and hits:
                q = self._expand(q, [d for d, _ in hits[:feedback_docs]], expand)
                hits = self._search_python(q, depth)
        if timed:
            boost = 1.0 + self.time_boost
            hits = sorted(((d, s * boost if self._timed[d] else s) for d, s in hits), key=lambda kv: (-kv[1], kv[0]))
        return hits[:limit]

    def _expand(self, q: dict[str, float], docs: list[int], n: int) -> dict[str, float]:
        gain: dict[str, float] = defaultdict(float)
        for doc in docs:
            for term, f in self._forward[doc].items():
                if term not in q and len(self._postings[term]) <= self.size // 4 + 1:
                    gain[term] += f
        best = sorted(gain.items(), key=lambda kv: -kv[1] * self.idf(kv[0]))[:n]
        return {**q, **{t: 0.5 for t, _ in best}}
