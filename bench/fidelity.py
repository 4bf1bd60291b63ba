"""Fidelity: what the context still holds for the model, system beside system, in one run.

    python bench/fidelity.py                 # every session, windows 32k/64k/128k, DEFAULT_POLICIES
    python bench/fidelity.py --quick         # 2 Claude Code sessions, 3 mini-swe runs, 1 synthetic, 32k
    python bench/fidelity.py --no-peer       # without the peers (no venv made)
    python bench/fidelity.py --frontier      # sweep FRONTIER_KNOBS on the working tree, mark the Pareto set
    python bench/fidelity.py --json          # the raw per-job rows (--load renders them again)

Inputs: every Claude Code session in ``<data>/claude-code``, the mini-swe-agent runs in
``<data>/mini-swe-agent`` and synthetic sessions (``_fidelity_synth``: facts planted at a
uniformly random line of an output, in inputs, user messages and conclusions).  A real
session's facts are drawn uniformly at random (seeded) from the distinctive, rare lines of
its tool outputs and user messages, head, middle and tail alike (``_fidelity_facts``).  A
fact counts when it is verbatim in the final context sent to the model.

Each (system, input, window) runs in its own process (``_fidelity_worker``), at most two
at a time, in two modes: **live** (before each recorded call what entered since is appended
to what the system returned last time, as an agent using the library does) and **one-shot**
(the whole history prepared once by a fresh instance).  Systems (``_fidelity_policies``):

- ``new``, ``new+model``: lossless as in this working tree; ``+model`` = ``provider=FakeProvider()``;
- ``today`` (``today+model``): the landed default at ``TODAY`` (its ``src/`` extracted with
  ``git archive`` and put first on ``PYTHONPATH``, so old and new code never share a process);
- ``openhands``: OpenHands' ``LLMSummarizingCondenser`` (``PEER_PACKAGE`` in ``PEER_VENV``,
  made once with Python ≥ 3.12 and reused; ``_peer_openhands`` drives it as its agent does,
  its LLM answering a fixed summary, its ``max_tokens`` = lossless's auto-compact threshold
  less the system prompt, counted with lossless's estimator);
- ``langchain`` (on request): LangChain's ``SummarizationMiddleware`` (``LANGCHAIN_PACKAGE`` in
  ``LANGCHAIN_VENV``, made once and reused; ``_peer_langchain`` calls its ``before_model``
  before each model call as ``create_agent`` does, its model answering the same fixed
  summary, triggered at the same budget, keeping its default last 20 messages);
- ``baseline``: past the threshold, the first message + the most recent whole rounds up to
  half the window (``_fidelity_baseline``);
- ``unmanaged``: the history as it grows (the cost reference); ``masking`` and
  ``threshold-summary`` on request.

Measures (``_fidelity_metrics``, which imports nothing of lossless; tables in
``_fidelity_report``): facts in context (live at the end and averaged after the first
compaction; one-shot); fill after each compaction (% of the threshold, % of the window);
prefix changes per 100 calls; share of context tokens in handles (``HANDLE_FORMS``);
account size (tokens of snip/summary markers, the peer's summary); recall depth; invalid
requests; calls over the window; input cost with prompt caching against unmanaged (reads
0.1×, writes 1.25×, the systems' own model calls included); the stages fired per live loop.
Sums, the mean over inputs and the worst input side by side.  When a peer ran, a last table gives
issue 22's measure: the real inputs only, each system's facts beside each peer's (live and one-shot),
the target (per input the lesser of 1.25× the peer's facts and all of them) and the inputs more than
one fact below the peer.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import _fidelity_report as report

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).resolve().parent / "_fidelity_worker.py"
TODAY = "579fe43"
"""The landed default the working tree is measured against."""
POLICIES = ("unmanaged", "baseline", "openhands", "langchain", "today", "new", "new+model",
            "today+model", "masking", "threshold-summary")
"""Every system the bench knows; the default run is ``DEFAULT_POLICIES``."""
DEFAULT_POLICIES = ("unmanaged", "baseline", "openhands", "today", "new", "new+model")
PEER_PACKAGE = "openhands-sdk==1.58.2"
CACHE = Path(os.environ.get("LOSSLESS_BENCH_CACHE", Path.home() / ".cache" / "lossless-bench"))
PEER_VENV = CACHE / "peer-venv"
"""Made once by ``ensure_peer`` and reused (outside the repo: nothing to ignore, nothing to commit)."""
LANGCHAIN_PACKAGE = "langchain==1.5.2"
LANGCHAIN_VENV = CACHE / "peer-langchain-venv"
PEERS: dict[str, dict[str, Any]] = {
    "openhands": {"package": PEER_PACKAGE, "venv": PEER_VENV, "probe": "import openhands.sdk.context.condenser",
                  "python": (3, 12)},
    "langchain": {"package": LANGCHAIN_PACKAGE, "venv": LANGCHAIN_VENV,
                  "probe": ("import importlib.metadata as m, langchain.agents.middleware.summarization; "
                            f"assert m.version('langchain') == {LANGCHAIN_PACKAGE.split('==')[1]!r}"),
                  "python": (3, 10)},
}
"""Each peer policy: what its venv holds, where it lives, what proves it usable, the Python it needs."""
WINDOWS = (32_000, 64_000, 128_000)
SYNTHETIC_SEEDS = (1, 2)
SAMPLES = 12
FRONTIER_KNOBS: dict[str, tuple[Any, ...]] = {
    "snip_target_fraction": (0.3, 0.5, 0.7),
    "account_fraction": (0.25, 0.4),
    "account_max_fraction": (0.2, 0.3),
}
"""Knobs swept by ``--frontier`` (the lead edits this); a knob ``ContextConfig`` lacks is skipped."""
FRONTIER_POLICY = "new"
FRONTIER_WINDOW = 64_000


def sources(data: Path, quick: bool) -> list[dict[str, Any]]:
    cc = sorted((data / "claude-code").glob("*.jsonl"))
    swe = sorted((data / "mini-swe-agent").glob("*.traj.json"))
    seeds = SYNTHETIC_SEEDS
    if quick:
        long_cc = [p for p in cc if len(p.stem) == 36]  # the long sessions are named by their uuid
        cc, swe, seeds = (long_cc or cc)[:2], swe[:3], seeds[:1]
    out: list[dict[str, Any]] = [{"file": str(p), "name": p.name[:36], "group": "claude-code"} for p in cc]
    out += [{"file": str(p), "name": p.name.removesuffix(".traj.json"), "group": "mini-swe"} for p in swe]
    out += [{"seed": s, "name": f"synthetic-{s}", "group": "synthetic"} for s in seeds]
    return out


def extract_today(repo: Path, commit: str, into: Path) -> Path:
    """``<into>/src`` holding ``commit``'s ``src/`` (via ``git archive``)."""
    archive = subprocess.run(["git", "-C", str(repo), "archive", commit, "src"], capture_output=True, check=False)
    if archive.returncode:
        raise SystemExit(f"fidelity: git archive {commit} failed in {repo}: {archive.stderr.decode().strip()}")
    tar = into / "today.tar"
    tar.write_bytes(archive.stdout)
    with tarfile.open(tar) as t:
        if hasattr(tarfile, "data_filter"):  # Python ≥ 3.11.4
            t.extractall(into, filter="data")
        else:
            t.extractall(into)
    src = into / "src"
    if (src / "recollect").is_dir() and not (src / "lossless").exists():
        (src / "lossless").symlink_to("recollect")  # a commit from before the rename: the same package
    return src


