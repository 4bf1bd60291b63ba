"""A replay in a terminal: a small chart of context tokens per call, and the per-call table.

The chart is plain text (block characters), so it reads the same with or without
rich and survives being pasted into an issue.  Calls are grouped into columns when
there are more calls than columns; a column shows the largest call of its group.
"""

from __future__ import annotations

from typing import Any, Sequence

MANAGED, UNMANAGED, WINDOW, THRESHOLD, FIRED = "█", "░", "═", "┄", "▲"


def _short(n: float) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1_000:
        return f"{n / 1_000:.0f}k"
    return f"{n:.0f}"


def _columns(per_call: Sequence[Any], width: int) -> list[list[Any]]:
    n = len(per_call)
    cols = min(n, width)
    return [list(per_call[i * n // cols:(i + 1) * n // cols]) for i in range(cols)]


def terminal_chart(report: Any, *, width: int = 60, height: int = 8) -> list[str]:
    """Lines of a chart of ``report.per_call``: managed (█) under unmanaged (░) tokens,
    the window (═) and the auto-compact threshold (┄) as lines, ▲ under a column where
    a stage fired.  Empty when the replay had no call."""
    if not report.per_call:
        return []
    columns = _columns(report.per_call, max(1, width))
    managed = [max(c.tokens_managed for c in col) for col in columns]
    unmanaged = [max(c.tokens_unmanaged for c in col) for col in columns]
    top = max(report.window, *unmanaged, *managed, 1)
    step = top / height

    def row_of(value: int) -> int:  # the row (0 = bottom) whose band holds ``value``
        return min(height - 1, max(0, int(value / step - 1e-9)))

    lines = [f"tokens per call ({MANAGED} managed, {UNMANAGED} unmanaged, {WINDOW} window {report.window:,}, "
             f"{THRESHOLD} auto-compact threshold {report.threshold:,}, {FIRED} a stage fired)"]
    label_width = len(_short(top))
    for r in range(height - 1, -1, -1):
        low = r * step
        cells = []
        for m, u in zip(managed, unmanaged):
            if m > low:
                cells.append(MANAGED)
            elif u > low:
                cells.append(UNMANAGED)
            elif report.window and row_of(report.window) == r:
                cells.append(WINDOW)
            elif report.threshold and row_of(report.threshold) == r:
                cells.append(THRESHOLD)
            else:
                cells.append(" ")
        label = _short(report.window) if r == row_of(report.window) else _short(top) if r == height - 1 else ""
        lines.append(f"{label:>{label_width}} ┤{''.join(cells)}")
    marks = "".join(FIRED if any(c.stages for c in col) else "─" for col in columns)
    lines.append(f"{'0':>{label_width}} └{marks}")
    first, last = report.per_call[0].call + 1, report.per_call[-1].call + 1
    span, end = f"call {first}", f"call {last}"
    gap = max(len(columns) - len(span) - len(end), 1)
    lines.append(f"{'':>{label_width}}  {span}{' ' * gap}{end}" if last != first else f"{'':>{label_width}}  {span}")
    return lines


def per_call_rows(report: Any) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """Headers and rows of the per-call table: tokens unmanaged and managed (and recorded,
    when the file has usage), cumulative costs in base-input-token units, stages fired."""
    recorded = any(c.recorded_tokens for c in report.per_call)
    headers = ("call", "msgs", "unmanaged", "managed", *(("recorded",) if recorded else ()), "cost unm.",
               "cost man.", "fired")
    rows = [
        (str(c.call + 1), str(c.messages_in), f"{c.tokens_unmanaged:,}", f"{c.tokens_managed:,}",
         *((f"{c.recorded_tokens:,}",) if recorded else ()), f"{c.cost_unmanaged:,.0f}", f"{c.cost_managed:,.0f}",
         ", ".join(c.stages) + ("" if c.valid else " INVALID"))
        for c in report.per_call
    ]
    return headers, rows

GLYPHS = {"free": "·", "auto-compact buffer": "-", "reserved for the answer": "="}
USED_GLYPHS = "█▓▒#@%&*+~"
COLOURS = {
    "system prompt": "grey62", "tool schemas": "grey50", "unseen system prompt and tools": "grey42",
    "memory": "magenta", "summaries": "yellow", "user messages": "green", "assistant text": "blue",
    "thinking": "cyan", "tool calls": "bright_blue", "tool results": "red", "images": "bright_magenta", "other blocks": "white",
    "free": "grey35", "auto-compact buffer": "dark_orange", "reserved for the answer": "grey27",
}
"""The terminal colour of each category of ``inspect``'s bar (the glyphs tell them apart without colour)."""


def window_bar(categories: Sequence[dict[str, Any]], *, width: int = 60) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The window split by category in ``width`` cells (largest remainder, so the cells
    add up): ``(cells, colour)`` segments in order, and the glyph of each category.
    Categories in use get the dense glyphs, in order; free room, the auto-compact buffer
    and the answer's reserve get light ones."""
    total = sum(c["tokens"] for c in categories) or 1
    exact = [c["tokens"] * width / total for c in categories]
    cells = [int(x) for x in exact]
    for i in sorted(range(len(exact)), key=lambda i: exact[i] - cells[i], reverse=True)[: width - sum(cells)]:
        cells[i] += 1
    glyphs, used = {}, iter(USED_GLYPHS * 2)
    for c in categories:
        glyphs[c["name"]] = GLYPHS.get(c["name"]) or next(used)
    segments = [(glyphs[c["name"]] * n, COLOURS.get(c["name"], "")) for c, n in zip(categories, cells) if n]
    return segments, glyphs
