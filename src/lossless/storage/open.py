"""``open_store(spec)``: one setting chooses where everything lossless keeps goes.

    store = open_store()                                  # $LOSSLESS_STORE, else the directory store
    store = open_store(".lossless")                      # a directory: today's store, unchanged
    store = open_store("postgresql://agent@db:5432/team") # the shared PostgreSQL store
    store.artifacts.put(b"..."); store.transcript("s1").append(msgs); store.memory.search("tabs", 5)

A spec that starts ``postgresql://`` or ``postgres://`` is a database; anything else is a
directory.  Without a spec, ``$LOSSLESS_STORE`` decides, then ``$LOSSLESS_HOME`` /
the nearest ``.lossless`` (``lossless.store.nearest_store_folder``).  There is never a silent fallback: a database that cannot be
reached is a ``StoreError`` naming it, not a local directory used instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterable

from .._legacy import getenv
from ..memory.store import MemoryStore
from ..store import ArtifactStore, home
from ..transcript import Transcript, read_entries, transcript_path

ENV_STORE = "LOSSLESS_STORE"
SCHEMES = ("postgresql://", "postgres://")


def is_database(spec: object) -> bool:
    return isinstance(spec, str) and spec.startswith(SCHEMES)


class DirTranscripts:
    """The directory store's transcripts: ``sessions/<id>/transcript.jsonl`` under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def writer(self, session_id: str | None = None) -> Transcript:
        return Transcript(session_id, root=self.root)

    def append_entries(self, session_id: str, entries: Iterable[dict[str, Any]]) -> None:
        entries = list(entries)
        if entries:
            with Transcript(session_id, root=self.root) as log:
                log._parent()  # opened (and a torn last line ended) before the entries go in
                log._emit(entries)

    def entries(self, session_id: str) -> list[dict[str, Any]]:
        path = transcript_path(session_id, self.root)
        return read_entries(path).entries if path.exists() else []

    def sessions(self) -> list[str]:
        base = self.root / "sessions"
        if not base.is_dir():
            return []
        return sorted(p.name for p in base.iterdir() if (p / "transcript.jsonl").is_file())


@dataclass(frozen=True)
class Store:
    """An opened store: its three parts, and ``root``, the local directory for what stays per
    machine (a session's notes).  ``spec`` names it in messages (a database without its password).
    ``memory`` is made on first use (the directory store's sweeps nothing before)."""

    spec: str
    root: Path
    artifacts: ArtifactStore
    transcripts: Any
    kind: str
    memory_factory: Callable[..., MemoryStore]

    @cached_property
    def memory(self) -> MemoryStore:
        """The memory store, unrestricted: it sees every scope."""
        return self.memory_factory()

    def memory_view(self, *, project: str | None = None, agent: str | None = None) -> MemoryStore:
        """The memory store as one project's and/or agent's view sees it (``lossless.memory.scope``)."""
        return self.memory_factory(project=project, agent=agent)

    def transcript(self, session_id: str | None = None) -> Transcript:
        """The append-only writer of one session's transcript."""
        writer: Transcript = self.transcripts.writer(session_id)
        return writer

    def close(self) -> None:
        db = getattr(self.artifacts, "db", None)
        if db is not None:
            db.close()


def open_store(spec: str | os.PathLike[str] | ArtifactStore | None = None, *, migrate: bool = True) -> Store:
    """The store ``spec`` names (see the module docstring); a database is migrated to the
    current schema first unless ``migrate=False`` (then a missing schema is an error)."""
    if isinstance(spec, ArtifactStore) and not hasattr(spec, "db"):
        return _directory(spec.root, artifacts=spec)
    if isinstance(spec, ArtifactStore):
        return _database(getattr(spec, "db"), migrate=False, artifacts=spec)
    if spec is None:
        spec = getenv(ENV_STORE) or None
    if is_database(spec):
        return _database(str(spec), migrate=migrate)
    return _directory(home(spec))


def _directory(root: Path, *, artifacts: ArtifactStore | None = None) -> Store:
    if root.exists() and not root.is_dir():  # refused here, or a read of it would answer "nothing there"
        from ..errors import StoreError
        from ..store import ENV_HOME
        raise StoreError(f"the store {root} is not a directory (pass --store DIR or set {ENV_HOME} to one)")
    return Store(spec=str(root), root=root, artifacts=artifacts or ArtifactStore(root),
                 transcripts=DirTranscripts(root), kind="directory",
                 memory_factory=lambda **view: MemoryStore(root / "memory", **view))


def _database(target: Any, *, migrate: bool, artifacts: ArtifactStore | None = None) -> Store:
    from ..errors import StoreError
    from .postgres.artifacts import PgArtifactStore
    from .postgres.connect import Database
    from .postgres.memory import PgMemoryStore
    from .postgres.schema import LATEST, current_version, ensure_current
    from .postgres.transcripts import PgTranscripts

    db = Database(target) if isinstance(target, str) else target
    if artifacts is not None:
        pass  # already opened (and migrated) by whoever made it
    elif migrate:
        ensure_current(db)
    elif current_version(db) < LATEST:
        raise StoreError(f"PostgreSQL store {db.label} is not at schema version {LATEST}: "
                         "run `lossless store migrate --store URL`")
    artifacts = artifacts or PgArtifactStore(db)
    return Store(spec=f"postgresql://{db.label}", root=artifacts.root, artifacts=artifacts,
                 transcripts=PgTranscripts(db), kind="postgresql", memory_factory=lambda **view: PgMemoryStore(db, **view))
