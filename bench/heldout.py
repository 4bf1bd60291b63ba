"""Sessions the defaults were never tuned on, laid out as the benches read ``../shared/data``.

    git clone https://github.com/marot/spotter /tmp/spotter
    git clone https://github.com/gruckion/mini-swe-agent /tmp/mini-swe-agent
    python bench/heldout.py --spotter /tmp/spotter --mini-swe-agent /tmp/mini-swe-agent --out /tmp/heldout

The shared sessions come from two public repositories, which hold more of the same kinds: Claude Code
transcripts under ``marot/spotter``'s ``test/fixtures/transcripts/`` and the whole Gemini 3 Pro
SWE-bench run under ``gruckion/mini-swe-agent``'s ``swebench_results/*/trajs/``.  This links every
one that ``../shared/data`` does not hold (a long session of more than 1,000 lines; a trajectory)
into two folders, each with ``claude-code/`` and ``mini-swe-agent/`` as ``--data`` expects:

- ``<out>/all``: all of them (``bench/replay_all.py --data``, ``bench/cadence.py --data``);
- ``<out>/sample``: the Claude Code sessions and ``--sample`` trajectories drawn with ``--seed`` from
  those whose unmanaged history passes ``--window`` tokens on some call (``bench/fidelity.py --data``:
  the others never compact at its windows).

Links, not copies: nothing of them enters this repository.  RESULTS.md §6 ("Sessions the project was
never tuned on") used ``marot/spotter`` at ``8cc42b0`` and ``gruckion/mini-swe-agent`` at ``d12a71a``.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from lossless.dialects.detect import read_any  # noqa: E402
from lossless.replay import replay  # noqa: E402

LONG_LINES = 1_000
"""A Claude Code transcript of at least this many lines is a whole working session, not a fixture."""


def claude_sessions(spotter: Path, shared: Path) -> list[Path]:
    folder = spotter / "test" / "fixtures" / "transcripts"
    out = []
    for path in sorted(folder.glob("*.jsonl")):
        if (shared / "claude-code" / path.name).exists():
            continue
        with path.open("rb") as f:
            if sum(1 for _ in f) >= LONG_LINES:
                out.append(path)
    return out


def trajectories(mini_swe_agent: Path, shared: Path) -> list[Path]:
    found = sorted(mini_swe_agent.glob("swebench_results/*/trajs/*/*.traj.json"))
    return [p for p in found if not (shared / "mini-swe-agent" / p.name).exists()]


def link(paths: list[Path], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for path in paths:
        target = folder / path.name
        if target.is_symlink() or target.exists():
            target.unlink()
        target.symlink_to(path.resolve())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spotter", type=Path, required=True, help="a clone of marot/spotter")
    ap.add_argument("--mini-swe-agent", type=Path, required=True, help="a clone of gruckion/mini-swe-agent")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data",
                    help="what to leave out (default ../shared/data)")
    ap.add_argument("--sample", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--window", type=int, default=32_000)
    args = ap.parse_args()
    cc = claude_sessions(args.spotter, args.shared)
    runs = trajectories(args.mini_swe_agent, args.shared)
    if not cc and not runs:
        print(f"heldout: no session found under {args.spotter} or {args.mini_swe_agent}", file=sys.stderr)
        return 1
    link(cc, args.out / "all" / "claude-code")
    link(runs, args.out / "all" / "mini-swe-agent")
    big = [p for p in runs if replay(read_any(p), args.window).peak_unmanaged_tokens > args.window]
    drawn = random.Random(args.seed).sample(big, min(args.sample, len(big)))
    link(cc, args.out / "sample" / "claude-code")
    link(sorted(drawn), args.out / "sample" / "mini-swe-agent")
    print(f"{args.out / 'all'}: {len(cc)} Claude Code sessions, {len(runs)} trajectories")
    print(f"{args.out / 'sample'}: {len(cc)} Claude Code sessions, {len(drawn)} of the {len(big)} trajectories "
          f"that pass {args.window:,} tokens (seed {args.seed})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
