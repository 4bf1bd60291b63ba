"""Session memory: a per-session notes file the model keeps current, for compaction to use.

Use::

    notes = SessionNotes("abc123")                     # .lossless/sessions/abc123/notes.md
    if notes.due(history_tokens):
        notes.update(provider, messages)               # failure keeps the old notes
    if notes.substantial(history_tokens, text_messages, notes_tokens):
        ...                                            # compaction may use notes.read() as its summary

Thresholds (the seeds'): notes are first written once the history reaches
10,000 tokens and refreshed every further 5,000; compaction may use them when the
history has ≥ 10,000 tokens and ≥ 5 text messages and the notes are ≤ 40,000 tokens.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import MemoryError_
from ..messages import Message, user
from ..providers.base import Provider, Request
from ..store import atomic_write, home
from ._llm import ask
from .model import SLUG_RE

MIN_HISTORY_TOKENS = 10_000
MIN_TEXT_MESSAGES = 5
MAX_NOTES_TOKENS = 40_000
UPDATE_EVERY_TOKENS = 5_000

NOTES_SYSTEM = (
    "You keep running notes of a working session so that it can continue after its history is compacted. "
    "Rewrite the notes with these sections: # Task, # Current state, # Decisions and constraints "
    "(including every instruction the user gave), # Files and places, # Errors and fixes, # Next steps. "
    "Be specific (names, paths, commands). Never include secrets. Reply with the notes only."
)


def looks_like_notes(text: str, sections: int = 2) -> bool:
    """At least ``sections`` Markdown headings.  Compaction lets notes stand for a history
    only with two; a refresh is kept with one ("OK.", an apology or an error text has none)."""
    return sum(1 for line in text.splitlines() if line.startswith("#")) >= sections


class SessionNotes:
    """The notes file of one session. ``path`` is ``<store>/sessions/<id>/notes.md``."""

    def __init__(self, session_id: str, root: str | os.PathLike[str] | None = None, *,
                 every_tokens: int = UPDATE_EVERY_TOKENS) -> None:
        if not isinstance(session_id, str) or not SLUG_RE.fullmatch(session_id.lower()):
            raise MemoryError_(f"invalid session id {session_id!r}: use letters, digits and hyphens")
        self.session_id = session_id
        self.path: Path = home(root) / "sessions" / session_id / "notes.md"
        self._last_update_tokens: int | None = None
        self.every_tokens = every_tokens

    def read(self) -> str:
        """The notes, secrets redacted (the file may have been edited by hand)."""
        from .redact import redact

        try:
            return redact(self.path.read_text("utf-8"))
        except FileNotFoundError:
            return ""

    def write(self, text: str) -> None:
        from .redact import redact

        atomic_write(self.path, redact(text).encode("utf-8"))

    def due(self, history_tokens: int) -> bool:
        """Whether the notes should be refreshed at this history size."""
        if history_tokens < MIN_HISTORY_TOKENS:
            return False
        last = self._last_update_tokens
        return last is None or history_tokens - last >= self.every_tokens

    def compacted(self, history_tokens: int) -> None:
        """The history was compacted down to ``history_tokens``: the next refresh is due
        once it has grown again, so the notes at the next compaction are recent."""
        if self._last_update_tokens is not None:
            self._last_update_tokens = min(self._last_update_tokens, history_tokens)

    def update(self, provider: Provider, messages: Sequence[Message], *, history_tokens: int | None = None,
               max_chars: int = 40_000, model: str | None = None, in_conversation: bool = False,
               system: Any = None, tools: Sequence[Mapping[str, Any]] | None = None) -> bool:
        """Ask the model to rewrite the notes from the history. False (old notes kept) on any
        failure, or when the reply is not notes (no ``#`` section at all).  Either way
        the next attempt waits for the history to grow, as after a success.

        ``in_conversation=True`` sends the conversation itself (with its ``system`` and
        ``tools``) and the notes request as one more user message, as a summary request
        does: the request then starts with the prefix the provider has cached, so a refresh
        costs a cache read of the history rather than a full write of an excerpt of it.
        The caller passes it only when the history fits the window."""
        if history_tokens is not None:
            self._last_update_tokens = history_tokens
        current = self.read() or "(none yet)"
        if in_conversation and messages:
            instruction = (f"{NOTES_SYSTEM} Do not call any tool: answer with text only.\n\n"
                           f"Current notes:\n{current}")
            request = Request(messages=(*messages, user(instruction)), system=system,
                              tools=tuple(dict(t) for t in tools or ()), max_tokens=4096, model=model,
                              purpose="session-notes")
            try:
                text = provider.complete(request).text.strip()
            except Exception:  # a failed refresh keeps the previous notes
                return False
        else:
            dialogue = "\n\n".join(f"{m.role}: {m.text.strip()}" for m in messages if m.text.strip())[-max_chars:]
            prompt = f"Current notes:\n{current}\n\nRecent conversation:\n{dialogue}"
            try:
                text = ask(provider, system=NOTES_SYSTEM, prompt=prompt, purpose="session-notes", max_tokens=4096,
                           model=model).strip()
            except Exception:  # a failed refresh keeps the previous notes
                return False
        if not looks_like_notes(text, sections=1):  # "OK.", an apology, an error text: never taken for notes
            return False
        self.write(text + "\n")
        return True

    @staticmethod
    def substantial(history_tokens: int, text_messages: int, notes_tokens: int) -> bool:
        """Whether the notes may stand in for a summary at compaction."""
        return (history_tokens >= MIN_HISTORY_TOKENS and text_messages >= MIN_TEXT_MESSAGES
                and 0 < notes_tokens <= MAX_NOTES_TOKENS)
