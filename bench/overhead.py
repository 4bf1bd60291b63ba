"""Per-turn cost of ``ContextManager.prepare`` in a live loop, beside the teaching loop and the floor.

    python bench/overhead.py [--sizes 100,1000,5000] [--turns 41] [--json]
    python bench/overhead.py --real [--data DIR] [--window 200000] [--profile N]

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
window.  Medians over ``--turns`` turns at each size, beside the mean, the p99 and the
maximum of the same turns; absolute times vary with the machine's load, the ratios measured
in the same turns do not much.

``--real``: every shared session played as a live agent would (its messages up to each
recorded call appended to one list of wire dicts, ``prepare`` on it, transcript on, the
store on disk), at ``--window`` with the session's unseen overhead (system prompt and tool
schemas, inferred from its first recorded usage) so the stages fire where they did.  Per
session: the median, mean, p99 and maximum ``prepare`` per turn, each beside the floor of
the same turns (``json.dumps`` of what was appended), and the share of the session's
``prepare`` time spent in the turns where a stage fired.  ``--profile N`` adds a profile of
those firing turns (all sessions), its N heaviest functions by cumulative time.

``--real --parts``: where a turn on which nothing fires spends its time.  The same turns (every
session, store on ``/dev/shm``, first turns and firing turns left out) replayed on managers with one
piece taken out at a time — no transcript, no stages, the token count replaced by ``len // 4`` — and
all three; each row is the mean CPU per turn (this thread's, the least of ``--repeat`` replays) beside
the floor's mean, so the difference between two rows is what that piece costs.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import io
import json
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if not any(p.endswith("/src") for p in sys.path):  # PYTHONPATH=<another tree>/src measures that tree
    sys.path.insert(0, str(ROOT / "src"))

from lossless import ContextManager  # noqa: E402
from lossless.dialects.anthropic import message_to_dict  # noqa: E402
from lossless.dialects.detect import read_any  # noqa: E402
from lossless.dialects.openai import to_openai  # noqa: E402
from lossless.inspect import infer_unseen_tokens  # noqa: E402
from lossless.tokens import ContentAwareEstimator, default_counter  # noqa: E402

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


def spread(times: list[float]) -> dict[str, float]:
    """Median, mean, p99 and maximum of per-turn seconds, in ms."""
    p99 = statistics.quantiles(times, n=100, method="inclusive")[98] if len(times) > 1 else times[0]
    return {"median_ms": round(statistics.median(times) * 1e3, 3), "mean_ms": round(statistics.fmean(times) * 1e3, 3),
            "p99_ms": round(p99 * 1e3, 3), "max_ms": round(max(times) * 1e3, 3)}


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
                         "vs_teaching": round(t / o, 2), "vs_floor": round(o / f, 1),
                         **{k: v for k, v in spread(ours).items() if k != "median_ms"},
                         "mean_vs_floor": round(statistics.fmean(ours) / statistics.fmean(floor), 1)})
        cm.close()
        bare.close()
    return rows


def wire_of(session: Any) -> list[Any]:
    if session.dialect == "anthropic":
        return [message_to_dict(m) for m in session.messages]
    return to_openai(list(session.messages))


def turns_of(path: Path) -> tuple[Any, list[Any], list[int], int]:
    """The session, its messages as wire dicts (recorded summaries dropped), the end of the
    request of each recorded call, and its unseen overhead (system prompt, tool schemas)."""
    session = read_any(path)
    keep = [i for i, m in enumerate(session.messages) if not m.meta.get("is_compact_summary")]
    position = {i: k for k, i in enumerate(keep)}  # a recorded call's index once summaries are dropped
    kept = [session.messages[i] for i in keep]
    wire = wire_of(type(session)(path=session.path, format=session.format, messages=tuple(kept)))
    if len(wire) != len(kept):
        raise RuntimeError(f"{path}: its messages do not map one to one onto wire messages")
    stops = sorted({position[c.index] for c in session.calls if position.get(c.index, 0) > 0}
                   or {i for i, m in enumerate(kept) if m.role == "assistant" and i > 0})
    return session, wire, stops, infer_unseen_tokens(session, default_counter())


def real_session(path: Path, window: int) -> tuple[dict[str, Any], list[bool]]:
    """One shared session as a live agent, each turn timed beside the floor (``json.dumps`` of
    what it appended, the least of three runs); the row, and which turns fired."""
    session, wire, stops, unseen = turns_of(path)
    times, cpu, floors, fired = [], [], [], []
    with tempfile.TemporaryDirectory() as store:
        cm = ContextManager(window=window, store=store, dialect=session.dialect, unseen_tokens=unseen,
                            session_id="bench-real")
        history: list[Any] = []
        for stop in stops:
            new = wire[len(history):stop]
            history.extend(new)
            floor = []
            for _ in range(3):  # the least of three: a turn's floor is tiny, one preemption would swamp it
                t0 = time.perf_counter()
                floor_turn(new)
                floor.append(time.perf_counter() - t0)
            c1, t1 = time.thread_time(), time.perf_counter()
            view = cm.prepare(history, system=session.system)
            t2, c2 = time.perf_counter(), time.thread_time()
            floors.append(min(floor))
            times.append(t2 - t1)
            cpu.append(c2 - c1)
            fired.append(any(e.fired for e in view.events))
        cm.close()
    firing = [t for t, f in zip(times, fired) if f]
    floor_mean = statistics.fmean(floors)
    row = {"session": path.name, "turns": len(times), "fired": len(firing), **spread(times),
           "floor_ms": round(floor_mean * 1e3, 4),
           "median_vs_floor": round(statistics.median(times) / statistics.median(floors), 1),
           "mean_vs_floor": round(statistics.fmean(times) / floor_mean, 1),
           "cpu_mean_ms": round(statistics.fmean(cpu) * 1e3, 3), "cpu_p99_ms": spread(cpu)["p99_ms"],
           "firing_share": round(sum(firing) / sum(times), 3),
           "firing_mean_ms": round(statistics.fmean(firing) * 1e3, 2) if firing else 0.0}
    return row, fired


def profile_firing(path: Path, window: int, fired: list[bool], merged: pstats.Stats | None) -> pstats.Stats | None:
    """The session's turns again on a new manager (not timed), each turn that fired profiled and
    added to ``merged``: where a firing turn's time goes."""
    session, wire, stops, unseen = turns_of(path)
    with tempfile.TemporaryDirectory() as store:
        cm = ContextManager(window=window, store=store, dialect=session.dialect, unseen_tokens=unseen,
                            session_id="bench-profile")
        history: list[Any] = []
        for stop, fires in zip(stops, fired):
            history.extend(wire[len(history):stop])
            if not fires:
                cm.prepare(history, system=session.system)
                continue
            probe = cProfile.Profile()
            probe.enable()
            cm.prepare(history, system=session.system)
            probe.disable()
            merged = pstats.Stats(probe) if merged is None else merged.add(probe)
        cm.close()
    return merged


