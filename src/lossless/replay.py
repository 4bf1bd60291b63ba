"""Replay a recorded session call by call through the pipeline, as if live.

For each API call recorded in the file, the messages that entered since the
previous call are appended to the *managed* history (what ``prepare`` returned
last time) and ``prepare`` runs again: state carries over between calls, as in a
live loop.  The unmanaged baseline is the raw history growing without limit
(Claude Code's own recorded summaries are left out of both: lossless decides).

Cost model (input side only, in base-input-token units): with prompt caching a
request reads the longest prefix it shares with the previous request at 0.1× and
writes the rest at 1.25×; a changed prefix is a write.  The system prompt and
tools count as part of the prefix.  Cache expiry is not modelled.

In dollars (``price_report``, when the session's model has a price in
``lossless.modelinfo``): those cache reads and writes at the model's own prices,
plus the output the file recorded (the same answers, managed or not), beside
what the file's recorded usage cost (``dollars["recorded"]``: the agent's own
compactions and cache behaviour, as they happened).

Estimate error is computed on the recorded sequence itself: each call is predicted
from the previous call's recorded usage plus the estimate of what was appended,
restarting after a compaction recorded in the file.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Mapping, Sequence

from .config import ContextConfig
from .inspect import infer_unseen_tokens
from .manager import ContextManager, context_tokens
from .messages import Message
from .rounds import problems
from .session import Call, Session
from .tokens import TokenCounter, default_counter

__all__ = ["CACHE_READ", "CACHE_WRITE", "SUMMARIES", "CallReport", "ReplayReport", "estimate_error",
           "infer_unseen_tokens", "price_report", "replay"]

SUMMARIES = frozenset({"autocompact", "reactive", "compact", "collapse"})
"""Stages that replace history by a summary (besides those named ``*summary``): what hitting
the window costs an agent, as its own compaction does."""

CACHE_READ = 0.1
CACHE_WRITE = 1.25


@dataclass(slots=True)
class CallReport:
    """One replayed call.  Costs are cumulative, in base-input-token units (a cache
    read counts 0.1, a cache write 1.25), the managed one including lossless's own
    summary calls so far."""

    call: int
    messages_in: int
    tokens_unmanaged: int
    tokens_managed: int
    stages: list[str]
    valid: bool
    cache_read: int
    cache_write: int
    details: list[str] = field(default_factory=list)
    """What each fired stage did, one line each (in ``stages`` order)."""
    cost_unmanaged: float = 0.0
    cost_managed: float = 0.0
    recorded_tokens: int = 0
    """The context size the file recorded for this call (0 when it has none)."""
    unmanaged_cache_read: int = 0
    unmanaged_cache_write: int = 0
    """The unmanaged request's cache reads and writes (``cache_read``/``cache_write`` are the managed one's)."""


@dataclass(slots=True)
class ReplayReport:
    file: str
    window: int
    threshold: int = 0
    """Auto-compaction starts above this many tokens."""
    warning: int = 0
    """The warning state starts here."""
    effective: int = 0
    """The window less what is reserved for the answer."""
    unseen_tokens: int = 0
    """Tokens added to every request for what the file does not show (system prompt, tools)."""
    unseen_inferred: bool = False
    """True when ``unseen_tokens`` was inferred from the first recorded usage."""
    cost_unit: str = "base-input-token units (cache read 0.1, cache write 1.25)"
    calls: int = 0
    peak_tokens: int = 0
    peak_unmanaged_tokens: int = 0
    over_window_calls: int = 0
    unmanaged_over_window_calls: int = 0
    invalid_requests: int = 0
    stages: dict[str, int] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)
    cache_read_ratio: float = 0.0
    unmanaged_cache_read_ratio: float = 0.0
    cache_tokens: dict[str, int] = field(default_factory=dict)
    summary_calls: int = 0
    summary_failures: int = 0
    summaries: int = 0
    """Calls on which a summary replaced history (``SUMMARIES``): how often lossless hit the window."""
    recorded_compactions: int = 0
    """Compactions the file records of its own: how often the agent hit the window."""
    model: str | None = None
    """The model that answered most recorded calls (what ``dollars`` is priced at)."""
    dollars: dict[str, float] = field(default_factory=dict)
    """``recorded``, ``unmanaged``, ``managed`` in dollars (see the module docstring); empty when
    the model has no known price."""
    estimate_error: dict[str, float] = field(default_factory=dict)
    handles: list[str] = field(default_factory=list)
    per_call: list[CallReport] = field(default_factory=list)

    def to_json(self, *, per_call: bool = False) -> dict[str, Any]:
        d = asdict(self)
        if not per_call:
            d.pop("per_call")
        d.pop("handles")
        return d


class CacheMeter:
    """Tokens read from and written to the prompt cache over a sequence of requests."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.prev: Sequence[Message] = ()
        self.read = 0
        self.write = 0

    def add(self, request: Sequence[Message], overhead: int) -> tuple[int, int]:
        common = 0
        for a, b in zip(self.prev, request):
            if a is not b:
                break
            common += 1
        cached = sum(self.counter.count_message(m) for m in request[:common])
        total = sum(self.counter.count_message(m) for m in request)
        read = (overhead if self.prev else 0) + cached
        write = (0 if self.prev else overhead) + total - cached
        self.prev = list(request)
        self.read += read
        self.write += write
        return read, write

    @property
    def cost(self) -> float:
        return self.read * CACHE_READ + self.write * CACHE_WRITE

    @property
    def read_ratio(self) -> float:
        total = self.read + self.write
        return round(self.read / total, 4) if total else 0.0


