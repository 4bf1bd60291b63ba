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

import logging
import math
import time
import uuid
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from .compaction import AutoCompactor, Collapser, Hooks, LLMSummarizer, ReattachConfig, Summarizer
from .compaction.collapse import range_summariser
from .config import ContextConfig
from .dialects.anthropic import message_from_dict, message_to_dict
from .dialects.openai import from_openai, to_openai
from .errors import CompactionError, ConfigError, FormatError, InvalidRequest
from .memory import lifecycle
from .memory.extract import Extractor
from .memory.inject import SessionInjector, inject
from .memory.retrieval import LLMRetriever
from .memory.session import SessionNotes
from .messages import Message
from .model_ops import ModelOperations
from .pipeline import run as run_pipeline
from .providers.base import Provider
from .providers.metered import MeteredProvider
from .rounds import problems
from .stages.base import Stage, StageContext
from .stages.echo import echo
from .stages.microcompact import microcompact
from .stages.persist import persist
from .stages.session_memory import SessionMemoryCompactor
from .stages.snip import snip, summarised
from .stages.summary import fallback_summary
from .store import ArtifactStore
from .storage.open import open_store
from .calibration import Calibrator, plausible
from .tokens import ScaledCounter, TokenCounter, default_counter
from .view import ContextState, Prepared, context_tokens, fingerprint, round_start

_log = logging.getLogger("lossless")

NOTES_ROOM = 5_200
"""Tokens a notes refresh needs beside the conversation and the current notes: its answer
(``max_tokens`` 4,096) and its request, with a margin for the estimate."""

__all__ = ["ContextManager", "ContextState", "Prepared", "context_tokens"]


