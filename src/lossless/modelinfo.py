"""What lossless knows about a model, from data others maintain: its window, its output cap, its price.

    window_for("gpt-4o")                           # 128_000: the window every front door budgets by
    window_for("my-local-model", warn=print)       # DEFAULT_WINDOW, and one line saying so, once
    window_for("gpt-4o", override=64_000)          # --window wins over the data
    price("claude-haiku-4-5")                      # Price(input=1.0, output=5.0, cache_read=0.1, cache_write=1.25)
    cost("claude-haiku-4-5", input=1_000_000, output=0)   # 1.0 (dollars)

Prices and windows come from ``genai-prices`` (Pydantic's package; the ``models`` extra), which
matches the names APIs use — dated snapshots, ``provider/model`` router names — and is released
with each new model.  Nothing here is a table kept by hand.  Without the package every lookup
answers None and ``window_for`` uses ``DEFAULT_WINDOW``, so the proxy and the CLI still run.

The data is bundled in the package: no lookup reaches the network.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any, Callable

__all__ = ["DEFAULT_WINDOW", "Price", "context_window", "cost", "max_output", "price", "window_for"]

DEFAULT_WINDOW = 128_000
"""The window of a model the data does not know.  128k is the smallest window among the current
API families (GPT-4o, Llama 3.1+, Mistral, most open models as served): 85 % of the models with a
known window in genai-prices have at least this much.  Too small a guess only compacts early; too
large a one gets requests rejected, which is the one failure lossless exists to prevent.  A model
with less (a local one, usually) needs ``--window``."""

_log = logging.getLogger("lossless")


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """Dollars per million tokens, None where the data has no price.  ``input`` is uncached input;
    a model priced by tiers (more per token past 200k, say) shows its first tier."""

    input: float | None
    output: float | None
    cache_read: float | None
    cache_write: float | None


def context_window(model: str) -> int | None:
    """The most input tokens ``model`` takes, or None when the data does not know it."""
    found = _lookup(model)
    window = getattr(found, "context_window", None) if found is not None else None
    return window if isinstance(window, int) and window > 0 else None


def max_output(model: str) -> int | None:
    """The most tokens one answer of ``model`` may have, or None when the data does not say."""
    found = _lookup(model)
    cap = getattr(found, "max_output", None) if found is not None else None
    return cap if isinstance(cap, int) and cap > 0 else None


def price(model: str) -> Price | None:
    """``model``'s price per million tokens today, or None when the data does not know it."""
    prices = _model_price(model)
    if prices is None:
        return None
    return Price(input=_per_mtok(prices, "input_mtok"), output=_per_mtok(prices, "output_mtok"),
                 cache_read=_per_mtok(prices, "cache_read_mtok"), cache_write=_per_mtok(prices, "cache_write_mtok"))


def cost(model: str, *, input: int, output: int, cache_read: int = 0, cache_write: int = 0) -> float | None:
    """Dollars for one call's tokens (``input`` uncached, as Anthropic counts it), tiers applied;
    None when the data does not price ``model``."""
    found = _resolve(model)
    if found is None:
        return None
    from genai_prices import Usage, calc_price

    ref, provider_id = found
    # genai-prices counts input_tokens with the cached ones inside it (OpenAI's way).
    usage = Usage(input_tokens=input + cache_read + cache_write, output_tokens=output,
                  cache_read_tokens=cache_read, cache_write_tokens=cache_write)
    return float(calc_price(usage, ref, provider_id=provider_id).total_price)


_warned: set[str] = set()
_warned_lock = threading.Lock()


def window_for(model: str | None, *, override: int | None = None,
               warn: Callable[[str], None] | None = None) -> int:
    """The window to budget ``model`` by: ``override`` (``--window``) if given, else the data's,
    else ``DEFAULT_WINDOW`` — saying so through ``warn`` (default: the ``lossless`` logger) once
    per model per process, so a proxy serving thousands of requests warns one time."""
    if override is not None:
        return override
    known = context_window(model) if model else None
    if known is not None:
        return known
    name = model or "(no model named)"
    with _warned_lock:
        first = name not in _warned
        _warned.add(name)
    if first:
        (warn or _log.warning)(
            f"the context window of model {name!r} is not known (" + _why_unknown() + f"); "
            f"budgeting {DEFAULT_WINDOW:,} tokens — pass --window N if it has less or more")
    return DEFAULT_WINDOW


def _why_unknown() -> str:
    try:
        import genai_prices  # noqa: F401
    except ImportError:
        return "install lossless[models] for the models' data"
    return "not in genai-prices' data"


def _refs(model: str) -> list[tuple[str, str | None]]:
    """The (name, provider) pairs to look ``model`` up by: as given, then a router's
    ``provider/model`` as that provider's, then its last part alone."""
    name = model.strip()
    refs: list[tuple[str, str | None]] = [(name, None)]
    if "/" in name:
        provider, rest = name.split("/", 1)
        refs += [(rest, provider), (name, provider), (name.rsplit("/", 1)[-1], None)]
    return refs


@lru_cache(maxsize=1024)
def _resolve(model: str) -> tuple[str, str | None] | None:
    """The first of ``_refs(model)`` the data knows, or None (also when genai-prices is absent)."""
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        return None
    for ref, provider_id in _refs(model):
        try:
            calc_price(Usage(input_tokens=0, output_tokens=0), ref, provider_id=provider_id)
        except LookupError:
            continue
        return ref, provider_id
    return None


def _lookup(model: str) -> Any:
    """genai-prices' record of ``model`` (its ``ModelInfo``), or None."""
    found = _resolve(model)
    if found is None:
        return None
    from genai_prices import Usage, calc_price

    ref, provider_id = found
    return calc_price(Usage(input_tokens=0, output_tokens=0), ref, provider_id=provider_id).model


def _model_price(model: str) -> Any:
    found = _resolve(model)
    if found is None:
        return None
    from genai_prices import Usage, calc_price

    ref, provider_id = found
    return calc_price(Usage(input_tokens=0, output_tokens=0), ref, provider_id=provider_id).model_price


def _per_mtok(prices: Any, key: str) -> float | None:
    value = getattr(prices, key, None)
    value = getattr(value, "base", value)  # TieredPrices: the first tier
    return float(value) if isinstance(value, Decimal) else None
