"""A deterministic stand-in for the model's session notes.

Used by ``FakeProvider`` and the fake HTTP server, so tests and benches with a "model"
run the session-notes path (``lossless.memory.session``) as with a real one: a notes
request gets Markdown notes with the sections the request asks for — # Task,
# Current state, # Decisions and constraints, # Files and places, # Errors and fixes,
# Next steps — built only from what the request holds: the user's words, the paths
named, the last errors, the last assistant text, and the current notes it is asked to
rewrite (their task, decisions and files are carried over, as a model keeps them).
Same request, same notes.

Both shapes of the request are read: the conversation followed by one user message
asking for the notes (``in_conversation=True``), and one message holding the current
notes and an excerpt of the dialogue (``Recent conversation:``).
"""

from __future__ import annotations

import re
from typing import Sequence

from .. import markers
from ..memory.session import NOTES_SYSTEM
from .summaries import _ERROR, _PATH, _TODO, Turn, _clip, _unique

__all__ = ["NOTES_MARK", "build_notes", "is_notes_instruction", "notes_turns"]

NOTES_MARK = NOTES_SYSTEM.split(".")[0]
"""The first sentence of the notes instruction: how a notes request is recognised."""
SECTIONS = ("Task", "Current state", "Decisions and constraints", "Files and places", "Errors and fixes",
            "Next steps")
_CURRENT = "Current notes:\n"
_RECENT = "\n\nRecent conversation:\n"
_SPEAKER = re.compile(r"(?:^|\n\n)(user|assistant|system): ", re.M)


def is_notes_instruction(text: str) -> bool:
    """True for a system prompt or a user message that asks for the session notes."""
    return NOTES_MARK in text


def notes_turns(turns: Sequence[Turn]) -> tuple[list[Turn], str]:
    """The conversation a notes request is about, and the current notes it carries.

    ``turns`` end with the notes request itself (the last user turn)."""
    turns = list(turns)
    last = next((k for k in range(len(turns) - 1, -1, -1) if turns[k][0] == "user"), None)
    if last is None:
        return turns, ""
    ask = turns[last][1]
    before = turns[:last]
    body = ask.split(_CURRENT, 1)[1] if _CURRENT in ask else ""
    current, _, recent = body.partition(_RECENT)
    if recent:  # the excerpt shape: "role: text" paragraphs
        parts = _SPEAKER.split("\n\n" + recent)
        before += [(role, text.strip()) for role, text in zip(parts[1::2], parts[2::2])]
    current = current.strip()
    return before, "" if current == "(none yet)" else current


def _section(notes: str, title: str) -> list[str]:
    """The lines of section ``# title`` of ``notes`` (none when it has no such section)."""
    out: list[str] = []
    inside = False
    for line in notes.splitlines():
        if line.startswith("#"):
            inside = line.lstrip("#").strip().lower() == title.lower()
        elif inside and line.strip():
            out.append(line.strip())
    return out


_EMPTY = frozenset({"None stated.", "None named.", "None recorded.", "None."})


def _items(lines: Sequence[str]) -> list[str]:
    items = (line[2:] if line.startswith("- ") else line for line in lines)
    return [item for item in items if item not in _EMPTY]


def _bullets(items: Sequence[str], empty: str) -> str:
    return "\n".join(f"- {item}" for item in items) if items else f"- {empty}"


def build_notes(turns: Sequence[Turn], current: str = "") -> str:
    """Session notes for ``turns`` (``(role, text)``, tool results as "tool"), rewriting
    ``current``: at most a few kilobytes whatever the conversation's length."""
    users = [t for role, t in turns if role == "user" and t.strip() and not markers.is_marker(t.strip())]
    assistants = [t for role, t in turns if role == "assistant" and t.strip()]
    everything = "\n".join(t for _, t in turns)
    calls = sum(1 for role, _ in turns if role == "tool")

    # The task stays what the current notes say it is (the request may have left the context).
    task = " ".join(_section(current, "Task")) or (_clip(users[0], 300) if users else "Not stated yet.")
    state = _clip(assistants[-1], 300) if assistants else "No work recorded yet."
    # The newest win a place: carried items first, the conversation's after, the last 20 kept.
    decisions = _unique([*_items(_section(current, "Decisions and constraints")),
                         *(_clip(u, 200) for u in users[-12:])], 1_000)[-20:]
    files = _unique([*reversed(_PATH.findall(everything)), *_items(_section(current, "Files and places"))], 15)
    errors = _unique((_clip(line, 160) for line in reversed(everything.splitlines()) if _ERROR.search(line)), 4)
    todos = _unique((_clip(line, 160) for line in everything.splitlines() if _TODO.search(line)), 4)
    next_steps = [f"Continue with: {_clip(users[-1], 200)}" if users else "Continue the task.", *todos]
    body = [
        f"# {SECTIONS[0]}\n{task}",
        f"# {SECTIONS[1]}\n{state}\n({len(turns)} messages reviewed, {calls} tool results.)",
        f"# {SECTIONS[2]}\n{_bullets(decisions, 'None stated.')}",
        f"# {SECTIONS[3]}\n{_bullets(files, 'None named.')}",
        f"# {SECTIONS[4]}\n{_bullets(errors, 'None recorded.')}",
        f"# {SECTIONS[5]}\n{_bullets(next_steps, 'None.')}",
    ]
    return "\n\n".join(body) + "\n"
