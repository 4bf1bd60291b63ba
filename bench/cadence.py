"""How often compaction comes back, on every shared session, at windows the other benches do not use.

    python bench/cadence.py [--data DIR] [--windows 8000,12000,16000,24000,48000,100000] [--unseen]

Each shared session (Claude Code and mini-swe-agent) is played as a live agent through one
``ContextManager``: before each recorded call, the session's messages up to it (as wire dicts, the
whole list each time, as a client sends it through the proxy).  Per window, over all sessions:

- ``compactions``: calls on which a stage moved earlier content (persist only replaces the newest
  result, which the model has not read: it is not counted);
- ``too soon``: compactions that came when less than 30 % of the threshold of new content had
  been added since the previous one landed (issue 22, point 3: a compaction makes room for a real
  stretch of work) — the request before them brought little, yet the context was full again;
- ``in band``: landings at 55–70 % of the threshold; the median landing;
- ``over`` (tokens sent above the window) and ``invalid`` (a request the provider would reject).

``--unseen`` adds each session's inferred system prompt and tool schemas (Claude Code's are about
26,000 tokens) to every request: at the smaller windows they alone take most of the threshold,
and the band cannot be reached (bench/fixed_part.py, and the warning the manager logs).

To compare two trees, run the same command with ``PYTHONPATH=<other tree>/src``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not any(p.endswith("/src") for p in sys.path):
    sys.path.insert(0, str(ROOT / "src"))

from lossless import ContextManager  # noqa: E402
from lossless.rounds import problems  # noqa: E402

from fixed_part import MOVES  # noqa: E402
from overhead import turns_of  # noqa: E402

SOON = 0.3
"""A compaction is too soon when the context grew by less than this share of the threshold since
the previous one landed."""


def play(path: Path, window: int, unseen: bool) -> dict:
    session, wire, stops, inferred = turns_of(path)
    with tempfile.TemporaryDirectory() as store:
        cm = ContextManager(window=window, store=store, dialect=session.dialect, session_id="cadence",
                            unseen_tokens=inferred if unseen else 0, transcript=False)
        threshold = cm.budget.threshold
        out = {"calls": 0, "compactions": 0, "soon": 0, "over": 0, "invalid": 0, "landed": []}
        landed_at: int | None = None
        for stop in stops:
            view = cm.prepare(wire[:stop], system=session.system)
            moved = [e for e in view.events if e.fired and e.stage in MOVES]
            out["calls"] += 1
            out["over"] += view.state.tokens > window
            out["invalid"] += bool(problems(view.neutral, session.dialect))
            if moved:
                out["compactions"] += 1
                if landed_at is not None and moved[0].tokens_before - landed_at < SOON * threshold:
                    out["soon"] += 1
                landed_at = view.state.tokens
                out["landed"].append(view.state.tokens / threshold)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--windows", default="8000,12000,16000,24000,48000,100000")
    ap.add_argument("--unseen", action="store_true", help="add each session's inferred system prompt and tools")
    args = ap.parse_args()
    paths = sorted((args.data / "claude-code").glob("*.jsonl")) + sorted((args.data / "mini-swe-agent").glob("*.traj.json"))
    if not paths:
        sys.exit(f"bench/cadence.py: no shared sessions under {args.data} (pass --data)")
    print(f"{len(paths)} shared sessions, the whole list sent before each recorded call"
          f"{', with their inferred system prompt and tools' if args.unseen else ''}")
    print("| window | calls | compactions | too soon (< 30 % of the threshold of new work) | landings in band (55–70 %) | median landing | worst session (too soon) | over | invalid |")
    print("|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for window in map(int, args.windows.split(",")):
        rows = {p.name: play(p, window, args.unseen) for p in paths}
        landed = [x for r in rows.values() for x in r["landed"]]
        worst = max(rows, key=lambda n: rows[n]["soon"])
        in_band = sum(0.55 <= x <= 0.70 for x in landed)
        print(f"| {window:,} | {sum(r['calls'] for r in rows.values()):,} | {len(landed)} | "
              f"{sum(r['soon'] for r in rows.values())} | {in_band} ({in_band / max(1, len(landed)):.0%}) | "
              f"{statistics.median(landed) if landed else 0:.2f} | {worst[:24]} ({rows[worst]['soon']}) | "
              f"{sum(r['over'] for r in rows.values())} | {sum(r['invalid'] for r in rows.values())} |")


if __name__ == "__main__":
    main()
