"""Auto-compact: one model-written summary, a verbatim tail, re-attached context.

    compactor = AutoCompactor(LLMSummarizer(provider))
    stages = (*pipeline.DEFAULT_STAGES[:3], ("autocompact", compactor), ("summary", fallback_summary))
    new, result = compactor(messages, ctx, tokens)        # the stage contract

Above the auto-compact threshold (or on a manual/reactive trigger) it keeps a tail
of whole recent rounds (up to ``tail_fraction`` of the threshold) and replaces
everything before it with ONE user message: the summary (``prompts``, nine
sections) inside a ``<lossless-summary … source="model">`` marker whose handle
recalls the exact replaced messages (``archive_json``), followed by re-attached
instruction files and recently read files (``reattach``).

Stateful, for the session:

- **Never a bad replacement.** A provider error (after its retries), or a summary
  that is empty, malformed or not smaller than what it replaces, leaves the history
  exactly as it was (``fired=False``, the reason in ``detail``).
- **Circuit breaker.** Each automatic failure counts; ``breaker_limit`` (3) in a row
  opens the breaker and auto-compaction stays off — the deterministic fallback
  summary after this stage takes over, for manual and reactive compactions too.
  ``reset()`` (a new session) closes it.
- **No compaction loop.** When a compaction leaves the context above the threshold,
  auto-compaction does not fire again until the context has grown by
  ``regrowth_fraction`` of the threshold (or came back under it); the fallback
  summary keeps the request under the blocking limit meanwhile.

Invariants: only whole rounds are replaced, so the output passes ``validate()``
whenever the input did (the summary is a user message, the tail starts at a round);
tail messages are the input's own objects; the input list is never changed.  A last
assistant message whose tool calls are not answered yet (the model's own ``compact``
call) is left out of the summary request and kept last, for the agent to answer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from .. import account as _account, markers
from ..config import ContextConfig
from ..errors import CompactionError
from ..messages import Message, Text
from ..rounds import group_rounds
from ..stages.base import StageContext, StageResult, skipped
from ..store import ArtifactStore, handle_for
from ..tokens import TokenCounter, default_counter
from . import reattach as _reattach
from .hooks import Hooks
from .prompts import check_summary
from .reattach import ReattachConfig
from .summarizer import Summarizer

__all__ = ["AutoCompactor", "compact_with", "summary_message"]

NAME = "autocompact"
ACCOUNT_CHARS_PER_TOKEN = 3
REATTACH_FRACTION = 0.3
"""Re-attached files take at most this share of the threshold: 50,100 tokens at 200k (the seeds'
50,000), 6,480 at 32k."""
KIND = "summary"


def summary_message(*, handle: str, covered: int, tokens: int, summary: str, kind: str = KIND,
                    attachments: str = "", omitted: int = 0, tail: bool = True, scope: str = "",
                    account: str = "") -> Message:
    """The one user message that stands for ``covered`` replaced messages: the model's
    summary on top of the deterministic ``account`` of what they held (the floor: every
    user message and tool call of the range, with handles, whatever the model wrote)."""
    scope_attr = f' scope="{scope}"' if scope else ""
    missing = (f" {omitted} of them (the oldest) did not fit the summary request: the account below covers them."
               if omitted else "")
    after = ("The conversation continues below, word for word." if tail else
             "Continue the work from where it left off, without asking the user to repeat anything.")
    body = summary.replace(markers.SUMMARY_CLOSE[:-1], "<\\/" + markers.SUMMARY_CLOSE[2:-1])
    parts = [
        f'{markers.SUMMARY_OPEN} handle="{handle}" messages="{covered}" tokens="{tokens}" source="model"{scope_attr}>',
        f"This replaces {markers.counted(covered, 'earlier message')} (about {tokens:,} tokens) with a summary written by the model."
        f"{missing} The originals are stored in full; {markers.RECALL_HINT.format(handle=handle)}.",
        "",
        body,
    ]
    if account:
        parts += ["", _account.H_ACCOUNT, account]
    if attachments:
        parts += ["", attachments]
    parts += ["", after, markers.SUMMARY_CLOSE]
    return Message(role="user", content=(Text(text="\n".join(parts)),),
                   meta={"lossless": {"kind": kind, "handle": handle}})


def compact_with(
    summarizer: Summarizer,
    messages: Sequence[Message],
    ctx: StageContext,
    tokens: int,
    *,
    tail_budget: float,
    window: int | None = None,
    instructions: str | None = None,
    reattach: ReattachConfig = ReattachConfig(),
    stage: str = NAME,
) -> tuple[list[Message], StageResult] | None:
    """One compaction attempt; None when there is nothing to summarise.  Raises on any
    failure (``CompactionError`` for an unusable summary, the provider's error otherwise)."""
    # A trailing assistant message whose calls are not answered yet (the agent's own
    # ``compact`` tool call, say) stays out of the summary request — the API refuses a
    # tool_use without its result — and stays last, so the agent can answer it.
    pending = list(messages[-1:]) if messages and messages[-1].role == "assistant" and messages[-1].tool_uses else []
    messages = messages[: len(messages) - len(pending)]
    rounds = group_rounds(messages)
    lead = 0  # leading system messages (OpenAI dialect) stay first
    while lead < len(rounds) and rounds[lead].kind == "system":
        lead += 1
    body = rounds[lead:]
    if not body or (len(body) == 1 and len(body[0]) == 1 and messages[body[0].start].marker):
        return None
    count = ctx.counter.count_message
    sizes = [sum(count(messages[i]) for i in range(r.start, r.stop)) for r in body]
    k, used = 0, 0
    for size in reversed(sizes[1:]):  # at least one round is summarised
        if used + size > tail_budget:
            break
        used, k = used + size, k + 1
    start = body[0].start
    stop = body[len(body) - k].start if k else len(messages)
    replaced = list(messages[start:stop])
    replaced_tokens = sum(sizes[: len(body) - k])
    result = summarizer.summarize(
        messages, system=ctx.system, tools=ctx.tools, instructions=instructions,
        mode="up_to" if k else "full", point=stop if k else None, window=window,
    )
    reason = check_summary(result.text, replaced_tokens, ctx.counter)
    if reason:
        raise CompactionError(reason)
    archive = _account.flat_archive(replaced, ctx.store)
    handle = handle_for(archive.encode("utf-8", "surrogatepass"))
    tail = [*messages[stop:], *pending]
    acc = _account.collect(replaced, ctx.config, ctx.store)
    account = acc.render(ACCOUNT_CHARS_PER_TOKEN * ctx.config.account_tokens(replaced_tokens))

    def build(attached: str) -> Message:
        return summary_message(handle=handle, covered=len(replaced), tokens=replaced_tokens, summary=result.text,
                               attachments=attached, omitted=result.omitted, tail=bool(tail), account=account)

    plain = build("")
    if count(plain) >= replaced_tokens:
        raise CompactionError(f"the summary message ({count(plain):,} tokens) is not smaller than the "
                              f"{replaced_tokens:,} tokens it would replace")
    # Re-attached context fits under the threshold, takes at most REATTACH_FRACTION of it (the seeds'
    # 50,000 tokens at 200k; on a small window a fixed budget would fill the context right back up)
    # and at most half of what the summary freed, its Markdown included: a compaction keeps at least
    # half its saving (with all of it allowed, a /compact of a short context re-read the file it had
    # just summarised and went from 8,764 to 8,762 tokens).
    after_plain = tokens - replaced_tokens + count(plain)
    threshold = ctx.budget.threshold
    room = min(threshold - after_plain, (tokens - after_plain) // 2, int(REATTACH_FRACTION * threshold))
    attachments = _reattach.collect(replaced, tail, reattach, ctx.counter, budget=room, system=ctx.system)
    msg = build(_reattach.render(attachments)) if attachments else plain
    excess = count(msg) - count(plain) - room
    if attachments and excess > 0:  # the Markdown's share, learnt: collect again within what it leaves
        attachments = _reattach.collect(replaced, tail, reattach, ctx.counter, budget=room - excess,
                                        system=ctx.system)
        msg = build(_reattach.render(attachments)) if attachments else plain
    while attachments and count(msg) - count(plain) > room:  # the Markdown around them counts too
        attachments = attachments[:-1]
        msg = build(_reattach.render(attachments)) if attachments else plain
    after = tokens - replaced_tokens + count(msg)
    handle = ctx.store.put(archive)
    item_handles = acc.commit(ctx.store, msg.text)
    files = sum(1 for a in attachments if a.kind == "file")
    detail = (
        f"summarized {len(replaced)} messages ({replaced_tokens:,} tokens) with the model in "
        f"{markers.counted(result.calls, 'call')}, kept {markers.counted(k, 'round')} verbatim, re-attached "
        f"{markers.counted(files, 'file')} and {markers.counted(len(attachments) - files, 'instruction file')}: {tokens:,} → {after:,} tokens (threshold {threshold:,})"
    )
    boundary = {"trigger": ctx.trigger, "preTokens": tokens, "postTokens": after, "covered": len(replaced)}
    out = [*messages[:start], msg, *tail]
    return out, StageResult(stage=stage, fired=True, tokens_before=tokens, tokens_after=after, detail=detail,
                            handles=(handle,), items=item_handles, boundary=boundary)


@dataclass(slots=True)
class _Guard:
    """Set after a compaction that left the context above the threshold."""

    floor: int
    until: int


class AutoCompactor:
    """The auto-compact stage: callable as ``(messages, ctx, tokens) -> (messages, StageResult)``."""

    def __init__(
        self,
        summarizer: Summarizer,
        *,
        config: ContextConfig | None = None,
        counter: TokenCounter | None = None,
        store: ArtifactStore | None = None,
        breaker_limit: int = 3,
        tail_fraction: float | None = None,
        reattach: ReattachConfig = ReattachConfig(),
        hooks: Hooks = Hooks(),
        regrowth_fraction: float = 0.1,
    ) -> None:
        """``config``/``counter``/``store`` are used only by ``compact()`` without a context;
        in the pipeline the ``StageContext`` supplies them.  ``tail_fraction`` defaults to
        ``ContextConfig.tail_fraction``."""
        self.summarizer = summarizer
        self.config = config
        self.counter = counter
        self.store = store
        self.breaker_limit = breaker_limit
        self.tail_fraction = tail_fraction
        self.reattach = reattach
        self.hooks = hooks
        self.regrowth_fraction = regrowth_fraction
        self.reset()

    def reset(self) -> None:
        """A new session: the breaker closes and the loop guard is cleared."""
        self.failures = 0
        self._guard: _Guard | None = None

    @property
    def is_open(self) -> bool:
        """True when auto-compaction is off for this session (too many failures in a row)."""
        return self.failures >= self.breaker_limit

    def __call__(self, messages: Sequence[Message], ctx: StageContext,
                 tokens: int) -> tuple[list[Message], StageResult]:
        return self.run(messages, ctx, tokens)

    def compact(self, messages: Sequence[Message], *, instructions: str | None = None, system: Any = None,
                tools: Any = None, ctx: StageContext | None = None) -> tuple[list[Message], StageResult]:
        """A manual compaction (``trigger="manual"``), with a context built from this object's
        ``config``/``counter``/``store`` when none is given."""
        if ctx is None:
            ctx = StageContext(config=self.config or ContextConfig(), counter=self.counter or default_counter(),
                               store=self.store or ArtifactStore(), system=system, tools=tools)
        ctx = replace(ctx, trigger="manual")
        return self.run(messages, ctx, ctx.count(messages), instructions=instructions)

    def run(self, messages: Sequence[Message], ctx: StageContext, tokens: int, *,
            instructions: str | None = None) -> tuple[list[Message], StageResult]:
        same = messages if isinstance(messages, list) else list(messages)
        threshold = ctx.budget.threshold
        trigger = ctx.trigger
        if trigger == "auto":
            if tokens <= threshold:
                self._guard = None
                return same, skipped(NAME, tokens, f"{tokens:,} tokens, at or below the threshold {threshold:,}")
            if self.is_open:
                return same, skipped(NAME, tokens, self._open_detail())
            if self._guard is not None and tokens < self._guard.until:
                why = (f"the last compaction left {self._guard.floor:,} tokens, above the threshold {threshold:,}; "
                       f"not compacting again before {self._guard.until:,} (the fallback summary makes room)")
                return same, skipped(NAME, tokens, why)
        elif self.is_open:  # manual or reactive: a model known to fail is not asked again
            return same, skipped(NAME, tokens, self._open_detail())
        instr = self.hooks.instructions(messages, trigger, instructions)
        fraction = self.tail_fraction if self.tail_fraction is not None else ctx.config.tail_fraction
        try:
            done = compact_with(self.summarizer, messages, ctx, tokens, tail_budget=fraction * threshold,
                                window=ctx.config.window, instructions=instr, reattach=self.reattach)
        except Exception as exc:  # noqa: BLE001 - any failure must leave the history as it was
            result = self._failed(trigger, tokens, exc)
            self.hooks.after(result)
            return same, result
        if done is None:
            return same, skipped(NAME, tokens, "nothing to summarise")
        out, result = done
        self.failures = 0
        self._guard = None
        if result.tokens_after > threshold:
            until = result.tokens_after + int(self.regrowth_fraction * threshold)
            self._guard = _Guard(floor=result.tokens_after, until=until)
            result = replace(result, detail=result.detail + f"; still above the threshold: auto-compaction waits "
                                                            f"until {until:,} tokens")
        self.hooks.after(result)
        return out, result

    def _failed(self, trigger: str, tokens: int, exc: Exception) -> StageResult:
        why = str(exc) if isinstance(exc, CompactionError) else f"{type(exc).__name__}: {exc}"
        detail = f"{trigger} compaction failed, history kept: {why}"
        if trigger != "manual":  # a manual failure is reported to the user, not held against auto
            self.failures += 1
            detail += f" ({markers.counted(self.failures, 'consecutive failure')}"
            detail += "; circuit breaker now open: auto-compaction is off for this session)" if self.is_open else ")"
        return skipped(NAME, tokens, detail)

    def _open_detail(self) -> str:
        return (f"circuit breaker open after {self.failures} consecutive failures: auto-compaction is off for this "
                f"session (the fallback summary makes room; reset() closes it)")
