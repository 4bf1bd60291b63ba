"""``ContextManager``'s keyword arguments as a ``TypedDict``, for the adapters' ``**kwargs``.

An adapter built without a manager passes its keywords on to ``ContextManager``;
typing them ``**kwargs: Unpack[ManagerOptions]`` lets a type checker catch a misspelt
or mistyped argument where the user writes it (``Lossless(windw=...)``), not only when
it runs.  mypy checks each adapter's ``ContextManager(**options)`` call against the real
signature, and ``tests/test_types.py`` that the keys are exactly its parameters.

An adapter given no ``window`` (nor ``config`` nor ``manager``) budgets each call by its model's
window (``ModelWindow``): the framework's own word for it where it has one, else the models' data.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Sequence, TypedDict

from ..compaction import Hooks, Summarizer
from ..config import ContextConfig
from ..manager import ContextManager
from ..modelinfo import fitted, window_for
from ..providers.base import Provider
from ..stages.base import Stage
from ..store import ArtifactStore
from ..tokens import TokenCounter


class ManagerOptions(TypedDict, total=False):
    """Any of ``ContextManager(...)``'s arguments, by keyword; see its docstring for each."""

    window: int
    max_output: int | None
    config: ContextConfig | None
    counter: TokenCounter | None
    store: str | ArtifactStore | None
    session_id: str | None
    transcript: bool
    stages: Sequence[tuple[str, Stage]] | None
    unseen_tokens: int
    dialect: Literal["anthropic", "openai"]
    provider: Provider | None
    summarizer: Summarizer | None
    summary_model: str | None
    hooks: Hooks | None
    project_dir: str | None
    session_notes: bool
    memory: Any
    clock: Any


def openai_manager(options: ManagerOptions) -> ContextManager:
    """The manager an adapter builds from its keywords: OpenAI's dialect unless they name one."""
    merged: ManagerOptions = {"dialect": "openai", **options}
    return ContextManager(**merged)


class ModelWindow:
    """Fits an adapter's manager to the window of each call's model, unless it was built with a
    window of its own (``window=``, ``config=`` or ``manager=``): then it does nothing."""

    def __init__(self, manager: ContextManager | None, options: ManagerOptions) -> None:
        self.active = manager is None and "window" not in options and "config" not in options
        self.max_output = options.get("max_output")

    def fit(self, manager: ContextManager, window: int | None, model: str | None,
            warn: Callable[[str], None] | None = None) -> None:
        """Budget ``manager`` by ``window`` (the framework's figure) when known, else by ``model``'s
        in the models' data (``modelinfo.window_for``: an unknown one warns once)."""
        if not self.active:
            return
        window = window if isinstance(window, int) and window > 0 else window_for(model, warn=warn)
        if manager.config.window != window:
            manager.config = fitted(manager.config, window, self.max_output)
            manager.budget = manager.config.budget


def model_name(model: Any) -> str | None:
    """The name a framework's model object goes by (``model_name``, ``model``), or the string itself."""
    if isinstance(model, str):
        return model
    for attribute in ("model_name", "model", "model_id"):
        name = getattr(model, attribute, None)
        if isinstance(name, str) and name:
            return name
    return None
