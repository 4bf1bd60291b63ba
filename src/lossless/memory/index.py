"""``MEMORY.md``: one line per memory, within 200 lines and 25 KB.

When the memories do not all fit, the *least recently used* are left out first
(recency = the later of ``updated`` and the last time the memory was used), and
a closing line says how many are not listed and how to see them.  The newest
memories are therefore never the ones silently dropped.

The listed lines are written in creation order, not recency order, so that
using a memory (which changes its recency) does not reorder the index: the
index sits in the system prompt and should change only when memories change.
"""

from __future__ import annotations

import bisect
from functools import lru_cache
from itertools import accumulate
from operator import itemgetter
from typing import Mapping, Sequence

from .model import Memory, parse_time

MAX_LINES = 200
MAX_BYTES = 25_000
MAX_DESCRIPTION = 200


def index_line(memory: Memory) -> str:
    desc = memory.description or memory.body.strip().split("\n", 1)[0]
    if len(desc) > MAX_DESCRIPTION:
        desc = desc[: MAX_DESCRIPTION - 1].rstrip() + "…"
    name = memory.name.replace("]", ")").replace("[", "(")[:MAX_DESCRIPTION // 2]
    return f"- [{name}]({memory.filename}) — {desc}" if desc else f"- [{name}]({memory.filename})"


def closing_line(omitted: int) -> str:
    noun = "memory is" if omitted == 1 else "memories are"
    return (
        f"- … {omitted} more {noun} not listed (the least recently used): "
        "run `lossless memory list` or view /memories to see every memory"
    )


def recency(memory: Memory, used: Mapping[str, float]) -> float:
    """When the memory was last written or used, in seconds since the epoch."""
    return max(parse_time(memory.updated), used.get(memory.id, 0.0))


Row = tuple[float, float, str, str, int]
"""A memory as the index sorts it: (recency, created, id, line, the line's size in bytes with its newline)."""


def index_rows(memories: Sequence[Memory], used: Mapping[str, float] | None = None) -> list[Row]:
    """The rows of the live memories among ``memories``, most recent first (what ``render_rows`` takes)."""
    used = used or {}
    return sorted((_row(recency(m, used), m) for m in memories if not m.superseded), key=_order)


def _row(recent: float, memory: Memory) -> Row:
    line = index_line(memory)
    return (recent, parse_time(memory.created), memory.id, line, len(line.encode("utf-8")) + 1)


def _order(row: Row) -> tuple[float, float, str]:
    return (-row[0], -row[1], row[2])


_created = itemgetter(1, 2)
"""A row's place in the file: by creation, then id."""


def with_row(rows: list[Row], memory: Memory, keep: int) -> list[Row]:
    """``rows`` with ``memory`` added (or replaced) in its place, at most ``keep`` of them: a store
    that added one memory updates its index rows without reading the others again."""
    kept = [r for r in rows if r[2] != memory.id] if memory.id in map(itemgetter(2), rows) else list(rows)
    if not memory.superseded:  # into its place in the sorted rows (the newest: at the front)
        row = _row(parse_time(memory.updated), memory)
        place = 0 if not kept or _order(row) <= _order(kept[0]) else bisect.bisect_left(kept, _order(row), key=_order)
        kept.insert(place, row)
    return kept[:keep]


def render_index(
    memories: Sequence[Memory],
    used: Mapping[str, float] | None = None,
    *,
    max_lines: int = MAX_LINES,
    max_bytes: int = MAX_BYTES,
    count: int | None = None,
) -> str:
    """The index text. Superseded memories are not listed (they stay on disk).

    ``count`` is the number of live memories when ``memories`` holds only the most
    recent of them (at least ``max_lines + 1``): the rest are counted in the closing line.

    Invariant: if a memory is left out, every listed memory is at least as recent.
    """
    return render_rows(index_rows(memories, used), max_lines=max_lines, max_bytes=max_bytes, count=count)


@lru_cache(maxsize=1024)
def _closing_size(omitted: int) -> int:
    return len(closing_line(omitted).encode("utf-8")) + 1


def render_rows(rows: Sequence[Row], *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES,
                count: int | None = None) -> str:
    """``render_index`` over rows already made and sorted (``index_rows``, ``with_row``)."""
    n = len(rows)
    unseen = max(0, (count if count is not None else n) - n)
    totals = list(accumulate(map(itemgetter(4), rows), initial=0))
    # The first k lines are listed for the largest k that fits with its closing line, among those
    # before the lines themselves pass a limit (``last``).
    last = min(n, max_lines, bisect.bisect_right(totals, max_bytes) - 1)
    keep = 0
    for k in range(last, -1, -1):
        omitted = n - k + unseen
        if k + (1 if omitted else 0) <= max_lines and totals[k] + (_closing_size(omitted) if omitted else 0) <= max_bytes:
            keep = k
            break
    out = [r[3] for r in sorted(rows[:keep], key=_created)]
    if keep < n + unseen:
        out.append(closing_line(n - keep + unseen))
    return "\n".join(out) + ("\n" if out else "")
