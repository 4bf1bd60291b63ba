"""``ContextManager``: the one object an agent loop calls before each model call.

    cm = ContextManager(window=200_000, max_output=32_000)
    while True:
        view = cm.prepare(history, system=SYSTEM, tools=TOOLS)
        response = client.messages.create(messages=view.messages, system=SYSTEM, tools=TOOLS, ...)
        cm.observe(response.usage)
        history = view.messages + [assistant_turn, tool_results]   # or keep your own full list

Either way of keeping history works: ``prepare`` recognises the prefix it saw last
time (your own list, by object identity, or the list it returned) and reuses its
previous output for it, so a turn costs O(new messages), not O(history).  Earlier
messages are treated as immutable; if you rewrite your history, call ``reset()``.

What comes back is always valid for the API (``validate()`` passes) and, whenever
that is reachable, under the auto-compact threshold.  Everything moved out of the
context is in the transcript and the artifact store, and comes back by handle
through ``recall``.
"""

from __future__ import annotations

import time
import uuid
import weakref
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Mapping, Sequence

from .compaction import AutoCompactor, Collapser, Hooks, LLMSummarizer, ReattachConfig, Summarizer, recover
from .config import ContextConfig
from .dialects.anthropic import message_from_dict, message_to_dict
from .dialects.openai import from_openai, to_openai
from .errors import CompactionError, ConfigError, ContextTooLong, InvalidRequest
from .messages import Message
from .rounds import problems
from .memory.extract import Extractor
from .memory.inject import SessionInjector, inject
from .memory.session import SessionNotes
from .pipeline import run as run_pipeline
from .providers.base import Provider, Request, Response
from .providers.metered import MeteredProvider
from .stages.base import Stage, StageContext, StageResult
from .stages.microcompact import microcompact
from .stages.persist import persist
from .stages.session_memory import SessionMemoryCompactor
from .stages.snip import snip
from .stages.summary import fallback_summary
from .store import ArtifactStore
from .tokens import Calibrator, TokenCounter, default_counter


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextState:
    tokens: int
    """Estimated tokens of the request (messages + system + tools), calibrated when possible."""
    window: int
    threshold: int
    percent_left: float
    """Percent of the room below the auto-compact threshold still free."""
    above_warning: bool
    above_error: bool
    above_threshold: bool
    blocking: bool
    """True when even after every stage the request is above the blocking limit."""
    calibrated: bool
    messages: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    messages: list[Any]
    """Ready to send, in the form given (Anthropic dicts in, Anthropic dicts out)."""
    state: ContextState
    events: list[StageResult] = field(default_factory=list)
    """What each stage did on this call (fired or not, and why)."""
    neutral: list[Message] = field(default_factory=list)

    @property
    def fired(self) -> list[StageResult]:
        return [e for e in self.events if e.fired]