def real(data: Path, window: int, profile_top: int) -> int:
    paths = sorted((data / "claude-code").glob("*.jsonl")) + sorted((data / "mini-swe-agent").glob("*.traj.json"))
    if not paths:
        print(f"no sessions under {data} (pass --data DIR)", file=sys.stderr)
        return 2
    rows, profile = [], None
    for path in paths:
        row, fired = real_session(path, window)
        rows.append(row)
        if profile_top:
            profile = profile_firing(path, window, fired, profile)
    print(f"each shared session as a live agent at a {window:,}-token window; prepare() per turn, ms; "
          "floor = json.dumps of what the turn appended (its mean)")
    print("(cpu: the same turns in this thread's CPU time, without the waits a loaded machine adds; "
          "firing share: of the wall time)")
    print(f"{'session':34} {'turns':>5} {'fired':>5} {'median':>7} {'mean':>7} {'p99':>7} {'max':>7} {'cpu mean':>8} "
          f"{'cpu p99':>7} {'floor':>7} {'median/floor':>12} {'mean/floor':>10} {'firing share':>12}")
    for r in rows:
        print(f"{r['session'][:34]:34} {r['turns']:>5} {r['fired']:>5} {r['median_ms']:>7.2f} {r['mean_ms']:>7.2f} "
              f"{r['p99_ms']:>7.2f} {r['max_ms']:>7.2f} {r['cpu_mean_ms']:>8.2f} {r['cpu_p99_ms']:>7.2f} "
              f"{r['floor_ms']:>7.3f} {r['median_vs_floor']:>11.1f}× {r['mean_vs_floor']:>9.1f}× {r['firing_share']:>11.0%}")
    means = [r["mean_vs_floor"] for r in rows]
    print(f"mean/floor {min(means):.1f}–{max(means):.1f}× per session; median/floor "
          f"{min(r['median_vs_floor'] for r in rows):.1f}–{max(r['median_vs_floor'] for r in rows):.1f}×; p99 "
          f"{min(r['p99_ms'] for r in rows):.1f}–{max(r['p99_ms'] for r in rows):.1f} ms; max "
          f"{max(r['max_ms'] for r in rows):.1f} ms; cpu p99 {min(r['cpu_p99_ms'] for r in rows):.1f}–"
          f"{max(r['cpu_p99_ms'] for r in rows):.1f} ms; {sum(r['fired'] for r in rows)} firing turns of "
          f"{sum(r['turns'] for r in rows)}")
    if profile is not None:
        out = io.StringIO()
        profile.stream = out  # type: ignore[attr-defined]
        profile.sort_stats("cumulative").print_stats(profile_top)
        print("\nprofile of the firing turns (all sessions), by cumulative time:")
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip()))
    return 0


