"""A large system prompt and tool schemas: where compactions land, and whether they come back to back.

    python bench/fixed_part.py [--windows 32000,64000] [--shares 0.3,0.5,0.6,0.7] [--turns 120] [--seeds 1,2]

An agent with many tools (or MCP servers) sends the same schemas on every request: a fixed part the
stages cannot shrink.  This loop gives a ``ContextManager`` tool schemas of a share of its
auto-compact threshold, then appends rounds of tool output (150, 300 or 600 lines, at random) and
adopts each view, as an agent does.  Per window and share: compactions (stages that move earlier
content; persist only replaces the newest result), how many came on the request right after
another, and where they landed (tokens sent ÷ the threshold: lowest, median, highest).

To compare two trees, run the same command with ``PYTHONPATH=<other tree>/src``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not any(p.endswith("/src") for p in sys.path):
    sys.path.insert(0, str(ROOT / "src"))

from lossless import ContextManager  # noqa: E402

MOVES = {"snip", "microcompact", "summary", "fallback_summary", "collapse", "autocompact", "session_memory"}


def tools_of(tokens: int) -> list[dict]:
    """Tool schemas of about ``tokens`` tokens."""
    return [{"name": f"tool_{i}", "description": "Reads a file and reports its lines. " * 60,
             "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
            for i in range(max(1, tokens // 600))]


def round_of(i: int, lines: int) -> list[dict]:
    tid = f"toolu_{i:05d}"
    return [
        {"role": "assistant", "content": [{"type": "text", "text": f"step {i}"},
                                          {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": f"cat f{i}"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": f"line {i}\n" * lines}]},
    ]


def loop(window: int, share: float, turns: int, seed: int) -> dict:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as store:
        cm = ContextManager(window=window, store=store, transcript=False)
        threshold = cm.budget.threshold
        tools = tools_of(int(share * threshold))
        history: list = [{"role": "user", "content": "Fix the failing tests."}]
        fired, landed = [], []
        for turn in range(turns):
            history += round_of(turn, rng.choice([150, 300, 600]))
            view = cm.prepare(history, system="You are a careful engineer.", tools=tools)
            moved = any(e.fired and e.stage in MOVES for e in view.events)
            fired.append(moved)
            if moved:
                landed.append(view.state.tokens / threshold)
            history = view.messages
        fixed = cm.counter.count_tools(tools) / threshold
    return {"fixed": fixed, "compactions": sum(fired), "back_to_back": sum(a and b for a, b in zip(fired, fired[1:])),
            "landed": landed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--windows", default="32000,64000")
    ap.add_argument("--shares", default="0.3,0.5,0.6,0.7")
    ap.add_argument("--turns", type=int, default=120)
    ap.add_argument("--seeds", default="1,2")
    args = ap.parse_args()
    print("| window | tools ÷ threshold | compactions | right after another | landed: lowest / median / highest (÷ threshold) |")
    print("|---:|---:|---:|---:|---|")
    for window in map(int, args.windows.split(",")):
        for share in map(float, args.shares.split(",")):
            rows = [loop(window, share, args.turns, int(s)) for s in args.seeds.split(",")]
            landed = [x for r in rows for x in r["landed"]]
            spread = f"{min(landed):.2f} / {statistics.median(landed):.2f} / {max(landed):.2f}" if landed else "–"
            print(f"| {window:,} | {rows[0]['fixed']:.2f} | {sum(r['compactions'] for r in rows)} | "
                  f"{sum(r['back_to_back'] for r in rows)} | {spread} |")


if __name__ == "__main__":
    main()
