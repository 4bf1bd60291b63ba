"""Text helpers for accounts: fitting call lines to a budget, clipping, escaping.

Pure functions over strings; ``lossless.account`` renders with them.  Nothing here
drops a line silently: what does not fit is shortened (its handle kept) or folded into
a counted line that says where it is.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from .. import markers

_CLOSERS = ("</user-message", "</earlier-summary", markers.SUMMARY_CLOSE[:-1])


def fold_calls(lines: list[str], budget: int) -> list[str]:
    """The call lines within ``budget``: the newest whole, older ones shortened (their
    handle kept: still one recall away), the oldest folded into one line per tool."""
    return fold_calls_counted(lines, budget)[0]


def fold_calls_counted(lines: list[str], budget: int) -> tuple[list[str], int]:
    """``fold_calls``, and how many of the oldest lines went into its folded line (the rest are
    listed one by one, the last of what it returns standing for the last of ``lines``)."""
    total = sum(len(line) + 1 for line in lines)
    if total <= budget:
        return list(lines), 0
    full: list[str] = []
    used = 200  # room for the folded line
    for line in reversed(lines):  # the newest half of the budget: whole lines
        if used + len(line) + 1 > budget // 2:
            break
        full.append(line)
        used += len(line) + 1
    shortened: list[str] = []
    for line in reversed(lines[: len(lines) - len(full)]):
        line = short(line)
        if used + len(line) + 1 > budget:
            break
        shortened.append(line)
        used += len(line) + 1
    folded = lines[: len(lines) - len(full) - len(shortened)]
    if not folded:
        return [*shortened[::-1], *full[::-1]], 0
    tools: dict[str, int] = {}
    for line in folded:
        name = line[2:].split(" ", 1)[0] if line.startswith("- ") and not line.startswith("- (") else "earlier"
        tools[name] = tools.get(name, 0) + 1
    summary = ", ".join(f"{name} ×{n}" for name, n in sorted(tools.items(), key=lambda kv: -kv[1])[:8])
    head = (f"- ({len(folded)} older calls not listed one by one: {summary}; "
            f"their results are in the ranges' handles)")
    return [head, *shortened[::-1], *full[::-1]], len(folded)


@lru_cache(maxsize=8_192)  # the same old lines are shortened again on every compaction that carries them
def short(line: str, part: int = 60) -> str:
    """A call line with its target and outcome clipped; the tool and the handle stay."""
    body, sep, handle = line.rpartition(" · ")
    if not sep or not markers.HANDLE_RE.fullmatch(handle):
        body, handle = line, ""  # a short output: the range's handle holds it
    call, arrow, outcome = body.partition(" → ")
    if not arrow:
        return line
    return f"{middle(call, part + 10)} → {one_line(outcome, part)}" + (f" · {handle}" if handle else "")


def middle(text: str, limit: int) -> str:
    """``text`` on one line within ``limit``, cut in the middle: a path keeps its file name,
    a command its last words, and the tool name at the start stays."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    head = limit // 3
    return f"{flat[:head]}…{flat[len(flat) - (limit - head - 1):]}"


def newest_fit(items: list[str], budget: int, sep: int = 1) -> list[str]:
    kept: list[str] = []
    used = 0
    for item in reversed(items):
        if used + len(item) + sep > budget:
            break
        kept.append(item)
        used += len(item) + sep
    return kept[::-1]


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… {len(text) - limit:,} more characters — recall the range handle]"


def one_line(text: str, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def dedup_last(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.pop(item, None)
        seen[item] = None
    return list(seen)


def escape(text: str) -> str:
    for closer in _CLOSERS:
        text = text.replace(closer, "<\\/" + closer[2:])
    return text


def unescape(text: str) -> str:
    for closer in _CLOSERS:
        text = text.replace("<\\/" + closer[2:], closer)
    return text

