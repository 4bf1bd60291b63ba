"""The systems the fidelity bench compares, each behind one call: ``prepare(incoming, new, system, now)``.

    policy = make_policy(job, store, counter, overhead)
    sent = policy.prepare(history + new, new, system, now)   # what goes to the model
    policy.fired                                             # {stage: calls it fired in}
    policy.oneshot(messages, system, now)                    # the whole history at once, fresh

``unmanaged`` (the history as it grows), ``masking`` (observation masking), ``baseline``
(first message + most recent whole rounds up to half the window, ``_fidelity_baseline``),
``threshold-summary`` (persist + auto-compact + fallback), ``today``/``new`` (lossless's
``ContextManager`` from whichever ``src`` is importable; ``+model`` = ``FakeProvider``),
``openhands`` (its ``LLMSummarizingCondenser`` in its own venv, ``_peer_client``) and
``langchain`` (its ``SummarizationMiddleware`` in its own venv, likewise).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, Callable, Sequence

import _fidelity_metrics as fm
from _fidelity_baseline import RecentRounds

OUTPUT_PRICE = 5.0
MASK_KEEP = 10
MASK_PLACEHOLDER = "[Earlier tool result compacted. Re-run if needed.]"


class CountingProvider:
    """Wraps the fake summariser: counts the policy's model calls and prices them like a
    conversation call (a request that carries the conversation — a summary, or notes sent
    in the conversation — reads it from the cache and writes its last message; a request of
    one message is all written; output at 5×)."""

    def __init__(self, inner: Any, count: Callable[[Any], int], count_system: Callable[[Any], int]) -> None:
        self.inner, self.count, self.count_system = inner, count, count_system
        self.calls = 0
        self.cost = 0.0
        self.parts = {"read": 0.0, "write": 0.0, "output": 0.0}
        self.purposes: dict[str, int] = {}

    def complete(self, request: Any) -> Any:
        self.calls += 1
        purpose = str(getattr(request, "purpose", None))
        self.purposes[purpose] = self.purposes.get(purpose, 0) + 1
        body = [self.count(m) for m in getattr(request, "messages", ())]
        head = self.count_system(getattr(request, "system", None))
        if len(body) > 1:  # the conversation plus one request (summaries, notes): its prefix is cached
            self.parts["read"] += (head + sum(body[:-1])) * fm.CACHE_READ
            self.parts["write"] += body[-1] * fm.CACHE_WRITE
        else:
            self.parts["write"] += (head + sum(body)) * fm.CACHE_WRITE
        response = self.inner.complete(request)
        usage = getattr(response, "usage", None)
        self.parts["output"] += (getattr(usage, "output_tokens", 0) or 0) * OUTPUT_PRICE
        self.cost = sum(self.parts.values())
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Masker:
    """Observation masking: every tool result but the ``MASK_KEEP`` most recent becomes a
    placeholder, every call.  A masked message is built once and reused, so the
    cached prefix only moves where a result is newly masked."""

    def __init__(self) -> None:
        self.memo: dict[int, tuple[Any, Any]] = {}

    def __call__(self, history: list[Any]) -> list[Any]:
        from lossless.messages import ToolResult

        out, seen = list(history), 0
        for i in range(len(out) - 1, -1, -1):
            m = out[i]
            if not any(b.type == "tool_result" for b in m.content):
                continue
            blocks, changed = [], False
            for b in m.content:
                if b.type == "tool_result":
                    seen += 1
                    if seen > MASK_KEEP and b.content != MASK_PLACEHOLDER:
                        b = ToolResult(tool_use_id=b.tool_use_id, content=MASK_PLACEHOLDER, is_error=b.is_error)
                        changed = True
                blocks.append(b)
            if changed:
                hit = self.memo.get(id(m))
                if hit is None or hit[0] is not m:
                    hit = (m, m.with_content(blocks))
                    self.memo[id(m)] = hit
                out[i] = hit[1]
        return out


MOVES_ONE = frozenset({"persist", "microcompact", "echo"})
"""Lossless's stages that move single results out (a large one to its handle, old ones cleared):
not a compaction of the history, so not a landing that the band (55–70 % of the threshold) is for."""


class Policy:
    """One system in the live loop.  ``fired`` counts, per stage, the calls it fired in;
    ``landed`` says whether the last ``prepare`` compacted the history (a snip, a summary, the
    peer's condensation), not only moved single results out (None: every change compacts it)."""

    provider: Any = None
    account_prefixes: tuple[str, ...] = fm.ACCOUNT_PREFIXES
    landed: bool | None = None
    seconds: tuple[float, float] | None = None
    """The last ``prepare``'s own (wall, CPU) seconds where the system measures them itself (a peer, in
    its own process, without the wire to it); None: the worker's clock around the call is its time."""

    def __init__(self, fn: Callable[[list[Any], Any, Any], list[Any]],
                 fresh: Callable[[], Callable[[list[Any], Any, Any], list[Any]]] | None = None) -> None:
        self.fn, self.fresh = fn, fresh
        self.fired: Counter[str] = Counter()
        self.model_calls, self.model_cost = 0, 0.0

    def prepare(self, incoming: list[Any], new: Sequence[Any], system: Any, now: Any) -> list[Any]:
        return list(self.fn(incoming, system, now))

    def oneshot(self, messages: list[Any], system: Any, now: Any) -> list[Any]:
        """The whole history prepared once by a fresh instance of the same system."""
        return list((self.fresh() if self.fresh else self.fn)(list(messages), system, now))

    def close(self) -> None:
        pass


class Lossless(Policy):
    def __init__(self, make: Callable[[], Any], provider: Any) -> None:
        super().__init__(self._call)
        self.make, self.provider = make, provider
        self.cm = make()

    def _call(self, h: list[Any], system: Any, now: Any, cm: Any = None) -> list[Any]:
        prepared = (cm or self.cm).prepare(h, system=system, now=now)
        if cm is None:
            for e in prepared.events:
                if e.fired:
                    self.fired[e.stage] += 1
            self.landed = any(e.fired and e.stage not in MOVES_ONE for e in prepared.events)
        return prepared.messages

    def oneshot(self, messages: list[Any], system: Any, now: Any) -> list[Any]:
        return self._call(list(messages), system, now, cm=self.make())


class Peer(Policy):
    """A peer system in its own process (``_peer_client``); ``kind`` is ``openhands`` or
    ``langchain``, ``max_tokens`` the budget it is given.  Its summary message counts as
    its account."""

    account_prefixes = fm.ACCOUNT_PREFIXES

    def __init__(self, python: str, max_tokens: int, src: str | None, originals: Sequence[Any],
                 count_text: Callable[[str], int], kind: str = "openhands") -> None:
        from _peer_client import LANGCHAIN_OPENING, SUMMARY, LangChainPeer, OpenHandsPeer

        super().__init__(lambda h, system, now: h)
        self.summary_tokens = count_text(SUMMARY)
        if kind == "langchain":
            self.peer: Any = LangChainPeer(python, trigger_tokens=max_tokens, src=src)
            self.account_prefixes = (LANGCHAIN_OPENING[:20],)
        else:
            self.peer = OpenHandsPeer(python, max_tokens=max_tokens, src=src)
            self.account_prefixes = (SUMMARY[:20],)
        self.originals = originals

    def prepare(self, incoming: list[Any], new: Sequence[Any], system: Any, now: Any) -> list[Any]:
        sent, condensed = self.peer.step(new, self.originals)
        self.seconds = self.peer.seconds
        self.landed = bool(condensed)
        if condensed:
            self.fired["condense"] += 1
        self.model_calls = self.peer.model_calls
        # a summary request carries the forgotten events, uncached: written at 1.25×, output at 5×
        self.model_cost = self.peer.summary_input * fm.CACHE_WRITE + self.model_calls * self.summary_tokens * OUTPUT_PRICE
        return sent

    def oneshot(self, messages: list[Any], system: Any, now: Any) -> list[Any]:
        return self.peer.oneshot(messages)

    def close(self) -> None:
        self.peer.close()


def make_policy(job: dict[str, Any], store: str, counter: Any, overhead: int,
                originals: Sequence[Any] = ()) -> Policy:
    """The job's system (see the module docstring); ``store`` is its artifact directory."""
    from lossless.config import ContextConfig
    from lossless.manager import ContextManager
    from lossless.testing import FakeProvider

    name, window = job["policy"], job["window"]
    threshold = ContextConfig(window=window).budget.threshold
    if name == "unmanaged":
        return Policy(lambda h, system, now: h)
    if name == "masking":
        masker = Masker()
        return Policy(lambda h, system, now: masker(h), fresh=lambda: (lambda h, system, now: Masker()(h)))
    if name == "baseline":
        def keep() -> Callable[[list[Any], Any, Any], list[Any]]:
            rounds = RecentRounds(threshold=threshold, keep_tokens=window // 2, count=counter.count_message)
            return lambda h, system, now: rounds(h, overhead)
        return Policy(keep(), fresh=keep)
    if name in ("openhands", "langchain"):
        if not job.get("peer_python"):
            raise ValueError(f"the {name} policy needs the peer's python (run fidelity.py with --peer)")
        return Peer(job["peer_python"], threshold - overhead, job.get("peer_src"), originals, counter.count_text,
                    kind=name)
    provider = CountingProvider(FakeProvider(), counter.count_message, counter.count_system)
    kwargs: dict[str, Any] = {"session_id": "fidelity", "transcript": False}
    if job.get("config"):
        from dataclasses import fields

        known = {f.name for f in fields(ContextConfig)}
        values = {k: v for k, v in job["config"].items() if k in known}
        kwargs["config"] = ContextConfig.from_mapping({"window": window, **values})
    else:
        kwargs["window"] = window
    if name == "threshold-summary":
        from lossless.compaction import AutoCompactor, LLMSummarizer
        from lossless.stages.persist import persist
        from lossless.stages.summary import fallback_summary

        kwargs["stages"] = [("persist", persist), ("autocompact", AutoCompactor(LLMSummarizer(provider))),
                            ("summary", fallback_summary)]
    elif name.endswith("+model"):
        kwargs["provider"] = provider
    elif name not in ("today", "new"):
        raise ValueError(f"unknown policy {name!r}")
    uses = provider if ("provider" in kwargs or name == "threshold-summary") else None
    spare = [0]

    def make() -> Any:  # the first manager uses ``store``; a one-shot one, a sibling directory
        spare[0] += 1
        return ContextManager(store=store if spare[0] == 1 else os.path.join(store, f"oneshot-{spare[0]}"), **kwargs)

    return Lossless(make, uses)