def _python(least: tuple[int, int]) -> str | None:
    """An interpreter ≥ ``least`` for a peer's venv: this one when it is new enough, else a
    Python 3.12 or 3.13 on PATH or in pyenv's folders."""
    if sys.version_info >= least:
        return sys.executable
    for name in ("python3.13", "python3.12"):
        found = shutil.which(name)
        if found and subprocess.run([found, "-c", "1"], capture_output=True, check=False).returncode == 0:
            return found
    for version in ("3.12", "3.13"):  # pyenv's own folders, when its shims are not on PATH
        pyenv = sorted(Path.home().glob(f".pyenv/versions/{version}*/bin/python3"))
        if pyenv:
            return str(pyenv[-1])
    return None


def ensure_peer(venv: Path = PEER_VENV, peer: str = "openhands") -> tuple[str | None, str]:
    """The venv's python for ``peer`` (a key of ``PEERS``), made and filled with its package
    on first use; or None and why."""
    spec = PEERS[peer]
    python = venv / "bin" / "python"
    probe = [str(python), "-c", spec["probe"]]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENHANDS_SUPPRESS_BANNER": "1"}
    if python.exists() and subprocess.run(probe, capture_output=True, check=False, env=env).returncode == 0:
        return str(python), "reused"
    least = spec["python"]
    base = _python(least)
    if base is None:
        return None, (f"no Python ≥ {least[0]}.{least[1]} found ({spec['package']} needs it): "
                      "install one or pass --no-peer")
    print(f"fidelity: making the peer venv {venv} ({spec['package']}) once", file=sys.stderr, flush=True)
    steps = [[base, "-m", "venv", str(venv)], [str(python), "-m", "pip", "install", "-q", spec["package"]], probe]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False, env=env)
        if done.returncode:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return None, f"{' '.join(step[:4])} failed: {tail}"
    return str(python), "made"


