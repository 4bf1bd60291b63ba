"""What the chat knows about models: their window, their output budget and their price.

    limits = model_limits("claude-sonnet-4-5")          # Limits(window=200_000, max_output=64_000)
    limits = model_limits("my-local-model", window=32_768)   # --window for anything unknown
    price = model_price("gpt-5-mini")                   # Price(input=0.25, output=2.0) in $ / M tokens

Matched by the longest known prefix of the model name (a dated snapshot such as
``claude-sonnet-4-5-20250929`` is its family).  An unknown model has no limits: the
caller must pass ``--window`` rather than have a guess silently cut its context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..errors import ConfigError


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    window: int
    """Context window, in tokens."""
    max_output: int
    """The most tokens one answer may have."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """Dollars per million tokens: base input and output.  Cache reads and writes are priced
    as lossless's replay prices them (0.1× and 1.25× of input: ``providers.metered``)."""

    input: float
    output: float


# Published limits of the current families (tokens).
LIMITS: dict[str, Limits] = {
    "claude-opus-4-5": Limits(window=200_000, max_output=64_000),
    "claude-opus-4-1": Limits(window=200_000, max_output=32_000),
    "claude-opus-4": Limits(window=200_000, max_output=32_000),
    "claude-sonnet-4-5": Limits(window=200_000, max_output=64_000),
    "claude-sonnet-4": Limits(window=200_000, max_output=64_000),
    "claude-haiku-4-5": Limits(window=200_000, max_output=64_000),
    "claude-3-7-sonnet": Limits(window=200_000, max_output=64_000),
    "claude-3-5-haiku": Limits(window=200_000, max_output=8_192),
    "gpt-5": Limits(window=400_000, max_output=128_000),
    "gpt-4.1": Limits(window=1_047_576, max_output=32_768),
    "gpt-4o": Limits(window=128_000, max_output=16_384),
    "o3": Limits(window=200_000, max_output=100_000),
    "o4-mini": Limits(window=200_000, max_output=100_000),
}

PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price(input=5.0, output=25.0),
    "claude-opus-4-1": Price(input=15.0, output=75.0),
    "claude-opus-4": Price(input=15.0, output=75.0),
    "claude-sonnet-4": Price(input=3.0, output=15.0),
    "claude-3-7-sonnet": Price(input=3.0, output=15.0),
    "claude-haiku-4-5": Price(input=1.0, output=5.0),
    "claude-3-5-haiku": Price(input=0.8, output=4.0),
    "gpt-5-nano": Price(input=0.05, output=0.4),
    "gpt-5-mini": Price(input=0.25, output=2.0),
    "gpt-5": Price(input=1.25, output=10.0),
    "gpt-4.1-mini": Price(input=0.4, output=1.6),
    "gpt-4.1": Price(input=2.0, output=8.0),
    "gpt-4o-mini": Price(input=0.15, output=0.6),
    "gpt-4o": Price(input=2.5, output=10.0),
    "o3": Price(input=2.0, output=8.0),
    "o4-mini": Price(input=1.1, output=4.4),
}


def _family(model: str, table: Iterable[str]) -> str | None:
    name = model.lower().rsplit("/", 1)[-1]  # "anthropic/claude-…" as routers spell it
    found = [prefix for prefix in table if name.startswith(prefix)]
    return max(found, key=len) if found else None


def model_limits(model: str | None, *, window: int | None = None, max_output: int | None = None) -> Limits:
    """The limits to manage ``model`` with: the known ones, each overridden when given.

    Raises ``ConfigError`` (one line, saying to pass ``--window``) for a model it does
    not know and no window."""
    family = _family(model or "", LIMITS) if model else None
    known = LIMITS[family] if family else None
    if window is None:
        if known is None:
            raise ConfigError(f"the context window of model {model!r} is not known to lossless; "
                              "pass --window N (and --max-output N) for it")
        window = known.window
    if max_output is None:
        # The manager reserves at most 20,000 for the answer; asking for more than a quarter of
        # a small --window would leave the conversation no room.
        cap = known.max_output if known else 8_192
        max_output = min(cap, 32_000, window // 4)
    if not 0 < max_output < window:
        raise ConfigError(f"--max-output ({max_output}) must be above 0 and below the window ({window})")
    return Limits(window=window, max_output=max_output)


def model_price(model: str | None) -> Price | None:
    """The model family's price, or None (shown as "unknown price")."""
    family = _family(model or "", PRICES) if model else None
    return PRICES[family] if family else None
