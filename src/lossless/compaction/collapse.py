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

Episodes are bounded: an agent may work for hundreds of rounds on one request, and
one summary of all of them folds the work into a line.  A stretch longer than
``max_episode_tokens`` (20,000) is cut into several episodes, each summarised on its
own.  A cut falls at a natural boundary when one lies in the second half of the bound
— a todo marked done, a task closed, a passing test run, a git commit (the last one
before the bound) — else at the last round boundary under it; one round larger than
the bound is an episode of its own.  The rounds after a summary (the rest of an
episode partly collapsed) are cut the same way.

A failed call or an unusable summary stops collapsing for this call and keeps
that episode as it was (episodes already collapsed on this call stay collapsed);
``breaker_limit`` failing calls in a row turn collapse off for the session
(``reset()`` turns it back on).  An episode that was collapsed, or any earlier
summary, is never summarised again here.

Invariant: an episode starts and ends at round boundaries (at a user request, at a
cut, after a summary), so replacing it never splits a round and the output passes
``validate()`` whenever the input did; every message of a finished episode lies in
exactly one of its pieces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Literal, Sequence

from .. import account, markers
from ..messages import Message, Text, ToolResult, ToolUse, result_text
from ..rounds import Round, group_rounds
from ..account.outcome import exit_status
from ..stages.base import StageContext, StageResult, skipped
from ..stages.snip import Summarise
from ..store import handle_for
from .autocompact import ACCOUNT_CHARS_PER_TOKEN, summary_message
from .prompts import check_summary
from .summarizer import Summarizer

__all__ = ["Collapser", "Episode", "episodes", "range_summariser"]

NAME = "collapse"
KIND = "collapse"


MAX_EPISODE_TOKENS = 20_000
"""Default bound of one episode: a longer stretch without a user turn is cut into several.
In tokens, not a share of the window: what a short summary can do justice to depends on
how much work it covers, and in a small window a smaller piece would not be worth its
summary's marker and account."""
REACH = 0.5
"""A natural boundary is taken for a cut when the piece before it holds at least this
share of the bound; below it, the cut goes to the last round under the bound instead."""

Cut = Literal["request", "todo done", "task closed", "tests passed", "commit", "bound"]
NATURAL: tuple[Cut, ...] = ("todo done", "task closed", "tests passed", "commit")


@dataclass(frozen=True, slots=True)
class Episode:
    """Messages ``start`` (inclusive) to ``stop`` (exclusive); ``cut`` says why it ends
    there: the next user request (or summary), a natural boundary, or the token bound."""

    start: int
    stop: int
    cut: Cut = "request"


def _is_summary(m: Message) -> bool:
    kind = (m.marker or {}).get("kind")
    return kind in ("summary", "collapse") or any(
        isinstance(b, Text) and b.text.startswith(markers.SUMMARY_OPEN) for b in m.content)


def _is_request(m: Message) -> bool:
    return m.role == "user" and not m.tool_results and any(
        isinstance(b, Text) and b.text.strip() and not markers.is_marker(b.text) for b in m.content)


# -- natural boundaries --------------------------------------------------------
_TEST_RUN = re.compile(
    r"\b(?:py\.?test|mix test|(?:npm|yarn|pnpm|bun)(?: run)? test|go test|cargo test|vitest|jest|rspec|tox|nox"
    r"|make (?:test|check)|unittest|phpunit|ctest|(?:gradle|mvn|dotnet) test|rake test|bats)\b")
_PASSED = re.compile(
    r"\b\d+ (?:tests?|examples?|specs?), 0 failures\b|\b\d+ passed\b|^OK\b|^ok\s+\S|\btest result: ok\b"
    r"|^Tests:?\s+\d+ passed|^PASS\b", re.M)
