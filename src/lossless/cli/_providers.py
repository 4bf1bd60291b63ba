"""Build a provider from a name, as the CLI's ``--provider``/``--model``/``--base-url`` do."""

from __future__ import annotations

import os

from ..errors import ConfigError
from ..providers.base import Provider

PROVIDERS = ("anthropic", "openai", "fake")


def make_provider(name: str, model: str | None = None, base_url: str | None = None) -> Provider:
    """``anthropic`` and ``openai`` use the official SDKs (keys from ANTHROPIC_API_KEY /
    OPENAI_API_KEY); ``fake`` is lossless's offline scripted provider, whose summaries
    are built deterministically from the request (for trying things out and benchmarks)."""
    if name == "fake":
        from ..testing.fake_provider import FakeProvider

        return FakeProvider()
    if name not in PROVIDERS:
        raise ConfigError(f"unknown provider {name!r}; choose one of {', '.join(PROVIDERS)}")
    if not model:
        raise ConfigError(f"--provider {name} needs --model (the model to summarise with)")
    key = "ANTHROPIC_API_KEY" if name == "anthropic" else "OPENAI_API_KEY"
    if base_url is None and not os.environ.get(key):
        raise ConfigError(f"--provider {name} needs an API key: set {key} (or pass --base-url for a local server)")
    try:
        if name == "anthropic":
            from ..providers.anthropic import AnthropicProvider

            return AnthropicProvider(model, base_url=base_url)
        from ..providers.openai import OpenAIProvider

        return OpenAIProvider(model, base_url=base_url)
    except ImportError as exc:
        raise ConfigError(f"the {name} provider needs its SDK: pip install 'lossless[{name}]' ({exc})") from None
    except Exception as exc:  # the SDKs raise their own errors for a missing key or a bad URL
        raise ConfigError(f"cannot create the {name} provider: {exc}") from None
