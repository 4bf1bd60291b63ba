"""What the end of a live loop is made of: the final context split into its parts, and the facts in each.

    python bench/anatomy.py [--data DIR] [--window 32000]

Each real session of ``--data`` (Claude Code and mini-swe-agent) is played as ``bench/fidelity.py``'s
live loop plays lossless (the ``new`` policy, the same facts), and its final context is split at the
account: the pinned head before it (the task and the first rounds), the account itself (the map of what
left), and the rounds after it, verbatim.  Per part, summed over the sessions: tokens, the facts found in
it, and tokens per fact — which part of the budget holds what the bench counts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import _fidelity_metrics as fm  # noqa: E402
from _fidelity_policies import make_policy  # noqa: E402
from _fidelity_worker import load, timestamp  # noqa: E402

PARTS = ("head", "account", "recent")
KINDS = ("tool output", "tool input", "assistant text", "user text", "other")
"""What the verbatim rounds after the account are made of, by who wrote it and how."""


def _kind(role: str, block) -> str:
    kind = block.type
    if kind == "tool_result":
        return "tool output"
    if kind == "tool_use":
        return "tool input"
    if kind == "text":
        return "assistant text" if role == "assistant" else "user text"
    return "other"


def parts(path: Path, window: int, kinds: dict[str, list[int]] | None = None) -> dict[str, list[int]]:
    """``{part: [tokens, facts]}`` of the final context of ``path``'s live loop at ``window``; the recent
    rounds' tokens and facts by block kind are added into ``kinds`` when given."""
    from lossless.tokens import default_counter

    s = load({"file": str(path)})
    messages, system, stops, facts = s["messages"], s["system"], s["stops"], s["facts"]
    out = {p: [0, 0] for p in PARTS}
    if not stops:
        return out
    counter = default_counter()
    with tempfile.TemporaryDirectory(prefix="lossless-anatomy-") as store:
        policy = make_policy({"policy": "new", "window": window}, store, counter, counter.count_system(system),
                             messages)
        history: list = []
        taken = 0
        for stop in stops:
            new = messages[taken:stop]
            taken = stop
            history = policy.prepare(history + new, new, system,
                                     timestamp(messages[stop]) if stop < len(messages) else None)
        policy.close()
    live = [f for f in facts if f.entered < stops[-1]]
    at = next((i for i, m in enumerate(history) if any(
        b.type == "text" and b.text.lstrip().startswith(fm.ACCOUNT_PREFIXES) for b in m.content)), None)
    for i, m in enumerate(history):
        part = "recent" if at is None or i > at else "account" if i == at else "head"
        out[part][0] += counter.count_message(m)
        out[part][1] += sum(fm.present(live, fm.context_text([m])))
        if part == "recent" and kinds is not None:
            from lossless.messages import Message
            for b in m.content:
                one = Message(role=m.role, content=(b,))
                k = kinds.setdefault(_kind(m.role, b), [0, 0])
                k[0] += counter.count_block(b)
                k[1] += sum(fm.present(live, fm.context_text([one])))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--window", type=int, default=32_000)
    args = ap.parse_args()
    paths = sorted((args.data / "claude-code").glob("*.jsonl")) + sorted((args.data / "mini-swe-agent").glob("*.traj.json"))
    if not paths:
        print(f"bench/anatomy.py: no sessions under {args.data} (pass --data)", file=sys.stderr)
        return 2
    total = {p: [0, 0] for p in PARTS}
    kinds: dict[str, list[int]] = {}
    for path in paths:
        for part, (tokens, found) in parts(path, args.window, kinds).items():
            total[part][0] += tokens
            total[part][1] += found
    print(f"the final context of each live loop at {args.window:,} tokens, {len(paths)} sessions")
    print("| part | tokens | facts in it | tokens per fact |")
    print("|---|---:|---:|---:|")
    for part, (tokens, found) in total.items():
        print(f"| {part} | {tokens:,} | {found:,} | {tokens / found:,.0f} |" if found else f"| {part} | {tokens:,} | 0 | – |")
    print()
    print("| the recent rounds, by block | tokens | facts in it | tokens per fact |")
    print("|---|---:|---:|---:|")
    for kind in KINDS:
        tokens, found = kinds.get(kind, [0, 0])
        print(f"| {kind} | {tokens:,} | {found:,} | {tokens / found:,.0f} |" if found else f"| {kind} | {tokens:,} | 0 | – |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
