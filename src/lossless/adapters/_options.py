"""``ContextManager``'s keyword arguments as a ``TypedDict``, for the adapters' ``**kwargs``.

An adapter built without a manager passes its keywords on to ``ContextManager``;
typing them ``**kwargs: Unpack[ManagerOptions]`` lets a type checker catch a misspelt
or mistyped argument where the user writes it (``Lossless(windw=...)``), not only when
it runs.  mypy checks each adapter's ``ContextManager(**options)`` call against the real
signature, and ``tests/test_types.py`` that the keys are exactly its parameters.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence, TypedDict

from ..compaction import Hooks, Summarizer
from ..config import ContextConfig
from ..manager import ContextManager
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
