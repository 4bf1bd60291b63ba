"""Facts of a real session, drawn uniformly at random from the lines of what the model read.

    facts = sample_facts(messages, seed=1, k=120)

A candidate is a line of a tool output, or of a user message (mini-swe-agent's observations
are user messages: they count as outputs), once line-number prefixes, system reminders and
bare tags are removed (``_fidelity_metrics.meaningful_lines``), whitespace-normalised, at least
``MIN_CHARS`` long, mostly letters and digits, and *rare*: its text occurs exactly once in
the whole session, so finding it in the context means the message (or a verbatim quote of
it) is there.  Lines longer than ``MAX_CHARS`` are cut at a word boundary.  Every candidate
— head, middle or tail of its output — has the same chance: the candidates are shuffled
with ``random.Random(seed)`` and the first ``k`` rare ones kept, in session order.

Each fact's ``kind`` is ``<position>:<source>``: position ``head``/``middle``/``tail`` by the
line's place in its output (first third, middle third, last third of its meaningful lines),
source ``result`` (tool output) or ``user`` (what a person wrote).  Nothing here imports
lossless.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import _fidelity_metrics as fm

MIN_CHARS = 20
MAX_CHARS = 120
PER_SESSION = 120
POSITIONS = ("head", "middle", "tail")


def position(k: int, n: int) -> str:
    """``head``/``middle``/``tail`` of line ``k`` among ``n``: thirds of the output."""
    return POSITIONS[min(2, 3 * k // max(n, 1))]


def distinctive(line: str) -> bool:
    """A line worth asking for: long enough, mostly letters and digits, not one repeated char."""
    if len(line) < MIN_CHARS or len(set(line)) < 8:
        return False
    return sum(c.isalnum() for c in line) >= 0.5 * len(line.replace(" ", ""))


def cut(line: str) -> str:
    if len(line) <= MAX_CHARS:
        return line
    head = line[:MAX_CHARS]
    space = head.rfind(" ")
    return head[:space] if space >= MIN_CHARS else head


def _outputs(messages: Sequence[Any]) -> list[tuple[int, str, str]]:
    """(message index, source, text) of every tool output and user text."""
    out = []
    for i, m in enumerate(messages):
        for b in m.content:
            if b.type == "tool_result":
                out.append((i, "result", fm.result_text(b)))
            elif b.type == "text" and m.role == "user":
                observation = b.text.lstrip().startswith(("<returncode>", "<output"))
                out.append((i, "result" if observation else "user", b.text))
    return out


def candidates(messages: Sequence[Any]) -> list[fm.Fact]:
    """Every distinctive line of every output, each once (its first occurrence)."""
    seen: set[str] = set()
    out: list[fm.Fact] = []
    for i, source, text in _outputs(messages):
        lines = fm.meaningful_lines(text)
        for k, raw in enumerate(lines):
            line = cut(fm.norm(raw))
            if distinctive(line) and line not in seen:
                seen.add(line)
                out.append(fm.Fact(line, f"{position(k, len(lines))}:{source}", i))
    return out


def sample_facts(messages: Sequence[Any], *, seed: int = 1, k: int = PER_SESSION) -> list[fm.Fact]:
    """Up to ``k`` rare candidates drawn uniformly at random (see the module docstring)."""
    pool = candidates(messages)
    flat = fm.norm(fm.context_text(messages))
    order = list(range(len(pool)))
    random.Random(seed).shuffle(order)
    chosen: list[int] = []
    for j in order:
        if flat.count(pool[j].text) == 1:
            chosen.append(j)
            if len(chosen) == k:
                break
    return [pool[j] for j in sorted(chosen)]
