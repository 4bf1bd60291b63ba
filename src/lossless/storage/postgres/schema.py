"""The PostgreSQL store's schema: an ordered list of named migrations and the version table.

Everything lives in the schema ``lossless`` (so the database can be shared with other
applications).  ``lossless.schema_version`` holds one row per applied migration.  ``migrate``
applies what is missing, in order, in one transaction under an advisory lock: two processes
opening a new database at once apply each migration exactly once, and running it again
changes nothing (idempotent).  A database migrated by a newer lossless is refused rather
than misread.
"""

from __future__ import annotations

from typing import Any

from ...errors import StoreError
from .connect import Database

MIGRATE_LOCK = 0x7265636F6C6C0001
"""The advisory lock key migrations serialise on ("recoll" + 1)."""

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("artifacts-transcripts-memories", """
CREATE TABLE lossless.artifacts (
    handle  text PRIMARY KEY,
    data    bytea NOT NULL,
    size    bigint NOT NULL,
    created timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE lossless.transcript_entries (
    session_id text NOT NULL,
    seq        bigint NOT NULL,
    entry      jsonb,
    raw        text,
    at         double precision NOT NULL,
    PRIMARY KEY (session_id, seq),
    CHECK ((entry IS NULL) <> (raw IS NULL))
);
CREATE INDEX transcript_entries_at ON lossless.transcript_entries (at);
CREATE TABLE lossless.memories (
    id          text PRIMARY KEY,
    name        text NOT NULL,
    description text NOT NULL,
    type        text NOT NULL,
    body        text NOT NULL,
    created     text NOT NULL,
    updated     text NOT NULL,
    extra       jsonb NOT NULL DEFAULT '{}',
    exact       boolean NOT NULL,
    text        text NOT NULL,
    stamp       double precision NOT NULL,
    created_ts  double precision NOT NULL,
    live        boolean NOT NULL,
    tsv         tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', name || ' ' || replace(id, '-', ' ')), 'A') ||
        setweight(to_tsvector('english', description), 'B') ||
        setweight(to_tsvector('english', body), 'C')) STORED
);
CREATE INDEX memories_tsv ON lossless.memories USING gin (tsv);
CREATE INDEX memories_stamp ON lossless.memories (stamp DESC, id DESC);
CREATE TABLE lossless.memory_changes (
    seq   bigserial PRIMARY KEY,
    entry jsonb NOT NULL
);
CREATE TABLE lossless.memory_usage (
    id   text PRIMARY KEY,
    used double precision NOT NULL
);
CREATE TABLE lossless.memory_trash (
    seq     bigserial PRIMARY KEY,
    id      text NOT NULL,
    run     text,
    text    text NOT NULL,
    trashed timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE lossless.meta (
    key   text PRIMARY KEY,
    value jsonb NOT NULL
);
"""),
    ("memory-scopes", """
ALTER TABLE lossless.memories ADD COLUMN scope text;
UPDATE lossless.memories SET scope = extra->>'scope', extra = extra - 'scope' WHERE extra ? 'scope';
CREATE INDEX memories_scope ON lossless.memories (scope);
"""),
)
"""(name, SQL) in order; version N is ``MIGRATIONS[N-1]``.  Append, never edit an applied one."""

LATEST = len(MIGRATIONS)


def current_version(db: Database) -> int:
    """The schema version of the database (0: lossless never ran there)."""
    with db.cursor("read the schema version") as cur:
        cur.execute("SELECT to_regclass('lossless.schema_version') IS NOT NULL")
        row = cur.fetchone()
        if not row or not row[0]:
            return 0
        cur.execute("SELECT coalesce(max(version), 0) FROM lossless.schema_version")
        row = cur.fetchone()
        return int(row[0]) if row else 0


def migrate(db: Database, *, target: int = LATEST) -> list[str]:
    """Apply the missing migrations up to ``target``; the names of those applied now (empty: already there)."""
    applied: list[str] = []
    with db.transaction("migrate the schema", lock_key=MIGRATE_LOCK) as cur:
        cur.execute("CREATE SCHEMA IF NOT EXISTS lossless")
        cur.execute("CREATE TABLE IF NOT EXISTS lossless.schema_version ("
                    "version int PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())")
        cur.execute("SELECT coalesce(max(version), 0) FROM lossless.schema_version")
        row: Any = cur.fetchone()
        have = int(row[0]) if row else 0
        _refuse_newer(db, have)
        for version, (name, sql) in enumerate(MIGRATIONS, start=1):
            if version <= have or version > target:
                continue
            cur.execute(sql)
            cur.execute("INSERT INTO lossless.schema_version (version, name) VALUES (%s, %s)", (version, name))
            applied.append(f"{version:04d}-{name}")
    return applied


def ensure_current(db: Database) -> None:
    """Migrate when the database is behind (cheap when it is not); refuse one from a newer lossless."""
    have = current_version(db)
    _refuse_newer(db, have)
    if have < LATEST:
        migrate(db)


def _refuse_newer(db: Database, have: int) -> None:
    if have > LATEST:
        raise StoreError(f"PostgreSQL store {db.label} has schema version {have}, newer than this lossless "
                         f"knows ({LATEST}): upgrade lossless")


def has_pgvector(db: Database) -> bool:
    """Whether the server offers the ``vector`` extension (the dense side of retrieval)."""
    with db.cursor("look for pgvector") as cur:
        cur.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        return cur.fetchone() is not None
