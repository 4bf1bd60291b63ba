"""The PostgreSQL store's schema: versioned, idempotent migrations, refused when newer."""

from __future__ import annotations

import json

import pytest

from lossless.cli import main
from lossless.errors import StoreError
from lossless.storage import open_store
from lossless.storage.postgres.connect import Database
from lossless.storage.postgres.schema import LATEST, MIGRATIONS, current_version, migrate


def test_migrate_is_idempotent_and_recorded(pg_url):
    db = Database(pg_url)
    assert current_version(db) == 0
    assert migrate(db) == [f"{i:04d}-{name}" for i, (name, _) in enumerate(MIGRATIONS, start=1)]
    assert migrate(db) == []
    assert current_version(db) == LATEST
    with db.cursor() as cur:
        cur.execute("SELECT version, name FROM lossless.schema_version ORDER BY version")
        assert cur.fetchall() == [(i, name) for i, (name, _) in enumerate(MIGRATIONS, start=1)]
    db.close()


def test_cli_migrate_reports_then_says_current(pg_url, capsys):
    assert main(["store", "migrate", "--store", pg_url, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["version"] == LATEST and len(first["applied"]) == LATEST
    assert main(["store", "migrate", "--store", pg_url]) == 0
    assert "already current" in capsys.readouterr().out


def test_opening_migrates_and_concurrent_openers_apply_once(pg_url):
    from concurrent.futures import ThreadPoolExecutor

    def opener(_):
        s = open_store(pg_url)
        s.close()
        return True

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(opener, range(4)))
    db = Database(pg_url)
    with db.cursor() as cur:
        cur.execute("SELECT count(*) FROM lossless.schema_version")
        assert cur.fetchone() == (LATEST,)
    db.close()


def test_a_newer_schema_is_refused(pg_url):
    db = Database(pg_url)
    migrate(db)
    with db.transaction() as cur:
        cur.execute("INSERT INTO lossless.schema_version (version, name) VALUES (%s, 'from-the-future')",
                    (LATEST + 1,))
    db.close()
    with pytest.raises(StoreError, match="newer than this lossless knows"):
        open_store(pg_url)


def test_without_migrate_a_bare_database_is_named(pg_url):
    with pytest.raises(StoreError, match="lossless store migrate"):
        open_store(pg_url, migrate=False)


def test_pgvector_is_detected_not_assumed(pg_url):
    from lossless.storage.postgres.schema import has_pgvector

    db = Database(pg_url)
    with db.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
        row = cur.fetchone()
    assert has_pgvector(db) is (row[0] == 1)
    db.close()


def test_upgrading_from_version_1_moves_scope_out_of_extra(pg_url, tmp_path, monkeypatch):
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "local"))
    db = Database(pg_url)
    assert migrate(db, target=1) == ["0001-artifacts-transcripts-memories"]
    text = "---\nname: Tabs\ndescription: tabs\ntype: user\nscope: user\ncreated: '2026-01-01T00:00:00Z'\n" \
           "updated: '2026-01-01T00:00:00Z'\n---\n\nAlways tabs.\n"
    with db.transaction() as cur:  # a row as version 1 wrote it: the scope among the unknown keys
        cur.execute("INSERT INTO lossless.memories (id, name, description, type, body, created, updated, extra,"
                    " exact, text, stamp, created_ts, live) VALUES ('tabs', 'Tabs', 'tabs', 'user', 'Always tabs.',"
                    " '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', '{\"scope\": \"user\"}', true, %s, 0, 0, true)",
                    (text,))
    db.close()
    store = open_store(pg_url)  # migrates to the latest
    m = store.memory.get("tabs")
    assert m.scope == "user" and m.extra == {}
    assert store.memory_view(project="acme").exists("tabs")
    store.close()