def replay(
    session: Session,
    window: int,
    max_output: int | None = None,
    *,
    counter: TokenCounter | None = None,
    store: str | None = None,
    unseen_tokens: int | None = 0,
    manager: ContextManager | None = None,
    config: ContextConfig | None = None,
    provider: Any = None,
) -> ReplayReport:
    """Replay ``session`` under a ``window``-token budget; see the module docstring.

    ``unseen_tokens`` is what each recorded request carried that the file does not
    show (Claude Code's system prompt and tool schemas); None infers it from the
    first recorded call's usage."""
    counter = counter or default_counter()
    inferred = unseen_tokens is None
    if unseen_tokens is None:
        unseen_tokens = infer_unseen_tokens(session, counter)
    messages = [m for m in session.messages if not m.meta.get("is_compact_summary")]
    index_map = _reindex(session.messages)
    tmp = None
    if manager is None:
        if store is None:
            tmp = tempfile.TemporaryDirectory(prefix="lossless-replay-")
            store = tmp.name
        manager = ContextManager(
            config=config or ContextConfig(window=window, max_output=max_output),
            counter=counter,
            store=store,
            transcript=False,
            unseen_tokens=unseen_tokens,
            provider=provider,
        )
    budget = getattr(manager, "budget", None) or (config or ContextConfig(window=window, max_output=max_output)).budget
    report = ReplayReport(file=str(session.path), window=window, threshold=budget.threshold,
                          warning=budget.warning, effective=budget.effective,
                          unseen_tokens=unseen_tokens, unseen_inferred=inferred)
    # With a provider given, a replay of the fallback alone must not pass for the model's.
    metered = getattr(manager, "provider", None) if provider is not None else None
    # A plain message list records no calls: each assistant message was one (its usage unknown).
    calls = session.calls or tuple(
        Call(index=i, usage=None, message_id=None, model=None) for i, m in enumerate(session.messages)
        if m.role == "assistant"
    )
    system = session.system
    overhead = unseen_tokens + counter.count_system(system)
    managed_meter, raw_meter = CacheMeter(counter), CacheMeter(counter)
    history: list[Message] = []
    taken = 0
    ever_fired = False
    scale = 1.0
    try:
        for n, call in enumerate(calls):
            stop = index_map[call.index]
            if stop <= 0:
                continue
            history = history + messages[taken:stop]
            taken = stop
            view = manager.prepare(history, system=system, now=_timestamp(messages[stop]))
            if metered is not None:
                metered.check_answered()  # a model nobody reaches: stop now, not after every call failed
            fired = [e.stage for e in view.events if e.fired]
            details = [e.detail for e in view.events if e.fired]
            ever_fired = ever_fired or bool(fired)
            for name in fired:
                report.stages[name] = report.stages.get(name, 0) + 1
            report.summaries += any(name in SUMMARIES or "summary" in name for name in fired)
            for e in view.events:
                report.handles.extend(e.handles)
            history = view.neutral
            valid = not problems(history, session.dialect if session.dialect == "openai" else "anthropic")
            raw = messages[:stop]
            raw_tokens = overhead + sum(counter.count_message(m) for m in raw)
            if not ever_fired:
                # Until a stage fires the managed request is the recorded one, and the manager's
                # figure for it is anchored to recorded usage: the unmanaged one takes the same
                # correction (the two are then equal), and keeps the last one afterwards.
                sent = overhead + sum(counter.count_message(m) for m in history)
                scale = view.state.tokens / sent if sent else 1.0
            raw_tokens = round(raw_tokens * scale)
            read, write = managed_meter.add(history, overhead)
            raw_read, raw_write = raw_meter.add(raw, overhead)
            report.per_call.append(
                CallReport(n, len(history), raw_tokens, view.state.tokens, fired, valid, read, write,
                           details=details, cost_unmanaged=round(raw_meter.cost, 1),
                           cost_managed=round(managed_meter.cost + getattr(manager, "llm_cost", 0.0), 1),
                           recorded_tokens=context_tokens(call.usage), unmanaged_cache_read=raw_read,
                           unmanaged_cache_write=raw_write)
            )
            report.calls += 1
            report.peak_tokens = max(report.peak_tokens, view.state.tokens)
            report.peak_unmanaged_tokens = max(report.peak_unmanaged_tokens, raw_tokens)
            report.over_window_calls += view.state.tokens > window
            report.unmanaged_over_window_calls += raw_tokens > window
            report.invalid_requests += not valid
            # Recorded usage includes the system prompt and tools the file does not show:
            # calibrate on it only when those are accounted for (unseen_tokens) and only
            # while the managed request is still the recorded one.
            if call.usage and unseen_tokens and not ever_fired:
                manager.observe(call.usage)
    finally:
        if tmp is not None:
            manager.close()
            tmp.cleanup()
    # lossless's own model calls (summaries, collapse, notes) are part of what managing costs
    report.summary_calls = getattr(manager, "llm_calls", 0)
    report.summary_failures = getattr(metered, "failures", 0)
    report.cost = {"unmanaged": round(raw_meter.cost),
                   "managed": round(managed_meter.cost + getattr(manager, "llm_cost", 0.0))}
    report.cache_read_ratio = managed_meter.read_ratio
    report.cache_tokens = {"read": managed_meter.read, "write": managed_meter.write,
                           "unmanaged_read": raw_meter.read, "unmanaged_write": raw_meter.write}
    report.unmanaged_cache_read_ratio = raw_meter.read_ratio
    report.estimate_error = estimate_error(session, counter)
    report.recorded_compactions = len(session.boundaries)
    price_report(report, session)
    return report


