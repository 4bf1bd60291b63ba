"""What every stage is: a pure function ``(messages, ctx, tokens) -> (messages, StageResult)``.

A stage never mutates its input list or any message in it; it returns a new list
(or the same list object when it did nothing) and a typed result.  It removes only
whole API rounds (``lossless.rounds.group_rounds``), never edits a thinking
block, and what it returns passes ``validate()`` whenever its input did.

``tokens`` is the caller's count of the whole request (messages + system + tools)
so a stage that does not fire costs O(1) to decide; a stage that fires reports
``tokens_after`` computed from what it changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..config import Budget, ContextConfig
from ..messages import Message

if TYPE_CHECKING:
    from ..store import ArtifactStore
    from ..tokens import TokenCounter


@dataclass(frozen=True, slots=True, kw_only=True)
class StageResult:
    stage: str
    fired: bool
    tokens_before: int
    tokens_after: int
    detail: str = ""
    """One line a person can read: what the stage did and why (or why not)."""
    handles: tuple[str, ...] = ()
    """The handles of the ranges the stage removed (or results it moved); each resolves through recall()."""
    items: tuple[str, ...] = ()
    """The handles of the per-item originals its account names (one recall each)."""
    kept_before: int = 0
    """The returned messages before this index are the input's own objects, in place: a stage
    that changed only what is new on this call (persist, echo: ``ctx.fresh_from``) says so, and
    the caller then converts and checks only from there; 0 when anything may have changed."""
    boundary: dict | None = None
    """For summaries: {trigger, preTokens, postTokens, covered} to record in the transcript."""

    @property
    def saved(self) -> int:
        return self.tokens_before - self.tokens_after


@dataclass(frozen=True, slots=True, kw_only=True)
class StageContext:
    config: ContextConfig
    counter: TokenCounter
    store: ArtifactStore
    overhead: int = 0
    """Tokens of the system prompt and tool schemas, counted once per change."""
    now: float | None = None
    """Unix time of the coming call (for the idle rule); None disables time-based rules."""
    last_call: float | None = None
    """Unix time of this conversation's previous call, on the same clock as ``now``, when the
    caller made it through the same manager; None when unknown.  The idle rule believes it over
    the messages' timestamps: a call within the idle window means the cache is warm, whatever a
    recorded or skewed timestamp says."""
    fresh_from: int = 0
    """Messages before this index already went through the pipeline on an earlier call
    (the manager knows which); a stage that only looks at new content may start here."""
    trigger: str = "auto"
    """"auto" before a normal call, "manual" for an explicit compact(), "reactive" after a too-long error."""
    system: str | Sequence[Mapping[str, Any]] | None = None
    """The request's system prompt, as sent: a summary call repeats it so the prompt cache is reused."""
    tools: Sequence[Mapping[str, Any]] | None = None
    """The request's tool schemas, as sent (same reason)."""
    memo: dict[str, Any] | None = None
    """A dict the manager keeps for this conversation from call to call, where a stage may keep
    what it derived from the view (``echo``: the lines shown), under its own name.  The manager
    puts the view it returned under ``"view"``, so a stage checks that what it kept was made
    for the list this call extends; None: nothing is kept."""
    budget: Budget = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "budget", self.config.budget)

    def count(self, messages: Sequence[Message]) -> int:
        """Tokens of a request made of these messages, with the system prompt and tools."""
        return self.overhead + sum(self.counter.count_message(m) for m in messages)


Stage = Callable[[Sequence[Message], StageContext, int], "tuple[list[Message], StageResult]"]


def skipped(stage: str, tokens: int, why: str) -> StageResult:
    return StageResult(stage=stage, fired=False, tokens_before=tokens, tokens_after=tokens, detail=why)
