"""Moving a store between a directory and PostgreSQL is lossless, both ways: every handle
recalls the same bytes, every memory and every transcript entry is identical (a property,
over generated stores), and moving twice changes nothing."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless.cli import main
from lossless.errors import StoreError
from lossless.storage import open_store
from lossless.storage.move import copy_store, handles

TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=40)
JSON_TEXT = st.text(max_size=20)  # NUL and lone surrogates included: jsonb cannot hold them, the store must
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False, allow_infinity=False)
    | JSON_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JSON_TEXT, inner, max_size=3),
    max_leaves=8,
)
MEMORY = st.fixed_dictionaries({
    "name": TEXT.filter(str.strip), "description": TEXT, "body": TEXT,
    "type": st.sampled_from(["user", "feedback", "project", "reference"]),
    "extra": st.fixed_dictionaries({}, optional={"tags": st.lists(st.sampled_from(["a", "b"]), max_size=2)}),
    "scope": st.sampled_from([None, "user", "project:acme", "agent:reviewer"]),
})
STORE = st.fixed_dictionaries({
    "artifacts": st.lists(st.binary(max_size=300) | TEXT, max_size=5),
    "sessions": st.dictionaries(st.sampled_from(["s1", "s2", "s3"]),
                                st.lists(st.dictionaries(JSON_TEXT, JSON, max_size=4), min_size=1, max_size=4),
                                max_size=2),
    "memories": st.lists(MEMORY, max_size=4),
})


def _fill(store, content):
    made = [store.artifacts.put(a) for a in content["artifacts"]]
    for sid, entries in content["sessions"].items():
        store.transcripts.append_entries(sid, entries)
    for i, m in enumerate(content["memories"]):
        store.memory.add(id=f"m{i}", **m)
    return made


def _same(a, b, made):
    for h in made + handles(a):
        assert b.artifacts.get_bytes(h) == a.artifacts.get_bytes(h)
    assert sorted(handles(b)) == sorted(handles(a))
    assert b.transcripts.sessions() == a.transcripts.sessions()
    for sid in a.transcripts.sessions():
        assert b.transcripts.entries(sid) == a.transcripts.entries(sid)
    assert b.memory.memories() == a.memory.memories()
    for m in a.memory.memories():
        assert b.memory.text_of(m.id) == a.memory.text_of(m.id)


@settings(max_examples=8)
@given(content=STORE)
def test_directory_to_database_to_directory_is_lossless(pg_server, tmp_path_factory, content):
    base = tmp_path_factory.mktemp("move")
    first = open_store(str(base / "first"))
    made = _fill(first, content)
    db = open_store(pg_server.create_db())
    try:
        copy_store(first, db)
        _same(first, db, made)
        back = open_store(str(base / "back"))
        copy_store(db, back)
        _same(first, back, made)
        again = copy_store(first, db)  # a second import adds nothing
        assert again.entries == 0 and set(again.skipped_sessions) == set(content["sessions"])
        _same(first, db, made)
    finally:
        db.close()


def test_cli_import_then_export(pg_url, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "local"))
    src = open_store(str(tmp_path / "src"))
    h = src.artifacts.put(b"exact bytes \x00\xff")
    src.transcripts.append_entries("s", [{"uuid": "u1", "type": "user"}])
    src.memory.add(name="Team fact", description="shared", type="project", body="one database")
    assert main(["store", "import", "--store", pg_url, str(tmp_path / "src"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["artifacts"], report["entries"], report["memories"]) == (1, 1, 1)
    assert main(["store", "export", "--store", pg_url, str(tmp_path / "out")]) == 0
    assert "exported" in capsys.readouterr().out
    out = open_store(str(tmp_path / "out"))
    assert out.artifacts.get_bytes(h) == b"exact bytes \x00\xff"
    assert out.memory.get("team-fact") == src.memory.get("team-fact")
    t = src.artifacts.put("a text artifact")
    assert main(["store", "import", "--store", pg_url, str(tmp_path / "src")]) == 0
    capsys.readouterr()
    assert main(["recall", t, "--store", pg_url]) == 0
    assert capsys.readouterr().out == "a text artifact"


def test_a_conflicting_session_stops_the_move(pg_url, tmp_path, monkeypatch):
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "local"))
    src = open_store(str(tmp_path / "src"))
    src.transcripts.append_entries("s", [{"uuid": "mine"}])
    db = open_store(pg_url)
    db.transcripts.append_entries("s", [{"uuid": "theirs"}])
    with pytest.raises(StoreError, match="session 's'"):
        copy_store(src, db)
    assert db.transcripts.entries("s") == [{"uuid": "theirs"}]
    db.close()