def price_report(report: ReplayReport, session: Session) -> None:
    """Fill ``report.model`` and ``report.dollars`` (see the module docstring): each call at the
    price of the model that answered it (a session may switch models), tiers applied per call."""
    from .sessions import Usage, dollars, session_model

    model = session_model(session)
    report.model = model
    calls = session.calls
    totals = {"recorded": 0.0, "unmanaged": 0.0, "managed": 0.0}
    for c in report.per_call:
        call = calls[c.call] if c.call < len(calls) else None
        usage = call.usage if call is not None else None
        priced_as = (call.model if call is not None else None) or model
        out = _output_tokens(usage)
        each = (dollars(priced_as, _usage(usage)),
                dollars(priced_as, Usage(output=out, cache_read=c.unmanaged_cache_read,
                                         cache_write=c.unmanaged_cache_write)),
                dollars(priced_as, Usage(output=out, cache_read=c.cache_read, cache_write=c.cache_write)))
        if None in each:
            return
        for key, value in zip(totals, each):
            totals[key] += value or 0.0
    # lossless's own model calls, counted in base-input-token units, at the model's input price
    own = dollars(model, Usage(input=max(0, round(report.cost["managed"] - managed_units(report))))) or 0.0
    totals["managed"] += own
    report.dollars = {key: round(value, 4) for key, value in totals.items()} if report.per_call else {}


