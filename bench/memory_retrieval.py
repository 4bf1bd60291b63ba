"""Memory retrieval on LoCoMo: recall@5/@10 of the evidence turns, and speed at 10,000 memories.

    python bench/memory_retrieval.py --data ../shared/data/locomo/locomo-dev.json [--json]

Four corpora per conversation (questions are asked against their own conversation):

* ``turns``: every dialog turn is a memory (name = speaker, description = what
  was said, body = the image caption if any and the session date);
* ``turns+context``: the same, plus the ``CONTEXT_TURNS`` (2) turns before and after
  it in the same session as a low-weight ``context`` field (weight 0.5; how dialog
  memories are usually indexed: a reply often names its topic only in the turns
  around it).  Two turns each side at 0.5 ranked best of 1-3 turns at 0.3-1.0 on
  these conversations (R@5 66.1 against 64.0 with one turn);
* ``observations``: the dataset's extracted facts, each credited to its source turn;
* ``observations+context``: the same facts, each with the dialogue it was extracted from (its
  source turn and two turns each side) as the low-weight ``context`` field — how
  ``lossless memory extract`` stores a fact it takes from a conversation (the model cites
  the message it came from; ``memory.extract.source_context``).

Categories 1-4 (multi-hop, temporal, open-domain, single-hop); category 5 has no
answer.  Rankers: ``keyword`` (the seed's plain keyword match on name and
description), ``default`` (lossless's ``LexicalIndex`` as shipped: BM25F with
field weights, query stop words and the time boost for "when" questions),
``fts5`` (the SQLite FTS5 + porter backend, same query side), ``default+prf``
(with 8 pseudo-relevance-feedback terms) and ``store`` (the memory store's own index,
``memory.engine``, over the same documents: what a store ranks with at every size).  Recall is computed on the ranking
itself (no relevance floor).  ``--audit FILE`` (default: beside ``--data``)
replaces wrongly cited evidence with the audit's ``correct_evidence``; both
figures are reported.  The last lines give each ranker's overall recall minus the
FTS5 ranker's in the same run: the reference to quote.  The data is non-commercial: it is read here, never copied.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from lossless.memory.lexical import LexicalIndex, words  # noqa: E402
from lossless.memory.retrieval import DEPTH, FUSION, LEXICAL_WEIGHT, fuse  # noqa: E402

EVIDENCE = re.compile(r"D\d+:\d+")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
RANKERS = ("keyword", "default", "fts5", "default+prf", "store")
DENSE_RANKERS = ("dense", "hybrid")
"""With the ``embed`` extra installed: the model alone, and fused with ``default`` as ``HybridRetriever`` does."""
TUNE_WEIGHTS = (0.5, 0.6, 0.7, 0.8, 0.9)
CORPORA = ("turns", "turns+context", "observations", "observations+context")


def sessions(conv: dict):
    for key, turns in conv.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(turns, list):
            yield int(m.group(1)), conv.get(f"{key}_date_time", ""), turns


def turn_docs(sample: dict) -> tuple[list[tuple[str, str, str]], list[str]]:
    docs, ids = [], []
    for _, date, turns in sessions(sample["conversation"]):
        for t in turns:
            caption = f"[image: {t['blip_caption']}] " if t.get("blip_caption") else ""
            docs.append((t["speaker"], t["text"], f"{caption}{date}"))
            ids.append(t["dia_id"])
    return docs, ids


CONTEXT_TURNS = 2


def context_docs(sample: dict) -> tuple[list[tuple[str, str, str, str]], list[str]]:
    """``turn_docs`` plus the words of the ``CONTEXT_TURNS`` turns on each side, in the same session."""
    docs, ids = turn_docs(sample)
    session = [i.split(":")[0] for i in ids]
    out = []
    for i, doc in enumerate(docs):
        near = [docs[j][1] for j in range(i - CONTEXT_TURNS, i + CONTEXT_TURNS + 1)
                if j != i and 0 <= j < len(docs) and session[j] == session[i]]
        out.append((*doc, " ".join(near)))
    return out, ids


def observation_docs(sample: dict) -> tuple[list[tuple[str, str, str]], list[str]]:
    dates = {n: d for n, d, _ in sessions(sample["conversation"])}
    docs, ids = [], []
    for key, per_speaker in sample.get("observation", {}).items():
        n = int(re.search(r"\d+", key).group())
        for speaker, facts in per_speaker.items():
            for fact in facts:
                text, source = fact[0], fact[1] if len(fact) > 1 else ""
                for dia in EVIDENCE.findall(str(source)) or [""]:
                    docs.append((speaker, text, dates.get(n, "")))
                    ids.append(dia)
    return docs, ids


def observation_context_docs(sample: dict) -> tuple[list[tuple[str, str, str, str]], list[str]]:
    """``observation_docs`` plus, in a fourth field, the dialogue each fact was extracted from, as
    ``lossless memory extract`` keeps it (``memory.extract.source_context``): the source turn
    the dataset cites and the turns on each side, in the same session."""
    from lossless.memory.extract import source_context

    turns, turn_ids = turn_docs(sample)
    session = [i.split(":")[0] for i in turn_ids]
    said = {s: [t[1] for t, k in zip(turns, session) if k == s] for s in dict.fromkeys(session)}
    at = {dia: sum(1 for k in session[:i] if k == session[i]) for i, dia in enumerate(turn_ids)}
    docs, ids = observation_docs(sample)
    out = [(*doc, source_context(said[dia.split(":")[0]], [at[dia]]) if dia in at else "")
           for doc, dia in zip(docs, ids)]
    return out, ids


LOCOMO10_IDS = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47", "conv-48", "conv-49",
                "conv-50")
"""The ``sample_id`` of each conversation of the public locomo10.json, in its order: the audit's
``locomo_<n>_qa<k>`` names the n-th of them."""


def load_audit(path: Path | None, samples: list[dict]) -> dict[tuple[int, int], list[str]]:
    """(sample index, question index) -> corrected evidence, for the audit entries found in ``samples``.

    An entry is matched by the conversation's ``sample_id`` and the question's text, never by
    position in the file: on a file holding other conversations, or the same ones in another
    order or with questions left out, each correction still lands on its own question (and
    an entry whose question is not there applies nowhere).  The audit's question number only
    breaks a tie between two identical questions of one conversation."""
    if path is None or not path.exists():
        return {}
    by_id = {str(sample.get("sample_id")): s for s, sample in enumerate(samples)}
    fixes = {}
    for entry in json.loads(path.read_text("utf-8")):
        m = re.fullmatch(r"locomo_(\d+)_qa(\d+)", entry.get("question_id", ""))
        if not m or int(m.group(1)) >= len(LOCOMO10_IDS):
            continue
        s = by_id.get(LOCOMO10_IDS[int(m.group(1))])
        if s is None:
            continue
        same = [q for q, qa in enumerate(samples[s]["qa"]) if qa.get("question") == entry.get("question")]
        if not same:
            continue
        q = int(m.group(2)) if int(m.group(2)) in same else same[0]
        fixed = EVIDENCE.findall(" ".join(map(str, entry.get("correct_evidence") or [])))
        cited = EVIDENCE.findall(" ".join(map(str, samples[s]["qa"][q].get("evidence", []))))
        if fixed and sorted(fixed) != sorted(cited):
            fixes[(s, q)] = fixed
    return fixes


class Keyword:
    """The seed's fallback: number of query words found in name + description."""

    def __init__(self, docs):
        self.hay = [f"{d[0]} {d[1]}".lower() for d in docs]

    def search(self, query: str, limit: int):
        qs = set(words(query))
        scored = [(-sum(1 for w in qs if w in h), i) for i, h in enumerate(self.hay)]
        return [(i, -s) for s, i in sorted(x for x in scored if x[0] < 0)[:limit]]


