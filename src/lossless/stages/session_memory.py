"""Session-memory compaction: the session's notes file as the summary, with no LLM call.

When the context is over the threshold and the notes kept by ``SessionNotes`` are
substantial (the seeds' thresholds: at least 10,000 tokens of history and 5 text
messages, notes at most 40,000 tokens), everything before a verbatim recent tail
is replaced by one user message carrying the notes, with a handle to the replaced
messages.  It runs before any LLM summary: it costs nothing and the notes were
written by the model while it still saw the details.
"""

from __future__ import annotations

from typing import Sequence

from .. import account, markers
from ..memory.session import SessionNotes, looks_like_notes
from ..messages import Message, Text
from ..rounds import group_rounds
from .base import StageContext, StageResult, skipped

NAME = "session_memory"
MIN_NOTES_TOKENS = 50
"""Notes shorter than this (or without sections) are not trusted to replace a history."""


class SessionMemoryCompactor:
    """A stage (``stage(messages, ctx, tokens)``) bound to one session's notes."""

    def __init__(self, notes: SessionNotes) -> None:
        self.notes = notes

    def __call__(self, messages: Sequence[Message], ctx: StageContext, tokens: int) -> tuple[list[Message], StageResult]:
        current = messages if isinstance(messages, list) else list(messages)
        threshold = ctx.budget.threshold
        if ctx.trigger == "auto" and tokens <= threshold:
            return current, skipped(NAME, tokens, f"{tokens:,} tokens, at or below the threshold {threshold:,}")
        text = self.notes.read().strip()
        if not text:
            return current, skipped(NAME, tokens, "no session notes yet")
        notes_tokens = ctx.counter.count_text(text)
        text_messages = sum(1 for m in current if m.text.strip())
        if notes_tokens < MIN_NOTES_TOKENS or not looks_like_notes(text):
            return current, skipped(NAME, tokens, "session notes too thin to stand for the history (want ≥ 2 sections)")
        if not self.notes.substantial(tokens, text_messages, notes_tokens):
            return current, skipped(NAME, tokens, "session notes not substantial enough to stand for the history")
        count = ctx.counter.count_message
        cut = _tail_start(current, ctx, budget=int(ctx.config.tail_fraction * threshold))
        if cut <= 0:
            return current, skipped(NAME, tokens, "nothing before the recent tail to replace")
        replaced = current[:cut]
        removed = sum(count(m) for m in replaced)
        acc = account.collect(replaced, ctx.config, ctx.store)
        listed = acc.render(3 * ctx.config.account_tokens(removed) // 2)
        handle = ctx.store.put(account.flat_archive(replaced, ctx.store))
        body = (
            f'{markers.SUMMARY_OPEN} kind="session-notes" handle="{handle}" messages="{cut}" tokens="{removed}">\n'
            f"This replaces {markers.counted(cut, 'earlier message')} (about {removed:,} tokens) with the session's own notes. "
            f"The originals are stored in full; {markers.RECALL_HINT.format(handle=handle)}.\n\n"
            f"{text}\n\n{account.H_ACCOUNT}\n{listed}\n</lossless-summary>"
        )
        summary = Message(role="user", content=(Text(text=body),),
                          meta={"lossless": {"kind": "summary", "source": "session-notes", "handle": handle}})
        out = [summary, *current[cut:]]
        after = tokens - removed + count(summary)
        if after >= tokens:
            return current, skipped(NAME, tokens, "the notes would not be smaller than what they replace")
        items = acc.commit(ctx.store, body)
        detail = f"replaced {cut} messages by the session notes ({notes_tokens:,} tokens): {tokens:,} → {after:,} tokens"
        boundary = {"trigger": ctx.trigger, "preTokens": tokens, "postTokens": after, "covered": cut}
        return out, StageResult(stage=NAME, fired=True, tokens_before=tokens, tokens_after=after, detail=detail,
                                handles=(handle,), items=items, boundary=boundary)


def _tail_start(messages: list[Message], ctx: StageContext, budget: int) -> int:
    """Index where the verbatim tail starts: whole rounds from the end within ``budget``,
    at least the last round when it fits under the threshold on its own."""
    count = ctx.counter.count_message
    rounds = group_rounds(messages)
    start, used = len(messages), 0
    for k, r in enumerate(reversed(rounds)):
        size = sum(count(messages[i]) for i in range(r.start, r.stop))
        limit = ctx.budget.threshold // 2 if k == 0 else budget
        if used + size > limit:
            break
        used += size
        start = r.start
    return start
