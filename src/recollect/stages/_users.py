"""Interim: the user's messages to quote in an account (replaced by the full version)."""

from __future__ import annotations

import json
from typing import Callable, Sequence


def quote_users(texts: Sequence[str], *, budget: int, task_budget: int,
                put: Callable[[str], str]) -> tuple[list[str], int]:
    if not texts:
        return [], 0
    first, rest = texts[0], list(texts[1:])
    if len(first) > task_budget:
        h = put(first)
        half = max(1, task_budget // 2)
        first = f"{first[:half]}\n[… {len(texts[0]) - 2 * half:,} characters omitted — recall {h}]\n{first[-half:]}"
    kept: list[str] = []
    used = 0
    for t in reversed(rest):
        if used + len(t) > budget:
            break
        kept.append(t)
        used += len(t)
    kept.reverse()
    hidden = rest[: len(rest) - len(kept)]
    out = [first]
    if hidden:
        out.append(f"[{len(hidden)} earlier user messages not shown — recall {put(json.dumps(hidden))}]")
    return out + kept, len(hidden)
