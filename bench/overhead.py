"""Per-turn cost of ``ContextManager.prepare`` in a live loop, against the teaching baseline.

    python bench/overhead.py [--sizes 100,1000,5000] [--json]

A live loop: prepare, append the next round (assistant + tool results, as
Anthropic dicts the way an agent keeps them), repeat.  At each size the per-turn
time of ``prepare`` is the median over a few turns, measured side by side with the
baseline on the very same history: the teaching code's per-turn work, which
re-serialises the whole history with ``json.dumps`` to estimate its size and scans
every tool result for micro-compaction.

Two settings: a window so large that no stage fires (the pure overhead), and a
200k window where stages do fire (the agent keeps its full list; recollect keeps
the view), whose per-turn median includes the amortised firing turns.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from recollect import ContextManager  # noqa: E402

LINE = "src/app/module_{i}.py:{j}: def handler_{j}(request, *args, **kwargs):  # returns {j}\n"


def round_dicts(n: int) -> list[dict]:
    """One API round: an assistant call and its ~2 KB result, as an agent keeps them."""
    tid = f"toolu_{n:07d}"
    output = "".join(LINE.format(i=n % 97, j=j) for j in range(28))
    return [
        {"role": "assistant", "content": [
            {"type": "text", "text": f"Looking at module {n % 97} to trace the handler chain."},
            {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": f"grep -n def src/app/module_{n % 97}.py"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": output}]},
    ]


def teaching_turn(messages: list[dict]) -> int:
    """The teaching code's per-turn cost: scan all tool results, json.dumps everything."""
    results = [b for m in messages if isinstance(m.get("content"), list) for b in m["content"]
               if b.get("type") == "tool_result"]
    _ = results[:-3]
    return len(json.dumps(messages, default=str)) // 4


def measure(window: int, sizes: list[int], turns: int = 15) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as store:
        cm = ContextManager(window=window, store=store, transcript=True, session_id="bench")
        history: list[dict] = [{"role": "user", "content": "Trace the request handlers and fix the slow one."}]
        n = 0
        for size in sizes:
            ours, base = [], []
            while len(history) < size:  # grow without timing
                history.extend(round_dicts(n))
                n += 1
                cm.prepare(history)
            lengths = []
            for _ in range(turns):
                history.extend(round_dicts(n))
                n += 1
                t0 = time.perf_counter()
                view = cm.prepare(history)
                ours.append(time.perf_counter() - t0)
                lengths.append(len(history))
            # The baseline on the very same histories, timed right after (interleaving the
            # two would let the baseline's megabytes of JSON evict our working set each turn).
            for k in lengths:
                snapshot = history[:k]
                t0 = time.perf_counter()
                teaching_turn(snapshot)
                base.append(time.perf_counter() - t0)
            o, b = statistics.median(ours), statistics.median(base)
            rows.append({"window": window, "messages": len(history), "sent": len(view.messages),
                         "prepare_ms": round(o * 1e3, 3), "baseline_ms": round(b * 1e3, 3),
                         "speedup": round(b / o, 1)})
        cm.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = measure(100_000_000, sizes) + measure(200_000, sizes)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'window':>11} {'messages':>8} {'sent':>6} {'prepare ms':>11} {'baseline ms':>12} {'speedup':>8}")
    for r in rows:
        print(f"{r['window']:>11,} {r['messages']:>8} {r['sent']:>6} {r['prepare_ms']:>11} {r['baseline_ms']:>12} {r['speedup']:>7}×")
    flat = [r for r in rows if r["window"] == 100_000_000]
    if len(flat) > 1:
        print(f"per-turn cost growth {flat[0]['messages']}→{flat[-1]['messages']} messages: "
              f"recollect ×{flat[-1]['prepare_ms'] / flat[0]['prepare_ms']:.1f}, "
              f"baseline ×{flat[-1]['baseline_ms'] / flat[0]['baseline_ms']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
