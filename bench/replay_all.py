"""Replay every shared session under several windows, managed beside unmanaged.

    python bench/replay_all.py [--data DIR] [--windows 32000,64000,128000,200000] [--json]
    python bench/replay_all.py --sweep [--windows ...]   # micro-compact trigger × batch

For each session and window: calls, peak tokens, calls over the window and
invalid requests (both must be zero), input cost with prompt caching (reads 0.1×,
writes 1.25×) and the cache-read ratio, for the unmanaged history and for
lossless's default pipeline.

The cost ratio managed/unmanaged means something only where the unmanaged
history fits the window on every call (its peak ≤ the window): there both runs
could have happened.  Where it does not, the unmanaged run would have been
rejected for size on its first call over the window and every call after, so its
"cost" is fictional and the ratio says only that lossless sent less.  The
totals are therefore given separately for the two groups, per window, and for
the second group also over the calls before the unmanaged run's first call over
the window (the part of the session both runs could make).  At 200k every shared
session fits: that window compares the whole corpus honestly.

The last lines repeat the calibrated estimate's error on the whole next request
(``replay.estimate_error``); that figure is dominated by the previous call's
reported usage, which it reuses: ``bench/token_accuracy.py`` measures the error
on what was appended, which is what the estimator decides.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from lossless.config import ContextConfig  # noqa: E402
from lossless.dialects.detect import read_any  # noqa: E402
from lossless.replay import CACHE_READ, CACHE_WRITE, replay  # noqa: E402


def sessions(data: Path) -> list[Path]:
    cc = sorted(p for p in (data / "claude-code").glob("*.jsonl"))
    swe = sorted((data / "mini-swe-agent").glob("*.traj.json"))
    return cc + swe


def before_overflow(report, window: int) -> dict[str, float]:
    """Both costs over the calls the unmanaged run could make: those before its first call over
    the window (all of them when it fits).  The unmanaged history only grows, so each of its
    requests reads the previous one from the cache and writes what was appended."""
    calls = managed = unmanaged = 0.0
    prev = 0
    for c in report.per_call:
        if c.tokens_unmanaged > window:
            break
        managed += c.cache_read * CACHE_READ + c.cache_write * CACHE_WRITE
        unmanaged += prev * CACHE_READ + (c.tokens_unmanaged - prev) * CACHE_WRITE
        prev = c.tokens_unmanaged
        calls += 1
    return {"calls": int(calls), "managed": round(managed), "unmanaged": round(unmanaged)}


def split(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    """The rows whose unmanaged history fits the window on every call, and the others."""
    fits = [r for r in rows if not r["over_unmanaged"]]
    over = [r for r in rows if r["over_unmanaged"]]
    return [("unmanaged fits the window on every call (the comparison is meaningful):", fits),
            ("unmanaged exceeds the window (its cost is fictional: those calls would have been rejected):", over)]


def cost_line(group: list[dict]) -> str:
    raw = sum(r["cost_unmanaged"] for r in group)
    man = sum(r["cost_managed"] for r in group)
    ratios = sorted(r["cost_managed"] / r["cost_unmanaged"] for r in group if r["cost_unmanaged"])
    fired = sum(1 for r in group if r["stages"])
    spread = f"per session {ratios[0]:.3f}–{ratios[-1]:.3f}" if ratios else "no cost"
    line = (f"{len(group)} sessions, {sum(r['calls'] for r in group)} calls, stages fired in {fired}; "
            f"cost managed/unmanaged {man / raw:.3f} ({spread})")
    if any(r["over_unmanaged"] for r in group):
        b = [r["before_overflow"] for r in group]
        bm, bu = sum(x["managed"] for x in b), sum(x["unmanaged"] for x in b)
        line += (f"\n    over the {sum(x['calls'] for x in b)} calls before the unmanaged run's first call over the "
                 f"window (both could run): cost managed/unmanaged {bm / bu:.3f}" if bu else "")
    return line


SWEEP = ((0.6, 0.08), (0.8, 0.08), (0.4, 0.15), (0.5, 0.20), (0.6, 0.25))
"""(micro_trigger_fraction, micro_min_batch_fraction) pairs; the last is the default."""


def sweep(paths: list[Path], windows: list[int]) -> int:
    """The replay's cost per micro-compact configuration, split as in the main table."""
    loaded = [read_any(p) for p in paths]
    print("micro-compact trigger (fraction of the threshold) × minimum batch (fraction of the window);")
    print("fits = sessions whose unmanaged history fits the window; before = the other sessions' calls before")
    print("their first unmanaged call over the window; all = every session (reference only: partly fictional)")
    print(f"{'trigger':>7} {'batch':>5} {'window':>7} {'fits':>6} {'before':>7} {'all':>7} {'firings':>8}")
    for trigger, batch in SWEEP:
        for w in windows:
            cfg = ContextConfig(window=w, micro_trigger_fraction=trigger, micro_min_batch_fraction=batch)
            rows = []
            for s in loaded:
                r = replay(s, w, config=cfg)
                rows.append({"over_unmanaged": r.unmanaged_over_window_calls, "cost_unmanaged": r.cost["unmanaged"],
                             "cost_managed": r.cost["managed"], "before_overflow": before_overflow(r, w),
                             "firings": sum(r.stages.values())})
            fits = [r for r in rows if not r["over_unmanaged"]]
            over = [r for r in rows if r["over_unmanaged"]]

            def ratio(group: list[dict], managed: str, unmanaged: str) -> str:
                den = sum(r[unmanaged] for r in group)
                return f"{sum(r[managed] for r in group) / den:.3f}" if den else "-"

            before = [{"m": r["before_overflow"]["managed"], "u": r["before_overflow"]["unmanaged"]} for r in over]
            print(f"{trigger:>7} {batch:>5} {w:>7} {ratio(fits, 'cost_managed', 'cost_unmanaged'):>6} "
                  f"{ratio(before, 'm', 'u'):>7} {ratio(rows, 'cost_managed', 'cost_unmanaged'):>7} "
                  f"{sum(r['firings'] for r in rows):>8}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--windows", default="32000,64000,128000,200000")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--sweep", action="store_true", help="compare micro-compact configurations instead")
    args = ap.parse_args()
    windows = [int(w) for w in args.windows.split(",")]
    if args.sweep:
        return sweep(sessions(args.data), windows)
    rows = []
    for path in sessions(args.data):
        session = read_any(path)
        for w in windows:
            r = replay(session, w)
            rows.append({
                "session": path.name[:36], "file": path.name, "window": w, "calls": r.calls,
                "before_overflow": before_overflow(r, w),
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
          f"{'inv':>3} {'cost raw':>10} {'cost':>9} {'ratio':>7} {'read raw':>8} {'read':>6}")
    for r in rows:
        ratio = f"{r['cost_managed'] / r['cost_unmanaged']:.3f}" if r["cost_unmanaged"] else "-"
        if r["over_unmanaged"]:
            ratio = "(" + ratio + ")"  # against an unmanaged run that could not happen
        print(f"{r['session']:36} {r['window']:>7} {r['calls']:>5} {r['peak_unmanaged']:>9,} {r['peak']:>7,} "
              f"{r['over_unmanaged']:>8} {r['over']:>4} {r['invalid']:>3} {r['cost_unmanaged']:>10,} "
              f"{r['cost_managed']:>9,} {ratio:>7} {r['read_unmanaged']:>8.3f} {r['read_managed']:>6.3f}")
    print("(ratio) = the unmanaged history exceeds the window on some call: that run could not happen\n")
    for w in windows:
        sel = [r for r in rows if r["window"] == w]
        over = sum(r["over"] for r in sel)
        inv = sum(r["invalid"] for r in sel)
        print(f"window {w:>7,}: {len(sel)} sessions, {sum(r['calls'] for r in sel)} calls, over-window {over}, "
              f"invalid {inv}; unmanaged calls over the window {sum(r['over_unmanaged'] for r in sel)}")
        for label, group in split(sel):
            if group:
                print(f"  {label}")
                print(f"    {cost_line(group)}")

    print()
    print("whole next request, reported usage of the previous call + estimate of what was appended")
    print("(mostly the reused reported figure; the error on the appended part: bench/token_accuracy.py)")
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