class StoreEngine:
    """The memory store's persistent index (``lossless.memory.engine``) over the same documents, built
    in an in-memory SQLite database with the catalog's schema, ranked and ordered as the catalog does."""

    def __init__(self, docs):
        import sqlite3

        from lossless.memory._rows import create_schema
        from lossless.memory.engine import Engine
        from lossless.memory.lexical import mentions_time

        self.con = sqlite3.connect(":memory:", isolation_level=None)
        create_schema(self.con)
        self.engine = Engine()
        self.con.execute("BEGIN")
        for i, d in enumerate(docs):
            fields = (*d, *("",) * (4 - len(d)))
            self.con.execute("INSERT INTO files(rid, id, seq, state, timed) VALUES (?, ?, 0, 1, ?)",
                             (i, f"{i:07d}", int(any(mentions_time(f) for f in fields[:3]))))
            self.engine.put(self.con, i, None, fields)
        self.engine.flush(self.con)
        self.con.execute("COMMIT")

    def search(self, query: str, limit: int):
        from lossless.memory.engine import boost

        ranked = self.engine.search(self.con, query, limit, None)
        hits = boost([(mid, s) for s, _, mid in ranked], {mid: t for _, t, mid in ranked}, query, limit)
        return [(int(mid), s) for mid, s in hits]


