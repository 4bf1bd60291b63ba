"""First sight: one ``prepare()`` on a whole session lossless has never seen, beside the floor.

    python bench/first_sight.py [--data DIR] [--windows 32000,200000] [--repeat 3] [--dir DIR] [--json]

First sight is what the proxy pays on the first request of a long conversation, and what
``lossless compact``/a resumed agent pays on a long history: every stage that fires writes
its artifacts at once.  For each shared session and window, in one run, interleaved:

- ``floor``: parse the file (``read_any``) and serialise its messages (``json.dumps`` of the
  wire dicts) — the least any tool must do to look at the session;
- ``lossless``: a new ``ContextManager`` (transcript on, a new store under ``--dir``) and one
  ``prepare()`` of the whole session: the group commit (one batch, its fsyncs concurrent);
- ``per-file``: the same with an artifact store that syncs each artifact as it is written,
  one after the other (the store before the group commit: fsync, rename, next);
- ``tmpfs``: the group commit with the store on ``/dev/shm`` (no disk: what the stages cost).

Each run starts cold: what an earlier run in this process cached (the account's caches of
commands, conclusions and shortened lines, joined ranges) is forgotten first, so a repeat is
timed as a first sight too.  ``cpu/floor``: the same ``lossless`` runs in this
thread's CPU time beside the floor's (what is left when a loaded machine's preemption and the
disk's waits are taken out).  Medians of ``--repeat`` runs; ``fsyncs`` counts the ``os.fsync`` calls of one ``lossless``
run.  The store directory must be on the disk you care about (``--dir``; default: the
system's temporary directory).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import lossless.account  # noqa: E402
from lossless import ContextManager  # noqa: E402
from lossless.dialects.anthropic import message_to_dict  # noqa: E402
from lossless.dialects.detect import read_any  # noqa: E402
from lossless.dialects.openai import to_openai  # noqa: E402
from lossless.session import Session  # noqa: E402
from lossless.store import ArtifactStore, Staged  # noqa: E402

TMPFS = Path("/dev/shm")


class PerFileStore(ArtifactStore):
    """The store before the group commit: each artifact fsynced and renamed as it is written."""

    @contextmanager
    def batch(self) -> Iterator[None]:
        yield

    def _commit(self, staged: list[Staged]) -> None:
        for s in staged:
            assert s.tmp is not None and s.path is not None
            fd = os.open(s.tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(s.tmp, s.path)


def wire_of(session: Session) -> list[Any]:
    if session.dialect == "anthropic":
        return [message_to_dict(m) for m in session.messages]
    return to_openai(list(session.messages))


def floor(path: Path) -> tuple[float, float]:
    """Seconds of wall time and of this thread's CPU time."""
    c0, t0 = time.thread_time(), time.perf_counter()
    session = read_any(path)
    json.dumps(wire_of(session), ensure_ascii=False)
    return time.perf_counter() - t0, time.thread_time() - c0


FSYNCS = [0]
_fsync = os.fsync


def _counting_fsync(fd: int) -> None:
    FSYNCS[0] += 1
    _fsync(fd)


def cold() -> None:
    """Forget the caches an earlier run in this process filled: every ``functools`` cache of a
    lossless module, and the account's remembered joins of ranges."""
    for name, module in list(sys.modules.items()):
        if name == "lossless" or name.startswith("lossless."):
            for value in list(vars(module).values()):
                clear = getattr(value, "cache_clear", None)
                if callable(clear):
                    clear()
    getattr(lossless.account, "_JOINED", {}).clear()


def first_sight(session: Session, wire: list[Any], window: int, base: Path,
                make: Callable[[Path], ArtifactStore] | None) -> tuple[float, float, int, int]:
    """Seconds for a new manager's first ``prepare()`` of the whole session (wall, and this thread's
    CPU), fsyncs, artifacts."""
    store_dir = Path(tempfile.mkdtemp(dir=base, prefix="first-sight-"))
    try:
        cold()
        FSYNCS[0] = 0
        c0, t0 = time.thread_time(), time.perf_counter()
        store: Any = make(store_dir) if make is not None else str(store_dir)
        cm = ContextManager(window=window, store=store, dialect=session.dialect, session_id="first-sight")
        cm.prepare(wire, system=session.system)
        elapsed, cpu = time.perf_counter() - t0, time.thread_time() - c0
        cm.close()
        artifacts = store_dir / "artifacts"
        return elapsed, cpu, FSYNCS[0], len(os.listdir(artifacts)) if artifacts.is_dir() else 0
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)


