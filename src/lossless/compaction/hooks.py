"""Pre- and post-compact hooks.

    hooks = Hooks(
        pre=(lambda messages, trigger: "Keep every database schema decision.",),
        post=(lambda result: log.info(result.detail),),
    )
    AutoCompactor(summarizer, ..., hooks=hooks)

A pre-compact hook receives the messages about to be summarised and the trigger
("auto", "manual", "reactive") and returns extra instruction text for the summary
(or None).  A post-compact hook receives the ``StageResult`` of every compaction
attempt, fired or not, so it sees failures too.  Hooks are the caller's code: an
exception in one propagates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    from ..messages import Message
    from ..stages.base import StageResult

__all__ = ["Hooks", "PostCompactHook", "PreCompactHook"]

PreCompactHook = Callable[["Sequence[Message]", str], "str | None"]
PostCompactHook = Callable[["StageResult"], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Hooks:
    pre: tuple[PreCompactHook, ...] = ()
    post: tuple[PostCompactHook, ...] = ()

    def instructions(self, messages: Sequence[Message], trigger: str, given: str | None = None) -> str | None:
        """``given`` (a manual compact's own instructions) followed by every pre-hook's text."""
        parts = [given.strip()] if given and given.strip() else []
        for hook in self.pre:
            extra = hook(messages, trigger)
            if extra and extra.strip():
                parts.append(extra.strip())
        return "\n\n".join(parts) or None

    def after(self, result: StageResult) -> None:
        for hook in self.post:
            hook(result)