_FAILED = re.compile(r"\b[1-9]\d* (?:failed|failures?|errors?)\b|^FAILED\b|^FAIL\b|\btest result: FAILED\b", re.M)
_GIT_COMMIT = re.compile(r"\bgit\b(?:\s+-\S+(?:\s+\S+)?)*\s+commit\b")
_COMMITTED = re.compile(r"^\[[^\]\n]+ [0-9a-f]{7,40}\]|^ \d+ files? changed\b", re.M)
_TASK_CLOSED = re.compile(r"\b(?:bd|gh issue|jira issue) close\b|\bbd update\b.*--status[= ]closed")
_TODO_TOOLS = frozenset({"todowrite", "todo_write", "update_todos", "update_plan"})


def _command(use: ToolUse) -> str:
    value = use.input.get("command") or use.input.get("cmd") or ""
    if isinstance(value, list):
        value = " ".join(map(str, value))
    return value if isinstance(value, str) else ""


def _completed(use: ToolUse) -> set[str]:
    items = use.input.get("todos") or use.input.get("plan") or ()
    return {str(t.get("content") or t.get("step") or t.get("id") or t) for t in items if isinstance(t, dict)
            and t.get("status") in ("completed", "done")} if isinstance(items, list) else set()


def _clean(result: ToolResult | None) -> str | None:
    """The result's tail when the call succeeded (no error flag, exit status 0 or none)."""
    if result is None or result.is_error:
        return None
    text = result_text(result)
    return text[-4_000:] if exit_status(text) in (None, 0) else None


def _natural(messages: Sequence[Message], rounds: Sequence[Round]) -> list[Cut | None]:
    """Per round, the natural boundary it ends with (None: none).  Todos done are counted
    against every earlier todo list, so a list re-sent unchanged is no boundary."""
    done: set[str] = set()
    out: list[Cut | None] = []
    for r in rounds:
        found: Cut | None = None
        if r.kind == "round":
            results = {b.tool_use_id: b for b in messages[r.stop - 1].tool_results} if len(r) > 1 else {}
            for use in messages[r.start].tool_uses:
                if use.name.lower() in _TODO_TOOLS:
                    now = _completed(use)
                    if now - done and use.id in results and not results[use.id].is_error:
                        found = "todo done"
                    done |= now
                    continue
                command = _command(use)
                if not command or (tail := _clean(results.get(use.id))) is None:
                    continue
                if _GIT_COMMIT.search(command) and _COMMITTED.search(tail):
                    found = "commit"
                elif _TASK_CLOSED.search(command):
                    found = found or "task closed"
                elif _TEST_RUN.search(command) and _PASSED.search(tail) and not _FAILED.search(tail):
                    found = found or "tests passed"
        out.append(found)
    return out


def _pieces(sizes: Sequence[int], natural: Sequence[Cut | None], bound: int) -> list[tuple[int, int, Cut]]:
    """Consecutive pieces ``(first, stop, cut)`` of a run of rounds, each within ``bound``
    tokens (or one round), cut at the last natural boundary in reach, else at the bound."""
    out: list[tuple[int, int, Cut]] = []
    first, n = 0, len(sizes)
    while first < n:
        total, k = 0, first
        best: tuple[int, Cut] | None = None
        while k < n and (k == first or total + sizes[k] <= bound):
            total += sizes[k]
            if (mark := natural[k]) and total >= REACH * bound:
                best = (k + 1, mark)
            k += 1
        if k == n:
            out.append((first, n, "request"))
            break
        stop, cut = best if best else (k, "bound")
        out.append((first, stop, cut))
        first = stop
    return out


