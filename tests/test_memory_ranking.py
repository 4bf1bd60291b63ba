"""The engine's two ranking paths agree: SQLite's ranking statement and the same sums in Python.

``Engine.search`` ranks a query with few postings in Python, from postings it keeps while the
database is unchanged (``key``), and a larger one with one SQL statement.  Both must give the
same memories with the same scores — bit for bit, ties at the cut included — over any documents,
views and sequences of queries, whether the postings were cached by an earlier query or not."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from lossless.memory import MemoryStore
from lossless.memory._rows import create_schema
from lossless.memory import engine as engine_module
from lossless.memory.engine import Engine, boost
from lossless.memory.lexical import mentions_time

WORDS = ("deploy", "deploys", "staging", "tabs", "kiln", "glaze", "rust", "cache", "friday", "yesterday", "the")
SCOPES = (None, "user", "project:x")
VIEWS = (None, ("user",), ("project:x",), ("user", "project:x"))

field = st.lists(st.sampled_from(WORDS), max_size=5).map(" ".join)
doc = st.tuples(field, field, field, field, st.sampled_from(SCOPES))
query = st.lists(st.sampled_from((*WORDS, "when did", "nothing")), min_size=1, max_size=4).map(" ".join)


def _database(docs: list[tuple[str, str, str, str, str | None]]) -> sqlite3.Connection:
    con = sqlite3.connect(":memory:", isolation_level=None)
    create_schema(con)
    engine = Engine()
    con.execute("BEGIN")
    for rid, (*fields, scope) in enumerate(docs):
        con.execute("INSERT INTO files(rid, id, seq, state, timed) VALUES (?, ?, 0, 1, ?)",
                    (rid, f"m{rid:03d}", int(any(mentions_time(f) for f in fields[:3]))))
        engine.put(con, rid, scope, fields)
    engine.flush(con)
    con.execute("COMMIT")
    return con


def _ranked(engine: Engine, con: sqlite3.Connection, q: str, limit: int, view: tuple[str, ...] | None,
            key: object) -> list[tuple[float, bool, str]]:
    return sorted(engine.search(con, q, limit, view, key=key), key=lambda r: (-r[0], r[2]))


@settings(max_examples=150, deadline=None)
@given(docs=st.lists(doc, min_size=1, max_size=25), queries=st.lists(query, min_size=1, max_size=6),
       limit=st.integers(1, 6), view=st.sampled_from(VIEWS))
def test_python_ranking_equals_the_ranking_statement(docs, queries, limit, view):
    con = _database(docs)
    in_sql, in_python, cached = Engine(), Engine(), Engine()
    in_sql.py_max = 0
    in_python.py_max = cached.py_max = in_python.fetch_max = cached.fetch_max = 10**9
    for q in queries:  # ``cached`` keeps what earlier queries read (one key: nothing written)
        want = _ranked(in_sql, con, q, limit, view, None)
        assert _ranked(in_python, con, q, limit, view, None) == want
        assert _ranked(cached, con, q, limit, view, "unchanged") == want
        got = cached.search(con, q, limit, view, key="unchanged")
        assert boost([(r[2], r[0]) for r in got], {r[2]: r[1] for r in got}, q, limit) == \
            boost([(r[2], r[0]) for r in want], {r[2]: r[1] for r in want}, q, limit)


def test_a_full_cache_keeps_the_terms_of_the_query_it_answers(monkeypatch):
    """When what an engine keeps passes its bound it is emptied — but never of the terms the query
    being answered reads, some read by an earlier query and some now."""
    con = _database([("kiln glaze", "", "", "", None), ("kiln rust", "", "", "", None), ("glaze tabs", "", "", "", None)])
    reference, engine = Engine(), Engine()
    reference.py_max = 0
    monkeypatch.setattr(engine_module, "CACHED", 3)
    for q in ("kiln", "glaze", "kiln glaze tabs", "rust kiln", "tabs"):
        assert _ranked(engine, con, q, 5, None, "unchanged") == _ranked(reference, con, q, 5, None, None)


def test_a_query_after_a_write_by_another_process_sees_it(tmp_path):
    """What a store keeps between queries is forgotten when anything wrote: another store (another
    connection, as another process) adds and removes memories between two of its queries."""
    reader, writer = MemoryStore(tmp_path / "memory"), MemoryStore(tmp_path / "memory")
    writer.add(name="kiln", description="the kiln glaze", type="project", body="Fire the kiln slowly.")
    assert [m.id for m, _ in reader.search("kiln glaze", 5)] == ["kiln"]
    writer.add(name="glaze", description="kiln glaze recipe", type="project", body="Glaze glaze kiln.")
    assert [m.id for m, _ in reader.search("kiln glaze", 5)] == ["glaze", "kiln"]
    writer.touch(["glaze"])  # a use time: nothing a ranking reads
    assert [m.id for m, _ in reader.search("kiln glaze", 5)] == ["glaze", "kiln"]
    writer.delete("glaze")
    assert [m.id for m, _ in reader.search("kiln glaze", 5)] == ["kiln"]
    reader.add(name="rust", description="kiln rust", type="project", body="Rust on the kiln.")  # its own write
    assert {m.id for m, _ in reader.search("kiln", 5)} == {"kiln", "rust"}
