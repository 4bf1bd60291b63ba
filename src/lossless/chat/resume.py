"""Continuing a chat session after a restart or a crash, from what is on disk.

    sid = latest_session(store, workdir)                 # --resume with no id
    history, notes = rebuild(store, sid)                 # the history the model had

What is on disk, per session under ``<store>/sessions/<id>/``:

* ``transcript.jsonl`` — the manager's transcript: every message as it entered the
  context, each compaction as a boundary followed by the context that replaced the
  history (summary and verbatim tail).  It is written on each ``prepare``, so the model's
  latest answer, and the results of the tools it called, are not in it yet;
* ``chat-pending.json`` — exactly those: the messages since the transcript's last entry,
  rewritten atomically after each answer and each tool result, tagged with the uuid of the
  transcript entry they follow (stale, and ignored, once the transcript has moved on);
* ``chat.json`` — which working directory and model the session belongs to.

``rebuild`` takes the context after the last compaction boundary (what the model saw, not
the whole history: the summary stands for what came before, and the originals stay
recallable by handle), appends the pending messages, and gives any tool call left without
a result (the process was killed while it ran) an "interrupted" result, so the history is
valid.  The first ``prepare`` after a resume runs the pipeline over it afresh: the
zero-cost stages (persist, micro-compact, snip) redo what they had done, by the same
content-addressed handles.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from ..dialects.anthropic import message_from_dict, message_to_dict
from ..errors import ConfigError, StoreError
from ..messages import Message
from ..rounds import repair
from ..store import atomic_write, store_dir
from ..transcript import read_entries, transcript_path

PENDING = "chat-pending.json"
INFO = "chat.json"


def session_dir(store: Path, session_id: str) -> Path:
    return store_dir(store, "sessions", session_id)


def write_info(store: Path, session_id: str, info: dict[str, Any]) -> None:
    atomic_write(session_dir(store, session_id) / INFO, json.dumps(info, indent=1).encode())


def write_pending(store: Path, session_id: str, after: str | None, messages: Sequence[Message]) -> None:
    """Record the messages the transcript does not hold yet (after its entry ``after``)."""
    data = {"after": after, "messages": [message_to_dict(m) for m in messages]}
    atomic_write(session_dir(store, session_id) / PENDING, json.dumps(data, ensure_ascii=False).encode())


def sessions(store: Path, workdir: Path | None = None) -> list[tuple[str, float, dict[str, Any]]]:
    """``(id, last modified, info)`` of the chat sessions in ``store`` (of ``workdir`` when given), newest first."""
    root = store / "sessions"
    found = []
    if not root.is_dir():
        return []
    for d in root.iterdir():
        try:
            info = json.loads((d / INFO).read_text())
            when = max((d / name).stat().st_mtime for name in ("transcript.jsonl", INFO) if (d / name).exists())
        except (OSError, ValueError):
            continue  # not a chat session (another front door's), or unreadable
        if isinstance(info, dict) and (workdir is None or info.get("workdir") == str(workdir)):
            found.append((d.name, when, info))
    return sorted(found, key=lambda s: s[1], reverse=True)


def latest_session(store: Path, workdir: Path) -> str:
    """The newest session of ``workdir`` with something to continue (a run refused before its
    first message leaves a session with none)."""
    found = [s for s in sessions(store, workdir) if _has_messages(store / "sessions" / s[0])]
    if not found:
        raise ConfigError(f"no chat session of {workdir} in {store} to resume; start one with `lossless chat`")
    return found[0][0]


def _has_messages(folder: Path) -> bool:
    try:
        return (folder / "transcript.jsonl").stat().st_size > 0 or (folder / PENDING).exists()
    except OSError:
        return (folder / PENDING).exists()


def rebuild(store: Path, session_id: str) -> tuple[list[Message], list[str]]:
    """The history to continue ``session_id`` with, and notes on what was repaired."""
    from ..dialects.claude_code import read_session

    if not session_id or session_id in (".", "..") or "/" in session_id or "\0" in session_id:
        raise ConfigError(f"{session_id!r} is not a session id (`/resume` lists them)")
    path = transcript_path(session_id, store)
    if not (store / "sessions" / session_id).is_dir():
        raise ConfigError(f"no session {session_id!r} in {store}/sessions (`/resume` lists them)")
    notes: list[str] = []
    messages: list[Message] = []
    last_uuid = None
    if path.exists():
        session = read_session(path)
        notes.extend(session.warnings)
        start = max((b.index for b in session.boundaries), default=0)
        messages = list(session.messages[start:])
        entries = read_entries(path).entries
        last_uuid = entries[-1].get("uuid") if entries else None
    pending = _read_pending(store / "sessions" / session_id / PENDING)
    if pending is not None and pending[0] == last_uuid:
        messages.extend(pending[1])
    fixed, changes = repair([_plain(m) for m in messages])
    notes.extend(changes)
    return fixed, notes


def _read_pending(path: Path) -> tuple[str | None, list[Message]] | None:
    try:
        data = json.loads(path.read_bytes())
        return data.get("after"), [message_from_dict(d, i) for i, d in enumerate(data.get("messages") or [])]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, AttributeError) as exc:
        raise StoreError(f"{path}: cannot read the pending messages ({exc}); move the file away to resume "
                         "without the last answer") from None


def _plain(message: Message) -> Message:
    """Without the reader's bookkeeping (uuids, usage): the message as it is sent."""
    keep = {k: v for k, v in message.meta.items() if k in ("string_content", "anthropic_extra")}
    return message if keep == dict(message.meta) else Message(role=message.role, content=message.content, meta=keep)


def remove_pending(store: Path, session_id: str) -> None:
    try:
        os.unlink(store / "sessions" / session_id / PENDING)
    except FileNotFoundError:
        pass
