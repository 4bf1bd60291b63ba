"""One (policy, session, window) of the fidelity benchmark, run in its own process.

    echo '{"policy": "new", "source": {"file": "x.jsonl"}, "window": 32000}' | \\
        PYTHONPATH=<some lossless>/src python bench/_fidelity_worker.py

Whatever ``lossless`` is importable is the code under test (the landed commit, or
the working tree): this file uses only public API present in both — the
``ContextManager`` constructor, ``prepare``, ``view.messages``/``view.events``, the
message values, ``ArtifactStore``, ``read_any``, ``rounds.problems``,
``tokens.default_counter`` and ``testing.FakeProvider`` — and judges the result
with ``_fidelity_metrics``, which does not import lossless at all.  Prints one
JSON object (see ``run``).

The loop is live: before each recorded call, the messages that entered since the
previous call are appended to what ``prepare`` returned last time, and the
policy's answer becomes the next history.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from datetime import datetime
from typing import Any, Callable

import _fidelity_metrics as fm
from _fidelity_synth import generate

OUTPUT_PRICE = 5.0
MASK_KEEP = 10
MASK_PLACEHOLDER = "[Earlier tool result compacted. Re-run if needed.]"


# -- sessions ------------------------------------------------------------------------
def load(source: dict[str, Any]) -> dict[str, Any]:
    """Messages, system, call stops (a call's request is messages[:stop]), facts."""
    from lossless.messages import Message, Text, ToolResult, ToolUse

    if "file" in source:
        from lossless.dialects.detect import read_any

        s = read_any(source["file"])
        keep = [not m.meta.get("is_compact_summary") for m in s.messages]
        index, k = [], 0
        for flag in keep:
            index.append(k)
            k += flag
        messages = [m for m, flag in zip(s.messages, keep) if flag]
        calls = [c.index for c in s.calls] or [i for i, m in enumerate(s.messages) if m.role == "assistant"]
        stops = [index[i] for i in calls if index[i] > 0]
        facts = fm.derive_facts(messages)
        return {"messages": messages, "system": s.system, "stops": stops, "facts": facts,
                "dialect": "openai" if s.format in ("mini-swe-agent", "openai") else "anthropic"}
    g = generate(seed=source["seed"], rounds=source.get("rounds", 320))

    def block(d: dict[str, Any]) -> Any:
        if d["type"] == "text":
            return Text(text=d["text"])
        if d["type"] == "tool_use":
            return ToolUse(id=d["id"], name=d["name"], input=d["input"])
        return ToolResult(tool_use_id=d["tool_use_id"], content=d["content"], is_error=d["is_error"])

    messages = [Message(role=d["role"], content=tuple(block(b) for b in d["content"])) for d in g["messages"]]
    return {"messages": messages, "system": g["system"], "dialect": "anthropic",
            "stops": [i for i, m in enumerate(messages) if m.role == "assistant"],
            "facts": [fm.Fact(f["text"], f["kind"], f["message"]) for f in g["facts"]]}


def timestamp(message: Any) -> float | None:
    ts = message.meta.get("timestamp")
    if isinstance(ts, (int, float)):
        return float(ts)
    if isinstance(ts, str):
        try:
            return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


# -- policies ------------------------------------------------------------------------
class CountingProvider:
    """Wraps the fake summariser: counts the policy's model calls and prices them like a
    conversation call (a request that carries the conversation — a summary, or notes sent
    in the conversation — reads it from the cache and writes its last message; a request of
    one message is all written; output at 5×)."""

    def __init__(self, inner: Any, count: Callable[[Any], int], count_system: Callable[[Any], int]) -> None:
        self.inner, self.count, self.count_system = inner, count, count_system
        self.calls = 0
        self.cost = 0.0
        self.parts = {"read": 0.0, "write": 0.0, "output": 0.0}
        self.purposes: dict[str, int] = {}

    def complete(self, request: Any) -> Any:
        self.calls += 1
        purpose = str(getattr(request, "purpose", None))
        self.purposes[purpose] = self.purposes.get(purpose, 0) + 1
        body = [self.count(m) for m in getattr(request, "messages", ())]
        head = self.count_system(getattr(request, "system", None))
        if len(body) > 1:  # the conversation plus one request (summaries, notes): its prefix is cached
            self.parts["read"] += (head + sum(body[:-1])) * fm.CACHE_READ
            self.parts["write"] += body[-1] * fm.CACHE_WRITE
        else:
            self.parts["write"] += (head + sum(body)) * fm.CACHE_WRITE
        response = self.inner.complete(request)
        usage = getattr(response, "usage", None)
        self.parts["output"] += (getattr(usage, "output_tokens", 0) or 0) * OUTPUT_PRICE
        self.cost = sum(self.parts.values())
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Masker:
    """Observation masking: every tool result but the ``MASK_KEEP`` most recent becomes a
    placeholder, every call.  A masked message is built once and reused, so the
    cached prefix only moves where a result is newly masked."""

    def __init__(self) -> None:
        self.memo: dict[int, tuple[Any, Any]] = {}

    def __call__(self, history: list[Any]) -> list[Any]:
        from lossless.messages import ToolResult

        out, seen = list(history), 0
        for i in range(len(out) - 1, -1, -1):
            m = out[i]
            if not any(b.type == "tool_result" for b in m.content):
                continue
            blocks, changed = [], False
            for b in m.content:
                if b.type == "tool_result":
                    seen += 1
                    if seen > MASK_KEEP and b.content != MASK_PLACEHOLDER:
                        b = ToolResult(tool_use_id=b.tool_use_id, content=MASK_PLACEHOLDER, is_error=b.is_error)
                        changed = True
                blocks.append(b)
            if changed:
                hit = self.memo.get(id(m))
                if hit is None or hit[0] is not m:
                    hit = (m, m.with_content(blocks))
                    self.memo[id(m)] = hit
                out[i] = hit[1]
        return out


def make_policy(job: dict[str, Any], store: str, counter: Any) -> tuple[Callable[..., list[Any]], Any]:
    """``prepare(history, system, now) -> messages`` for the job's policy, and its provider."""
    from lossless.manager import ContextManager
    from lossless.testing import FakeProvider

    name, window = job["policy"], job["window"]
    if name == "unmanaged":
        return (lambda h, system, now: h), None
    if name == "masking":
        masker = Masker()
        return (lambda h, system, now: masker(h)), None
    provider = CountingProvider(FakeProvider(), counter.count_message, counter.count_system)
    kwargs: dict[str, Any] = {"store": store, "session_id": "fidelity", "transcript": False}
    if job.get("config"):
        from dataclasses import fields

        from lossless.config import ContextConfig

        known = {f.name for f in fields(ContextConfig)}
        values = {k: v for k, v in job["config"].items() if k in known}
        kwargs["config"] = ContextConfig.from_mapping({"window": window, **values})
    else:
        kwargs["window"] = window
    if name == "threshold-summary":
        from lossless.compaction import AutoCompactor, LLMSummarizer
        from lossless.stages.persist import persist
        from lossless.stages.summary import fallback_summary

        kwargs["stages"] = [("persist", persist), ("autocompact", AutoCompactor(LLMSummarizer(provider))),
                            ("summary", fallback_summary)]
    elif name.endswith("+model"):
        kwargs["provider"] = provider
    elif name not in ("today", "new"):
        raise ValueError(f"unknown policy {name!r}")
    cm = ContextManager(**kwargs)
    return (lambda h, system, now: cm.prepare(h, system=system, now=now).messages), provider


# -- the loop ------------------------------------------------------------------------
def run(job: dict[str, Any]) -> dict[str, Any]:
    from lossless.rounds import problems
    from lossless.store import ArtifactStore
    from lossless.tokens import default_counter

    started = time.perf_counter()
    counter = default_counter()
    s = load(job["source"])
    messages, system, stops, facts = s["messages"], s["system"], s["stops"], s["facts"]
    users = fm.user_messages(messages)
    originals = {b.id: (b, None) for m in messages for b in m.content if b.type == "tool_use"}
    for m in messages:
        for b in m.content:
            if b.type == "tool_result" and b.tool_use_id in originals:
                originals[b.tool_use_id] = (originals[b.tool_use_id][0], b)
    results_at = [(i, b) for i, m in enumerate(messages) for b in m.content if b.type == "tool_result"]
    overhead = counter.count_system(system)
    managed, raw = fm.Meter(counter.count_message, overhead), fm.Meter(counter.count_message, overhead)
    cache = fm.TextCache()
    ids_memo: dict[int, tuple[Any, set[str]]] = {}
    seen_ids: set[str] = set()
    out: dict[str, Any] = {"calls": 0, "compacting_calls": 0, "first_compaction": None, "over": 0, "invalid": 0,
                           "peak": 0, "peak_unmanaged": 0}
    fact_shares: list[float] = []
    user_shares: list[float] = []
    stride = 1
    # The store's I/O is not what is measured: a RAM disk, when there is one, keeps the run short.
    ram = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="lossless-fidelity-", dir=ram) as store:
        prepare, provider = make_policy(job, store, counter)
        history: list[Any] = []
        taken = 0
        sent: list[Any] = []
        for n, stop in enumerate(stops):
            incoming = history + messages[taken:stop]
            taken = stop
            sent = list(prepare(incoming, system, timestamp(messages[stop]) if stop < len(messages) else None))
            history = sent
            compacted = len(sent) != len(incoming) or any(a is not b for a, b in zip(sent, incoming))
            out["calls"] += 1
            out["compacting_calls"] += compacted
            if compacted and out["first_compaction"] is None:
                out["first_compaction"] = n
                stride = max(1, (len(stops) - n) // job.get("samples", 12))
            managed.add(sent)
            raw.add(messages[:stop])
            tokens = overhead + sum(counter.count_message(m) for m in sent)
            raw_tokens = overhead + sum(counter.count_message(m) for m in messages[:stop])
            out["peak"] = max(out["peak"], tokens)
            out["peak_unmanaged"] = max(out["peak_unmanaged"], raw_tokens)
            out["over"] += tokens > job["window"]
            out["invalid"] += bool(problems(sent, s["dialect"]))
            for m in sent:
                hit = ids_memo.get(id(m))
                if hit is None or hit[0] is not m:
                    hit = (m, fm.tool_ids([m]))
                    ids_memo[id(m)] = hit
                seen_ids |= hit[1]
            first = out["first_compaction"]
            if first is not None and ((n - first) % stride == 0 or n == len(stops) - 1):
                text = cache.context(sent)
                live = [f for f in facts if f.entered < stop]
                if live:
                    fact_shares.append(sum(fm.present(live, text)) / len(live))
                live_users = [u for u in users if u.entered < stop]
                if live_users:
                    user_shares.append(sum(fm.present(live_users, text)) / len(live_users))
        end = stops[-1] if stops else 0
        text = cache.context(sent)
        live = [f for f in facts if f.entered < end]
        live_users = [u for u in users if u.entered < end]
        facts_here = fm.present(live, text)
        users_here = fm.present(live_users, text)
        results = [r for i, r in results_at if i < end]
        flat = fm.norm(text)
        missing = ([f.text for f, ok in zip(live, facts_here) if not ok]
                   + [u.text for u, ok in zip(live_users, users_here) if not ok]
                   + [t for t in (fm.norm(p) for r in results for p in fm.result_parts(r)) if t and t not in flat])
        artifacts = ArtifactStore(store)

        def get(handle: str) -> str | None:
            try:
                return artifacts.get(handle)
            except Exception:  # a handle that resolves to nothing is unreachable, not a crash
                return None

        depths = fm.recall_depths(missing, text, get)
        # A user message the budget trimmed still counts as quoted when its opening is in
        # context and one recall of a handle there gives it whole (the issue's "handles for
        # what the budget trims"); never when it is only reachable through a chain.
        absent = [u.text for u, ok in zip(live_users, users_here) if not ok]
        quoted = sum(1 for t, d in zip(absent, fm.recall_depths(absent, text, get))
                     if d == 1 and fm.norm(t)[:60] in flat)
        removed = fm.removed_calls({i: originals[i] for i in seen_ids if i in originals}, sent)
        coverage = fm.account_coverage(removed, fm.TextCache(tool_use=False).context(sent))
    reached = [d for d in depths if d is not None]
    out.update({
        "facts": len(live), "facts_end": sum(facts_here), "by_kind": by_kind(live, facts_here),
        "facts_avg": sum(fact_shares) / len(fact_shares) if fact_shares else None,
        "users": len(live_users), "users_end": sum(users_here), "users_quoted": sum(users_here) + quoted,
        "users_avg": sum(user_shares) / len(user_shares) if user_shares else None,
        "missing": len(missing), "reachable": len(reached),
        "depth_max": max(reached, default=0), "depth_sum": sum(reached),
        "removed_calls": len(removed), "covered_calls": sum(coverage),
        "cost": managed.cost + (provider.cost if provider else 0.0), "cost_unmanaged": raw.cost,
        "prefix_changes": managed.prefix_changes,
        "model_calls": provider.calls if provider else 0,
        "model_cost": provider.cost if provider else 0.0,
        "model_parts": provider.parts if provider else {},
        "model_purposes": provider.purposes if provider else {},
        "seconds": round(time.perf_counter() - started, 2),
    })
    return out


def by_kind(facts: list[fm.Fact], here: list[bool]) -> dict[str, list[int]]:
    """``{kind: [facts, in context]}``."""
    out: dict[str, list[int]] = {}
    for f, ok in zip(facts, here):
        slot = out.setdefault(f.kind, [0, 0])
        slot[0] += 1
        slot[1] += ok
    return out


def main() -> int:
    job = json.loads(sys.stdin.read())
    try:
        result = run(job)
    except Exception as exc:  # reported per job, so one broken policy does not sink the run
        result = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    print(json.dumps({**job, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
