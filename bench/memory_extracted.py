"""LoCoMo's extracted facts through the product: ``lossless memory extract`` writes them, the store finds them.

    python bench/memory_extracted.py --data ../shared/data/locomo/locomo-dev.json [--json]

``bench/memory_retrieval.py`` builds its corpora itself; this one goes through the code a user
runs.  Each conversation becomes a session (the first speaker's turns ``user`` messages, the
other's ``assistant``), cut into the chunks ``extract_session`` sends a model.  The model is
scripted: for each chunk it answers with the dataset's observations whose source turn is in that
chunk — description the fact, body the fact and its session date, name its first six words —
that is, a model that extracts exactly LoCoMo's facts.  Two scripts, side by side:

* ``cites``: each ``add`` names the message its fact came from (``"from": [n]``), as the
  extraction prompt asks; the memory keeps that message and two on each side as its context;
* ``no-cite``: the same operations without ``from`` (a model that ignores that part of the
  prompt, and the product before it asked): every memory of a chunk keeps the last 400
  characters the user said in it.

Planning (deduplication included), redaction and writing are the product's; so is retrieval:
``MemoryStore.search`` (the catalog's BM25F, ``lexical``) and, with the ``embed`` extra,
``HybridRetriever.select_store`` over the store's persistent vectors (``hybrid``) — both ranked
whole, without the relevance floors that decide what is attached to a message, as the other
bench does.  A memory counts for the turn the dataset cites for its fact.  Categories 1-4,
R@5 / R@10 of the evidence turns, original evidence and with the audit's corrections
(``--audit``, default beside ``--data``).  The data is non-commercial: read here, never copied.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_retrieval import CATEGORIES, EVIDENCE, _has_embed, load_audit, sessions  # noqa: E402

from lossless.memory import MemoryStore  # noqa: E402
from lossless.memory.harvest import CHUNK_CHARS, chunk_dialogue, extract_session  # noqa: E402
from lossless.messages import Message, Text  # noqa: E402
from lossless.testing import FakeProvider  # noqa: E402

SCRIPTS = ("cites", "no-cite")


def session_of(sample: dict) -> tuple[list[Message], list[str], dict[str, str]]:
    """The conversation as messages, the turn id of each, and each turn's session date."""
    conv = sample["conversation"]
    first = conv.get("speaker_a")
    messages, turn_ids, dates = [], [], {}
    for _, date, turns in sessions(conv):
        for t in turns:
            messages.append(Message(role="user" if t["speaker"] == first else "assistant",
                                    content=(Text(text=t["text"]),)))
            turn_ids.append(t["dia_id"])
            dates[t["dia_id"]] = date
    return messages, turn_ids, dates


