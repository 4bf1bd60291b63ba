"""Open any session file lossless understands, by looking at it.

    s = read_any(path)     # → Session; s.format says what it was

Recognised, in this order:

1. Claude Code JSONL — the first line is a JSON object with ``type`` and one of
   ``uuid``/``sessionId``/``parentUuid``/``messageId``/``leafUuid`` (streamed, never loaded whole);
2. a mini-swe-agent ``.traj.json`` — an object with ``messages`` and
   ``trajectory_format`` or ``info``;
3. a request body — an object with ``messages`` (and maybe ``system``): a top-level
   ``system`` means Anthropic;
4. a plain JSON list of messages, or of Responses API input items (any ``function_call``,
   ``function_call_output`` or ``reasoning`` item says so).

A list or body is OpenAI when any message has role ``system``/``developer``/``tool``,
``tool_calls``, ``null`` content or an ``image_url`` part; otherwise Anthropic (for
plain user/assistant text the two read the same).  OpenAI system/developer messages
at the start of the list become ``Session.system`` (joined by a blank line).
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

from ._json import json_error, load_json, open_regular
from ..errors import FormatError
from ..messages import Message
from ..session import Session
from .anthropic import from_anthropic
from .claude_code import read_session
from .mini_swe import trajectory_session
from .openai import from_openai

__all__ = ["looks_openai", "read_any"]

_CC_KEYS = ("uuid", "sessionId", "parentUuid", "messageId", "leafUuid")
_OPENAI_PART_TYPES = ("image_url", "input_audio", "file", "refusal")
_RESPONSES_ONLY = ("function_call", "function_call_output", "reasoning")


def _first_line(path: Path) -> bytes:
    with open_regular(path) as f:
        for raw in f:
            if raw.strip():
                return raw.strip()
    return b""


def looks_openai(messages: Sequence[Any]) -> bool:
    """True when a message list can only be Chat Completions (see the module docstring)."""
    for m in messages:
        if not isinstance(m, Mapping):
            continue
        if m.get("role") in ("system", "developer", "tool") or "tool_calls" in m or m.get("content", "") is None:
            return True
        content = m.get("content")
        if isinstance(content, list):
            if any(isinstance(p, Mapping) and p.get("type") in _OPENAI_PART_TYPES for p in content):
                return True
    return False


def _is_claude_code(first: bytes) -> bool:
    try:
        entry = json.loads(first)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(entry, dict) and "type" in entry and "messages" not in entry and any(k in entry for k in _CC_KEYS)


def _unrecognised(path: Path, first: bytes) -> FormatError:
    try:
        shown = f"first line starts with {first[:40].decode('utf-8')!r}"
    except UnicodeDecodeError:
        shown = "it is binary, not text"
    return FormatError(
        f"{path}: not a Claude Code JSONL, mini-swe-agent .traj.json, or a JSON list of "
        f"Anthropic/OpenAI messages ({shown})"
    )


def _system_text(system: Any, path: Path) -> str | None:
    if system is None or isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n\n".join(b.get("text", "") for b in system if isinstance(b, Mapping))
    raise FormatError(f"{path}: 'system' must be a string or a list of text blocks, not {type(system).__name__}")


def _items_session(path: Path, items: list[Any]) -> Session:
    """A list of Responses API input items (what ``compact`` writes for a Responses model's run)."""
    from .responses import from_responses

    try:
        messages = from_responses(items)
    except FormatError as e:
        raise FormatError(f"{path}: {e}") from None
    lead = 0
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    texts = [m.text for m in messages[:lead]]
    return Session(path=path, format="openai", messages=tuple(messages[lead:]),
                   system="\n\n".join(texts) if texts else None)


def _messages_session(path: Path, raw: list[Any], system: Any, openai: bool) -> Session:
    try:
        if not openai:
            messages = from_anthropic(raw)
        else:
            messages = from_openai(raw)
    except FormatError as e:
        raise FormatError(f"{path}: {e}") from None
    if not openai:
        return Session(path=path, format="anthropic", messages=tuple(messages), system=_system_text(system, path))
    lead = 0
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    texts = [m.text for m in messages[:lead]]
    if system is not None:
        texts.insert(0, _system_text(system, path) or "")
    rest: list[Message] = messages[lead:]
    return Session(path=path, format="openai", messages=tuple(rest), system="\n\n".join(texts) if texts else None)


def _load_document(path: Path, first: bytes) -> Any:
    """The file as one JSON document; for JSON Lines (a line per entry) an error about its lines,
    not about the document they do not make.  The first line is parsed apart only when the
    document fails (a one-line file is the whole file: parsed once)."""
    try:
        return load_json(path)
    except FormatError as whole:
        try:
            head = json.loads(first)
        except json.JSONDecodeError as e:
            if path.suffix == ".jsonl":
                raise FormatError(f"{path}:1: not JSON ({json_error(e)})") from None
            raise whole from None
        except (ValueError, RecursionError):
            raise whole from None
        if isinstance(head, dict):  # one object on the first line, more after it: JSON Lines
            keys = ", ".join(list(head)[:4]) or "no keys"
            raise FormatError(f"{path}: JSON Lines whose first entry ({keys}) is neither a Claude Code entry "
                              f"(it has none of {', '.join(_CC_KEYS)}) nor a Codex CLI rollout's session_meta; "
                              f"a list of messages must be one JSON array") from None
        raise


def read_any(path: str | Path) -> Session:
    """Read a session file of any supported format; ``FormatError`` (one line,
    naming the file) when it is missing, empty, not a regular file (a FIFO is refused
    without being read, so it cannot hang) or not recognised."""
    path = Path(path)
    first = _first_line(path)
    if not first:
        raise FormatError(f"{path}: empty file")
    if first[:1] == b"{" and _is_claude_code(first):
        return read_session(path)
    if first[:1] not in (b"{", b"["):
        raise _unrecognised(path, first)
    data = _load_document(path, first)
    if isinstance(data, list):
        if data and all(isinstance(m, Mapping) and ("role" in m or "type" in m) for m in data) and \
                any(m.get("type") in _RESPONSES_ONLY for m in data):
            return _items_session(path, data)
        if not all(isinstance(m, Mapping) and "role" in m for m in data):
            raise _unrecognised(path, first)
        return _messages_session(path, data, None, looks_openai(data))
    if isinstance(data, Mapping) and isinstance(data.get("messages"), list):
        if "trajectory_format" in data or "info" in data:
            return trajectory_session(data, path)
        openai = "system" not in data and looks_openai(data["messages"])
        return _messages_session(path, data["messages"], data.get("system"), openai)
    raise _unrecognised(path, first)