def measure(paths: list[Path], windows: list[int], repeat: int, base: Path) -> list[dict[str, Any]]:
    os.fsync = _counting_fsync  # counted, not changed: the call goes through
    tmpfs = TMPFS if TMPFS.is_dir() and os.access(TMPFS, os.W_OK) else None
    rows = []
    for path in paths:
        session = read_any(path)
        wire = wire_of(session)
        for window in windows:
            f: list[float] = []
            fc: list[float] = []
            ours: list[float] = []
            oc: list[float] = []
            old: list[float] = []
            mem: list[float] = []
            fsyncs = artifacts = 0
            for _ in range(repeat):
                wall, cpu = floor(path)
                f.append(wall)
                fc.append(cpu)
                t, c, fsyncs, artifacts = first_sight(session, wire, window, base, None)
                ours.append(t)
                oc.append(c)
                old.append(first_sight(session, wire, window, base, PerFileStore)[0])
                if tmpfs is not None:
                    mem.append(first_sight(session, wire, window, tmpfs, None)[0])
            fl, o, p = statistics.median(f), statistics.median(ours), statistics.median(old)
            rows.append({"session": path.name, "messages": len(session.messages), "window": window,
                         "artifacts": artifacts, "fsyncs": fsyncs, "floor_ms": round(fl * 1e3, 2),
                         "lossless_ms": round(o * 1e3, 2), "per_file_ms": round(p * 1e3, 2),
                         "tmpfs_ms": round(statistics.median(mem) * 1e3, 2) if mem else None,
                         "vs_floor": round(o / fl, 1), "per_file_vs_floor": round(p / fl, 1),
                         "tmpfs_vs_floor": round(statistics.median(mem) / fl, 1) if mem else None,
                         "cpu_vs_floor": round(statistics.median(oc) / statistics.median(fc), 1)})
    os.fsync = _fsync
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--windows", default="32000,200000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    paths = sorted((args.data / "claude-code").glob("*.jsonl")) + sorted((args.data / "mini-swe-agent").glob("*.traj.json"))
    if not paths:
        print(f"no sessions under {args.data} (pass --data DIR)", file=sys.stderr)
        return 2
    rows = measure(paths, [int(w) for w in args.windows.split(",")], args.repeat, args.dir)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"first prepare() of a whole session, median of {args.repeat}, ms; store under {args.dir}")
    print(f"{'session':32} {'msgs':>5} {'window':>7} {'artifacts':>9} {'fsyncs':>6} {'floor':>7} {'lossless':>9} "
          f"{'/floor':>7} {'per-file':>9} {'/floor':>7} {'tmpfs':>7} {'/floor':>7} {'cpu/floor':>9}")
    for r in rows:
        tm = f"{r['tmpfs_ms']:>7.1f} {r['tmpfs_vs_floor']:>6.1f}×" if r["tmpfs_ms"] is not None else f"{'-':>7} {'-':>7}"
        print(f"{r['session'][:32]:32} {r['messages']:>5} {r['window']:>7} {r['artifacts']:>9} {r['fsyncs']:>6} "
              f"{r['floor_ms']:>7.1f} {r['lossless_ms']:>9.1f} {r['vs_floor']:>6.1f}× {r['per_file_ms']:>9.1f} "
              f"{r['per_file_vs_floor']:>6.1f}× {tm} {r['cpu_vs_floor']:>8.1f}×")
    for window in sorted({r["window"] for r in rows}):
        sel = [r for r in rows if r["window"] == window]
        worst = max(sel, key=lambda r: r["vs_floor"])
        total = sum(r["lossless_ms"] for r in sel), sum(r["per_file_ms"] for r in sel), sum(r["floor_ms"] for r in sel)
        print(f"window {window:,}: lossless/floor {min(r['vs_floor'] for r in sel):.1f}–{worst['vs_floor']:.1f}× "
              f"(worst {worst['session']}), per-file/floor {min(r['per_file_vs_floor'] for r in sel):.1f}–"
              f"{max(r['per_file_vs_floor'] for r in sel):.1f}×; all sessions: lossless {total[0]:,.0f} ms, "
              f"per-file {total[1]:,.0f} ms ({total[1] / total[0]:.2f}×), floor {total[2]:,.0f} ms; cpu/floor "
              f"{min(r['cpu_vs_floor'] for r in sel):.1f}–{max(r['cpu_vs_floor'] for r in sel):.1f}×, "
              f"{sum(r['cpu_vs_floor'] > 10 for r in sel)} of {len(sel)} sessions above 10×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
