"""Per-turn cost of ``ContextManager.prepare`` in a live loop, beside the teaching loop and the floor.

    python bench/overhead.py [--sizes 100,1000,5000] [--turns 41] [--json]

A live loop: prepare, append the next round (assistant + tool results, as
Anthropic dicts the way an agent keeps them), repeat.  Three loops receive the
very same rounds, and each turn is timed for all three, side by side:

- ``lossless``: ``ContextManager.prepare`` on the agent's full list (the agent
  keeps everything; lossless keeps the view and appends to its transcript), and
  the same without a transcript (``transcript=False``), to show what the append costs;
- ``teaching``: the per-turn work of the teaching loop as its chapter writes it,
  on its own list, which it rewrites in place: the tool-result budget of the last
  message (200,000 chars), the snip to 50 messages (first 3 + placeholder + last
  47), the micro-compact of every tool result but the 3 most recent (over 120
  chars → a one-line placeholder), then its size estimate (``json.dumps`` of the
  list, chars / 4) against the threshold.  Once past 50 messages its list stays
  at ~51, so its cost is flat; it is what the teaching loop really pays;
- ``floor``: ``json.dumps`` of the new round's messages, once: the least any
  manager must do to look at what was appended.

Two settings for lossless: a window so large that no stage fires (the pure
overhead), and a 200k window where stages do fire, whose per-turn median includes
the amortised firing turns.  The teaching loop and the floor do not depend on the
window.  Medians over ``--turns`` turns at each size; absolute times vary with the
machine's load, the ratios measured in the same turns do not much.
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

from lossless import ContextManager  # noqa: E402

LINE = "src/app/module_{i}.py:{j}: def handler_{j}(request, *args, **kwargs):  # returns {j}\n"

# The teaching chapter's constants (its snip, micro-compact and budget defaults).
SNIP_MAX_MESSAGES = 50
SNIP_KEEP_HEAD = 3
KEEP_RECENT_RESULTS = 3
MICRO_MIN_CHARS = 120
BUDGET_CHARS = 200_000
THRESHOLD_TOKENS = 50_000
PLACEHOLDER = "[Earlier tool result compacted. Re-run if needed.]"


def round_dicts(n: int) -> list[dict]:
    """One API round: an assistant call and its ~2 KB result, as an agent keeps them (fresh dicts)."""
    tid = f"toolu_{n:07d}"
    output = "".join(LINE.format(i=n % 97, j=j) for j in range(28))
    return [
        {"role": "assistant", "content": [
            {"type": "text", "text": f"Looking at module {n % 97} to trace the handler chain."},
            {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": f"grep -n def src/app/module_{n % 97}.py"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": output}]},
    ]


def _tool_results(messages: list[dict]) -> list[dict]:
    return [b for m in messages if m.get("role") == "user" and isinstance(m.get("content"), list)
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]


def teaching_turn(messages: list[dict]) -> bool:
    """The teaching loop's pre-call work, rewriting ``messages`` in place as it does.

    Returns whether its estimate crossed the threshold (it would then summarise; the
    bench's rounds never get there, so no model call is ever timed)."""
    last = messages[-1].get("content") if messages else None
    if isinstance(last, list):
        blocks = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
        total = sum(len(str(b.get("content", ""))) for b in blocks)
        if total > BUDGET_CHARS:  # never with ~2 KB results; the check itself is the per-turn cost
            raise RuntimeError("the overhead bench's rounds are meant to stay under the teaching budget")
    if len(messages) > SNIP_MAX_MESSAGES:
        keep_tail = SNIP_MAX_MESSAGES - SNIP_KEEP_HEAD
        snipped = len(messages) - SNIP_KEEP_HEAD - keep_tail
        placeholder = {"role": "user", "content": f"[snipped {snipped} messages from conversation middle]"}
        messages[:] = [*messages[:SNIP_KEEP_HEAD], placeholder, *messages[-keep_tail:]]
    results = _tool_results(messages)
    for block in results[:-KEEP_RECENT_RESULTS]:
        if len(block.get("content", "")) > MICRO_MIN_CHARS:
            block["content"] = PLACEHOLDER
    return len(json.dumps(messages, default=str)) // 4 > THRESHOLD_TOKENS


def floor_turn(new: list[dict]) -> int:
    """The least any manager must do: serialise what was appended, once."""
    return len(json.dumps(new, default=str))


def measure(window: int, sizes: list[int], turns: int = 15) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as store:
        cm = ContextManager(window=window, store=store, transcript=True, session_id="bench")
        bare = ContextManager(window=window, store=store, transcript=False, session_id="bench-bare")
        history: list[dict] = [{"role": "user", "content": "Trace the request handlers and fix the slow one."}]
        teaching: list[dict] = [dict(history[0])]
        n = 0
        for size in sizes:
            ours, nots, teach, floor = [], [], [], []
            while len(history) < size:  # grow without timing, every loop live
                history.extend(round_dicts(n))
                teaching.extend(round_dicts(n))
                teaching_turn(teaching)
                n += 1
                cm.prepare(history)
                bare.prepare(history)
            for _ in range(turns):
                new = round_dicts(n)
                history.extend(new)
                teaching.extend(round_dicts(n))  # its own copies: it rewrites blocks in place
                n += 1
                t0 = time.perf_counter()
                view = cm.prepare(history)
                t1 = time.perf_counter()
                if teaching_turn(teaching):
                    raise RuntimeError("the teaching loop would summarise here; the bench does not time model calls")
                t2 = time.perf_counter()
                floor_turn(new)
                t3 = time.perf_counter()
                bare.prepare(history)
                t4 = time.perf_counter()
                ours.append(t1 - t0)
                teach.append(t2 - t1)
                floor.append(t3 - t2)
                nots.append(t4 - t3)
            o, t, f = statistics.median(ours), statistics.median(teach), statistics.median(floor)
            rows.append({"window": window, "messages": len(history), "sent": len(view.messages),
                         "teaching_sent": len(teaching),
                         "prepare_ms": round(o * 1e3, 3), "no_transcript_ms": round(statistics.median(nots) * 1e3, 3),
                         "teaching_ms": round(t * 1e3, 3),
                         "floor_ms": round(f * 1e3, 4),
                         "vs_teaching": round(t / o, 2), "vs_floor": round(o / f, 1)})
        cm.close()
        bare.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--turns", type=int, default=41)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = measure(100_000_000, sizes, args.turns) + measure(200_000, sizes, args.turns)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("per-turn median, ms; teaching = the teaching loop's own per-turn work (its list snipped to ~51);")
    print("floor = json.dumps of the new round once; teaching/lossless > 1 means lossless is faster")
    print(f"{'window':>11} {'messages':>8} {'sent':>5} {'lossless':>10} {'no transcript':>13} {'teaching':>9} "
          f"{'sent':>5} {'floor':>7} {'teaching/lossless':>19} {'lossless/floor':>16}")
    for r in rows:
        print(f"{r['window']:>11,} {r['messages']:>8} {r['sent']:>5} {r['prepare_ms']:>10.3f} {r['no_transcript_ms']:>13.3f} "
              f"{r['teaching_ms']:>9.3f} {r['teaching_sent']:>5} {r['floor_ms']:>7.4f} {r['vs_teaching']:>18.2f}× "
              f"{r['vs_floor']:>15.1f}×")
    flat = [r for r in rows if r["window"] == 100_000_000]
    if len(flat) > 1:
        a, b = flat[0], flat[-1]
        print(f"per-turn cost growth {a['messages']}→{b['messages']} messages: lossless ×{b['prepare_ms'] / a['prepare_ms']:.1f}, "
              f"teaching ×{b['teaching_ms'] / a['teaching_ms']:.1f}, floor ×{b['floor_ms'] / a['floor_ms']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
