"""Artifacts in PostgreSQL: the same ``sha256:`` handles, the same exact bytes, deduplicated.

``PgArtifactStore`` is an ``ArtifactStore`` (so every stage, tool and adapter that takes one
takes it) whose bytes live in ``lossless.artifacts``.  ``put`` inserts with ``ON CONFLICT DO
NOTHING``: writing the same content twice, from any machine, keeps one row.  It returns the
handle only after the server committed the row; inside ``store.batch()`` (each ``prepare``)
the batch's rows go in one transaction at its end, as the directory store's group commit.  ``get_bytes`` checks the bytes against their
handle, as the directory store does.

``root`` is a local directory for what stays per machine (a session's notes): it is never
where artifacts go.
"""

from __future__ import annotations

import threading

from ...errors import HandleNotFound, StoreError
from ...store import ArtifactStore, Staged, handle_for, home
from .connect import Database


class PgArtifactStore(ArtifactStore):
    def __init__(self, db: Database) -> None:  # no super().__init__: there is no artifacts/ to sweep
        self.db = db
        self.root = home()
        self.dir = self.root / "artifacts"
        self.swept = []
        self._local = threading.local()

    def _stage(self, handle: str, data: bytes) -> Staged:
        return Staged(handle, data)  # the insert itself skips a row that exists

    def _commit(self, staged: list[Staged]) -> None:
        if not staged:
            return
        what = f"write artifact {staged[0].handle}" if len(staged) == 1 else f"write {len(staged)} artifacts"
        with self.db.transaction(what) as cur:
            cur.executemany("INSERT INTO lossless.artifacts (handle, data, size) VALUES (%s, %s, %s) "
                            "ON CONFLICT (handle) DO NOTHING", [(s.handle, s.data, len(s.data)) for s in staged])

    def _label(self) -> str:
        return f"the PostgreSQL store {self.db.label}"

    def _starting_with(self, short: str) -> list[str]:
        """Full handles that start with ``short`` (a handle holds no ``%`` or ``_``, so LIKE
        matches the start exactly, whatever the database's collation; on recall only)."""
        with self.db.cursor(f"look up artifact {short}") as cur:
            cur.execute("SELECT handle FROM lossless.artifacts WHERE handle LIKE %s ORDER BY handle LIMIT 9",
                        (short + "%",))
            return [r[0] for r in cur.fetchall()]

    def get_bytes(self, handle: str) -> bytes:
        handle = self.resolve(handle)
        staged = self._staged_data(handle)
        if staged is not None:
            return staged
        with self.db.cursor(f"read artifact {handle}") as cur:
            cur.execute("SELECT data FROM lossless.artifacts WHERE handle = %s", (handle,))
            row = cur.fetchone()
        if row is None:
            raise HandleNotFound(f"no artifact {handle} in the PostgreSQL store {self.db.label}")
        data = bytes(row[0])
        if handle_for(data) != handle:
            raise StoreError(f"artifact {handle} in {self.db.label} does not hold its content (changed after it was written)")
        return data

    def size(self, handle: str) -> int:
        handle = self.resolve(handle)
        staged = self._staged_data(handle)
        if staged is not None:
            return len(staged)
        with self.db.cursor(f"read artifact {handle}") as cur:
            cur.execute("SELECT size FROM lossless.artifacts WHERE handle = %s", (handle,))
            row = cur.fetchone()
        if row is None:
            raise HandleNotFound(f"no artifact {handle} in the PostgreSQL store {self.db.label}")
        return int(row[0])

    def _holds(self, handle: str) -> bool:
        with self.db.cursor(f"look up artifact {handle}") as cur:
            cur.execute("SELECT 1 FROM lossless.artifacts WHERE handle = %s", (handle,))
            return cur.fetchone() is not None

    def handles(self) -> list[str]:
        """Every handle the store holds (for export), in order."""
        with self.db.cursor("list artifacts") as cur:
            cur.execute("SELECT handle FROM lossless.artifacts ORDER BY handle")
            return [r[0] for r in cur.fetchall()]
