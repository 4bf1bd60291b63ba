"""Transcripts in PostgreSQL: one append-only row per entry, the same entries as the JSONL.

``lossless.transcript_entries`` holds ``(session_id, seq, entry)``; ``seq`` counts from 1 in
each session, so reading a session back in ``seq`` order gives its entries in the order they
were appended.  An entry PostgreSQL's ``jsonb`` cannot give back exactly (a NUL character or
a lone surrogate from undecodable tool output, a float whose type or spelling it would change)
is kept as its JSON text in ``raw`` instead, so nothing is altered on the way in.  Rows are only ever inserted.

``PgTranscript`` is a ``Transcript`` (the writer the manager uses) whose entries go to rows:
one ``append`` is one transaction, returned only once committed.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Iterable

from ...store import home
from ...transcript import Transcript
from .connect import Database

APPEND_LOCK = 0x7265
"""Advisory lock namespace (with the session id's hash) for appends: two writers of one session never pick the same seq."""


def _plain(value: Any) -> bool:
    """Whether ``jsonb`` gives ``value`` back exactly: no float (its numeric type may come back
    an int or another spelling), no NUL (refused), no lone surrogate (not UTF-8)."""
    if isinstance(value, float):
        return False
    if isinstance(value, str):
        if "\x00" in value:
            return False
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return True


def _row(entry: dict[str, Any]) -> tuple[str | None, str | None]:
    """(jsonb text, raw text): exactly one is set."""
    if _plain(entry):
        return json.dumps(entry, ensure_ascii=False, separators=(",", ":")), None
    return None, json.dumps(entry, separators=(",", ":"))


class PgTranscripts:
    """Every session's transcript in one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def writer(self, session_id: str | None = None) -> PgTranscript:
        return PgTranscript(self, session_id)

    def append_entries(self, session_id: str, entries: Iterable[dict[str, Any]]) -> None:
        rows = [_row(e) for e in entries]
        if not rows:
            return
        with self.db.transaction(f"append to the transcript of session {session_id!r}") as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s::int, hashtext(%s))", (APPEND_LOCK, session_id))
            cur.execute("SELECT coalesce(max(seq), 0) FROM lossless.transcript_entries WHERE session_id = %s",
                        (session_id,))
            row = cur.fetchone()
            seq = int(row[0]) if row else 0
            now = time.time()
            cur.executemany(
                "INSERT INTO lossless.transcript_entries (session_id, seq, entry, raw, at) "
                "VALUES (%s, %s, %s::jsonb, %s, %s)",
                [(session_id, seq + i, j, r, now) for i, (j, r) in enumerate(rows, start=1)])

    def entries(self, session_id: str) -> list[dict[str, Any]]:
        with self.db.cursor(f"read the transcript of session {session_id!r}") as cur:
            cur.execute("SELECT entry, raw FROM lossless.transcript_entries WHERE session_id = %s ORDER BY seq",
                        (session_id,))
            return [json.loads(raw) if raw is not None else entry for entry, raw in cur.fetchall()]

    def last_uuid(self, session_id: str) -> str | None:
        with self.db.cursor(f"read the transcript of session {session_id!r}") as cur:
            cur.execute("SELECT entry, raw FROM lossless.transcript_entries WHERE session_id = %s "
                        "ORDER BY seq DESC LIMIT 1", (session_id,))
            row = cur.fetchone()
        if row is None:
            return None
        entry = json.loads(row[1]) if row[1] is not None else row[0]
        value = entry.get("uuid") if isinstance(entry, dict) else None
        return value if isinstance(value, str) else None

    def sessions(self) -> list[str]:
        with self.db.cursor("list sessions") as cur:
            cur.execute("SELECT DISTINCT session_id FROM lossless.transcript_entries ORDER BY session_id")
            return [r[0] for r in cur.fetchall()]

    def recent(self) -> list[str]:
        """The sessions, the most recently appended to first."""
        with self.db.cursor("list sessions") as cur:
            cur.execute("SELECT session_id FROM lossless.transcript_entries GROUP BY session_id "
                        "ORDER BY max(at) DESC, session_id")
            return [r[0] for r in cur.fetchall()]

    def sessions_since(self, since: float) -> int:
        """Sessions appended to after ``since`` (seconds since the epoch)."""
        with self.db.cursor("count sessions") as cur:
            cur.execute("SELECT count(DISTINCT session_id) FROM lossless.transcript_entries WHERE at > %s", (since,))
            row = cur.fetchone()
            return int(row[0]) if row else 0


class PgTranscript(Transcript):
    """The session writer over ``PgTranscripts``; continues a session's ``parentUuid`` chain."""

    def __init__(self, backend: PgTranscripts, session_id: str | None = None,
                 root: str | os.PathLike[str] | None = None) -> None:
        super().__init__(session_id, root=home(root))
        self.backend = backend
        self._started = False

    def _parent(self) -> str | None:
        if not self._started:
            self.last_uuid = self.backend.last_uuid(self.session_id)
            self._started = True
        return self.last_uuid

    def _emit(self, entries: list[dict[str, Any]]) -> None:
        self.backend.append_entries(self.session_id, entries)

    def close(self) -> None:
        self._started = False
