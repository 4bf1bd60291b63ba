"""Snip: drop whole middle rounds in one batch, leaving one placeholder with a handle.

    new, result = snip(messages, ctx, tokens)

The cheapest big move: no model call, no rewriting of what stays.  Above
``snip_trigger_fraction`` of the threshold it removes the oldest API rounds between
a pinned head (the task statement) and a protected tail (``keep_tail_rounds``), as
many as it takes to come down to ``snip_target_fraction`` of the threshold (landing in the
band from 10 % of the threshold under it to 5 % over it, 55–70 % by default: a big round at the
cut stays when taking it would land under the band), and puts
one user message in their place: ``markers.snipped(...)`` naming the range's handle,
then the **account** of the removed rounds (``lossless.account``: the user's words,
one line per tool call with its target, outcome and the handle of its output, files,
conclusions, todos).  Because the batch is large it then stays quiet for many turns,
so the cached prompt prefix changes rarely — the teaching code snipped on every turn
past 50.

Invariants: only whole rounds go (``group_rounds``), so no tool_result loses its
tool_use and no thinking block is touched; the head keeps the first user message,
so an Anthropic request still starts with the user; the removed messages are stored
as JSON (``account.flat_archive``: Anthropic wire dicts) and come back exactly through
the handle.  An earlier account in the range is merged into the new one, never
archived inside it, so every handle in context is one recall from an original.
"""

from __future__ import annotations

from typing import Callable, Sequence

from .. import account, markers
from ..messages import Message, Text
from ..rounds import Round, group_rounds
from ..store import ArtifactStore, handle_for
from ..account.archive import archive_json
from .base import Stage, StageContext, StageResult, skipped
from .echo import restore
from .fold import Folded, _message_keys, fold
from .thin import Thinned, thin

__all__ = ["Summarise", "archive_json", "pinned_head", "snip", "snip_above", "summarised"]

NAME = "snip"
_HEADER_TOKENS = 120
"""About the size of the header line above an account."""
_LINE_TOKENS = 90
"""About the most a round adds to an account (a call line, some words): a small snip's
account is small, so the budget's floor does not stop it."""
_CHARS_PER_TOKEN = 3
"""Accounts are budgeted in characters; their text (paths, hex handles) is dense."""


Summarise = Callable[[Sequence[Message], int, StageContext, int], "str | None"]
"""``(messages up to the range's end, the range's start, ctx, its tokens) -> summary or None``:
a model's account of a range about to be snipped (``summarised``)."""