class Vectors:
    """Sentence vectors of the bench's texts, cached on disk under the temp dir (never the repo):
    embedding every LoCoMo turn and observation with numpy takes minutes, once."""

    def __init__(self, cache: Path | None = None):
        from lossless.memory.embed import MODEL, Embedder

        self.model, self.embedder = MODEL, Embedder()
        self.dir = cache or Path(tempfile.gettempdir()) / "lossless-bench-vectors"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._queries: dict[str, object] = {}
        self.live = False
        """Encode every query afresh, no cache (what ``speed`` times: the real cost of a message)."""

    def of(self, texts: list[str]):
        import numpy as np

        key = hashlib.sha256("\0".join([self.model, *texts]).encode()).hexdigest()[:32]
        path = self.dir / f"{key}.npy"
        if path.exists():
            return np.load(path)
        vecs = self.embedder.encode(texts)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
        np.save(tmp, vecs)
        os.replace(tmp, path)
        return vecs

    def queries(self, texts: list[str]) -> None:
        todo = sorted({t for t in texts if t not in self._queries})
        if todo:
            self._queries.update(zip(todo, self.of(todo), strict=True))

    def query(self, text: str):
        if self.live:
            return self.embedder.encode([text])[0]
        if text not in self._queries:
            self.queries([text])
        return self._queries[text]


def dense_text(doc) -> str:
    from lossless.memory.embed import memory_text

    return memory_text(doc[0], doc[1], doc[2])  # the context field is the lexical side's alone


class Dense:
    def __init__(self, docs, vectors: Vectors, matrix=None):
        self.vectors = vectors
        self.mat = vectors.of([dense_text(d) for d in docs]) if matrix is None else matrix

    def search(self, query: str, limit: int):
        import numpy as np

        from lossless.memory._minilm import one_thread

        with one_thread():  # as embed.VectorIndex.search does
            sims = self.mat @ self.vectors.query(query)
        top = np.argsort(-sims, kind="stable")[:limit]
        return [(int(i), float(sims[i])) for i in top]


def make_ranker(name: str, docs, vectors: Vectors | None = None, *, method: str = FUSION,
                weight: float = LEXICAL_WEIGHT, matrix=None):
    if name in DENSE_RANKERS:
        assert vectors is not None
        dense = Dense(docs, vectors, matrix)
        if name == "dense":
            return dense.search
        index = LexicalIndex(docs)
        return lambda q, k: fuse(index.search(q, DEPTH), dense.search(q, DEPTH), method=method, weight=weight)[:k]
    if name == "keyword":
        return Keyword(docs).search
    if name == "fts5":
        return LexicalIndex(docs, backend="fts5").search
    if name == "store":
        return StoreEngine(docs).search
    index = LexicalIndex(docs)
    if name == "default":
        return index.search
    return lambda q, k: index.search(q, k, expand=8)


