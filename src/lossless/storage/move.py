"""Moving everything from one store to another, losslessly: ``copy_store(src, dst)``.

    copy_store(open_store(".lossless"), open_store("postgresql://db/team"))   # lossless store import
    copy_store(open_store("postgresql://db/team"), open_store("backup/"))      # lossless store export

What moves, and the invariant each keeps:

* every artifact — written by its bytes, so the destination gives the same handle and
  ``recall`` the same bytes (checked: a handle that comes out different stops the move);
* every session's transcript entries, in order, equal as JSON values (``==`` on the dicts);
  a session the destination already holds is skipped when its entries are the same, and
  only the missing tail is appended when they are a prefix — running a move twice is safe;
  any other difference is a ``StoreError`` naming the session, and nothing of it is written;
* every memory (superseded ones too), by its file text, stamps kept (``restore``): the
  destination's ``get`` returns an equal ``Memory``.  Logged there as ``import`` under ``run``.

Use times, the change log and the trash stay where they were.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import StoreError
from .open import Store

_NAME = re.compile(r"[0-9a-f]{24}")


@dataclass(frozen=True, slots=True, kw_only=True)
class MoveReport:
    artifacts: int = 0
    sessions: int = 0
    entries: int = 0
    memories: int = 0
    skipped_sessions: tuple[str, ...] = field(default_factory=tuple)


def handles(store: Store) -> list[str]:
    """Every artifact handle a store holds, sorted."""
    listed = getattr(store.artifacts, "handles", None)
    if callable(listed):
        return list(listed())
    directory = store.artifacts.dir
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted("sha256:" + n for n in names if _NAME.fullmatch(n))


def copy_store(src: Store, dst: Store, *, run: str = "import") -> MoveReport:
    """Copy ``src`` into ``dst`` (see the module docstring); what was copied."""
    issues = src.memory.scan().issues
    if issues:
        raise StoreError(f"{issues[0]}: fix or remove it before moving the store ({len(issues)} unreadable)")
    n_art = 0
    for h in handles(src):
        got = dst.artifacts.put(src.artifacts.get_bytes(h))
        if got != h:
            raise StoreError(f"artifact {h} came out of {dst.spec} as {got}: stopped, nothing more copied")
        n_art += 1
    n_sessions, n_entries, skipped = 0, 0, []
    for sid in src.transcripts.sessions():
        entries: list[dict[str, Any]] = src.transcripts.entries(sid)
        have: list[dict[str, Any]] = dst.transcripts.entries(sid)
        if have != entries[: len(have)]:
            raise StoreError(f"session {sid!r} in {dst.spec} differs from the one in {src.spec}: "
                             "move it by hand or import into another store")
        if len(have) == len(entries):
            skipped.append(sid)
            continue
        dst.transcripts.append_entries(sid, entries[len(have):])
        n_sessions += 1
        n_entries += len(entries) - len(have)
    n_mem = 0
    for m in src.memory.memories():
        dst.memory.restore(src.memory.text_of(m.id), m.id, run=run)
        n_mem += 1
    return MoveReport(artifacts=n_art, sessions=n_sessions, entries=n_entries, memories=n_mem,
                      skipped_sessions=tuple(skipped))