def snip(messages: Sequence[Message], ctx: StageContext, tokens: int,
         summarise: Summarise | None = None) -> tuple[list[Message], StageResult]:
    """Remove the oldest middle rounds in one batch; return the input itself when nothing fires.

    With ``summarise``, the account of the range also carries a model's summary of it, in place
    of the earlier summaries it merges (the model read those too: they were in the range)."""
    cfg, threshold = ctx.config, ctx.budget.threshold
    trigger_at = int(cfg.snip_trigger_fraction * threshold)
    target = int(cfg.snip_target_fraction * threshold)
    manual = ctx.trigger == "manual"
    if not manual and tokens <= trigger_at:
        why = f"{tokens:,} tokens, at or below the snip trigger {trigger_at:,}"
        return _same(messages), skipped(NAME, tokens, why)

    rounds = group_rounds(messages)
    # The verbatim tail is kept by budget: the oldest rounds go first, so the last
    # keep_tail_rounds go only when the rounds before them cannot reach the target (a few
    # huge outputs); the newest round always stays.
    pin = pinned_head(messages, ctx, rounds)
    run = _removable(messages, rounds, pin, cfg.keep_tail_rounds if manual else 1)
    if not run:
        why = f"nothing removable between the pinned head and the last {markers.counted(max(1, cfg.keep_tail_rounds), 'round')}"
        return _same(messages), skipped(NAME, tokens, why)

    # A manual snip below the target still means "make room": then it takes the whole middle.
    goal = target if tokens > target else -1
    # Echoed results are put back whole first (``stages.echo``: the output an echo pointed at may be
    # about to go; not one its own call's input covers, which goes only with it), then what stays is folded (a result's lines that a later one repeats), so the
    # newest copy of a line is the one kept and the rounds that must go to reach the target are
    # fewer; what goes is archived and accounted whole.
    original, before = messages, tokens
    messages, whole = restore(messages, ctx)
    tokens += whole
    restored = messages
    folded = fold(messages, run[0].start, ctx)
    messages, tokens = folded.messages, tokens - folded.saved
    # Past the newest rounds, the replies that stay keep their conclusions and code (``stages.thin``):
    # the same budget then holds more of the outputs the model cannot say again.
    thinned = thin(messages, run[0].start, _verbatim_from(messages, rounds, ctx), ctx,
                   need=None if goal < 0 else max(0, tokens - goal))
    messages, tokens = thinned.messages, tokens - thinned.saved
    if 0 <= goal and tokens <= goal:
        return _folded_only(folded, thinned, ctx, before, target, whole)
    count = ctx.counter.count_message
    removed = chosen = 0
    after = tokens
    # The band a landing aims for: the target (65 % of the threshold by default) less 10 % of the
    # threshold to plus 5 %, so the next snip is at least 30 % of new work away.  A round that
    # would take the landing far below the target is left when stopping short of it lands nearer
    # (within target + 3⅓ %: the rest of the band is the margin for a provider's count drifting
    # from the calibrated estimate), or when it would take the landing under the band and stopping
    # short of it (judged without the account) stays in the band: a huge old round stays verbatim
    # rather than the recent rounds before it going too and half the budget going unused.
    floor, near, ceiling = goal - threshold // 10, goal + threshold // 30, goal + threshold // 20
    previous: tuple[int, int, int] | None = None
    for k, r in enumerate(run, 1):
        removed += sum(count(messages[i]) for i in range(r.start, r.stop))
        # The account is budgeted, so its size is bounded before it is built.
        after = tokens - removed + _HEADER_TOKENS + min(cfg.account_tokens(removed, ctx.overhead), _LINE_TOKENS * k)
        chosen = k
        if after <= goal:
            if previous is not None:
                # (the rescue is judged with no account at all; once built, one too large to stay in
                # the band takes this round after all, below)
                bare = tokens - previous[2] + _HEADER_TOKENS
                if previous[1] <= near and previous[1] - goal < goal - after or after < floor and bare <= ceiling:
                    chosen, after, removed = previous
            break
        previous = (k, after, removed)
    if after >= before:
        return _same(original), skipped(NAME, before, f"removing {markers.counted(chosen, 'round')} would not reduce the context")
    min_batch = int(cfg.snip_min_batch_fraction * cfg.window)
    rescues = before > threshold >= after  # a small batch is worth it only if it alone gets under
    if not manual and before - after < min_batch and not rescues:
        why = f"only {before - after:,} tokens removable (< {min_batch:,}); later stages make room instead"
        return _same(original), skipped(NAME, before, why)

    summary = None
    if summarise is not None:
        summary = summarise(restored[:run[chosen - 1].stop], run[0].start, ctx, removed)
    pieces: list[str] = []  # the archive's messages, each serialised once however often the range changes

    # The account's size in tokens: a tenth of the window, less where a large system prompt and tools
    # leave less room (``ContextConfig.account_room``), never under its floor.
    most = max(min(cfg.account_min_tokens, cfg.window // 10), int(cfg.window // 10 * cfg.account_room(ctx.overhead)))

    def build(chosen: int, removed: int) -> tuple[int, int, account.Account, str, Message, int]:
        """The range of the first ``chosen`` rounds, its account, archive and placeholder, the landing."""
        start, stop = run[0].start, run[chosen - 1].stop
        removed_msgs = restored[start:stop]
        acc = account.collect(removed_msgs, ctx.config, ctx.store,
                              task_in_view=start > 0 and messages[0].role == "user")
        if summary:
            acc.earlier = [summary]
        acc.present = _kept_lines(restored, start, stop)
        budget_chars = _CHARS_PER_TOKEN * cfg.account_tokens(removed, ctx.overhead)
        brief = budget_chars < account.BRIEF_BELOW_CHARS
        body = acc.render(budget_chars=budget_chars)
        archive = _archive(removed_msgs, ctx.store, pieces)
        handle = handle_for(archive.encode("utf-8", "surrogatepass"))
        placeholder = _placeholder(handle, stop - start, chosen, removed, body, brief=brief)
        # An account is held to a tenth of the window in tokens, not only in characters (text of about
        # two characters a token — codes, numbers, the key lines of a dense output — fills it faster),
        # or to that share of the room a large system prompt and tools leave under the threshold.
        for _ in range(3):
            size = count(placeholder)
            if size <= most:
                break
            budget_chars = budget_chars * most * 9 // (size * 10)
            body = acc.render(budget_chars=budget_chars)
            placeholder = _placeholder(handle, stop - start, chosen, removed, body, brief=brief)
        if count(placeholder) > most:  # still over at the render's floor: the user's words go behind their handle
            body = acc.render(budget_chars=budget_chars, user_chars=0)
            placeholder = _placeholder(handle, stop - start, chosen, removed, body, brief=brief)
        return start, stop, acc, archive, placeholder, tokens - removed + count(placeholder)

    def size(k: int) -> int:
        return sum(count(messages[i]) for i in range(run[k].start, run[k].stop))

    while True:
        start, stop, acc, archive, placeholder, after = build(chosen, removed)
        # The account's size is known only now: one that came out larger than estimated (the
        # user's own words quoted) takes one more round, so the landing stays near the target.
        if goal < 0 or after <= near or chosen == len(run):
            break
        removed += size(chosen)
        chosen += 1
    # One that came out smaller than budgeted (or a round taken for one that came out larger) left
    # the landing under the band: the newest rounds of the range come back while it stays in the
    # band (not under a model's summary of them).
    while summary is None and 0 <= goal and after < floor and chosen > 1:
        trial = build(chosen - 1, removed - size(chosen - 1))
        if trial[-1] > ceiling:
            break
        removed -= size(chosen - 1)
        chosen -= 1
        start, stop, acc, archive, placeholder, after = trial
    if after >= before:
        return _same(original), skipped(NAME, before, f"an account of {markers.counted(chosen, 'round')} would not be smaller")
    handle = placeholder.meta["lossless"]["handle"]
    ctx.store.put(archive)
    items = acc.commit(ctx.store, placeholder.text)
    kept = _store_originals(folded, ctx, stop)
    shortened = _store_originals(thinned, ctx, stop)
    out = [*messages[:start], placeholder, *messages[stop:]]
    detail = (
        f"snipped {markers.counted(stop - start, 'message')} ({markers.counted(chosen, 'round')}, {removed:,} tokens) after the "
        f"pinned head, "
        f"leaving an account of {markers.counted(len(acc.calls), 'call')}: {before:,} → {after:,} tokens (target {target:,})"
    )
    if kept or shortened:
        detail += "; " + _shortened(kept, shortened)
    if summary:
        detail += "; the model summarised the range"
    return out, StageResult(
        stage=NAME, fired=True, tokens_before=before, tokens_after=after, detail=detail, handles=(handle,),
        items=(*items, *kept, *shortened),
    )


def _verbatim_from(messages: Sequence[Message], rounds: list[Round], ctx: StageContext) -> int:
    """Where the newest rounds start that stay verbatim whole: as many as fit
    ``ContextConfig.verbatim_tail_fraction`` of the threshold, the newest always."""
    if ctx.config.verbatim_tail_fraction >= 1:
        return 0
    room = ctx.config.verbatim_tail_fraction * ctx.budget.threshold
    count = ctx.counter.count_message
    start, used = len(messages), 0
    for r in reversed(rounds):
        used += sum(count(messages[i]) for i in range(r.start, r.stop))
        if used > room and start < len(messages):
            break
        start = r.start
    return start


def _kept_lines(messages: Sequence[Message], start: int, stop: int) -> set[str]:
    """The lines of the tool results that stay in context around ``messages[start:stop]``, as
    folding compares them: an account quotes none of them again as a key line."""
    out: set[str] = set()
    for i in (*range(start), *range(stop, len(messages))):
        if messages[i].role == "user" and messages[i].tool_results:
            for lines in _message_keys(messages[i]):
                out.update(lines)
    return out


def _store_originals(folded: Folded | Thinned, ctx: StageContext, stop: int) -> tuple[str, ...]:
    """Store the originals of the folded results (or thinned replies) that stay (from message ``stop``
    on); their handles."""
    kept = tuple(h for h, (i, _) in folded.blobs.items() if i >= stop)
    for h in kept:
        ctx.store.put(folded.blobs[h][1])
    return kept


def _folded_only(folded: Folded, thinned: Thinned, ctx: StageContext, before: int, target: int,
                 restored: int = 0) -> tuple[list[Message], StageResult]:
    """Folding (and thinning) alone reached the target: no round goes (``restored``: the tokens echoed
    results put back whole added before the fold)."""
    kept = _store_originals(folded, ctx, 0)
    shortened = _store_originals(thinned, ctx, 0)
    after = before + restored - folded.saved - thinned.saved
    detail = f"{_shortened(kept, shortened) or 'folded'}: {before:,} → {after:,} tokens (target {target:,}); no round removed"
    return thinned.messages, StageResult(stage=NAME, fired=True, tokens_before=before, tokens_after=after,
                                         detail=detail, items=(*kept, *shortened))


def _shortened(folded: tuple[str, ...], thinned: tuple[str, ...]) -> str:
    """What fold and thin did, for a stage's detail ("" when neither did anything)."""
    what = [f"folded {markers.counted(len(folded), 'older result')} that later ones repeat"] if folded else []
    if thinned:
        what.append(f"thinned {markers.counted(len(thinned), 'older reply')} to its conclusion and code")
    return "; ".join(what)


def summarised(summarise: Summarise) -> Stage:
    """Snip whose accounts carry a model's summary of each removed range: the same rounds go,
    the same recent work stays verbatim, and the map gains what a model understood of them.
    When ``summarise`` gives None (a failed call, a malformed answer) it is a plain snip.  It
    stands aside on a manual compaction, which asks for the model's whole summary."""
    def stage(messages: Sequence[Message], ctx: StageContext, tokens: int) -> tuple[list[Message], StageResult]:
        if ctx.trigger == "manual":  # asked to compact: the model's whole summary comes first (auto-compact)
            return _same(messages), skipped(NAME, tokens, "a manual compaction is the model's to summarise first")
        return snip(messages, ctx, tokens, summarise)
    return stage


def snip_above(fraction: float) -> Stage:
    """Snip as a floor: it fires only above ``fraction`` of the threshold (with a model
    configured the model summarises first; snip stands in when it cannot)."""
    def stage(messages: Sequence[Message], ctx: StageContext, tokens: int) -> tuple[list[Message], StageResult]:
        at = int(fraction * ctx.budget.threshold)
        if ctx.trigger == "auto" and tokens <= at:
            return _same(messages), skipped(NAME, tokens, f"{tokens:,} tokens, at or below {at:,} (the model "
                                                          f"summarises first; snip is the floor)")
        return snip(messages, ctx, tokens)
    return stage


def _archive(removed: Sequence[Message], store: ArtifactStore, pieces: list[str]) -> str:
    """``account.flat_archive(removed, store)``, made from one JSON text per message (``pieces``, kept
    by the caller for the messages already seen): a JSON list is its items' texts joined by commas."""
    for m in removed[len(pieces):]:
        pieces.append(account.flat_archive([m], store)[1:-1])
    return "[" + ",".join(p for p in pieces[:len(removed)] if p) + "]"


def _same(messages: Sequence[Message]) -> list[Message]:
    return messages if isinstance(messages, list) else list(messages)


def _placeholder(handle: str, n_messages: int, n_rounds: int, tokens: int, body: str = "",
                 brief: bool = False) -> Message:
    text = markers.snipped(handle=handle, messages=n_messages, rounds=n_rounds, tokens=tokens, account=body,
                           brief=brief)
    return Message(role="user", content=(Text(text=text),), meta={"lossless": {"kind": "snip", "handle": handle}})


def pinned_head(messages: Sequence[Message], ctx: StageContext, rounds: list[Round] | None = None) -> int:
    """How many messages at the start snip keeps: the task and the first rounds of *work on it*
    (up to ``pin_head_messages``, ending at the user's next request), as many as fit
    ``pin_head_max_fraction`` of the threshold, extended to the end of the last one's round.  Where
    the system prompt and tools take so much of the target that the recent rounds would keep less
    than a third of it — or than the newest round, which stays verbatim — the head gets only what
    leaves them that (the task at least): beside a newest round of 0.4 of the threshold, pinned first
    rounds put every landing near 0.9 of it, and the next small request compacted again.  A round
    is not pinned for its first message when its whole would pass both that and the cap (a first
    ``ls`` as long as the task, at a small window: the head took 70 % of the threshold, and every
    snip landed near the threshold)."""
    cfg = ctx.config
    pin = cfg.pin_head_messages
    pin = next((j for j in range(1, min(pin, len(messages))) if messages[j].role == "user"
                and not messages[j].tool_results), pin)
    most = cfg.pin_head_max_fraction * ctx.budget.threshold
    target = cfg.snip_target_fraction * ctx.budget.threshold
    rounds = rounds if rounds is not None else group_rounds(messages)
    count = ctx.counter.count_message
    newest = sum(map(count, messages[rounds[-1].start:])) if len(rounds) > 1 else 0
    room = max(0.0, target - ctx.overhead - max(target / 3, newest))  # what leaves the recent rounds theirs
    fits = _fitting_pin(messages, pin, min(most, room), count)
    stop = next((r.stop for r in rounds if r.stop >= fits), fits)
    if stop > fits and sum(map(count, messages[:stop])) > room:
        stop = max((r.stop for r in rounds if r.stop <= fits), default=1)
    return stop


def _fitting_pin(messages: Sequence[Message], pin: int, cap: float, count: Callable[[Message], int]) -> int:
    """The most head messages, up to ``pin``, that hold at most ``cap`` tokens (at least the task):
    as many of the first rounds of work as fit.  ``_removable`` extends the head to the end of
    the round the last one is in."""
    size = 0
    fits = 1
    for n, m in enumerate(messages[:pin], 1):
        size += count(m)
        if size > cap:
            break
        fits = n
    return fits


def _removable(messages: Sequence[Message], rounds: list[Round], pin: int, keep_tail: int) -> list[Round]:
    """The oldest contiguous run of rounds between the pinned head and the protected tail.

    The head covers at least ``pin`` messages and the first user message, extended to a
    round boundary.  At least one tail round is kept whatever the config says: the last
    round is the request being answered.  A system message (OpenAI dialect) ends the run.
    """
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), 0)
    if first_user < len(messages) and account.is_account(messages[first_user]):
        # The task now lives in an earlier account (which quotes it first, whole):
        # that account is merged into the new one rather than pinned beside it.
        need = first_user
    else:
        need = max(1, pin, first_user + 1)
    head = next((n for n, r in enumerate(rounds, 1) if r.stop >= need), len(rounds)) if need else 0
    tail_start = max(head, len(rounds) - max(1, keep_tail))
    run: list[Round] = []
    for r in rounds[head:tail_start]:
        if r.kind == "system":
            break
        run.append(r)
    return run