def evaluate(samples, corpus: str, ranker: str, fixes, vectors: Vectors | None = None, **fusion) -> dict:
    sums = {c: [0.0, 0.0, 0] for c in (*CATEGORIES, 0)}
    per_question: list[tuple[float, float]] = []
    for s, sample in enumerate(samples):
        docs, ids = {"turns": turn_docs, "turns+context": context_docs, "observations": observation_docs,
                     "observations+context": observation_context_docs}[corpus](sample)
        if vectors is not None:
            vectors.queries([qa["question"] for qa in sample["qa"]])
        search = make_ranker(ranker, docs, vectors, **fusion)
        for q, qa in enumerate(sample["qa"]):
            cat = qa.get("category")
            if cat not in CATEGORIES:
                continue
            gold = set(fixes.get((s, q)) or EVIDENCE.findall(" ".join(map(str, qa.get("evidence", [])))))
            if not gold:
                continue
            ranked = [ids[i] for i, _ in search(qa["question"], 10)]
            per_question.append((len(gold & set(ranked[:5])) / len(gold), len(gold & set(ranked[:10])) / len(gold)))
            for c in (cat, 0):
                sums[c][0] += len(gold & set(ranked[:5])) / len(gold)
                sums[c][1] += len(gold & set(ranked[:10])) / len(gold)
                sums[c][2] += 1
    out = {}
    for c, (r5, r10, n) in sums.items():
        out[CATEGORIES.get(c, "overall")] = {"R@5": round(100 * r5 / max(n, 1), 1),
                                             "R@10": round(100 * r10 / max(n, 1), 1), "n": n}
    out["per_question"] = per_question
    return out


def speed(samples, ranker: str, size: int = 10_000, queries: int = 300, vectors: Vectors | None = None) -> float:
    """Milliseconds per query over ``size`` synthetic memories (turns replicated with perturbations).

    For ``dense`` / ``hybrid`` each query is encoded in the timed loop (the real cost of a message);
    the memories' matrix is the real turns' vectors, repeated with a little noise for the copies
    (their values do not change the cost of the product and the top-k)."""
    rng = random.Random(7)
    base = [d for s in samples for d in turn_docs(s)[0]]
    docs = []
    while len(docs) < size:
        n, d, b = base[len(docs) % len(base)]
        ws = d.split()
        if len(docs) >= len(base) and len(ws) > 3:
            ws.pop(rng.randrange(len(ws)))
            rng.shuffle(ws)
        docs.append((f"{n}{len(docs) // len(base)}", " ".join(ws), b))
    matrix = None
    if ranker in DENSE_RANKERS:
        import numpy as np

        assert vectors is not None
        base_vecs = vectors.of([dense_text(d) for d in base])
        noise = np.random.default_rng(7).normal(0, 0.01, (size, base_vecs.shape[1])).astype(np.float32)
        matrix = base_vecs[np.arange(size) % len(base)] + noise
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    search = make_ranker(ranker, docs, vectors, matrix=matrix)
    qs = [qa["question"] for s in samples for qa in s["qa"]]
    qs = [qs[rng.randrange(len(qs))] for _ in range(queries)]
    if vectors is not None:
        vectors.live = True  # encoding the question is part of the cost measured
    start = time.perf_counter()
    for q in qs:
        search(q, 10)
    elapsed = time.perf_counter() - start
    if vectors is not None:
        vectors.live = False
    return round(1000 * elapsed / len(qs), 3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--audit", type=Path, default=None, help="locomo-audit-errors.json (default: beside --data)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--rankers", default=None,
                    help=f"default: {','.join(RANKERS)}, and {','.join(DENSE_RANKERS)} when the embed extra is installed")
    ap.add_argument("--vectors", type=Path, default=None, help="vector cache dir (default: under the temp dir)")
    ap.add_argument("--tune", action="store_true", help="only the fusion sweep: each method and lexical weight")
    args = ap.parse_args(argv)
    samples = json.loads(args.data.read_text("utf-8"))
    fixes = load_audit(args.audit or args.data.parent / "locomo-audit-errors.json", samples)
    rankers = [r for r in (args.rankers or ",".join(RANKERS + (DENSE_RANKERS if _has_embed() else ()))).split(",")
               if r]
    vectors = Vectors(args.vectors) if args.tune or set(rankers) & set(DENSE_RANKERS) else None
    if args.tune:
        return tune(samples, fixes, vectors)
    results: dict = {"corrections_applied": len(fixes), "recall": {}, "ms_per_query_10k": {}}
    for corpus in CORPORA:
        for ranker in rankers:
            for audited in (False, True):
                key = f"{corpus}/{ranker}/{'audited' if audited else 'original'}"
                results["recall"][key] = evaluate(samples, corpus, ranker, fixes if audited else {}, vectors)
    for ranker in rankers:
        results["ms_per_query_10k"][ranker] = speed(samples, ranker, vectors=vectors)
    results["against_fts5"] = against_fts5(results["recall"])
    for per in results["recall"].values():
        per.pop("per_question")
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    cols = [*CATEGORIES.values(), "overall"]
    print(f"LoCoMo {args.data.name}: recall of evidence turns, categories 1-4 "
          f"({len(fixes)} audit corrections)\n")
    print(f"{'corpus/ranker/evidence':42}" + "".join(f"{c:>18}" for c in cols))
    print(f"{'':42}" + "".join(f"{'R@5 / R@10':>18}" for _ in cols))
    for key, per in results["recall"].items():
        print(f"{key:42}" + "".join(f"{per[c]['R@5']:>10.1f} /{per[c]['R@10']:>5.1f}" for c in cols))
    print("\nms/query at 10,000 memories: " + ", ".join(f"{r} {v}" for r, v in results["ms_per_query_10k"].items()))
    diffs = results["against_fts5"]
    if diffs:
        print("\nagainst the FTS5 run above (same corpus, evidence and questions), overall, in recall points,"
              " with a 95 % paired-bootstrap interval:")
        for key, d in diffs.items():
            lo5, hi5 = d["R@5 95% CI"]
            lo10, hi10 = d["R@10 95% CI"]
            print(f"  {key:42} R@5 {d['R@5']:+5.1f} [{lo5:+5.1f}, {hi5:+5.1f}]   "
                  f"R@10 {d['R@10']:+5.1f} [{lo10:+5.1f}, {hi10:+5.1f}]")
    return 0


