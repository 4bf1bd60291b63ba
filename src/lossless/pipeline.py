"""The pipeline: an ordered tuple of stages, cheapest first.

Adding a stage is adding a module under ``stages/`` and a line here.  The order
is by what the model keeps in hand: persist (nothing: a big result moves to the
store, a preview stays) → echo (nothing: a new result's lines that an earlier one in
context shows are pointed at there) → snip (the oldest middle rounds, down to 65 % of the
threshold; the recent rounds stay verbatim and an account maps what left) →
micro-compact (old tool *outputs*, only when removing whole rounds was not enough)
→ summary (everything before a verbatim tail; an account stays).  Persist comes
first so a big result's full text is stored before anything replaces it.  Each stage decides in O(1) whether to act, from the running token
count, so a turn on which nothing fires costs nothing but the count itself.
"""

from __future__ import annotations

from typing import Sequence

from .messages import Message
from .stages.base import Stage, StageContext, StageResult
from .stages.echo import echo, restore
from .stages.microcompact import microcompact
from .stages.persist import persist
from .stages.snip import snip
from .stages.summary import fallback_summary

DEFAULT_STAGES: tuple[tuple[str, Stage], ...] = (
    ("persist", persist),
    ("echo", echo),
    ("snip", snip),
    ("microcompact", microcompact),
    ("summary", fallback_summary),
)


def run(
    messages: Sequence[Message],
    ctx: StageContext,
    tokens: int,
    stages: Sequence[tuple[str, Stage]] = DEFAULT_STAGES,
) -> tuple[list[Message], list[StageResult]]:
    """Run every stage in order; each sees the previous one's output and count."""
    current = messages if isinstance(messages, list) else list(messages)
    results: list[StageResult] = []
    for _name, stage in stages:
        current, result = stage(current, ctx, tokens)
        results.append(result)
        tokens = result.tokens_after
    if any(r.fired and (r.kept_before < ctx.fresh_from or ctx.fresh_from == 0) for r in results):
        # Something before the new messages moved (micro-compact, a summary; a snip puts each echo
        # back whole before it folds, but one its own call's input covers): an echo whose lines left
        # gets them back while there is room.
        back, added = restore(current, ctx, lost_only=True)
        if added and tokens + added <= ctx.budget.threshold:
            current = back
            results.append(StageResult(stage="echo", fired=True, tokens_before=tokens, tokens_after=tokens + added,
                                       detail="put back whole the echoed results whose lines left the context"))
    return current, results
