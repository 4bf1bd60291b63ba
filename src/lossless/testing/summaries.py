"""A deterministic stand-in for the model's compaction summary.

Used by ``FakeProvider`` and the fake HTTP server, so tests of auto-compact see
the shape a real model returns — ``<analysis>…</analysis>`` then ``<summary>``
with the nine numbered sections — built only from the conversation it was given:
same input, same summary, always shorter than a real history.

The input is a list of ``(role, text)`` turns (``role`` is "user", "assistant" or
"tool"), so both the neutral messages and raw wire JSON can feed it.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Sequence

from ..messages import Image, Message, Opaque, RedactedThinking, Text, Thinking, ToolResult, ToolUse, result_text

__all__ = [
    "SECTIONS",
    "build_summary",
    "is_summary_instruction",
    "malformed_summary",
    "turns_from_messages",
    "wants_summary",
]

Turn = tuple[str, str]

SECTIONS = (
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code Sections",
    "Errors and fixes",
    "Problem Solving",
    "All user messages",
    "Pending Tasks",
    "Current Work",
    "Optional Next Step",
)

_PATH = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,5}\b")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{5,}")
_ERROR = re.compile(r"error|exception|traceback|failed|failure", re.I)
_TODO = re.compile(r"\bTODO\b|^\s*- \[ \]|\bnext,? (?:we|I) (?:need|should|will)\b", re.I | re.M)


def is_summary_instruction(text: str) -> bool:
    """True for a prompt that asks for a ``<summary>`` (the compaction instruction)."""
    return "<summary>" in text


def wants_summary(turns: Sequence[Turn], purpose: str | None = None) -> bool:
    if purpose == "summary":
        return True
    last_user = next((text for role, text in reversed(turns) if role == "user"), "")
    return is_summary_instruction(last_user)


_HEADING = re.compile(r"^[\s\-]*\d\.\s+(?:" + "|".join(re.escape(s) for s in SECTIONS) + r"):")


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _unique(items: Iterable[str], limit: int) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        if item not in seen:
            seen[item] = None
            if len(seen) == limit:
                break
    return list(seen)


def _bullets(items: Sequence[str], empty: str) -> str:
    return "\n".join(f"   - {item}" for item in items) if items else f"   - {empty}"


def build_summary(turns: Sequence[Turn]) -> str:
    """The nine-section summary of ``turns`` (a trailing summary instruction is ignored)."""
    turns = list(turns)
    if turns and turns[-1][0] == "user" and is_summary_instruction(turns[-1][1]):
        turns.pop()
    users = [text for role, text in turns if role == "user" and text.strip()]
    assistants = [text for role, text in turns if role == "assistant" and text.strip()]
    everything = "\n".join(text for _, text in turns)

    words = Counter(w for w in _WORD.findall(everything) if not w.isupper())
    concepts = [w for w, _ in sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))[:6]]
    files = _unique(_PATH.findall(everything), 8)
    lines = [line for line in everything.splitlines() if not _HEADING.match(line)]  # an earlier summary's own
    errors = _unique((_clip(line, 100) for line in lines if _ERROR.search(line)), 4)
    todos = _unique((_clip(line, 100) for line in lines if _TODO.search(line)), 4)
    first = _clip(users[0], 200) if users else "No user request recorded."
    current = _clip(assistants[-1], 200) if assistants else "No assistant work recorded."
    next_step = _clip(users[-1], 150) if users else "None."

    body = [
        f"1. {SECTIONS[0]}:\n   {first}",
        f"2. {SECTIONS[1]}:\n{_bullets(concepts, 'None identified.')}",
        f"3. {SECTIONS[2]}:\n{_bullets(files, 'None mentioned.')}",
        f"4. {SECTIONS[3]}:\n{_bullets(errors, 'None recorded.')}",
        f"5. {SECTIONS[4]}:\n   {len(turns)} messages reviewed ({len(users)} from the user, "
        f"{len(assistants)} from the assistant).",
        f"6. {SECTIONS[5]}:\n{_bullets([_clip(u, 160) for u in users], 'None.')}",
        f"7. {SECTIONS[6]}:\n{_bullets(todos, 'None recorded.')}",
        f"8. {SECTIONS[7]}:\n   {current}",
        f"9. {SECTIONS[8]}:\n   Continue with: {next_step}",
    ]
    analysis = f"Reviewed {len(turns)} messages, {len(everything)} characters, in order."
    return f"<analysis>\n{analysis}\n</analysis>\n\n<summary>\n" + "\n\n".join(body) + "\n</summary>"


def malformed_summary(turns: Sequence[Turn]) -> str:
    """What a confused model returns: no closing tags, sections missing."""
    return "<analysis>\nThe conversation is long and I will summarise it\n<summary>\n1. Primary Request and"


def _block_text(block: object) -> str:
    match block:
        case Text():
            return block.text
        case ToolUse():
            return f"[tool call {block.name}] " + " ".join(f"{k}={v}" for k, v in sorted(block.input.items()))
        case ToolResult():
            return result_text(block)
        case Thinking() | RedactedThinking() | Image() | Opaque():
            return ""
    raise TypeError(f"unknown block type {type(block).__name__!r}")


def turns_from_messages(messages: Sequence[Message]) -> list[Turn]:
    """Neutral messages as turns: a user message of tool results becomes "tool" turns."""
    turns: list[Turn] = []
    for message in messages:
        texts = [b.text for b in message.content if isinstance(b, Text)]
        if message.role == "user":
            for result in message.tool_results:
                turns.append(("tool", _block_text(result)))
            if texts:
                turns.append(("user", "\n".join(texts)))
        else:
            text = "\n".join(t for t in (_block_text(b) for b in message.content) if t)
            turns.append((message.role, text))
    return turns
