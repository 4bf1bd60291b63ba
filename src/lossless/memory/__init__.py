"""Long-term memory: the layer that survives compaction and sessions.

* ``MemoryStore`` — Markdown files with ordered frontmatter + ``MEMORY.md`` (store.py), read
  through a persistent index that stays in step with the files (catalog.py).
* ``Retriever`` / ``LexicalRetriever`` / ``LLMRetriever`` — what to bring back (retrieval.py);
  ``HybridRetriever`` adds the dense side of the ``embed`` extra (embed.py).
* ``SessionInjector``, ``append_to_last_user``, ``system_index`` — how it enters the context (inject.py).
* ``View`` — which scopes a store sees: user / project / agent namespaces in one directory (scope.py).
* ``Extractor`` — proposals after a turn (extract.py); ``extract_session`` — from a recorded session (harvest.py); ``Consolidator`` — merging (consolidate.py),
  run when a session ends (``lifecycle.session_ended``); what it may not change unattended is
  kept for a person (suggestions.py).
* ``SessionNotes`` — per-session notes for compaction (session.py).
* ``MemoryTool`` / ``TOOL_DEFINITION`` — the memory-tool command set over the store (tool.py).
* ``redact`` — secrets never reach disk (redact.py).
"""

from .consolidate import ConsolidationConfig, ConsolidationResult, Consolidator, Plan
from .extract import Extraction, Extractor, Proposal, apply_operations, plan_operations
from .harvest import extract_session
from .index import render_index
from .inject import SessionInjector, append_to_last_user, inject, system_index
from .lexical import LexicalIndex
from .model import TYPES, Issue, Memory, MemoryType, slugify
from .redact import redact
from .retrieval import (
    Hit, HybridRetriever, KeywordRetriever, LexicalRetriever, LLMRetriever, Retriever, recall_memories,
)
from .scope import View
from .session import SessionNotes
from .store import MemoryStore, ScanResult
from .tool import NATIVE_TOOL, TOOL_DEFINITION, MemoryTool

__all__ = [
    "NATIVE_TOOL",
    "TOOL_DEFINITION",
    "TYPES",
    "ConsolidationConfig",
    "ConsolidationResult",
    "Consolidator",
    "Extraction",
    "Extractor",
    "Hit",
    "HybridRetriever",
    "Issue",
    "KeywordRetriever",
    "LLMRetriever",
    "LexicalIndex",
    "LexicalRetriever",
    "Memory",
    "MemoryStore",
    "MemoryTool",
    "MemoryType",
    "Plan",
    "Proposal",
    "Retriever",
    "ScanResult",
    "SessionInjector",
    "SessionNotes",
    "View",
    "append_to_last_user",
    "apply_operations",
    "extract_session",
    "inject",
    "plan_operations",
    "recall_memories",
    "redact",
    "render_index",
    "slugify",
    "system_index",
]