class ContextManager:
    def __init__(
        self,
        window: int = 200_000,
        max_output: int | None = None,
        *,
        config: ContextConfig | None = None,
        counter: TokenCounter | None = None,
        store: str | ArtifactStore | None = None,
        session_id: str | None = None,
        transcript: bool = True,
        stages: Sequence[tuple[str, Stage]] | None = None,
        unseen_tokens: int = 0,
        dialect: Literal["anthropic", "openai"] = "anthropic",
        provider: Provider | None = None,
        summarizer: Summarizer | None = None,
        summary_model: str | None = None,
        hooks: Hooks | None = None,
        project_dir: str | None = None,
        session_notes: bool = True,
        memory: Any = None,
        clock: Any = time.time,
    ) -> None:
        """``config`` overrides ``window``/``max_output`` when given.  ``unseen_tokens`` is
        what every request carries that recollect is not shown (a system prompt your
        SDK adds, say).  ``transcript=False`` keeps nothing on disk but artifacts.

        Without a ``provider`` (or ``summarizer``) the pipeline needs no model: its last
        stage is the deterministic fallback summary.  With one, collapse and auto-compact
        run before it, session notes are kept and used first, and ``compact()``,
        ``recover()`` and ``call()`` summarise with the model; a failed summary never
        replaces history, and after 3 failures in a row the fallback takes over.

        ``memory`` (a ``recollect.memory.MemoryStore``) attaches the memories relevant to
        each new user request to that request — never to earlier messages, so the cached
        prefix does not move; put ``recollect.memory.system_index(store)`` in your system
        prompt for the index."""
        self.config = config or ContextConfig(window=window, max_output=max_output)
        self.budget = self.config.budget
        self.counter = counter or default_counter()
        self.store = store if isinstance(store, ArtifactStore) else ArtifactStore(store)
        self.session_id = session_id or str(uuid.uuid4())
        self.provider = MeteredProvider(provider, self.counter) if provider is not None else None
        if summarizer is None and self.provider is not None:
            summarizer = LLMSummarizer(self.provider, model=summary_model, counter=self.counter)
        self.summarizer = summarizer
        self.hooks = hooks or Hooks()
        self.notes = SessionNotes(self.session_id, root=self.store.root) if session_notes else None
        self.collapser = Collapser(summarizer) if summarizer is not None else None
        self.compactor = (
            AutoCompactor(summarizer, reattach=ReattachConfig(root=project_dir), hooks=self.hooks)
            if summarizer is not None
            else None
        )
        self.stages = tuple(stages) if stages is not None else self._default_stages()
        self.memory = memory
        self._injector = SessionInjector() if memory is not None else None
        self.extractor = Extractor(memory, self.provider) if memory is not None and self.provider is not None else None
        self.unseen_tokens = unseen_tokens
        self.dialect = dialect
        self.clock = clock
        self.calibrator = Calibrator(self.counter)
        self._transcript_enabled = transcript
        self._transcript: Any = None
        self.reset()

    # -- public -------------------------------------------------------------
    def reset(self) -> None:
        """Forget the previous view (after you rewrote your own history)."""
        self._last_in: tuple[Any, ...] = ()  # a fingerprint of the caller's list: see _fingerprint
        self._last_out: list[Message] = []
        self._last_out_wire: list[Any] = []
        self._overhead_key: tuple[int, int] | None = None
        self._overhead = 0
        self._last_sum = 0
        self._working_sum = 0

    @property
    def transcript(self) -> Any:
        if self._transcript is None and self._transcript_enabled:
            from .transcript import Transcript

            self._transcript = Transcript(self.session_id, root=self.store.root)
            weakref.finalize(self, self._transcript.close)  # no open file outlives the manager
        return self._transcript

    def prepare(
        self,
        messages: Sequence[Mapping[str, Any] | Message],
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        now: float | None = None,
        trigger: Literal["auto", "manual", "reactive"] = "auto",
    ) -> Prepared:
        """Make the history fit and return what to send.  Raises ``InvalidRequest``
        (with the message index and tool id) when the history you pass is invalid —
        fix it, or pass it through ``recollect.rounds.repair`` knowingly."""
        if not isinstance(messages, list):
            messages = list(messages)
        wire = bool(messages) and not isinstance(messages[0], Message)
        if wire and self.dialect == "openai":
            # OpenAI tool messages merge into one neutral message: convert the whole list.
            working, seam, fresh = from_openai(messages), 0, True
            lead = 0
            while lead < len(working) and working[lead].role == "system":
                lead += 1
            head, working = working[:lead], working[lead:]
            if head and system is None:
                system = "\n\n".join(m.text for m in head)
        else:
            working, seam, fresh = self._working(messages, wire)
        if self.memory is not None and len(working) > seam and working[-1].role == "user" and working[-1].text.strip():
            working = list(inject(working, self.memory, self._injector))  # a new request: attach memories
        # The input must be valid: all of it the first time, only the seam with what is new after.
        check_from = 0 if fresh else _round_start(working, seam)
        self._check(working[check_from:], check_from, whole=check_from == 0, ours=False)
        overhead = self._overhead_for(system, tools)
        tokens, calibrated = self._estimate(working, seam, fresh, overhead)
        if (self.provider is not None and self.notes is not None and tokens >= self.budget.warning
                and self.notes.due(tokens)):
            # Notes are refreshed only as compaction nears (every call before it would be
            # spent on notes nobody reads yet); a failure keeps the old notes.
            self.notes.update(self.provider, working, history_tokens=tokens)
        ctx = StageContext(
            config=self.config,
            counter=self.counter,
            store=self.store,
            overhead=overhead,
            now=self.clock() if now is None else now,
            fresh_from=0 if fresh else seam,
            trigger=trigger,
            system=system,
            tools=tools,
        )
        out, events = run_pipeline(working, ctx, tokens, self.stages)
        tokens = events[-1].tokens_after if events else tokens
        count = self.counter.count_message
        if any(e.fired for e in events):
            self._check(out, 0, whole=True, ours=True)
            self._last_sum = sum(count(m) for m in out)
        else:
            self._last_sum = self._working_sum
        if self.transcript is not None:
            self.transcript.append(working[seam:])
            for e in events:
                if e.fired and e.boundary:
                    self.transcript.boundary(**_boundary_args(e.boundary))
        self._last_in = _fingerprint(messages)
        self._last_out = out
        if wire and self.dialect == "openai":
            self._last_in, self._last_out_wire = (), to_openai(head + out)
        elif not wire:
            self._last_out_wire = list(out)
        elif fresh or any(e.fired for e in events):
            self._last_out_wire = [self._to_wire(m) for m in out]
        else:  # the previous view plus what is new: O(new)
            self._last_out_wire = self._last_out_wire + [self._to_wire(m) for m in out[seam:]]
        state = self._state(tokens, len(out), calibrated)
        return Prepared(messages=list(self._last_out_wire), state=state, events=events, neutral=out)

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
        the deterministic summary.  A failed model summary falls back, never half-applies."""
        if self.compactor is not None:
            compactor = self.compactor

            def model(m: Sequence[Message], c: StageContext, t: int) -> tuple[list[Message], StageResult]:
                return compactor.run(m, c, t, instructions=instructions)

            stage: Stage = _first_that_fires(model, fallback_summary)
        else:
            stage = fallback_summary
        return self._with_stages((("persist", persist), ("compact", stage)), messages, system, tools, "manual")

    def recover(
        self,
        messages: Sequence[Mapping[str, Any] | Message],
        error: ContextTooLong,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Prepared:
        """After the provider said the prompt is too long: compact harder (oldest rounds
        dropped plus a summary, the last rounds kept), aiming well under its limit."""
        summarizer = self.summarizer

        def reactive(m: Sequence[Message], c: StageContext, t: int) -> tuple[list[Message], StageResult]:
            return recover(m, error, c, summarizer, tokens=t)

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

        Returns the response and the view that was sent (adopt ``view.messages``)."""
        if self.provider is None:
            raise ConfigError("call() needs a provider: ContextManager(..., provider=AnthropicProvider(...))")
        view = self.prepare(messages, system, tools)
        for attempt in (1, 2):
            request = Request(messages=tuple(view.neutral), system=system, tools=tuple(tools or ()),
                              max_tokens=max_tokens or self.config.output_tokens, model=model)
            try:
                response = self.provider.provider.complete(request)
            except ContextTooLong as exc:
                if attempt == 2:
                    raise ContextTooLong(
                        f"still too long after reactive compaction ({exc}); lower the window or max_output "
                        "given to ContextManager so the budget matches the model",
                        tokens=exc.tokens, limit=exc.limit,
                    ) from exc
                view = self.recover(view.messages, exc, system, tools)
                continue
            self.observe(response.usage)
            if response.stop_reason != "tool_use":
                self.turn_ended([*view.neutral, Message(role="assistant", content=response.content)])
            return response, view
        raise AssertionError("unreachable")  # pragma: no cover

    def run_tool(self, name: str, tool_input: Mapping[str, Any], messages: Sequence[Any] | None = None) -> str:
        """Answer one of ``recollect.tools.DEFINITIONS`` the model called.  For ``compact``
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
        return f"error: {name!r} is not a recollect tool"

    def turn_ended(self, messages: Sequence[Message]) -> None:
        """Tell recollect a turn ended without tool use: with memory and a provider, a
        (debounced) extraction proposes memories from it.  ``call()`` does this itself."""
        if self.extractor is not None:
            self.extractor.turn_ended(messages)
            self.extractor.poll()

    def observe(self, usage: Any) -> None:
        """Record the usage the provider reported for the request ``prepare`` last
        returned; the next estimate is that figure plus what was appended since."""
        reported = context_tokens(usage)
        if reported > 0 and self._last_out:
            self.calibrator.observe(reported, self._last_out, overhead=self._overhead)

    def _default_stages(self) -> tuple[tuple[str, Stage], ...]:
        stages: list[tuple[str, Stage]] = [("persist", persist), ("snip", snip), ("microcompact", microcompact)]
        if self.collapser is not None:
            stages.append(("collapse", self.collapser))
        if self.notes is not None:
            stages.append(("session_memory", SessionMemoryCompactor(self.notes)))
        if self.compactor is not None:
            stages.append(("autocompact", self.compactor))
        stages.append(("summary", fallback_summary))
        return tuple(stages)

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
        """Model calls recollect made for itself (summaries, collapse, notes)."""
        return self.provider.calls if self.provider is not None else 0

    @property
    def llm_cost(self) -> float:
        """Their input and output cost in base-input-token units (see providers.metered)."""
        return self.provider.cost if self.provider is not None else 0.0

    def close(self) -> None:
        if self.extractor is not None:
            self.extractor.flush()
        if self._transcript is not None:
            self._transcript.close()

    def __enter__(self) -> ContextManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------
    def _check(self, messages: list[Message], offset: int, *, whole: bool, ours: bool) -> None:
        found = problems(messages, self.dialect, whole=whole)
        if not found:
            return
        p = found[0]
        index = None if p.index is None else p.index + offset
        what = str(p).split(": ", 1)[-1] if p.index is not None else str(p)
        where = f"message {index}" if index is not None else "the request"
        if ours:  # a stage produced an invalid request: a recollect bug, never sent
            raise CompactionError(f"{where}: a stage produced an invalid request ({what}); please report it")
        raise InvalidRequest(
            f"{where}: {what} — fix the history or pass it through recollect.rounds.repair() first",
            index=index,
            tool_id=p.tool_id,
        )

    def _working(self, messages: list[Any], wire: bool) -> tuple[list[Message], int, bool]:
        """The neutral list to run the pipeline on, the index where new messages
        start, and whether no previous view applied."""
        for seen in (self._last_in, _fingerprint(self._last_out_wire)):
            k = seen[0] if seen else 0
            if k and len(messages) >= k and all(a is b for a, b in zip(_fingerprint(messages, k)[1:], seen[1:])):
                new = [self._from_wire(m, len(self._last_out) + i) if wire else m for i, m in enumerate(messages[k:])]
                return self._last_out + new, len(self._last_out), False
        converted = [self._from_wire(m, i) if wire else m for i, m in enumerate(messages)]
        return converted, 0, True

    def _from_wire(self, d: Any, index: int) -> Message:
        if isinstance(d, Message):
            return d
        m = message_from_dict(d, index)
        m._memo["wire"] = d  # hand the caller's own dict back when the message is unchanged
        return m

    @staticmethod
    def _to_wire(m: Message) -> Any:
        d = m._memo.get("wire")
        if d is None:
            d = m._memo["wire"] = message_to_dict(m)
        return d

    def _overhead_for(self, system: Any, tools: Any) -> int:
        key = (id(system), id(tools))
        if key != self._overhead_key:
            self._overhead = self.unseen_tokens + self.counter.count_system(system) + self.counter.count_tools(tools)
            self._overhead_key = key
        return self._overhead

    def _estimate(self, working: list[Message], seam: int, fresh: bool, overhead: int) -> tuple[int, bool]:
        """Calibrated by the last reported usage when the history still extends it;
        otherwise the running raw count, kept in O(new messages)."""
        count = self.counter.count_message
        base = 0 if fresh else self._last_sum
        self._working_sum = base + sum(count(m) for m in working[seam if not fresh else 0 :])
        if self.calibrator.ratio is not None:
            e = self.calibrator.explain(working, overhead)
            return e.tokens, e.mode == "calibrated"
        return overhead + self._working_sum, False

    def _state(self, tokens: int, n: int, calibrated: bool) -> ContextState:
        b = self.budget
        return ContextState(
            tokens=tokens,
            window=b.window,
            threshold=b.threshold,
            percent_left=b.percent_left(tokens),
            above_warning=tokens >= b.warning,
            above_error=tokens >= b.warning,
            above_threshold=tokens >= b.threshold,
            blocking=tokens >= b.blocking,
            calibrated=calibrated,
            messages=n,
        )


def _first_that_fires(*stages: Stage) -> Stage:
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


def _fingerprint(messages: Sequence[Any], k: int | None = None) -> tuple[Any, ...]:
    """Length and the first, middle and last of the first ``k`` items (compared by identity).

    O(1), and kept instead of the list itself, so a caller that appends to its own
    list in place is still seen to have added messages.  Messages are values: an
    edit in place of an earlier message is not detected (call ``reset()``)."""
    k = len(messages) if k is None else k
    if not k:
        return ()
    return (k, messages[0], messages[k // 2], messages[k - 1])


def _round_start(messages: Sequence[Message], index: int) -> int:
    """Back up from ``index`` to the assistant message that opens its round."""
    i = min(index, len(messages)) - 1
    while i > 0 and messages[i].role != "assistant":
        i -= 1
    return max(i, 0)


def _boundary_args(boundary: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "trigger": boundary.get("trigger", "auto"),
        "pre_tokens": boundary.get("preTokens"),
        "post_tokens": boundary.get("postTokens"),
        "covered": boundary.get("covered"),
    }


def context_tokens(usage: Any) -> int:
    """The real prompt size from a provider's usage, whatever its shape: Anthropic
    (input + cache writes + cache reads), OpenAI (prompt_tokens) or recollect's Usage."""
    if usage is None:
        return 0
    get = usage.get if isinstance(usage, Mapping) else lambda k, d=None: getattr(usage, k, d)
    if get("prompt_tokens") is not None:
        return int(get("prompt_tokens") or 0)
    if get("context_tokens") is not None and not isinstance(usage, Mapping):
        return int(usage.context_tokens)
    return int(get("input_tokens") or 0) + int(get("cache_creation_input_tokens") or 0) + int(
        get("cache_read_input_tokens") or 0
    )
