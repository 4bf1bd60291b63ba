"""The state in view: one status line per model call, one notice per stage that fired.

    status_line(view.state)    # "context 9,412/16,000 tokens · 59% used · auto-compact at 10,800 · warning"
    notices(view.fired)        # ["microcompact: cleared 4 old results … (handle sha256:…)"]

The state names follow the seeds' budget (``config.Budget``): ``ok`` below the warning
line, ``warning`` from it (the error state of the seeds starts at the same line, so it is
not shown apart), ``error`` at or above the auto-compact threshold (a compaction is due
and did not bring the request under it), ``blocking`` above the blocking limit (the
request is refused rather than sent).
"""

from __future__ import annotations

import re
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
    """Each number once: the tokens in use of the window, the share used, where the
    auto-compaction starts, and the state's name."""
    used = 100 * state.tokens / state.window if state.window else 0.0
    return (f"context {state.tokens:,}/{state.window:,} tokens · {used:.0f}% used · "
            f"auto-compact at {state.threshold:,} · {state_name(state)}")


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
        lines.append(f"{stage}: {e.tokens_before:,} → {e.tokens_after:,} tokens · {tidy(e.detail)}{where}")
    return lines


_REPEATED = re.compile(r":? *\d[\d,]* → \d[\d,]* tokens(?: \([^)]*\))?")


def tidy(detail: str) -> str:
    """A stage's detail as the notice shows it: one line, its "N → M tokens" left out (the
    notice says it first), "(s)" and "1 messages" made plain English, "and 0 instruction
    files" left out."""
    text = _REPEATED.sub("", " ".join(detail.split()))
    text = re.sub(r"(,| and) 0 [\w ]+?\(s\)", "", text)
    text = re.sub(r"\b(\d[\d,]*) (\w+)\(s\)", lambda m: plural(int(m[1].replace(",", "")), m[2]), text)
    text = re.sub(r"\b1 (message|call|round|file|result|episode)s\b", r"1 \1", text)
    return text.strip(" ,;:")


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``plural(1, "call")`` → "1 call"; ``plural(3, "call")`` → "3 calls"; ``many`` for an irregular one."""
    return f"{n:,} {noun if n == 1 else (many or noun + 's')}"
