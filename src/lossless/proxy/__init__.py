"""``lossless proxy``: any agent that speaks the Anthropic Messages API or OpenAI Chat
Completions gets lossless by pointing its base URL here — no code changes.

    from lossless.proxy import ProxySettings, ProxyServer
    with ProxyServer(ProxySettings(upstream="http://127.0.0.1:8080", window=200_000)) as proxy:
        client = anthropic.Anthropic(base_url=proxy.base_url)   # OpenAI: base_url=proxy.base_url + "/v1"

Modules: ``settings`` (what it is told), ``conversations`` (the hash-chain registry),
``rewrite`` (the pipeline step, callable without HTTP), ``anthropic``/``openai`` (each
API's shapes and stream filter), ``turn`` (one call upstream: the reactive retry and
recall answered inside), ``relay`` (the upstream client, answers, server-sent events),
``stats``, ``metrics`` (Prometheus), ``app`` (the ASGI routes), ``server`` (uvicorn in a thread).
Needs the ``proxy`` extra (uvicorn, httpx2, prometheus-client); ``import lossless`` never loads them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker sees: the real names, not __getattr__'s Any (same list as _EXPORTS)
    from .rewrite import rewrite
    from .conversations import Conversations
    from .server import ProxyServer, manager_factory
    from .settings import ProxySettings

_EXPORTS = {
    "Conversations": "conversations",
    "ProxyServer": "server",
    "ProxySettings": "settings",
    "manager_factory": "server",
    "rewrite": "rewrite",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lossless.proxy' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
