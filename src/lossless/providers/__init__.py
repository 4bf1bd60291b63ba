"""Model providers behind one small protocol (see ``base``).

    from lossless.providers import AnthropicProvider, OpenAIProvider, RetryPolicy, with_retries

Importing this package never imports an SDK: the adapters import ``anthropic`` /
``openai`` when constructed.  Errors are lossless's own (``lossless.errors``).
"""

from __future__ import annotations

from .anthropic import AnthropicProvider
from .base import Provider, Request, Response, Usage, count_tokens, stream
from .health import ProviderHealth
from .openai import OpenAIProvider
from .retry import RetryingProvider, RetryPolicy, is_retryable, with_retries

__all__ = sorted([
    "AnthropicProvider",
    "OpenAIProvider",
    "Provider",
    "ProviderHealth",
    "Request",
    "Response",
    "RetryPolicy",
    "RetryingProvider",
    "Usage",
    "count_tokens",
    "is_retryable",
    "stream",
    "with_retries",
])
