"""lossless: context management and long-term memory for LLM agents.

    from lossless import ContextManager
    cm = ContextManager(window=200_000, max_output=32_000)
    view = cm.prepare(messages, system=SYSTEM, tools=TOOLS)   # view.messages is ready to send

The public names below are loaded on first use, so ``import lossless`` stays cheap.
"""

from __future__ import annotations

from importlib import import_module

__version__ = "0.1.0"
TYPE_CHECKING = False
"""``typing.TYPE_CHECKING`` without importing ``typing``, a fifth of ``lossless --help``'s own
time (bench/startup.py); type checkers know the name."""

if TYPE_CHECKING:  # what a type checker sees: the real names, not __getattr__'s Any (same list as _EXPORTS)
    from .config import Budget, ContextConfig
    from .manager import ContextManager, ContextState, Prepared
    from .messages import Message
    from .rounds import group_rounds, repair, validate
    from .stages.base import StageResult
    from .store import ArtifactStore, recall
    from .view import context_tokens

_EXPORTS = {
    "ArtifactStore": "store",
    "Budget": "config",
    "ContextConfig": "config",
    "ContextManager": "manager",
    "ContextState": "manager",
    "context_tokens": "view",
    "Message": "messages",
    "Prepared": "manager",
    "StageResult": "stages.base",
    "group_rounds": "rounds",
    "recall": "store",
    "repair": "rounds",
    "validate": "rounds",
}
__all__ = sorted(_EXPORTS)


if TYPE_CHECKING:
    from typing import Any


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lossless' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
