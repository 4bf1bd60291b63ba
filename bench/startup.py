"""How long ``lossless --help`` takes beside ``python -c pass`` (issue 21, point 6).

    .venv/bin/python bench/startup.py [--runs 60]

Each case is a fresh process started and waited for, the cases taking turns within each
round so that a slow moment of the machine falls on all of them alike.  Bytecode is
compiled first (``compileall``, as pip does when it installs), so the figures are a
user's.  Cases:

- ``python -c pass``: the interpreter alone, the floor;
- ``lossless --help`` and ``lossless --version``: the installed console script;
- ``lossless demo --help``: one command's module and what it imports;
- every command module imported: ``build_parser()`` in full, what ``--help`` did before
  commands were loaded on demand.

Reports median, mean and p99 in milliseconds and each median over the floor's.
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import time
from pathlib import Path

import lossless

BIN = Path(sys.executable).parent


def cases() -> dict[str, list[str]]:
    script = BIN / "lossless"
    lossless_cmd = [str(script)] if script.exists() else [sys.executable, "-m", "lossless.cli"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "lossless --help": [*lossless_cmd, "--help"],
        "lossless --version": [*lossless_cmd, "--version"],
        "lossless demo --help": [*lossless_cmd, "demo", "--help"],
        "every command module imported": [sys.executable, "-c",
                                          "from lossless.cli import build_parser; build_parser()"],
    }


def once(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - started) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=60, help="rounds; each runs every case once")
    args = parser.parse_args()
    compileall.compile_dir(Path(lossless.__file__).parent, quiet=1)
    todo = cases()
    times: dict[str, list[float]] = {name: [] for name in todo}
    for argv in todo.values():
        once(argv)  # warm the page cache and write any bytecode still missing
    for _ in range(args.runs):
        for name, argv in todo.items():
            times[name].append(once(argv))
    floor = statistics.median(times["python -c pass"])
    print(f"{args.runs} runs each, Python {sys.version.split()[0]}, lossless {lossless.__version__}\n")
    print("| case | median ms | mean | p99 | median / python -c pass |")
    print("|---|---:|---:|---:|---:|")
    for name, ms in times.items():
        p99 = statistics.quantiles(ms, n=100, method="inclusive")[98]
        print(f"| {name} | {statistics.median(ms):.1f} | {statistics.fmean(ms):.1f} | {p99:.1f} | "
              f"{statistics.median(ms) / floor:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