class LengthCounter(ContentAwareEstimator):
    """The estimator with its text count replaced by ``len // 4``: what counting costs, taken out."""

    def count_text(self, text: str) -> int:
        return len(text) // 4 + 1 if text else 0


def parts(data: Path, window: int, repeat: int) -> int:
    """Mean CPU per non-firing turn with pieces of ``prepare`` taken out (see the docstring)."""
    paths = sorted((data / "claude-code").glob("*.jsonl")) + sorted((data / "mini-swe-agent").glob("*.traj.json"))
    sessions = [turns_of(p) for p in paths]
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None

    def replay(**kw: Any) -> tuple[float, float, int]:
        cpu = floor = 0.0
        turns = 0
        for session, wire, stops, unseen in sessions:
            with tempfile.TemporaryDirectory(dir=base) as store:
                cm = ContextManager(window=window, store=store, dialect=session.dialect, unseen_tokens=unseen,
                                    session_id="bench-parts", **kw)
                history: list[Any] = []
                for k, stop in enumerate(stops):
                    new = wire[len(history):stop]
                    history.extend(new)
                    least = []
                    for _ in range(3):
                        t0 = time.perf_counter()
                        floor_turn(new)
                        least.append(time.perf_counter() - t0)
                    c0 = time.thread_time()
                    view = cm.prepare(history, system=session.system)
                    c1 = time.thread_time()
                    if k and not any(e.fired for e in view.events):
                        cpu, floor, turns = cpu + c1 - c0, floor + min(least), turns + 1
                cm.close()
        return cpu, floor, turns

    rows = [("prepare", {}), ("no transcript", {"transcript": False}), ("no stages", {"stages": ()}),
            ("count = len // 4", {"counter": LengthCounter()}),
            ("none of the three", {"transcript": False, "stages": (), "counter": LengthCounter()})]
    print(f"non-firing turns at a {window:,}-token window, every shared session; mean CPU per turn, the least of "
          f"{repeat} replays; floor = json.dumps of what the turn appended (its mean)")
    print(f"{'what runs':24} {'turns':>6} {'cpu, us':>8} {'floor, us':>9} {'/floor':>7}")
    for label, kw in rows:
        best = min((replay(**kw) for _ in range(repeat)), key=lambda r: r[0])
        cpu, floor, turns = best
        print(f"{label:24} {turns:>6} {cpu / turns * 1e6:>8.1f} {floor / turns * 1e6:>9.2f} {cpu / floor:>6.1f}×")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--turns", type=int, default=41)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--real", action="store_true", help="every shared session as a live agent (see the docstring)")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--window", type=int, default=200_000)
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    ap.add_argument("--parts", action="store_true", help="with --real: what a non-firing turn spends, piece by piece")
    ap.add_argument("--repeat", type=int, default=3, help="with --parts: replays of each row, the least kept")
    args = ap.parse_args()
    if args.real and args.parts:
        return parts(args.data, args.window, args.repeat)
    if args.real:
        return real(args.data, args.window, args.profile)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = measure(100_000_000, sizes, args.turns) + measure(200_000, sizes, args.turns)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("per-turn median, ms; teaching = the teaching loop's own per-turn work (its list snipped to ~51);")
    print("floor = json.dumps of the new round once; teaching/lossless > 1 means lossless is faster;")
    print("mean, p99, max: lossless's turns at that size (the mean beside the floor's mean)")
    print(f"{'window':>11} {'messages':>8} {'sent':>5} {'lossless':>10} {'no transcript':>13} {'teaching':>9} "
          f"{'sent':>5} {'floor':>7} {'teaching/lossless':>19} {'lossless/floor':>16} {'mean':>7} {'p99':>7} {'max':>7} "
          f"{'mean/floor':>10}")
    for r in rows:
        print(f"{r['window']:>11,} {r['messages']:>8} {r['sent']:>5} {r['prepare_ms']:>10.3f} {r['no_transcript_ms']:>13.3f} "
              f"{r['teaching_ms']:>9.3f} {r['teaching_sent']:>5} {r['floor_ms']:>7.4f} {r['vs_teaching']:>18.2f}× "
              f"{r['vs_floor']:>15.1f}× {r['mean_ms']:>7.3f} {r['p99_ms']:>7.3f} {r['max_ms']:>7.3f} {r['mean_vs_floor']:>9.1f}×")
    flat = [r for r in rows if r["window"] == 100_000_000]
    if len(flat) > 1:
        a, b = flat[0], flat[-1]
        print(f"per-turn cost growth {a['messages']}→{b['messages']} messages: lossless ×{b['prepare_ms'] / a['prepare_ms']:.1f}, "
              f"teaching ×{b['teaching_ms'] / a['teaching_ms']:.1f}, floor ×{b['floor_ms'] / a['floor_ms']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