def managed_units(report: ReplayReport) -> float:
    """The managed cost in base-input-token units without lossless's own model calls."""
    t = report.cache_tokens
    return t["read"] * CACHE_READ + t["write"] * CACHE_WRITE


def _output_tokens(usage: Any) -> int:
    if not isinstance(usage, Mapping):
        return 0
    value = usage.get("output_tokens", usage.get("completion_tokens"))
    return value if isinstance(value, int) and value > 0 else 0


def _usage_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _usage(usage: Any) -> Any:
    """A recorded usage dict (Anthropic's or OpenAI's) as ``sessions.Usage``."""
    from .sessions import Usage

    if not isinstance(usage, Mapping):
        return Usage()

    def n(key: str) -> int:
        return _usage_int(usage.get(key))

    if "prompt_tokens" in usage:  # OpenAI's: cached tokens are inside prompt_tokens
        details = usage.get("prompt_tokens_details")
        cached = n("cached_tokens") or (_usage_int(details.get("cached_tokens")) if isinstance(details, Mapping) else 0)
        return Usage(input=max(0, n("prompt_tokens") - cached), output=n("completion_tokens"), cache_read=cached)
    return Usage(input=n("input_tokens"), output=n("output_tokens"), cache_read=n("cache_read_input_tokens"),
                 cache_write=n("cache_creation_input_tokens"))


def estimate_error(session: Session, counter: TokenCounter | None = None) -> dict[str, float]:
    """Predict each recorded call from the previous one's usage plus what was appended."""
    counter = counter or default_counter()
    boundaries = sorted(b.index for b in session.boundaries)
    errors: list[float] = []
    prev = None
    for call in session.calls:
        actual = context_tokens(call.usage)
        if actual <= 0:
            prev = None
            continue
        if prev is not None and not any(prev.index < b <= call.index for b in boundaries):
            appended = session.messages[prev.index : call.index]
            predicted = context_tokens(prev.usage) + sum(counter.count_message(m) for m in appended)
            errors.append(100.0 * (predicted - actual) / actual)
        prev = call
    if not errors:
        return {"calls": 0, "mean_abs_pct": 0.0, "mean_pct": 0.0, "max_under_pct": 0.0}
    return {
        "calls": len(errors),
        "mean_abs_pct": round(sum(abs(e) for e in errors) / len(errors), 2),
        "mean_pct": round(sum(errors) / len(errors), 2),
        "max_under_pct": round(max(0.0, -min(errors)), 2),
    }


def _reindex(messages: Sequence[Message]) -> list[int]:
    """Map an index in the session's messages to the index once summaries are dropped."""
    out, k = [], 0
    for m in messages:
        out.append(k)
        if not m.meta.get("is_compact_summary"):
            k += 1
    out.append(k)
    return out


def _timestamp(message: Message) -> float | None:
    ts = message.meta.get("timestamp")
    if isinstance(ts, (int, float)):
        return float(ts)
    if isinstance(ts, str):
        try:
            return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None
