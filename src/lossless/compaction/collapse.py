"""Collapse: the oldest finished episodes become short summaries, one by one.

    collapser = Collapser(LLMSummarizer(provider))
    new, result = collapser(messages, ctx, tokens)        # the stage contract

An **episode** is a user request (a user message with text of its own — not a tool
result, not a lossless marker) and every round that serves it, up to the next
such message.  The newest episode (``keep_episodes``) is never collapsed: it is the
work in progress.  Above ``trigger_fraction`` (90 %) of the auto-compact threshold,
the oldest finished episodes are summarised one at a time — one small model call
each, the request being the conversation up to the end of the episode, so it
starts with the cached prefix — and each is replaced by ONE user message (a
``<lossless-summary … scope="episode">`` marker whose handle recalls the episode
exactly), until the context is under ``target_fraction`` (50 %).  Recent episodes
stay verbatim, so more detail survives than in one full summary, and auto-compact
below usually has nothing left to do.

A failed call or an unusable summary stops collapsing for this call and keeps
that episode as it was (episodes already collapsed on this call stay collapsed);
``breaker_limit`` failing calls in a row turn collapse off for the session
(``reset()`` turns it back on).  An episode that was collapsed, or any earlier
summary, is never summarised again here.

Invariant: an episode starts at a user message that opens a round and ends where
the next one starts, so replacing it never splits a round and the output passes
``validate()`` whenever the input did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .. import account, markers
from ..messages import Message, Text
from ..rounds import group_rounds
from ..stages.base import StageContext, StageResult, skipped
from ..store import handle_for
from .autocompact import ACCOUNT_CHARS_PER_TOKEN, summary_message
from .prompts import check_summary
from .summarizer import Summarizer

__all__ = ["Collapser", "Episode", "episodes"]

NAME = "collapse"
KIND = "collapse"


@dataclass(frozen=True, slots=True)
class Episode:
    start: int
    stop: int


def _is_summary(m: Message) -> bool:
    kind = (m.marker or {}).get("kind")
    return kind in ("summary", "collapse") or any(
        isinstance(b, Text) and b.text.startswith(markers.SUMMARY_OPEN) for b in m.content)


def _is_request(m: Message) -> bool:
    return m.role == "user" and not m.tool_results and any(
        isinstance(b, Text) and b.text.strip() and not markers.is_marker(b.text) for b in m.content)


def episodes(messages: Sequence[Message], keep: int = 1) -> list[Episode]:
    """The finished episodes that may be collapsed, oldest first."""
    starts: list[tuple[int, bool]] = []
    for r in group_rounds(messages):
        if r.kind != "user":
            continue
        m = messages[r.start]
        if _is_summary(m):
            starts.append((r.start, False))
        elif _is_request(m):
            starts.append((r.start, True))
    requests = [i for i, (_, ok) in enumerate(starts) if ok]
    newest = set(requests[-keep:]) if keep > 0 else set()
    out = []
    for i, (start, ok) in enumerate(starts[:-1]):
        stop = starts[i + 1][0]
        if ok and i not in newest and stop - start >= 2:
            out.append(Episode(start, stop))
    return out


class Collapser:
    """The collapse stage: callable as ``(messages, ctx, tokens) -> (messages, StageResult)``."""

    def __init__(
        self,
        summarizer: Summarizer,
        *,
        trigger_fraction: float = 0.9,
        target_fraction: float = 0.5,
        keep_episodes: int = 1,
        min_episode_fraction: float = 0.03,
        max_calls: int = 8,
        breaker_limit: int = 3,
        min_sections: int = 7,
    ) -> None:
        """``min_episode_fraction`` of the threshold: smaller episodes are not worth a call.
        ``max_calls`` bounds the model calls (and the latency) of one pipeline run."""
        self.summarizer = summarizer
        self.trigger_fraction = trigger_fraction
        self.target_fraction = target_fraction
        self.keep_episodes = max(1, keep_episodes)
        self.min_episode_fraction = min_episode_fraction
        self.max_calls = max_calls
        self.breaker_limit = breaker_limit
        self.min_sections = min_sections
        self.reset()

    def reset(self) -> None:
        self.failures = 0

    @property
    def is_open(self) -> bool:
        return self.failures >= self.breaker_limit

    def __call__(self, messages: Sequence[Message], ctx: StageContext,
                 tokens: int) -> tuple[list[Message], StageResult]:
        same = messages if isinstance(messages, list) else list(messages)
        threshold = ctx.budget.threshold
        start_at, target = int(self.trigger_fraction * threshold), int(self.target_fraction * threshold)
        if ctx.trigger != "auto":
            return same, skipped(NAME, tokens, f"collapse runs before normal calls only (trigger {ctx.trigger!r})")
        if tokens <= start_at:
            return same, skipped(NAME, tokens, f"{tokens:,} tokens, at or below the collapse trigger {start_at:,}")
        if self.is_open:
            return same, skipped(NAME, tokens, f"collapse is off for this session after {self.failures} failures")
        count = ctx.counter.count_message
        min_tokens = self.min_episode_fraction * threshold
        current, now = same, tokens
        handles: list[str] = []
        items: list[str] = []
        collapsed, calls, stop_why = 0, 0, ""
        while now > target:
            if calls >= self.max_calls:
                stop_why = f"; stopped after {calls} calls (max_calls)"
                break
            sized = [(e, sum(count(m) for m in current[e.start:e.stop])) for e in episodes(current, self.keep_episodes)]
            candidates = [(e, n) for e, n in sized if n >= min_tokens]
            if not candidates:
                break
            episode, size = candidates[0]
            calls += 1
            try:
                result = self.summarizer.summarize(
                    current[: episode.stop], system=ctx.system, tools=ctx.tools, mode="since", point=episode.start,
                    window=ctx.config.window, brief=True,
                )
                reason = check_summary(result.text, size, ctx.counter, min_sections=self.min_sections)
            except Exception as exc:  # noqa: BLE001 - a failed call keeps the episode
                reason = f"{type(exc).__name__}: {exc}"
            if reason:
                if not collapsed:
                    self.failures += 1
                stop_why = f"; stopped at messages {episode.start}-{episode.stop - 1}, kept verbatim: {reason}"
                break
            removed = current[episode.start: episode.stop]
            archive = account.flat_archive(removed, ctx.store)
            handle = handle_for(archive.encode("utf-8", "surrogatepass"))
            acc = account.collect(removed, ctx.config)
            body = acc.render(ACCOUNT_CHARS_PER_TOKEN * ctx.config.account_tokens(size) // 2)
            msg = summary_message(handle=handle, covered=episode.stop - episode.start, tokens=size,
                                  summary=result.text, kind=KIND, omitted=result.omitted, scope="episode",
                                  account=body)
            if count(msg) >= size:
                if not collapsed:
                    self.failures += 1
                stop_why = (f"; stopped at messages {episode.start}-{episode.stop - 1}, kept verbatim: its summary "
                            f"({count(msg):,} tokens with the marker) is not smaller than the episode ({size:,})")
                break
            ctx.store.put(archive)
            current = [*current[: episode.start], msg, *current[episode.stop:]]
            now = now - size + count(msg)
            handles.append(handle)
            items.extend(acc.commit(ctx.store))
            collapsed += 1
        if not collapsed:
            return same, skipped(NAME, tokens, "no finished episode worth collapsing" + stop_why)
        self.failures = 0
        detail = (f"collapsed {collapsed} episode(s) into short summaries in {calls} call(s): {tokens:,} → {now:,} "
                  f"tokens (target {target:,}){stop_why}")
        return current, StageResult(stage=NAME, fired=True, tokens_before=tokens, tokens_after=now, detail=detail,
                                    handles=tuple(handles), items=tuple(items))