def _has_embed() -> bool:
    from lossless.errors import ConfigError
    from lossless.memory.embed import model_dir

    try:
        model_dir()
    except ConfigError:
        return False
    return True


def tune(samples, fixes, vectors: Vectors) -> int:
    """The fusion sweep: overall R@5 / R@10 (original evidence) per corpus, method and lexical weight,
    with the lexical and dense rankings alone for reference. On the dev file's six conversations:
    the choice is made on the same questions it is reported on (there is no held-out split)."""
    print("fusion sweep, categories 1-4, original evidence, overall R@5 / R@10\n")
    print(f"{'fusion':18}" + "".join(f"{c:>22}" for c in CORPORA))
    rows = [("default", "default", {}), ("dense", "dense", {})]
    rows += [(f"{m} w={w}", "hybrid", {"method": m, "weight": w}) for m in ("rrf", "score") for w in TUNE_WEIGHTS]
    for label, ranker, fusion in rows:
        cells = []
        for corpus in CORPORA:
            o = evaluate(samples, corpus, ranker, {}, vectors, **fusion)["overall"]
            cells.append(f"{o['R@5']:>14.1f} /{o['R@10']:>5.1f}")
        print(f"{label:18}" + "".join(cells), flush=True)
    return 0


def against_fts5(recall: dict, resamples: int = 1000) -> dict:
    """Overall R@5 / R@10 of each other ranker minus the FTS5 ranker's, per corpus and evidence,
    with a 95 % paired-bootstrap interval over the questions (the same questions for both)."""
    out = {}
    for key, per in recall.items():
        corpus, ranker, evidence = key.split("/")
        ref = recall.get(f"{corpus}/fts5/{evidence}")
        if ranker == "fts5" or ref is None:
            continue
        row = {}
        for j, k in enumerate(("R@5", "R@10")):
            diffs = [a[j] - b[j] for a, b in zip(per["per_question"], ref["per_question"], strict=True)]
            row[k] = round(100 * sum(diffs) / len(diffs), 1)
            row[f"{k} 95% CI"] = _bootstrap(diffs, resamples)
        out[f"{key} − fts5"] = row
    return out


_RESAMPLES: dict[tuple[int, int], list[list[int]]] = {}


def _bootstrap(diffs: list[float], resamples: int) -> tuple[float, float]:
    n = len(diffs)
    if (n, resamples) not in _RESAMPLES:  # the same resamples for every row: seeded, drawn once
        rng = random.Random(11)
        _RESAMPLES[n, resamples] = [[rng.randrange(n) for _ in range(n)] for _ in range(resamples)]
    means = sorted(sum([diffs[i] for i in idx]) / n for idx in _RESAMPLES[n, resamples])
    return (round(100 * means[int(0.025 * resamples)], 1), round(100 * means[int(0.975 * resamples) - 1], 1))


if __name__ == "__main__":
    raise SystemExit(main())
