"""Consolidation over the PostgreSQL store: the lock is an advisory lock that dies with its holder.

``PgConsolidator`` is the ``Consolidator`` with its file lock replaced: ``_acquire`` opens a
connection of its own and takes ``pg_try_advisory_lock`` on it, so at most one consolidation
runs across every machine, and a holder that crashes (or whose machine does) releases it
with its connection — there is no stale lock file to time out.  When the last run finished
is a row of ``lossless.meta``; the sessions since are counted from the transcript rows.
"""

from __future__ import annotations

import json
from typing import Any

from ...memory.consolidate import Consolidator
from .connect import Database

CONSOLIDATE_LOCK = 0x7265636F6C6C0004
"""The session-level advisory lock a consolidation holds for its whole run."""


class PgConsolidator(Consolidator):
    def __init__(self, store: Any, provider: Any, **kwargs: Any) -> None:
        super().__init__(store, provider, **kwargs)
        self.db: Database = store.db
        self._holder: Any = None

    def last_consolidated(self) -> float:
        with self.db.cursor("read when memories were last consolidated") as cur:
            cur.execute("SELECT value FROM lossless.meta WHERE key = 'consolidated'")
            row = cur.fetchone()
        return float(row[0]) if row else 0.0

    def _lock_state(self) -> tuple[float, dict[str, Any] | None, float]:
        last = self.last_consolidated()
        return last, None, last  # a held lock is found by _acquire's try, never by a timestamp

    def sessions_since(self, since: float) -> int:
        from .transcripts import PgTranscripts

        return PgTranscripts(self.db).sessions_since(since)

    def _acquire(self) -> float | None:
        conn = self.db.connect()
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (CONSOLIDATE_LOCK,)).fetchone()
        except BaseException:
            conn.close()
            raise
        if not row or not row[0]:
            conn.close()
            return None
        self._holder = conn
        return self.last_consolidated()

    def _release(self, *, success: bool, prior: float) -> None:
        try:
            if success:
                with self.db.transaction("record the consolidation") as cur:
                    cur.execute("INSERT INTO lossless.meta (key, value) VALUES ('consolidated', %s::jsonb) "
                                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                                (json.dumps(self.clock()),))
        finally:
            holder, self._holder = self._holder, None
            if holder is not None:
                holder.close()  # the advisory lock goes with the connection
