"""Replay every shared session under several windows, managed beside unmanaged.

    python bench/replay_all.py [--data DIR] [--windows 32000,64000,128000] [--json]

For each session and window: calls, peak tokens, calls over the window and
invalid requests (both must be zero), input cost with prompt caching (reads 0.1×,
writes 1.25×) and the cache-read ratio, for the unmanaged history and for
recollect's default pipeline; plus the calibrated estimate's error against the
usage recorded in the Claude Code sessions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from recollect.dialects.detect import read_any  # noqa: E402
from recollect.replay import replay  # noqa: E402


def sessions(data: Path) -> list[Path]:
    cc = sorted(p for p in (data / "claude-code").glob("*.jsonl"))
    swe = sorted((data / "mini-swe-agent").glob("*.traj.json"))
    return cc + swe


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--windows", default="32000,64000,128000")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    windows = [int(w) for w in args.windows.split(",")]
    rows = []
    for path in sessions(args.data):
        session = read_any(path)
        for w in windows:
            r = replay(session, w)
            rows.append({
                "session": path.name[:36], "file": path.name, "window": w, "calls": r.calls,
                "peak_unmanaged": r.peak_unmanaged_tokens, "peak": r.peak_tokens,
                "over_unmanaged": r.unmanaged_over_window_calls, "over": r.over_window_calls,
                "invalid": r.invalid_requests, "stages": r.stages,
                "cost_unmanaged": r.cost["unmanaged"], "cost_managed": r.cost["managed"],
                "read_unmanaged": r.unmanaged_cache_read_ratio, "read_managed": r.cache_read_ratio,
                "estimate_error": r.estimate_error,
            })
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'session':36} {'window':>7} {'calls':>5} {'peak raw':>9} {'peak':>7} {'over raw':>8} {'over':>4} "
          f"{'inv':>3} {'cost raw':>10} {'cost':>9} {'read raw':>8} {'read':>6}")
    for r in rows:
        print(f"{r['session']:36} {r['window']:>7} {r['calls']:>5} {r['peak_unmanaged']:>9,} {r['peak']:>7,} "
              f"{r['over_unmanaged']:>8} {r['over']:>4} {r['invalid']:>3} {r['cost_unmanaged']:>10,} "
              f"{r['cost_managed']:>9,} {r['read_unmanaged']:>8.3f} {r['read_managed']:>6.3f}")
    print()
    for w in windows:
        sel = [r for r in rows if r["window"] == w]
        over = sum(r["over"] for r in sel)
        inv = sum(r["invalid"] for r in sel)
        raw = sum(r["cost_unmanaged"] for r in sel)
        man = sum(r["cost_managed"] for r in sel)
        print(f"window {w:>7,}: {len(sel)} sessions, {sum(r['calls'] for r in sel)} calls, over-window {over}, "
              f"invalid {inv}, cost managed/unmanaged {man / raw:.3f}, "
              f"unmanaged calls over the window {sum(r['over_unmanaged'] for r in sel)}")
    cc = [r for r in rows if r["window"] == windows[0] and r["file"].endswith(".jsonl")
          and r["estimate_error"].get("calls")]
    if cc:
        n = sum(r["estimate_error"]["calls"] for r in cc)
        mean = sum(r["estimate_error"]["mean_abs_pct"] * r["estimate_error"]["calls"] for r in cc) / n
        worst = max(r["estimate_error"]["max_under_pct"] for r in cc)
        print(f"calibrated next-call estimate on the Claude Code sessions: {n} calls, mean |error| {mean:.2f}%, "
              f"worst under-estimate {worst:.2f}%")
    swe = [r for r in rows if r["window"] == windows[0] and r["file"].endswith(".traj.json")
           and r["estimate_error"].get("calls")]
    if swe:
        n = sum(r["estimate_error"]["calls"] for r in swe)
        mean = sum(r["estimate_error"]["mean_abs_pct"] * r["estimate_error"]["calls"] for r in swe) / n
        print(f"calibrated next-call estimate on the mini-swe-agent runs (Gemini tokenizer): {n} calls, "
              f"mean |error| {mean:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