def facts_by_turn(sample: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for per_speaker in sample.get("observation", {}).values():
        for facts in per_speaker.values():
            for fact in facts:
                for dia in EVIDENCE.findall(str(fact[1] if len(fact) > 1 else "")):
                    out.setdefault(dia, []).append(fact[0])
    return out


def extract(sample: dict, root: Path, *, cite: bool) -> tuple[MemoryStore, dict[str, str], int]:
    """The conversation's facts written by ``extract_session`` with a scripted model: the store,
    each memory's source turn, and the requests made."""
    messages, turn_ids, dates = session_of(sample)
    facts = facts_by_turn(sample)
    turn_of = {id(m): turn_ids[i] for i, m in enumerate(messages)}
    replies, sources = [], []
    for chunk in chunk_dialogue(messages, CHUNK_CHARS):
        ops = []
        for n, m in enumerate(chunk.messages, 1):
            dia = turn_of[id(m)]
            for fact in facts.get(dia, ()):
                op = {"op": "add", "name": " ".join(fact.split()[:6]), "type": "project", "description": fact,
                      "body": f"{fact} (said {dates[dia]})"}
                if cite:
                    op["from"] = [n]
                ops.append(op)
                sources.append(dia)
        replies.append(json.dumps({"operations": ops}))
    store = MemoryStore(root)
    result = extract_session(store, FakeProvider(script=replies), messages, run="bench")
    assert not result.errors, result.errors
    # extract_session plans one proposal per operation, in order
    source = {p.id: dia for p, dia in zip(result.proposals, sources, strict=True) if p.op == "add"}
    return store, source, result.chunks


def evaluate(samples: list[dict], fixes: dict, *, cite: bool, hybrid: bool) -> dict:
    from lossless.memory.retrieval import HybridRetriever, LexicalRetriever

    rankers = {"lexical": None}
    if hybrid:
        rankers["hybrid"] = HybridRetriever(lexical=LexicalRetriever(relative_floor=0.0, min_score=0.0),
                                            dense_floor=-1.0)
    sums = {r: {c: [0.0, 0.0, 0] for c in (*CATEGORIES, 0)} for r in rankers}
    stored = requests = 0
    for s, sample in enumerate(samples):
        with tempfile.TemporaryDirectory() as tmp:
            store, source, chunks = extract(sample, Path(tmp) / "memory", cite=cite)
            stored, requests = stored + len(source), requests + chunks
            for q, qa in enumerate(sample["qa"]):
                cat = qa.get("category")
                gold = set(fixes.get((s, q)) or EVIDENCE.findall(" ".join(map(str, qa.get("evidence", [])))))
                if cat not in CATEGORIES or not gold:
                    continue
                for name, retriever in rankers.items():
                    if retriever is None:
                        ids = [m.id for m, _ in store.search(qa["question"], 10)]
                    else:
                        ids = [h.memory.id for h in retriever.select_store(qa["question"], store, limit=10)]
                    ranked = [source.get(i) for i in ids]
                    for c in (cat, 0):
                        sums[name][c][0] += len(gold & set(ranked[:5])) / len(gold)
                        sums[name][c][1] += len(gold & set(ranked[:10])) / len(gold)
                        sums[name][c][2] += 1
    out: dict = {"memories": stored, "requests": requests}
    for name, per in sums.items():
        out[name] = {CATEGORIES.get(c, "overall"): {"R@5": round(100 * a / max(n, 1), 1),
                                                    "R@10": round(100 * b / max(n, 1), 1), "n": n}
                     for c, (a, b, n) in per.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data/locomo/locomo-dev.json"))
    ap.add_argument("--audit", type=Path, default=None,
                    help="the audit's corrections (default: locomo-audit-errors.json beside --data)")
    ap.add_argument("--no-embed", action="store_true", help="lexical only, even with the embed extra installed")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        samples = json.loads(args.data.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        print(f"memory_extracted: cannot read {args.data}: {exc}", file=sys.stderr)
        return 2
    audit = args.audit or args.data.with_name("locomo-audit-errors.json")
    fixes = {"original": {}, "audited": load_audit(audit if audit.exists() else None, samples)}
    hybrid = not args.no_embed and _has_embed()
    if hybrid:
        import os

        os.environ["LOSSLESS_EMBED"] = "1"
    report = {script: {ev: evaluate(samples, fx, cite=script == "cites", hybrid=hybrid) for ev, fx in fixes.items()}
              for script in SCRIPTS}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    cats = [*CATEGORIES.values(), "overall"]
    print(f"{'script/ranker/evidence':<28}" + "".join(f"{c:>16}" for c in cats) + "   (R@5 / R@10)")
    for script, by_ev in report.items():
        for ev, res in by_ev.items():
            for ranker in ("lexical", "hybrid"):
                if ranker in res:
                    cells = "".join(f"{res[ranker][c]['R@5']:>8.1f} /{res[ranker][c]['R@10']:>5.1f}" for c in cats)
                    print(f"{script + '/' + ranker + '/' + ev:<28}{cells}")
        first = by_ev["original"]
        print(f"  {script}: {first['memories']} memories written in {first['requests']} requests")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
