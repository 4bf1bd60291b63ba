"""Suggestions: what unattended consolidation would have changed in a protected memory.

Use::

    record(store, suggestion.as_entry(run))     # the consolidator, under its run
    for s in pending(store): print(s["sid"], s["op"], s["ids"])
    accept(store, sid)                           # a person applies it: a logged, undoable run
    dismiss(store, sid)                          # or drops it

``.suggestions.jsonl`` is append-only: a suggestion line, then at most one
resolution line (``{"sid": …, "resolved": "accepted"|"dismissed"}``).  Invariant:
``accept`` applies a suggestion only if every memory it names is still exactly as
it was when the suggestion was made (else a one-line error and nothing changes),
and logs every change under ``accept-<sid>`` so ``store.undo`` reverts it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..errors import MemoryError_
from ._fs import append_line, read_bytes
from .model import Memory, MemoryFileError, now_iso, parse_memory
from .store import MemoryStore

FILE_NAME = ".suggestions.jsonl"


def _lines(store: MemoryStore) -> list[dict[str, Any]]:
    """The file's well-formed entries, in order (see ``_read``)."""
    return _read(store)[0]


def _read(store: MemoryStore) -> tuple[list[dict[str, Any]], int]:
    """The well-formed entries and the count of lines passed over (see ``review``)."""
    try:
        raw = read_bytes(store.dir / FILE_NAME)
    except FileNotFoundError:
        return [], 0
    out, bad = [], 0
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line.decode("utf-8"))
        except ValueError:  # JSONDecodeError and UnicodeDecodeError
            bad += 1
            continue
        if _suggestion(entry) or _resolution(entry):
            out.append(entry)
        else:
            bad += 1
    return out, bad


def _text_or_none(value: object) -> bool:
    return value is None or isinstance(value, str)


def _suggestion(entry: object) -> bool:
    if not (isinstance(entry, dict) and isinstance(entry.get("sid"), str) and "resolved" not in entry):
        return False
    ids, changes = entry.get("ids"), entry.get("changes", [])
    return (isinstance(entry.get("op"), str) and isinstance(ids, list) and all(isinstance(i, str) for i in ids)
            and _text_or_none(entry.get("reason")) and isinstance(changes, list)
            and all(isinstance(c, dict) and isinstance(c.get("id"), str) and _text_or_none(c.get("before"))
                    and _text_or_none(c.get("after")) for c in changes))


def _resolution(entry: object) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("sid"), str) and isinstance(entry.get("resolved"), str)


def record(store: MemoryStore, entry: dict[str, Any]) -> str:
    """Append a suggestion; returns its id (a short content hash, stable across machines)."""
    body = json.dumps(entry, sort_keys=True, ensure_ascii=False)
    sid = "s-" + hashlib.sha256(body.encode("utf-8")).hexdigest()[:10]
    with store.lock():
        if any(e["sid"] == sid for e in _lines(store)):
            return sid
        line = {"sid": sid, "time": now_iso(store.clock()), **entry}
        append_line(store.dir / FILE_NAME, (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8"))
    return sid


def pending(store: MemoryStore) -> list[dict[str, Any]]:
    """Suggestions not yet accepted or dismissed, oldest first."""
    return review(store)[0]


def review(store: MemoryStore) -> tuple[list[dict[str, Any]], int]:
    """``pending(store)``, and how many lines of the file are neither a suggestion nor a resolution (a
    line torn by a crash, not UTF-8, or a hand edit gone wrong: passed over), from one read."""
    entries, unreadable = _read(store)
    resolved = {e["sid"] for e in entries if "resolved" in e}
    return [e for e in entries if "resolved" not in e and e["sid"] not in resolved], unreadable


def _find(store: MemoryStore, sid: str) -> dict[str, Any]:
    for e in pending(store):
        if e["sid"] == sid:
            return e
    raise MemoryError_(f"no pending suggestion {sid!r} in {store.dir / FILE_NAME} "
                       "(see `lossless memory suggestions`)")


def _resolve(store: MemoryStore, sid: str, how: str) -> None:
    line = {"sid": sid, "resolved": how, "time": now_iso(store.clock())}
    append_line(store.dir / FILE_NAME, (json.dumps(line) + "\n").encode("utf-8"))


def accept(store: MemoryStore, sid: str) -> str:
    """Apply suggestion ``sid``; returns the run id to undo it with."""
    run = f"accept-{sid}"
    with store.lock():
        entry = _find(store, sid)
        changes = [c for c in entry.get("changes", []) if isinstance(c, dict) and isinstance(c.get("id"), str)]
        for c in changes:
            current = store.text_of(c["id"]) if store.exists(c["id"]) else None
            was = _parsed(store, sid, c, "before")
            _parsed(store, sid, c, "after")
            now = parse_memory(current, store.path_for(c["id"])) if current is not None else None
            if was is None or now is None or (now.body, now.updated) != (was.body, was.updated):
                raise MemoryError_(f"cannot accept {sid}: memory {c['id']!r} changed since it was suggested; "
                                   "dismiss it and edit by hand")
        for c in changes:
            if c.get("after") is None:
                store.delete(c["id"], run=run, reason=str(c.get("reason") or "accepted suggestion"))
            else:
                store.put(parse_memory(c["after"], store.path_for(c["id"])), run=run, op=f"accept-{c.get('op')}")
        _resolve(store, sid, "accepted")
    return run


def _parsed(store: MemoryStore, sid: str, change: dict[str, Any], side: str) -> Memory | None:
    """The memory a suggestion's change holds before or after, or None; a text that is not a memory is an
    error naming the suggestion, not the memory file it would have been written to."""
    text = change.get(side)
    if not text:
        return None
    try:
        return parse_memory(text, store.path_for(change["id"]))
    except MemoryError_ as exc:
        why = f"line {exc.line}: {exc.message}" if isinstance(exc, MemoryFileError) else str(exc)
        raise MemoryError_(f"cannot accept {sid}: its {side!r} text for {change['id']!r} in {store.dir / FILE_NAME} "
                           f"is not a memory ({why}); dismiss it") from None


def dismiss(store: MemoryStore, sid: str) -> None:
    """Drop suggestion ``sid`` (the memories stay as they are)."""
    with store.lock():
        _find(store, sid)
        _resolve(store, sid, "dismissed")