class ContextManager(ModelOperations):

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
        what every request carries that lossless is not shown (a system prompt your
        SDK adds, say).  ``transcript=False`` keeps nothing on disk but artifacts (and, with a
        provider, the session notes: pass ``session_notes=False`` too).

        Without a ``provider`` (or ``summarizer``) the pipeline needs no model: its last
        stage is the deterministic fallback summary.  With one, collapse and auto-compact
        run before it, session notes are kept and used first, and ``compact()``,
        ``recover()`` and ``call()`` summarise with the model; a failed summary never
        replaces history, and after 3 failures in a row the fallback takes over.

        ``memory`` (a ``lossless.memory.MemoryStore``) attaches the memories relevant to
        each new user request to that request — never to earlier messages, so the cached
        prefix does not move; put ``lossless.memory.system_index(store)`` in your system
        prompt for the index."""
        if dialect not in ("anthropic", "openai"):  # a typo must not silently mean Anthropic
            raise ConfigError(f"dialect {dialect!r} is not 'anthropic' or 'openai' (Responses input items: "
                              "lossless.adapters.responses.ResponsesContext)")
        self.config = config or ContextConfig(window=window, max_output=max_output)
        self.budget = self.config.budget
        self.counter = counter or default_counter()
        self.storage = open_store(store)  # a directory, postgresql://…, or $LOSSLESS_STORE (lossless.storage)
        self.store = self.storage.artifacts
        self.session_id = session_id or str(uuid.uuid4())
        self.provider = MeteredProvider(provider, self.counter) if provider is not None else None
        if summarizer is None and self.provider is not None:
            summarizer = LLMSummarizer(self.provider, model=summary_model, counter=self.counter)
        self.summarizer = summarizer
        self.hooks = hooks or Hooks()
        self.notes = (SessionNotes(self.session_id, root=self.store.root, every_tokens=self.config.notes_every_tokens)
                      if session_notes else None)
        self.reattach = ReattachConfig(root=project_dir)
        self.collapser = (Collapser(summarizer, trigger_fraction=self.config.collapse_trigger_fraction,
                                    target_fraction=self.config.collapse_target_fraction,
                                    max_episode_tokens=self.config.collapse_episode_tokens)
                          if summarizer is not None else None)
        self.compactor = (
            AutoCompactor(summarizer, reattach=self.reattach, hooks=self.hooks)
            if summarizer is not None
            else None
        )
        self.stages = tuple(stages) if stages is not None else self._default_stages()
        self.memory = memory
        self._injector = SessionInjector() if memory is not None else None
        self._retriever = (LLMRetriever(self.provider, model=summary_model)
                           if memory is not None and self.provider is not None else None)
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
        self._last_in: tuple[Any, ...] = ()  # a fingerprint of the caller's list: see view.fingerprint
        self._last_in_list: list[Any] = []  # the caller's list itself, for agents that pass copies
        self._last_out: list[Message] = []
        self._stage_memo: dict[str, Any] = {}  # what stages keep from call to call (StageContext.memo)
        self._last_out_wire: list[Any] = []
        self._head: list[Message] = []  # OpenAI: the leading system messages of the list
        self._head_system: str | None = None
        self._overhead_key: tuple[Any, Any] | None = None
        self._overhead = 0
        self._last_sum = 0
        self._working_sum = 0
        self._last_call: float | None = None  # when the previous view was prepared (for the idle rule)

    @property
    def transcript(self) -> Any:
        if self._transcript is None and self._transcript_enabled:
            self._transcript = self.storage.transcript(self.session_id)
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
        fix it, or pass it through ``lossless.rounds.repair`` knowingly."""
        if not isinstance(messages, list):
            if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
                raise FormatError(f"messages must be a list of messages, not {type(messages).__name__}: "
                                  "pass [message] for one")
            messages = list(messages)
        wire = bool(messages) and not isinstance(messages[0], Message)
        openai = wire and self.dialect == "openai"
        working, seam, fresh = self._working(messages, wire, openai)
        if openai and system is None:
            system = self._head_system  # the list's own leading system messages
        if self.memory is not None and len(working) > seam and working[-1].role == "user" and working[-1].text.strip():
            # a new request: attach the memories relevant to it (chosen by the model when there is one)
            injector = self._injector
            assert injector is not None  # set exactly when self.memory is
            working = list(inject(working, self.memory, injector, self._retriever))
        # The input must be valid: all of it the first time, only the seam with what is new after.
        check_from = 0 if fresh else round_start(working, seam)
        self._check(working[check_from:], check_from, whole=check_from == 0, ours=False)
        overhead = self._overhead_for(system, tools)
        tokens, calibrated = self._estimate(working, seam, fresh, overhead)
        if (self.provider is not None and self.notes is not None and tokens >= self.budget.warning
                and self.notes.due(tokens) and self.provider.available):
            # Notes are refreshed only as compaction nears (every call before it would be
            # spent on notes nobody reads yet); a failure keeps the old notes, and while the
            # provider is failing the refresh waits (still due).
            # Sent as the conversation plus the notes request while it fits, so the refresh
            # reads the cached prefix instead of writing an excerpt of the history anew.
            notes_tokens = self.counter.count_text(self.notes.read())
            fits = tokens + notes_tokens + NOTES_ROOM <= self.config.window
            self.notes.update(self.provider, working, history_tokens=tokens, in_conversation=fits,
                              system=system, tools=tools)
        # The stages count in the units of ``tokens``: calibrated by the provider's report, that is
        # its tokens, so what they remove is counted in them too (tokens.ScaledCounter).  The ratio is
        # kept to a hundredth: a stage's per-message memo is keyed by the counter's name.
        counter: TokenCounter = self.counter
        raw, fixed = overhead + self._working_sum, overhead
        ratio = round(tokens / raw, 2) if raw > 0 else 1.0
        if ratio != 1.0:
            scaled = ScaledCounter(self.counter, ratio)
            counter, fixed = scaled, math.ceil(overhead * ratio)
        ctx = StageContext(
            config=self.config,
            counter=counter,
            store=self.store,
            overhead=fixed,
            now=self.clock() if now is None else now,
            last_call=self._last_call,
            fresh_from=0 if fresh else seam,
            trigger=trigger,
            memo=self._stage_memo,
            system=system,
            tools=tools,
        )
        with self.store.batch():  # one group commit: every handle in the view is durable before it returns
            out, events = run_pipeline(working, ctx, tokens, self._gated(self.stages))
            fired = any(e.fired for e in events)
            # Where only what is new on this call changed (persist, echo), the view before it is the
            # previous one, as sent: only the new part is checked and converted, as when nothing fired.
            local = fired and not fresh and len(out) >= seam and all(e.kept_before >= seam for e in events if e.fired)
            if fired:
                start = round_start(out, seam) if local else 0
                self._check(out[start:], start, whole=start == 0, ours=True)
            # While the batch's files sync: what needs no handle of this batch — the input's entries (they
            # entered the context whatever the stages did) and the view's wire form.
            if self.transcript is not None:
                self.transcript.append(working[seam:])
            rewritten = fresh or (fired and not local)
            wire_new: list[Any]
            if openai:  # one neutral tool-results message is several wire messages
                wire_new = to_openai(self._head + out) if rewritten else to_openai(out[seam:])
            elif not wire:
                wire_new = list(out)
            else:
                wire_new = [self._to_wire(m) for m in (out if rewritten else out[seam:])]
        tokens = events[-1].tokens_after if events else tokens
        if self.notes is not None and any(e.fired and e.boundary for e in events):
            self.notes.compacted(tokens)  # refresh again before the next compaction, not stale notes
        count = self.counter.count_message
        if local:  # the previous view's sum, and what is new as the stages left it
            self._last_sum = self._working_sum - sum(map(count, working[seam:])) + sum(map(count, out[seam:]))
        else:
            self._last_sum = sum(count(m) for m in out) if fired else self._working_sum
        if self.transcript is not None:
            bounds = [e.boundary for e in events if e.fired and e.boundary]
            for b in bounds:
                self.transcript.boundary(**_boundary_args(b))
            if bounds:
                # As Claude Code lays it out: after the boundary, the context the model sees
                # from now on — the summary (isCompactSummary) and the tail kept verbatim.
                self.transcript.append(out)
        self._last_in = fingerprint(messages)
        self._last_in_list = messages
        self._last_call = ctx.now
        self._last_out = out
        self._stage_memo["view"] = out
        # ``_last_out_wire`` is this manager's own list (the caller gets a copy): extended in place, O(new).
        if rewritten or not wire:
            self._last_out_wire = wire_new
        else:  # the previous view plus what is new
            self._last_out_wire.extend(wire_new)
        state = self._state(tokens, len(out), calibrated)
        return Prepared(messages=list(self._last_out_wire), state=state, events=events, neutral=out)

    def observe(self, usage: Any) -> bool:
        """Record the usage the provider reported for the request ``prepare`` last
        returned; the next estimate is that figure plus what was appended since.  Returns
        whether the report was taken: one under half of the count of what was sent is not
        believed (``calibration.TRUSTED``; the count in the provider's units once a report was
        believed), unless it is short by no more than a twentieth of the window."""
        reported = context_tokens(usage)
        counted = self._overhead + self._last_sum
        if not (reported > 0 and self._last_out
                and plausible(reported, counted, self.config.window // 20, self.calibrator.observed)):
            return False
        self.calibrator.observe(reported, self._last_out, overhead=self._overhead)
        return True

    def sent_with(self, system: str | Sequence[Mapping[str, Any]] | None = None,
                  tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        """The request ``prepare`` last returned went out with ``system`` and ``tools`` rather than
        those it was given (a proxy that offers ``recall`` once the view holds handles): the usage
        reported for it is read against their size, so the next estimate counts them once."""
        if self.dialect == "openai" and system is None:
            system = self._head_system
        self._overhead_for(system, tools)

    def resume(self, sent: Sequence[Mapping[str, Any] | Message], system: str | Sequence[Mapping[str, Any]] | None = None,
               tools: Sequence[Mapping[str, Any]] | None = None, *, reported: int | None = None,
               overhead: int | None = None) -> None:
        """Take up a conversation another manager was running: ``sent`` is the view it last
        returned (as given to the provider) and ``reported`` the usage the provider gave for it,
        if known.  The next ``prepare`` then treats what extends ``sent`` as new and estimates —
        and compacts — exactly as the other manager would have (a parked proxy conversation
        restored, a process restarted).  Nothing is checked or compacted here."""
        sent = list(sent)
        wire = bool(sent) and not isinstance(sent[0], Message)
        openai = wire and self.dialect == "openai"
        working, _, _ = self._working(sent, wire, openai)
        if openai and system is None:
            system = self._head_system
        self._overhead_for(system, tools)
        self._last_sum = sum(self.counter.count_message(m) for m in working)
        self._last_in = fingerprint(sent)
        self._last_in_list = sent
        self._last_out = working
        self._stage_memo = {"view": working}
        self._last_out_wire = sent
        if reported:
            self.calibrator.observe(reported, working, overhead=self._overhead if overhead is None else overhead)

    def _default_stages(self) -> tuple[tuple[str, Stage], ...]:
        # Least lost first (see pipeline.py).  Micro-compact runs after snip: it clears old
        # outputs only when removing whole rounds could not get under the threshold, so the
        # recent rounds stay verbatim.  With a model, snip still decides what leaves (the recent work stays verbatim, the
        # landing is the same) and the model summarises each range it removes into the account;
        # session notes and auto-compact stand behind it for when removing whole rounds cannot
        # make room.  Collapse is not in the default: replacing finished episodes with summaries
        # kept a third fewer facts in front of the model (bench/RESULTS.md §6).
        stages: list[tuple[str, Stage]] = [("persist", persist), ("echo", echo)]
        if self.summarizer is None:  # notes a person wrote are used first; snip makes room otherwise
            if self.notes is not None:
                stages.append(("session_memory", SessionMemoryCompactor(self.notes)))
            stages += [("snip", snip), ("microcompact", microcompact), ("summary", fallback_summary)]
            return tuple(stages)
        stages.append(("snip", summarised(range_summariser(self.summarizer))))
        stages.append(("microcompact", microcompact))
        if self.notes is not None:
            stages.append(("session_memory", SessionMemoryCompactor(self.notes)))
        if self.compactor is not None:
            stages.append(("autocompact", self.compactor))
        stages.append(("snip", snip))  # the floor when the model cannot summarise (a manual compaction)
        stages.append(("summary", fallback_summary))
        return tuple(stages)

    def close(self) -> None:
        if self.extractor is not None:
            self.extractor.flush()
        lifecycle.session_ended(self.memory, self.provider)  # the consolidation gates, in the background
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
        if ours:  # a stage produced an invalid request: a lossless bug, never sent
            raise CompactionError(f"{where}: a stage produced an invalid request ({what}); please report it")
        raise InvalidRequest(
            f"{where}: {what} — fix the history or pass it through lossless.rounds.repair() first",
            index=index,
            tool_id=p.tool_id,
        )

    def _working(self, messages: list[Any], wire: bool, openai: bool) -> tuple[list[Message], int, bool]:
        """The neutral list to run the pipeline on, the index where new messages
        start, and whether no previous view applied.

        The previous view applies when ``messages`` extends the caller's previous list
        or the list ``prepare`` returned: recognised by identity in O(1), else (an agent
        that passes copies, a json round-trip) by value in O(history) — slower, but
        the same view, the same requests and each message logged once."""
        k = self._extends(messages)
        if k and not (openai and k < len(messages) and _role(messages[k]) == "tool"):
            n = len(self._last_out)
            if openai:
                new = from_openai(messages[k:], start=k)
            else:
                new = [self._from_wire(m, k + i) if wire else m for i, m in enumerate(messages[k:])]
            return self._last_out + new, n, False
        if not openai:
            return [self._from_wire(m, i) if wire else m for i, m in enumerate(messages)], 0, True
        # OpenAI tool messages merge into one neutral message: convert the whole list.
        working = from_openai(messages)
        lead = 0
        while lead < len(working) and working[lead].role == "system":
            lead += 1
        self._head = working[:lead]
        self._head_system = "\n\n".join(m.text for m in self._head) if self._head else None
        return working[lead:], 0, True

    def _extends(self, messages: list[Any]) -> int:
        """How many leading messages are the previous call's input or output (0: none)."""
        for seen in (self._last_in, fingerprint(self._last_out_wire)):
            k = seen[0] if seen else 0
            if k and len(messages) >= k and all(a is b for a, b in zip(fingerprint(messages, k)[1:], seen[1:])):
                return k
        # Not the same objects: equal values?  (Never for the caller's own list object
        # changed in place since — that is a rewrite, see reset().)
        for previous, k in ((self._last_in_list, self._last_in[0] if self._last_in else 0),
                            (self._last_out_wire, len(self._last_out_wire))):
            if k and previous is not messages and len(messages) >= k and messages[:k] == previous[:k]:
                return k
        return 0

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
        # Held (not ids, which a freed object's successor may reuse) and shallow, so a
        # tool appended to the same list is seen; O(number of tools), not O(their size).
        # A system string or tool dict edited in place is a value change nobody can see.
        key = (_shallow(system), _shallow(tools))
        if key != self._overhead_key:
            _check_fixed_part(system, tools)
            self._overhead = self.unseen_tokens + self.counter.count_system(system) + self.counter.count_tools(tools)
            self._overhead_key = key
            b = self.budget
            if self._overhead >= b.threshold:
                _log.warning(f"lossless: warning: the system prompt and tools take {self._overhead:,} tokens, over the "
                             f"auto-compact threshold of {b.threshold:,} for a {b.window:,}-token window by "
                             f"themselves: every request will be compacted to its newest round; use a model "
                             f"with a larger window, or fewer tools")
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


def _shallow(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    return (type(value), tuple(value)) if isinstance(value, (list, tuple)) else value


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def _check_fixed_part(system: Any, tools: Any) -> None:
    """A system prompt is a string or a list of content blocks, and tools a list of definitions:
    anything else is a ``FormatError`` naming it (not a ``TypeError`` from deep inside a count)."""
    if system is not None and not isinstance(system, str):
        if isinstance(system, (bytes, Mapping)) or not isinstance(system, Sequence):
            raise FormatError(f"system must be a string or a list of content blocks, not {type(system).__name__}")
        for i, block in enumerate(system):
            if not isinstance(block, Mapping):
                raise FormatError(f"system, block {i}: a content block must be an object, not {type(block).__name__}")
    if tools is not None:
        if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
            raise FormatError(f"tools must be a list of tool definitions, not {type(tools).__name__}")
        for i, tool in enumerate(tools):
            if not isinstance(tool, Mapping):
                raise FormatError(f"tools, tool {i}: a tool definition must be an object, not {type(tool).__name__}")


def _boundary_args(boundary: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "trigger": boundary.get("trigger", "auto"),
        "pre_tokens": boundary.get("preTokens"),
        "post_tokens": boundary.get("postTokens"),
        "covered": boundary.get("covered"),
    }
