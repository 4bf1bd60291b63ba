"""What ``ContextManager`` does with a model: manual and reactive compaction, a call
with one reactive retry, the tools the model can call, and memory extraction.

Kept apart from the manager's core (``prepare``/``observe``), which needs no model.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal, Mapping, Sequence

from .caching import with_breakpoints
from .compaction import AutoCompactor, Collapser, ReattachConfig, Summarizer, recover
from .config import ContextConfig
from .dialects.anthropic import message_from_dict
from .dialects.openai import from_openai
from .errors import ConfigError, ContextTooLong
from .memory.extract import Extractor
from .messages import Message
from .providers.base import Request, Response
from .providers.metered import MeteredProvider
from .stages.base import Stage, StageContext, StageResult, skipped
from .stages.persist import persist
from .stages.summary import fallback_summary
from .store import ArtifactStore
from .view import Prepared


class ModelOperations:
    """Mixed into ``ContextManager``: what it does with a model.  The attributes and the
    two methods below are the manager's (declared here, so this module needs nothing
    from ``manager`` and the two do not import each other)."""

    config: ContextConfig
    store: ArtifactStore
    dialect: Literal["anthropic", "openai"]
    provider: MeteredProvider | None
    summarizer: Summarizer | None
    collapser: Collapser | None
    compactor: AutoCompactor | None
    extractor: Extractor | None
    reattach: ReattachConfig
    stages: tuple[tuple[str, Stage], ...]
    last: Prepared

    def prepare(self, messages: Sequence[Mapping[str, Any] | Message], system: Any = None, tools: Any = None, *,
                now: float | None = None, trigger: Literal["auto", "manual", "reactive"] = "auto") -> Prepared:
        raise NotImplementedError  # pragma: no cover - ContextManager.prepare

    def observe(self, usage: Any) -> bool:
        raise NotImplementedError  # pragma: no cover - ContextManager.observe

    def compact(
        self,
        messages: Sequence[Mapping[str, Any] | Message],
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        instructions: str | None = None,
    ) -> Prepared:
        """Compact now (a user's /compact, or the agent's ``compact`` tool): the model's
        summary when a provider is set — pre-compact hooks may add instructions — else
        the deterministic summary.  A failed model summary falls back, never half-applies.
        With the breaker open, or the provider failing, the model is not called: the
        deterministic summary is used and its event says why."""
        why_not = self._no_model_summary()
        if self.compactor is not None and why_not is None:
            compactor = self.compactor

            def model(m: Sequence[Message], c: StageContext, t: int) -> tuple[list[Message], StageResult]:
                return compactor.run(m, c, t, instructions=instructions)

            stage: Stage = first_that_fires(model, fallback_summary)
        elif why_not is not None:
            stage = _explained(fallback_summary, f"{why_not}: the deterministic summary instead of the model's")
        else:
            stage = fallback_summary
        messages = list(messages)
        pending = messages.pop() if messages and _calls_pending(messages[-1]) else None
        view = self._with_stages((("persist", persist), ("compact", stage)), messages, system, tools, "manual")
        if pending is None:
            return view
        # The model's own `compact` call (unanswered yet) stays last, after the compacted
        # history, for the agent to answer; it is not part of what is summarised.
        neutral = pending if isinstance(pending, Message) else (
            from_openai([pending])[0] if self.dialect == "openai" else message_from_dict(pending))
        return replace(view, messages=[*view.messages, pending], neutral=[*view.neutral, neutral])

    def recover(
        self,
        messages: Sequence[Mapping[str, Any] | Message],
        error: ContextTooLong,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Prepared:
        """After the provider said the prompt is too long: compact harder (oldest rounds
        dropped plus a summary, the last rounds kept), aiming well under its limit."""
        # A summarizer whose breaker is open, or whose provider is failing, is known to fail:
        # go straight to the fallback.
        summarizer = None if self._no_model_summary() is not None else self.summarizer
        reattach = self.reattach

        def reactive(m: Sequence[Message], c: StageContext, t: int) -> tuple[list[Message], StageResult]:
            return recover(m, error, c, summarizer, tokens=t, reattach=reattach)

        return self._with_stages((("reactive", reactive),), messages, system, tools, "reactive")

    def call(
        self,
        messages: Sequence[Mapping[str, Any] | Message],
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        max_tokens: int | None = None,
        model: str | None = None,
    ) -> tuple[Response, Prepared]:
        """prepare → the provider → observe, with one reactive retry on ``ContextTooLong``.

        The request carries prompt-cache breakpoints (``lossless.caching.with_breakpoints``: the
        tools, the system prompt, the newest message; never more than four, the caller's own
        marks kept), so each call reads the prefix the one before wrote.

        Returns the response and the view that was sent (adopt ``view.messages``).
        Under a persistent 429/529 or no answer it sends at most the provider's
        ``RetryPolicy.max_attempts`` requests, lossless's side calls included (see
        ``providers.metered``); a retry_after over the policy's maximum fails fast."""
        if self.provider is None:
            raise ConfigError("call() needs a provider: ContextManager(..., provider=AnthropicProvider(...))")
        with self.provider.turn():
            if self.extractor is not None:
                self.extractor.poll()  # an earlier burst that has gone quiet (the user took a while to answer)
            if model is not None and getattr(self.summarizer, "model", "unset") is None:
                # Summaries on the same model read the same prompt cache.  Any summarizer with a
                # ``model`` left None takes it, which the Summarizer protocol does not declare.
                setattr(self.summarizer, "model", model)
            view = self.prepare(messages, system, tools)
            for attempt in (1, 2):
                # The request, not the view, carries the prompt-cache marks (lossless.caching).
                sent, blocks, schemas = with_breakpoints(view.neutral, system, tools)
                request = Request(messages=sent, system=blocks, tools=schemas,
                                  max_tokens=max_tokens or self.config.output_tokens, model=model)
                try:
                    response = self.provider.send(request)
                except ContextTooLong as exc:
                    if attempt == 2:
                        raise ContextTooLong(
                            f"still too long after reactive compaction ({exc}); lower the window or max_output "
                            "given to ContextManager so the budget matches the model",
                            tokens=exc.tokens, limit=exc.limit, status=exc.status,
                        ) from exc
                    view = self.recover(view.messages, exc, system, tools)
                    continue
                self.observe(response.usage)
                if response.stop_reason != "tool_use":
                    self.turn_ended([*view.neutral, Message(role="assistant", content=response.content)])
                return response, view
        raise AssertionError("unreachable")  # pragma: no cover

    def run_tool(self, name: str, tool_input: Mapping[str, Any], messages: Sequence[Any] | None = None) -> str:
        """Answer one of ``lossless.tools.DEFINITIONS`` the model called.  For ``compact``
        pass the history; its compacted view is then in ``self.last``."""
        from .compaction.manual import compact_instructions
        from .tools import run_recall

        if name == "recall":
            return run_recall(tool_input, self.store)
        if name == "compact":
            if messages is None:
                return "error: compaction needs the conversation; the agent must pass its history"
            self.last = self.compact(messages, instructions=compact_instructions(tool_input))
            if not self.last.fired:
                return f"[Nothing compacted: {self.last.events[-1].detail}]"
            return "[Compacted. The earlier conversation is summarised above; recall handles bring details back.]"
        return f"error: {name!r} is not a lossless tool"

    def turn_ended(self, messages: Sequence[Message]) -> None:
        """Tell lossless a turn ended without tool use: with memory and a provider, a
        (debounced) extraction proposes memories from it.  ``call()`` does this itself."""
        if self.extractor is not None:
            # Polled before recording: polling right after would always find the burst
            # just renewed, and extraction would only ever run at close().
            self.extractor.poll()
            self.extractor.turn_ended(messages)

    def _no_model_summary(self) -> str | None:
        """Why a summary must not ask the model now (None: it may)."""
        if self.compactor is not None and self.compactor.is_open:
            return f"circuit breaker open after {self.compactor.failures} consecutive failures"
        if self.provider is not None and not self.provider.available:
            return self.provider.health.why()
        return None

    def _gated(self, stages: Sequence[tuple[str, Stage]]) -> tuple[tuple[str, Stage], ...]:
        """``stages`` with the model stages (collapse, auto-compact) skipped while the provider
        is failing — decided as each runs, so a failure earlier in the same pipeline counts —
        and not run, so an outage never counts against their breakers; the fallback summary
        makes room meanwhile."""
        provider = self.provider
        model = [m for m in (self.collapser, self.compactor) if m is not None]
        if provider is None or not model:
            return tuple(stages)

        def gate(name: str, stage: Stage) -> Stage:
            def run(messages: Sequence[Message], ctx: StageContext, tokens: int) -> tuple[list[Message], StageResult]:
                if provider.available:
                    return stage(messages, ctx, tokens)
                why = f"{provider.health.why()}; no model summary until it answers (the fallback makes room)"
                return (messages if isinstance(messages, list) else list(messages)), skipped(name, tokens, why)

            return run

        return tuple((name, gate(name, stage)) if any(stage is m for m in model) else (name, stage)
                     for name, stage in stages)

    def _with_stages(self, stages: Sequence[tuple[str, Stage]], messages: Any, system: Any, tools: Any,
                     trigger: Literal["manual", "reactive"]) -> Prepared:
        saved = self.stages
        self.stages = tuple(stages)
        try:
            return self.prepare(messages, system, tools, trigger=trigger)
        finally:
            self.stages = saved

    @property
    def llm_calls(self) -> int:
        """Model calls lossless made for itself (summaries, collapse, notes)."""
        return self.provider.calls if self.provider is not None else 0

    @property
    def llm_cost(self) -> float:
        """Their input and output cost in base-input-token units (see providers.metered)."""
        return self.provider.cost if self.provider is not None else 0.0


def _calls_pending(message: Any) -> bool:
    """An assistant message (neutral or wire) that asks for tool calls."""
    if isinstance(message, Message):
        return message.role == "assistant" and bool(message.tool_uses)
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return False
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return bool(message.get("tool_calls")) or any(isinstance(b, Mapping) and b.get("type") == "tool_use" for b in blocks)


def _explained(stage: Stage, why: str) -> Stage:
    """``stage`` with ``why`` in front of its detail."""

    def run(messages: Sequence[Message], ctx: StageContext, tokens: int) -> tuple[list[Message], StageResult]:
        out, result = stage(messages, ctx, tokens)
        return out, replace(result, detail=f"{why}; {result.detail}")

    return run


def first_that_fires(*stages: Stage) -> Stage:
    """A stage that runs each in turn until one fires (a model summary, else the fallback)."""

    def run(messages: Sequence[Message], ctx: StageContext, tokens: int) -> tuple[list[Message], StageResult]:
        details = []
        for stage in stages:
            out, result = stage(messages, ctx, tokens)
            if result.fired:
                return out, result
            details.append(result.detail)
        return out, replace(result, detail="; ".join(details))

    return run
