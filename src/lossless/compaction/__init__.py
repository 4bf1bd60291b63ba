"""Compaction with a model: collapse, auto-compact, manual and reactive compaction.

    summarizer = LLMSummarizer(provider)               # reuses the conversation's prompt cache
    collapser, compactor = Collapser(summarizer), AutoCompactor(summarizer)
    stages = (("persist", persist), ("snip", snip), ("microcompact", microcompact),
              ("collapse", collapser), ("autocompact", compactor), ("summary", fallback_summary))

Every path keeps the promises: a failed or unusable summary never replaces the
history, only whole API rounds are replaced, and every replaced message comes back
by handle.  Modules: ``prompts`` (templates, parse and check), ``summarizer``,
``autocompact``, ``collapse``, ``reactive``, ``manual``, ``reattach``, ``hooks``.
"""

from __future__ import annotations

from .autocompact import AutoCompactor, compact_with, summary_message
from .collapse import Collapser, Episode, episodes
from .hooks import Hooks
from .manual import COMPACT_TOOL, compact_instructions, compact_now
from .prompts import check_summary, parse_summary, render
from .reactive import Recovered, call_with_recovery, recover
from .reattach import ReattachConfig
from .summarizer import LLMSummarizer, Summarizer, SummaryResult

__all__ = sorted([
    "AutoCompactor",
    "COMPACT_TOOL",
    "Collapser",
    "Episode",
    "Hooks",
    "LLMSummarizer",
    "ReattachConfig",
    "Recovered",
    "Summarizer",
    "SummaryResult",
    "call_with_recovery",
    "check_summary",
    "compact_instructions",
    "compact_now",
    "compact_with",
    "episodes",
    "parse_summary",
    "recover",
    "render",
    "summary_message",
])
