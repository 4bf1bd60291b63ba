"""Reactive compaction: the provider said "prompt too long" anyway; make room and retry once.

    result = call_with_recovery(provider, lambda msgs: Request(messages=tuple(msgs), system=S, tools=T),
                                history, ctx, summarizer)
    history = result.messages                     # compacted when result.compaction is not None

``recover`` is more aggressive than auto-compaction: it targets a window derived
from the error (``error.limit``, converted to our token units with the ratio of
``error.tokens`` to our own count; without numbers, the current size), so the
result lands well under the provider's real limit — a threshold about 70 % of it.
It keeps the last rounds verbatim (whole rounds: never an orphan tool_result) and
replaces the rest with a model summary when a summarizer is given and succeeds,
else with the deterministic fallback summary.  If the model summary still leaves
the context too big, the fallback runs on top of it.

``call_with_recovery`` retries ONCE; a second "too long" becomes a clear
``ContextTooLong`` ("still too long after reactive compaction: N > M; …").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from ..config import ContextConfig
from ..errors import ContextTooLong
from ..messages import Message
from ..providers.base import Provider, Request, Response
from ..stages.base import StageContext, StageResult
from ..stages.summary import fallback_summary
from .autocompact import compact_with
from .reattach import ReattachConfig
from .summarizer import Summarizer

__all__ = ["Recovered", "call_with_recovery", "recover"]

NAME = "reactive"


def _target_config(error: ContextTooLong, ctx: StageContext, tokens: int) -> ContextConfig:
    """The configuration whose window is what the provider really takes, in our units."""
    if error.limit:
        ratio = tokens / error.tokens if error.tokens else 1.0
        window = int(error.limit * min(ratio, 1.5))
    else:
        window = tokens
    window = max(1024, min(ctx.config.window, window))
    max_output = ctx.config.max_output
    if max_output is not None and max_output >= window:
        max_output = window // 4
    return replace(ctx.config, window=window, max_output=max_output)


def recover(
    messages: Sequence[Message],
    error: ContextTooLong,
    ctx: StageContext,
    summarizer: Summarizer | None = None,
    *,
    tokens: int | None = None,
    reattach: ReattachConfig = ReattachConfig(),
) -> tuple[list[Message], StageResult]:
    """Compact ``messages`` after ``error``; ``fired=False`` when nothing could be removed."""
    tokens = ctx.count(messages) if tokens is None else tokens
    cfg = _target_config(error, ctx, tokens)
    rctx = replace(ctx, config=cfg, trigger="reactive")
    threshold = rctx.budget.threshold
    said = f"{error.tokens:,} > {error.limit:,}" if error.tokens and error.limit else "no numbers given"
    why = ""
    out: list[Message] | None = None
    result: StageResult | None = None
    if summarizer is not None:
        try:
            done = compact_with(summarizer, messages, rctx, tokens, tail_budget=cfg.tail_fraction * threshold,
                                window=cfg.window, reattach=reattach, stage=NAME)
        except Exception as exc:  # noqa: BLE001 - fall back to the deterministic summary
            done, why = None, f"the model summary failed ({type(exc).__name__}: {exc}); "
        if done is not None:
            out, result = done
    if out is None or result is None or result.tokens_after > threshold:
        base = out if out is not None else list(messages)
        base_tokens = result.tokens_after if result is not None else tokens
        fb_out, fb = fallback_summary(base, rctx, base_tokens)
        if fb.fired:
            handles = (result.handles if result is not None else ()) + fb.handles
            how = "model summary, then the fallback summary" if result is not None else "fallback summary"
            result = replace(fb, stage=NAME, tokens_before=tokens, handles=handles,
                             boundary={**(fb.boundary or {}), "preTokens": tokens},
                             detail=f"{why}{how}: {fb.detail}")
            out = fb_out
        elif result is None:
            return list(messages), StageResult(
                stage=NAME, fired=False, tokens_before=tokens, tokens_after=tokens,
                detail=f"provider said too long ({said}); {why}nothing could be removed: {fb.detail}")
    assert out is not None and result is not None
    detail = (f"provider said too long ({said}); targeting {threshold:,} of our tokens (window {cfg.window:,}): "
              f"{result.detail}")
    return out, replace(result, detail=detail)


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovered:
    response: Response
    messages: list[Message]
    """The messages that were sent last: compacted when ``compaction`` is not None."""
    compaction: StageResult | None = None


def call_with_recovery(
    provider: Provider,
    build: Callable[[list[Message]], Request],
    messages: Sequence[Message],
    ctx: StageContext,
    summarizer: Summarizer | None = None,
) -> Recovered:
    """Call; on ``ContextTooLong`` compact reactively and retry once; then give up clearly."""
    messages = list(messages)
    try:
        return Recovered(response=provider.complete(build(messages)), messages=messages)
    except ContextTooLong as error:
        first = error
    new, result = recover(messages, first, ctx, summarizer)
    if not result.fired:
        raise ContextTooLong(
            f"the request is too long ({_numbers(first)}) and reactive compaction could not make room: "
            f"{result.detail}", tokens=first.tokens, limit=first.limit, status=first.status) from first
    try:
        response = provider.complete(build(new))
    except ContextTooLong as again:
        raise ContextTooLong(
            f"still too long after reactive compaction: {_numbers(again)}; the recent rounds, system prompt and "
            f"tools alone do not fit — lower max_tokens, shorten the system prompt or tool schemas, or persist "
            f"large tool results", tokens=again.tokens, limit=again.limit, status=again.status) from again
    return Recovered(response=response, messages=new, compaction=result)


def _numbers(error: ContextTooLong) -> str:
    if error.tokens is not None and error.limit is not None:
        return f"{error.tokens} > {error.limit}"
    return "the provider gave no numbers"
