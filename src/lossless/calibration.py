"""Calibration: anchor token estimates to the usage the provider reported.

After a call, the provider's input-token figure is exact for that request; the
next request is that figure plus the estimate of what was appended since, so the
estimator's error is confined to the new content.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Literal, Sequence

from .messages import Message
from .tokens import TokenCounter, default_counter


TRUSTED = 0.5
"""A reported count under this share of lossless's own count of the same request is not believed:
an upstream that under-reports (one that leaves cached tokens out, a session file edited by hand)
would otherwise switch compaction off and let a request overflow the window (``plausible``)."""


def plausible(reported: int, estimated: int, slack: int = 0, ratio: float | None = None) -> bool:
    """Whether a provider's count of a request may anchor the estimates: at least ``TRUSTED`` of
    lossless's count, or short of it by at most ``slack`` tokens (a small request, where a fixed
    part such as a tool-use preamble one provider adds and another does not weighs most, and an
    error of that size cannot overflow a window).

    ``ratio``: the provider's count over lossless's in the last report believed.  Where it is under
    1, lossless's count is first put in the provider's units (but no lower than ``TRUSTED`` of it,
    so reports cannot drift down by half at each step): a server whose tokenizer counts 0.65 of the
    estimate reports 0.45 of it for a request made mostly of an account (hex handles, paths), and
    that report is the provider's word, not a fault."""
    if ratio is not None and ratio < 1:
        estimated = math.ceil(estimated * max(ratio, TRUSTED))
    return reported >= TRUSTED * estimated or estimated - reported <= slack


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    """One calibrated estimate and how it was made."""

    tokens: int
    mode: Literal["calibrated", "scaled", "raw"]
    """calibrated: reported + appended (× ratio if scale_appended); scaled: ratio × raw
    (history rewritten);
    raw: nothing observed yet."""
    reported: int | None = None
    appended: int = 0
    ratio: float = 1.0


class Calibrator:
    """Anchors estimates to the usage the provider reported.

    After each call, ``observe(reported, messages, overhead=...)`` with the input size the
    provider reported (for Anthropic: input + cache_creation + cache_read tokens) and the
    exact message sequence that was sent.  Before the next call, ``estimate(messages,
    overhead)``:

    - if ``messages`` still starts with the observed messages (the same objects, in order),
      the answer is ``reported + count(messages[k:])`` plus any change in ``overhead``:
      the estimator's error is confined to what was appended since;
    - otherwise (a stage rewrote the history) it is ``ratio × (raw estimate + overhead)``.

    ``ratio`` is reported/estimated for the observed request, clamped to ``ratio_bounds``.
    It carries the provider's tokenizer into the estimate: on the recorded Claude Code
    sessions Claude reported 1.14–1.58× what ``ContentAwareEstimator`` counts (o200k-like).
    ``scale_appended=True`` applies it to the appended part too (``reported + ratio ×
    appended``); leave it off when ``overhead`` is unknown, as the ratio is then inflated.

    ``verify="prefix"`` (default) checks every observed position by identity, in C
    (``map(operator.is_)``, ~20 ns per message), so a stage that replaced one old message
    while keeping the last one is caught.  ``verify="last"`` checks only the length and the
    object at position k−1: O(1), correct only if no stage rewrites the middle of a history
    it keeps the end of.
    """

    def __init__(
        self,
        counter: TokenCounter | None = None,
        *,
        ratio_bounds: tuple[float, float] = (0.9, 2.0),
        verify: Literal["prefix", "last"] = "prefix",
        scale_appended: bool = False,
    ) -> None:
        lo, hi = ratio_bounds
        if not 0 < lo <= 1 <= hi:
            raise ValueError(f"ratio_bounds {ratio_bounds!r} must satisfy 0 < low ≤ 1 ≤ high")
        if verify not in ("prefix", "last"):
            raise ValueError(f"verify must be 'prefix' or 'last', not {verify!r}")
        self.counter = counter if counter is not None else default_counter()
        self.ratio_bounds = (lo, hi)
        self.verify = verify
        self.scale_appended = scale_appended
        self.reset()

    def reset(self) -> None:
        """Forget the last observation (estimates become raw until the next ``observe``)."""
        self._reported: int | None = None
        self._observed: tuple[Message, ...] = ()
        self._observed_estimate = 0
        self._overhead: int | None = None

    def observe(self, reported_tokens: int, messages: Sequence[Message], *, overhead: int | None = None) -> None:
        """Record the provider's input-token count for the request made of ``messages``.

        ``overhead`` is our count of that request's system prompt and tools; give it when
        known, so a later change of tools or system prompt is added to the reported figure.
        Costs O(len(messages)) dictionary lookups (the counts are memoised)."""
        if reported_tokens < 0:
            raise ValueError(f"reported_tokens must be ≥ 0, got {reported_tokens}")
        self._reported = int(reported_tokens)
        self._observed = tuple(messages)
        self._observed_estimate = sum(self.counter.count_message(m) for m in self._observed)
        self._overhead = overhead

    @property
    def observed(self) -> float | None:
        """reported / estimated for the last observation, as it was (not clamped); None before any."""
        if self._reported is None:
            return None
        base = self._observed_estimate + (self._overhead or 0)
        return self._reported / base if base > 0 else None

    @property
    def ratio(self) -> float | None:
        """reported / estimated for the last observation, clamped; None before any."""
        if self._reported is None:
            return None
        return self._ratio(self._overhead or 0)

    def _ratio(self, overhead: int) -> float:
        assert self._reported is not None
        base = self._observed_estimate + (self._overhead if self._overhead is not None else overhead)
        lo, hi = self.ratio_bounds
        return min(hi, max(lo, self._reported / base)) if base > 0 else 1.0

    def _extends_observed(self, messages: Sequence[Message]) -> bool:
        k = len(self._observed)
        if len(messages) < k:
            return False
        if k == 0:
            return True
        if messages[k - 1] is not self._observed[k - 1]:
            return False
        return self.verify == "last" or all(map(operator.is_, messages, self._observed))

    def explain(self, messages: Sequence[Message], overhead: int = 0) -> Estimate:
        """Like ``estimate``, with how the figure was obtained."""
        count = self.counter.count_message
        if self._reported is None:
            return Estimate(tokens=overhead + sum(count(m) for m in messages), mode="raw")
        if self._extends_observed(messages):
            k = len(self._observed)
            appended = sum(count(m) for m in messages[k:])
            delta = overhead - self._overhead if self._overhead is not None else 0
            ratio = self._ratio(overhead) if self.scale_appended else 1.0
            return Estimate(
                tokens=max(0, self._reported + math.ceil((delta + appended) * ratio)),
                mode="calibrated",
                reported=self._reported,
                appended=appended,
                ratio=ratio,
            )
        ratio = self._ratio(overhead)
        raw = overhead + sum(count(m) for m in messages)
        return Estimate(tokens=math.ceil(raw * ratio), mode="scaled", reported=self._reported, ratio=ratio)

    def estimate(self, messages: Sequence[Message], overhead: int = 0) -> int:
        """Tokens of the next request: ``messages`` plus ``overhead`` (system prompt and tools)."""
        return self.explain(messages, overhead).tokens
