"""Failure is loud: a server that is down, or refuses the credentials, is one line naming
``host:port/db`` (never the password) and exit 2; nothing falls back to a local directory;
no write is reported done that was not committed."""

from __future__ import annotations

import socket

import pytest

from lossless.cli import main
from lossless.errors import StoreError
from lossless.storage import open_store


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def down_url():
    pytest.importorskip("psycopg")
    return f"postgresql://agent:s3cret-pw@127.0.0.1:{_closed_port()}/team"


def test_a_server_that_is_down_is_one_line_naming_it(down_url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError) as info:
        open_store(down_url)
    message = str(info.value)
    assert "127.0.0.1:" in message and "/team" in message and "s3cret-pw" not in message
    assert "\n" not in message
    assert not (tmp_path / ".lossless").exists()  # no silent local fallback


@pytest.mark.parametrize("argv", [
    ["recall", "sha256:" + "0" * 24, "--store", "{url}"],
    ["memory", "--store", "{url}", "list"],
    ["store", "migrate", "--store", "{url}"],
    ["store", "export", "--store", "{url}", "{dir}"],
])
def test_cli_exits_2_with_one_line(down_url, argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main([a.format(url=down_url, dir=str(tmp_path / "out")) for a in argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "127.0.0.1:" in err and "s3cret-pw" not in err
    assert not (tmp_path / ".lossless").exists()


def test_environment_store_down_is_not_replaced_by_a_directory(down_url, tmp_path, monkeypatch):
    from lossless import ContextManager

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOSSLESS_STORE", down_url)
    with pytest.raises(StoreError, match="127.0.0.1"):
        ContextManager()
    assert not (tmp_path / ".lossless").exists()


def test_bad_credentials_are_named(pg_server, tmp_path):
    url = pg_server.create_db()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE ROLE agent LOGIN PASSWORD 'right-pw'")
    # trust auth lets any password in on loopback: a role that does not exist is the refusal here.
    bad = url.replace("postgres@", "nobody:wrong-pw@")
    with pytest.raises(StoreError) as info:
        open_store(bad)
    assert "nobody" in str(info.value) and "wrong-pw" not in str(info.value)


def test_server_stopped_mid_run_fails_the_write_and_keeps_nothing_half_done(pg_server, tmp_path, monkeypatch):
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "local"))
    url = pg_server.create_db()
    store = open_store(url)
    kept = store.artifacts.put(b"before the outage")
    store.memory.add(name="Before", description="written before", type="project", body="x")
    pg_server.pg_ctl("stop")
    try:
        with pytest.raises(StoreError, match="127.0.0.1"):
            store.artifacts.put(b"during the outage")
        with pytest.raises(StoreError, match="127.0.0.1"):
            store.memory.add(name="During", description="written during", type="project", body="y")
        with pytest.raises(StoreError):
            store.transcripts.append_entries("s", [{"uuid": "u"}])
    finally:
        pg_server.pg_ctl("start")
    again = open_store(url)
    assert again.artifacts.get_bytes(kept) == b"before the outage"
    assert [m.id for m in again.memory.memories()] == ["before"]
    assert again.transcripts.entries("s") == []
    # the first store reconnects by itself once the server is back
    assert store.memory.exists("before") and not store.memory.exists("during")
    store.close()
    again.close()