def run_job(job: dict[str, Any], pythonpath: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    proc = subprocess.run([sys.executable, str(WORKER)], input=json.dumps(job), capture_output=True,
                          text=True, env=env, check=False)
    if proc.returncode or not proc.stdout.strip():
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {**job, "error": f"worker exited {proc.returncode}: {tail}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_all(jobs: list[dict[str, Any]], paths: dict[str, Path], workers: int) -> list[dict[str, Any]]:
    """Run every job (largest sessions first), at most ``workers`` at a time; progress on stderr."""
    done: list[dict[str, Any]] = []
    started = time.perf_counter()

    def one(job: dict[str, Any]) -> dict[str, Any]:
        version = "today" if job["policy"].startswith("today") else "new"
        row = run_job(job, paths[version])
        done.append(row)
        note = f" ERROR {row['error']}" if "error" in row else f" {row.get('seconds', 0):.1f}s"
        print(f"[{len(done)}/{len(jobs)} {time.perf_counter() - started:5.0f}s] {job['policy']:17} "
              f"{job['window']:>6} {job['source']['name']}{note}", file=sys.stderr, flush=True)
        return row

    with ThreadPoolExecutor(max_workers=max(1, min(workers, 2))) as pool:
        return list(pool.map(one, jobs))


def config_fields(src: Path) -> set[str]:
    code = "import dataclasses, json, lossless.config as c; print(json.dumps([f.name for f in dataclasses.fields(c.ContextConfig)]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(src)})
    return set(json.loads(out.stdout))


def frontier_points(known: set[str], sweep: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    knobs = {k: tuple(v) for k, v in sweep.items() if k in known}
    skipped = [k for k in sweep if k not in known]
    return [dict(zip(knobs, values)) for values in itertools.product(*knobs.values())], skipped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--windows", default=None, help="comma-separated windows (default 32000,64000,128000)")
    ap.add_argument("--policies", default=",".join(DEFAULT_POLICIES),
                    help=f"comma-separated, of: {', '.join(POLICIES)}")
    ap.add_argument("--peer", action=argparse.BooleanOptionalAction, default=True,
                    help="run the peers, OpenHands' condenser ('openhands') and LangChain's summarization "
                         "middleware ('langchain'), each in its own venv made once and reused")
    ap.add_argument("--quick", action="store_true", help="2 CC sessions, 3 mini-swe runs, 1 synthetic, 1 window")
    ap.add_argument("--frontier", action="store_true", help="sweep FRONTIER_KNOBS on the working tree")
    ap.add_argument("--knobs", type=json.loads, default=None, metavar="JSON",
                    help='what --frontier sweeps instead of FRONTIER_KNOBS, e.g. \'{"tail_fraction": [0.05, 0.25]}\'')
    ap.add_argument("--frontier-policy", default=FRONTIER_POLICY, choices=("new", "new+model"),
                    help=f"the policy --frontier sweeps (default {FRONTIER_POLICY})")
    ap.add_argument("--json", action="store_true", help="print the per-job rows as JSON")
    ap.add_argument("--load", type=Path, help="render the tables of an earlier --json output; run nothing")
    ap.add_argument("--jobs", type=int, default=2, help="parallel workers (at most 2)")
    ap.add_argument("--today", default=TODAY, help=f"the commit whose default is 'today' (default {TODAY})")
    ap.add_argument("--make-peers", action="store_true",
                    help="make (or reuse) each peer's venv, say how it went, and run nothing else")
    args = ap.parse_args(argv)
    if args.make_peers:
        return make_peers()
    if args.load:
        return _render_saved(args.load, args.frontier)
    if not (args.data / "claude-code").is_dir() and not (args.data / "mini-swe-agent").is_dir():
        print(f"fidelity: no data in {args.data} (pass --data DIR)", file=sys.stderr)
        return 2
    srcs = sources(args.data, args.quick)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = sorted(set(policies) - set(POLICIES))
    if unknown:
        print(f"fidelity: unknown policy {unknown[0]!r}; known: {', '.join(POLICIES)}", file=sys.stderr)
        return 2
    if not args.peer:
        policies = [p for p in policies if p not in PEERS]
    peers: dict[str, dict[str, str]] = {}
    for name in [p for p in policies if p in PEERS and not args.frontier]:
        python, why = ensure_peer(PEERS[name]["venv"], name)
        if python is None:
            print(f"fidelity: the {name} peer is skipped: {why}", file=sys.stderr)
            policies = [p for p in policies if p != name]
        else:
            peers[name] = {"peer_python": python, "peer_src": str(ROOT / "src")}
    default_windows = (WINDOWS[0],) if args.quick else ((FRONTIER_WINDOW,) if args.frontier else WINDOWS)
    windows = [int(w) for w in args.windows.split(",")] if args.windows else list(default_windows)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lossless-fidelity-today-") as tmp:
        paths = {"new": ROOT / "src"}
        if args.frontier:
            points, skipped = frontier_points(config_fields(paths["new"]), args.knobs or FRONTIER_KNOBS)
            jobs = [{"policy": args.frontier_policy, "source": s, "window": w, "samples": SAMPLES, "config": pt,
                     "point": k} for k, pt in enumerate(points) for w in windows for s in srcs]
        else:
            points, skipped = [], []
            if any(p.startswith("today") for p in policies):
                paths["today"] = extract_today(ROOT, args.today, Path(tmp))
            jobs = [{"policy": p, "source": s, "window": w, "samples": SAMPLES, **peers.get(p, {})}
                    for w in windows for s in srcs for p in policies]
        jobs.sort(key=lambda j: -_size(j["source"]))
        rows = run_all(jobs, paths, args.jobs)
    elapsed = time.perf_counter() - started
    if args.json:
        print(json.dumps(rows, indent=1))
    elif args.frontier:
        print(report.frontier(rows, points, skipped, args.frontier_policy))
    else:
        print(report.tables(rows, policies, windows))
    print(f"{len(rows)} jobs in {elapsed:.0f}s on {min(args.jobs, 2)} workers", file=sys.stderr)
    return 1 if any("error" in r for r in rows) else 0


def make_peers() -> int:
    """Each peer's venv made or reused (``ensure_peer``); 1 if one could not be made, with why."""
    failed = 0
    for name, spec in PEERS.items():
        started = time.perf_counter()
        python, why = ensure_peer(spec["venv"], name)
        failed += python is None
        said = f"{why} in {time.perf_counter() - started:.0f} s: {python}" if python else f"not made: {why}"
        print(f"fidelity: the {name} peer ({spec['package']}) {said}", file=sys.stderr)
    return 1 if failed else 0


def _render_saved(path: Path, frontier: bool) -> int:
    try:
        rows = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        print(f"fidelity: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    if frontier:
        points = [r["config"] for r in sorted(rows, key=lambda r: r["point"])]
        points = [p for k, p in enumerate(points) if p not in points[:k]]
        print(report.frontier(rows, points, [], rows[0]["policy"] if rows else FRONTIER_POLICY))
    else:
        policies = [p for p in POLICIES if any(r["policy"] == p for r in rows)]
        print(report.tables(rows, policies, sorted({r["window"] for r in rows})))
    return 0


def _size(source: dict[str, Any]) -> int:
    return os.path.getsize(source["file"]) if "file" in source else 3_000_000


if __name__ == "__main__":
    sys.exit(main())
