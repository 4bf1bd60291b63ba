"""What the chat knows about models: their window, their output budget and their price.

    limits = model_limits("claude-sonnet-5-5")          # the window and output cap the data gives
    limits = model_limits("my-local-model", window=32_768)   # --window for anything unknown
    price = model_price("gpt-5.4-mini")                 # dollars per million tokens, cache prices too

Read from the models' data (``lossless.modelinfo``: genai-prices, models.dev), never from a table
kept here.  A model the data does not know gets ``modelinfo.DEFAULT_WINDOW`` and one warning
saying to pass ``--window``; an unknown price is shown as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .. import modelinfo
from ..errors import ConfigError

__all__ = ["DEFAULT_MODELS", "Limits", "Price", "model_limits", "model_price"]

DEFAULT_MODELS = {"anthropic": "claude-sonnet-5-5", "openai": "gpt-5.4-mini"}
"""The model each provider gets without ``--model``: the current Sonnet (the SDK's and
genai-prices' newest, a 1M window; Sonnet 4.5, the default before, ends on 2026-11-30) and
OpenAI's current small model (GPT-5.4 mini), both in the installed SDKs' model lists."""

OUTPUT_CAP = 32_000
"""The most the chat asks for one answer (the manager reserves at most 20,000 of it)."""
UNKNOWN_OUTPUT = 8_192
"""The answer budget of a model whose output cap the data does not give."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """Dollars per million tokens (``modelinfo.Price`` with both base prices known)."""

    input: float
    output: float
    cache_read: float | None
    cache_write: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    window: int
    """Context window, in tokens."""
    max_output: int
    """The most tokens one answer may have."""


def model_limits(model: str | None, *, window: int | None = None, max_output: int | None = None,
                 warn: Callable[[str], None] | None = None) -> Limits:
    """The limits to manage ``model`` with: the data's, each overridden when given.  An unknown
    model gets the default window and one warning through ``warn`` (``modelinfo.window_for``).

    Raises ``ConfigError`` (one line) for a ``--max-output`` that leaves the window no room."""
    window = modelinfo.window_for(model, override=window, warn=warn)
    if max_output is None:
        # Asking for more than a quarter of a small window would leave the conversation no room.
        cap = (modelinfo.max_output(model) if model else None) or UNKNOWN_OUTPUT
        max_output = min(cap, OUTPUT_CAP, window // 4)
    if not 0 < max_output < window:
        raise ConfigError(f"--max-output ({max_output}) must be above 0 and below the window ({window})")
    return Limits(window=window, max_output=max_output)


def model_price(model: str | None) -> Price | None:
    """``model``'s price per million tokens (genai-prices), or None (shown as "unknown price")
    when the data has no input and output price for it."""
    price = modelinfo.price(model) if model else None
    if price is None or price.input is None or price.output is None:
        return None
    return Price(input=price.input, output=price.output, cache_read=price.cache_read, cache_write=price.cache_write)