def episodes(messages: Sequence[Message], keep: int = 1, *, max_tokens: int | None = None,
             count: Callable[[Message], int] | None = None) -> list[Episode]:
    """The finished episodes that may be collapsed, oldest first.

    With ``max_tokens`` and ``count``, a longer episode comes as several pieces of at
    most ``max_tokens`` each (one round alone may be more), and the rounds that follow a
    summary (what is left of an episode partly collapsed) are episodes too."""
    rounds = group_rounds(messages)
    starts: list[tuple[int, bool]] = []
    for k, r in enumerate(rounds):
        if r.kind != "user":
            continue
        m = messages[r.start]
        if _is_summary(m):
            starts.append((k, False))
        elif _is_request(m):
            starts.append((k, True))
    requests = [i for i, (_, ok) in enumerate(starts) if ok]
    newest = set(requests[-keep:]) if keep > 0 else set()
    split = max_tokens is not None and count is not None
    natural = _natural(messages, rounds) if split else []
    out: list[Episode] = []
    for i, (first, ok) in enumerate(starts[:-1]):
        last = starts[i + 1][0]
        if i in newest:
            continue
        if not ok:  # a summary is never summarised again; what follows it may be
            if not split:
                continue
            first += 1
        if first >= last:
            continue
        if not split:
            start, stop = rounds[first].start, rounds[last].start
            if stop - start >= 2:
                out.append(Episode(start, stop))
            continue
        assert max_tokens is not None and count is not None
        sizes = [sum(count(messages[j]) for j in range(r.start, r.stop)) for r in rounds[first:last]]
        for a, b, cut in _pieces(sizes, natural[first:last], max_tokens):
            start, stop = rounds[first + a].start, rounds[first + b - 1].stop
            if stop - start >= 2:
                out.append(Episode(start, stop, cut))
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
        max_episode_tokens: int = MAX_EPISODE_TOKENS,
        max_calls: int = 8,
        breaker_limit: int = 3,
        min_sections: int = 7,
    ) -> None:
        """``min_episode_fraction`` of the threshold: smaller episodes are not worth a call;
        ``max_episode_tokens``: longer stretches without a user turn are cut.
        ``max_calls`` bounds the model calls (and the latency) of one pipeline run."""
        self.summarizer = summarizer
        self.trigger_fraction = trigger_fraction
        self.target_fraction = target_fraction
        self.keep_episodes = max(1, keep_episodes)
        self.min_episode_fraction = min_episode_fraction
        self.max_episode_tokens = max_episode_tokens
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
        max_tokens = max(1, self.max_episode_tokens)
        current, now = same, tokens
        handles: list[str] = []
        items: list[str] = []
        collapsed, calls, stop_why = 0, 0, ""
        while now > target:
            if calls >= self.max_calls:
                stop_why = f"; stopped after {calls} calls (max_calls)"
                break
            sized = [(e, sum(count(m) for m in current[e.start:e.stop]))
                     for e in episodes(current, self.keep_episodes, max_tokens=max_tokens, count=count)]
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
            items.extend(acc.commit(ctx.store, msg.text))
            collapsed += 1
        if not collapsed:
            return same, skipped(NAME, tokens, "no finished episode worth collapsing" + stop_why)
        self.failures = 0
        detail = (f"collapsed {markers.counted(collapsed, 'episode')} into short summaries in {markers.counted(calls, 'call')}: {tokens:,} → {now:,} "
                  f"tokens (target {target:,}){stop_why}")
        return current, StageResult(stage=NAME, fired=True, tokens_before=tokens, tokens_after=now, detail=detail,
                                    handles=tuple(handles), items=tuple(items))


def range_summariser(summarizer: Summarizer, *, min_sections: int = 7, breaker_limit: int = 3) -> Summarise:
    """What ``stages.snip.summarised`` asks before it snips a range: the model's brief summary
    of it, one call whose request is the conversation up to the range's end (so it reads the
    cached prefix), or None — a failed call or a malformed or oversized answer; after
    ``breaker_limit`` of those in a row it stops asking for the session."""
    failures = 0

    def summarise(messages: Sequence[Message], start: int, ctx: StageContext, size: int) -> str | None:
        nonlocal failures
        if failures >= breaker_limit:
            return None
        try:
            result = summarizer.summarize(messages, system=ctx.system, tools=ctx.tools, mode="since", point=start,
                                          window=ctx.config.window, brief=True)
            reason = check_summary(result.text, size, ctx.counter, min_sections=min_sections)
        except Exception as exc:  # noqa: BLE001 - a failed call is a plain snip
            reason = f"{type(exc).__name__}: {exc}"
        if reason:
            failures += 1
            return None
        failures = 0
        return result.text

    return summarise
