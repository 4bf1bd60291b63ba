"""The state in view: one status line per model call, one notice per stage that fired.

    status_line(view.state)    # "context 9,412/16,000 tokens · 41.2% left · warning"
    notices(view.fired)        # ["microcompact: cleared 4 old results … (handle sha256:…)"]

The state names follow the seeds' budget (``config.Budget``): ``ok`` below the warning
line, ``warning`` from it (the error state of the seeds starts at the same line, so it is
not shown apart), ``error`` at or above the auto-compact threshold (a compaction is due
and did not bring the request under it), ``blocking`` above the blocking limit (the
request is refused rather than sent).
"""

from __future__ import annotations

from typing import Literal, Sequence

from ..stages.base import StageResult
from ..view import ContextState

State = Literal["ok", "warning", "error", "blocking"]


def state_name(state: ContextState) -> State:
    if state.blocking:
        return "blocking"
    if state.above_threshold:
        return "error"
    if state.above_warning or state.above_error:
        return "warning"
    return "ok"


def status_line(state: ContextState) -> str:
    used = 100 - state.percent_left
    return (f"context {state.tokens:,}/{state.window:,} tokens ({used:.0f}% used, {state.percent_left:.1f}% left) "
            f"· auto-compact at {state.threshold:,} · {state_name(state)}")


def notices(events: Sequence[StageResult]) -> list[str]:
    """One line per stage that fired: what it moved and the handle that brings it back."""
    lines = []
    for e in events:
        if not e.fired:
            continue
        handles = e.handles or e.items
        where = ""
        if handles:
            more = f" (+{len(handles) - 1} more)" if len(handles) > 1 else ""
            where = f" · recall {handles[0]}{more}"
        # A /compact or the model's compact call runs the auto-compactor: say which it was.
        stage = "compact" if (e.boundary or {}).get("trigger") == "manual" else e.stage
        lines.append(f"{stage}: {e.tokens_before:,} → {e.tokens_after:,} tokens · {_clip(e.detail)}{where}")
    return lines


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
