"""One (policy, session, window) of the fidelity benchmark, run in its own process.

    echo '{"policy": "new", "source": {"file": "x.jsonl"}, "window": 32000}' | \\
        PYTHONPATH=<some lossless>/src python bench/_fidelity_worker.py

Whatever ``lossless`` is importable is the code under test (the landed commit, or
the working tree): this file and ``_fidelity_policies`` use only public API present in
both — the ``ContextManager`` constructor, ``prepare`` and its ``messages``/``events``,
``ContextConfig(...).budget.threshold``, the message values, ``ArtifactStore``,
``read_any``, ``rounds.problems``, ``tokens.default_counter`` and
``testing.FakeProvider`` — and judges the result with ``_fidelity_metrics``, which does
not import lossless at all.  Prints one JSON object (see ``run``).

The loop is live: before each recorded call, the messages that entered since the
previous call are appended to what the system returned last time, and its answer
becomes the next history.  Each call's time to make the view is kept (``turn_ms``, wall;
``turn_cpu_ms``, this thread's CPU; ``turn_compacted``: whether it changed what was sent
before): lossless's ``prepare`` timed around the call, a peer's step as the peer's own
process timed it (the JSON wire to it left out).  After the loop, a fresh instance prepares
the whole history once (one-shot).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from datetime import datetime
from typing import Any

import _fidelity_metrics as fm
from _fidelity_facts import sample_facts
from _fidelity_policies import make_policy
from _fidelity_synth import generate



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
        facts = sample_facts(messages, seed=source.get("fact_seed", 1))
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


# -- the loop ------------------------------------------------------------------------
def run(job: dict[str, Any]) -> dict[str, Any]:
    from lossless.config import ContextConfig
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
    window = job["window"]
    threshold = ContextConfig(window=window).budget.threshold
    managed, raw = fm.Meter(counter.count_message, overhead), fm.Meter(counter.count_message, overhead)
    cache = fm.TextCache()
    ids_memo: dict[int, tuple[Any, set[str]]] = {}
    seen_ids: set[str] = set()
    out: dict[str, Any] = {"calls": 0, "compacting_calls": 0, "first_compaction": None, "over": 0, "invalid": 0,
                           "peak": 0, "peak_unmanaged": 0, "threshold": threshold, "fills": [],
                           "landings": [], "turn_ms": [], "turn_cpu_ms": [], "turn_compacted": []}
    fact_shares: list[float] = []
    user_shares: list[float] = []
    handle_shares: list[float] = []
    accounts: list[int] = []
    stride = 1
    # The store's I/O is not what is measured: a RAM disk, when there is one, keeps the run short.
    ram = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="lossless-fidelity-", dir=ram) as store:
        policy = make_policy(job, store, counter, overhead, messages)
        try:
            history: list[Any] = []
            taken = 0
            sent: list[Any] = []
            for n, stop in enumerate(stops):
                new = messages[taken:stop]
                incoming = history + new
                taken = stop
                now = timestamp(messages[stop]) if stop < len(messages) else None
                wall, cpu = time.perf_counter(), time.thread_time()
                sent = policy.prepare(incoming, new, system, now)
                spent = policy.seconds or (time.perf_counter() - wall, time.thread_time() - cpu)
                history = sent
                compacted = len(sent) != len(incoming) or any(a is not b for a, b in zip(sent, incoming))
                out["turn_ms"].append(round(spent[0] * 1e3, 4))
                out["turn_cpu_ms"].append(round(spent[1] * 1e3, 4))
                out["turn_compacted"].append(compacted)
                out["calls"] += 1
                out["compacting_calls"] += compacted
                # The first landing starts the averages: a call where only a single result moved
                # (persist, echo: ``Policy.landed`` is False) removed nothing of the history.
                if compacted and policy.landed is not False and out["first_compaction"] is None:
                    out["first_compaction"] = n
                    stride = max(1, (len(stops) - n) // job.get("samples", 12))
                managed.add(sent)
                raw.add(messages[:stop])
                tokens = overhead + sum(counter.count_message(m) for m in sent)
                raw_tokens = overhead + sum(counter.count_message(m) for m in messages[:stop])
                if compacted:
                    out["fills"].append(tokens)
                    out["landings"].append(policy.landed is not False)
                out["peak"] = max(out["peak"], tokens)
                out["peak_unmanaged"] = max(out["peak_unmanaged"], raw_tokens)
                out["over"] += tokens > window
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
                    handle_shares.append(fm.handle_tokens(text, counter.count_text) / max(1, tokens - overhead))
                    accounts.append(fm.account_tokens(sent, counter.count_text, policy.account_prefixes))
            end = stops[-1] if stops else 0
            model_calls = policy.provider.calls if policy.provider else policy.model_calls
            model_cost = policy.provider.cost if policy.provider else policy.model_cost
            once = policy.oneshot(messages[:end], system, timestamp(messages[end]) if end < len(messages) else None)
        finally:
            policy.close()
        text = cache.context(sent)
        live = [f for f in facts if f.entered < end]
        live_users = [u for u in users if u.entered < end]
        facts_here = fm.present(live, text)
        once_here = fm.present(live, fm.context_text(once))
        once_tokens = overhead + sum(counter.count_message(m) for m in once)
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
        "facts_oneshot": sum(once_here), "by_kind_oneshot": by_kind(live, once_here),
        # which facts, for comparing systems input by input: "1" kept, "0" not, in fact order
        "facts_mask": "".join("01"[ok] for ok in facts_here), "oneshot_mask": "".join("01"[ok] for ok in once_here),
        "facts_entered": [f.entered for f in live],
        "oneshot_tokens": once_tokens, "oneshot_over": once_tokens > window,
        "oneshot_invalid": bool(problems(once, s["dialect"])) if once else False,
        "oneshot_compacted": len(once) != end or any(a is not b for a, b in zip(once, messages)),
        "handle_share": sum(handle_shares) / len(handle_shares) if handle_shares else None,
        "account_avg": sum(accounts) / len(accounts) if accounts else None,
        "account_max": max(accounts, default=0),
        "stages": dict(policy.fired),
        "users": len(live_users), "users_end": sum(users_here), "users_quoted": sum(users_here) + quoted,
        "users_avg": sum(user_shares) / len(user_shares) if user_shares else None,
        "missing": len(missing), "reachable": len(reached),
        "depth_max": max(reached, default=0), "depth_sum": sum(reached),
        "removed_calls": len(removed), "covered_calls": sum(coverage),
        "cost": managed.cost + model_cost, "cost_unmanaged": raw.cost,
        "prefix_changes": managed.prefix_changes,
        "model_calls": model_calls, "model_cost": model_cost,
        "model_parts": policy.provider.parts if policy.provider else {},
        "model_purposes": policy.provider.purposes if policy.provider else {},
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
