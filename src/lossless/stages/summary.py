"""The fallback summary: a deterministic account of everything before a verbatim tail.

    new, result = fallback_summary(messages, ctx, tokens)

Used when no summarizer is configured or the circuit breaker is open.  Above the
auto-compact threshold (or on a manual/reactive trigger) it keeps a verbatim tail of
whole rounds (up to ``tail_fraction`` of the threshold) and replaces everything before
it with ONE user message::

    <lossless-summary handle="sha256:…" messages="N" tokens="T">
    ## User messages …        the user's own words, verbatim (the task first, whole within a budget)
    ## Tool calls …           one line per call: tool, target, outcome, the handle of its output
    ## Files / ## Assistant conclusions / ## Open todos / ## Earlier ranges
    </lossless-summary>

The body is the account of the replaced part (``lossless.account``), with a larger
budget than a snip's.  The handle recalls the exact replaced history (flat: earlier
accounts and summaries in it are merged into this one, not archived inside it), so
every handle shown is one recall from an original, and the user's words survive any
number of summaries.

Invariants: only whole rounds are replaced, the summary is the first message (after
OpenAI system messages) and comes from the user, tail messages are the input's own
objects, and the same input gives the same bytes.  A summary that would not be
smaller than what it replaces is never used.
"""

from __future__ import annotations

from typing import Sequence

from .. import account, markers
from ..messages import Message, Text
from ..rounds import group_rounds
from ..store import handle_for
from .base import StageContext, StageResult, skipped

__all__ = ["READ_TOOLS", "fallback_summary"]

NAME = "fallback_summary"
KIND = "summary"
SCALES = (1.0, 0.5, 0.25, 0.1)
"""The account's budget is multiplied by these, in turn, until the request fits the threshold."""
SUMMARY_SHARE = 0.15
"""The account of a summary may take this share of the threshold (a snip's takes less): with the
verbatim tail (``tail_fraction``) it lands near 60 % of the threshold."""
CHARS_PER_TOKEN = 3
READ_TOOLS = account.READ_TOOLS


def fallback_summary(messages: Sequence[Message], ctx: StageContext, tokens: int) -> tuple[list[Message], StageResult]:
    """Replace all but a verbatim tail with one account; the input itself when nothing fires."""
    threshold = ctx.budget.threshold
    same = messages if isinstance(messages, list) else list(messages)
    if ctx.trigger not in ("manual", "reactive") and tokens <= threshold:
        return same, skipped(NAME, tokens, f"{tokens:,} tokens, at or below the threshold {threshold:,}")

    rounds = group_rounds(messages)
    lead = 0  # leading system messages (OpenAI dialect) stay first
    while lead < len(rounds) and rounds[lead].kind == "system":
        lead += 1
    body = rounds[lead:]
    if not body:
        return same, skipped(NAME, tokens, "no conversation to summarize")
    count = ctx.counter.count_message
    sizes = [sum(count(messages[i]) for i in range(r.start, r.stop)) for r in body]
    start = body[0].start
    cfg = ctx.config

    def tail_start(k: int) -> int:
        return body[len(body) - k].start if k else len(messages)

    fit, used = 0, 0
    # An earlier account or summary is merged into the new one, never kept in the tail beside it.
    last_account = max((i for i, m in enumerate(messages) if account.is_account(m)), default=-1)
    for r, size in zip(reversed(body), reversed(sizes)):
        if used + size > cfg.tail_fraction * threshold or r.start <= last_account:
            break
        used, fit = used + size, fit + 1
    # The largest tail that fits tail_fraction; then the last round alone; then no tail at all.
    # Each with the account's budget shrinking, until the request is under the threshold.
    best: tuple[int, int, Message, str, account.Account] | None = None
    # Results moved earlier are read back once, not once per candidate tail.
    moved_back = [account.restored(m, ctx.store) for m in messages[start:]]
    for k in sorted({k for k in (fit, 1, 0) if k < len(body)}, reverse=True):
        stop, replaced = tail_start(k), sum(sizes[: len(body) - k])
        acc = account.collect(messages[start:stop], ctx.config, ctx.store)
        archive = account.flat_archive(moved_back[: stop - start], None)
        handle = handle_for(archive.encode("utf-8", "surrogatepass"))
        budget = CHARS_PER_TOKEN * max(cfg.account_min_tokens, min(int(SUMMARY_SHARE * threshold), replaced // 2))
        for scale in SCALES:
            text = markers.summary(handle=handle, messages=stop - start, tokens=replaced,
                                   body=acc.render(int(budget * scale), int(cfg.summary_user_chars * scale)))
            msg = Message(role="user", content=(Text(text=text),), meta={"lossless": {"kind": KIND, "handle": handle}})
            after = tokens - replaced + count(msg)
            if best is None or after < best[0]:
                best = (after, k, msg, archive, acc)
            if after <= threshold:
                break
        if best is not None and best[0] <= threshold:
            break

    assert best is not None  # body is not empty, so k = 0 was tried
    after, k, msg, archive, acc = best
    stop, replaced = tail_start(k), sum(sizes[: len(body) - k])
    if count(msg) >= replaced:
        return same, skipped(NAME, tokens, f"a summary would not be smaller than the {replaced:,} tokens it replaces")
    handle = ctx.store.put(archive)
    items = acc.commit(ctx.store, msg.text)
    covered = stop - start
    detail = (
        f"summarized {covered} messages ({replaced:,} tokens) without a model, kept {markers.counted(k, 'round')} verbatim: "
        f"{tokens:,} → {after:,} tokens (threshold {threshold:,})"
    )
    boundary = {"trigger": ctx.trigger, "preTokens": tokens, "postTokens": after, "covered": covered}
    result = StageResult(
        stage=NAME, fired=True, tokens_before=tokens, tokens_after=after, detail=detail, handles=(handle,),
        items=items, boundary=boundary,
    )
    return [*messages[:start], msg, *messages[stop:]], result
