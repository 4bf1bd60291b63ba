"""The catalog's ranking index (``memory.engine``) stays equal to one built from scratch.

Whatever interleaving of adds, edits, removes, undos and edits by other programs (a file
renamed over, appended to, created, deleted) reached a directory, the index a store kept in
step holds exactly the postings, frequencies and lengths of an index built from the same
files by a new store, and ranks as ``LexicalIndex``'s BM25F over the live memories."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3

from conftest import data_path
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lossless.errors import MemoryError_
from lossless.memory import MemoryStore
from lossless.memory._rows import create_schema
from lossless.memory.catalog import memory_doc
from lossless.memory.engine import Engine, boost
from lossless.memory.index import MAX_LINES
from lossless.memory.lexical import LexicalIndex, mentions_time

WORDS = ("deploy", "staging", "tabs", "kiln", "glaze", "the", "rust", "cache", "deploys", "fridays")
IDS = ("a", "b", "c", "d")
SCOPES = (None, "user", "project:x", "agent:y")
QUERIES = ("deploy staging", "kiln glaze cache", "tabs", "rust fridays deploys", "when did the cache deploy")

text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
op = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(IDS), text, st.sampled_from(SCOPES)),
    st.tuples(st.just("update"), st.sampled_from(IDS), text),
    st.tuples(st.just("delete"), st.sampled_from(IDS)),
    st.tuples(st.just("undo")),
    st.tuples(st.just("rename-over"), st.sampled_from(IDS), text),
    st.tuples(st.just("append"), st.sampled_from(IDS), text),
    st.tuples(st.just("unlink"), st.sampled_from(IDS)),
    st.tuples(st.just("search"), st.sampled_from(QUERIES)),
)


def _file(body: str, scope: str | None) -> str:
    return (f"---\nname: note {body.split()[0]}\ndescription: about {body}\ntype: project\n"
            + (f"scope: {scope}\n" if scope else "") + f"---\n\n{body}\n")


def _apply(store: MemoryStore, step: tuple, runs: list[str]) -> None:
    kind, path = step[0], store.dir / f"{step[1]}.md" if len(step) > 1 and step[0] != "search" else None
    try:
        if kind == "add":
            run = f"r{len(runs)}"
            store.add(name=step[1], id=step[1], description=f"about {step[2]}", type="project", body=step[2],
                      scope=step[3], run=run)
            runs.append(run)
        elif kind == "update":
            store.update(step[1], body=step[2], run=f"r{len(runs)}")
            runs.append(f"r{len(runs)}")
        elif kind == "delete":
            store.delete(step[1], run=f"r{len(runs)}")
            runs.append(f"r{len(runs)}")
        elif kind == "undo" and runs:
            store.undo(runs.pop())
        elif kind == "rename-over":  # an editor saving by writing a copy and renaming it over
            tmp = store.dir / f"{step[1]}.md~"
            tmp.write_text(_file(step[2], None))
            os.replace(tmp, path)
        elif kind == "append" and path is not None and path.exists():  # in place: the directory unchanged
            with open(path, "a") as f:
                f.write(f"\n{step[2]}\n")
        elif kind == "unlink" and path is not None and path.exists():
            path.unlink()
        elif kind == "search":
            store.search(step[1], 5)
    except MemoryError_:
        pass  # an id taken or absent, an undo refused: the store said no, nothing changed


def _tables(store: MemoryStore) -> tuple[set, dict, dict]:
    con = store.catalog._db()
    posts = set(con.execute("SELECT t.term, f.id, s.name, p.tf, p.dl FROM post p JOIN terms t ON t.tid = p.tid"
                            " JOIN files f ON f.rid = p.rid JOIN scopes s ON s.sc = p.sc"))
    df = {(t, s): n for t, s, n in con.execute(
        "SELECT t.term, s.name, d.n FROM df d JOIN terms t ON t.tid = d.tid JOIN scopes s ON s.sc = d.sc")}
    scopes = {name: (n, total) for name, n, total in con.execute("SELECT name, n, total FROM scopes WHERE n > 0")}
    return posts, df, scopes


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(op, max_size=14))
@example(steps=[("update", "a", "deploy"), ("add", "a", "the", None), ("delete", "a")])  # a memory of no terms, deleted
def test_the_index_kept_in_step_equals_one_built_from_scratch(tmp_path_factory, steps):
    d = tmp_path_factory.mktemp("kept") / "memory"
    d.mkdir()
    store = MemoryStore(d)
    runs: list[str] = []
    for step in steps:
        _apply(store, step, runs)
    store.memories()  # what any read does first: get in step with the directory
    fresh_dir = tmp_path_factory.mktemp("fresh") / "memory"
    fresh_dir.mkdir()
    for p in d.glob("*.md"):
        shutil.copy2(p, fresh_dir / p.name)
    fresh = MemoryStore(fresh_dir)
    assert {m.id for m in fresh.memories()} == {m.id for m in store.memories()}
    assert _tables(store) == _tables(fresh)
    live = [m for m in fresh.memories() if not m.superseded]
    reference = LexicalIndex([memory_doc(m) for m in live], backend="python")
    for q in QUERIES:
        want = [(live[i].id, round(s, 9)) for i, s in reference.search(q, 5)]
        assert [(m.id, round(s, 9)) for m, s in store.search(q, 5)] == want
        assert [(m.id, round(s, 9)) for m, s in fresh.search(q, 5)] == want


def test_memory_md_kept_by_adds_equals_one_rebuilt(tmp_path):
    store = MemoryStore(tmp_path / "memory")
    for i in range(MAX_LINES + 5):  # past the cap: the least recent leave, the closing line counts them
        store.add(name=f"fact {i}", description=f"about {WORDS[i % len(WORDS)]}", type="project", body="b")
        if i in (0, MAX_LINES - 2, MAX_LINES - 1, MAX_LINES + 4):
            kept = (store.dir / "MEMORY.md").read_text()
            assert kept == MemoryStore(store.dir).rebuild_index()
    store.touch(["fact-3"])  # a use changes recency: the next add starts from the catalog again
    store.add(name="last", description="the newest", type="user", body="b")
    assert "(fact-3.md)" in (store.dir / "MEMORY.md").read_text()
    assert (store.dir / "MEMORY.md").read_text() == MemoryStore(store.dir).rebuild_index()


_TIME_REFERENCE = re.compile(  # how ``mentions_time`` was written before it became a set lookup
    r"\b(?:yesterday|today|tonight|tomorrow|ago|last|next|weekend|weeks?|months?|years?|recently|lately|soon"
    r"|earlier|later|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|\b\d{4}-\d\d-\d\d\b", re.I)


@settings(max_examples=300)
@given(st.lists(st.sampled_from(["Yesterday", "weeks", "week2", "weekä", "_last", "2024-05-01", "x2024-05-01",
                                 "Friday!", "ago.", "agony", "LATER", " ", "-", "é", "1", "note"]), max_size=8))
def test_mentions_time_answers_as_the_case_blind_regex(parts):
    text = "".join(parts)
    assert mentions_time(text) == bool(_TIME_REFERENCE.search(text))


def test_the_engine_ranks_a_locomo_conversation_as_lexical_index():
    """Real dialogue (LoCoMo's first conversation, every turn a memory): the store's engine returns the
    ranking ``LexicalIndex`` does — the one RESULTS §4 measures — to the last place and score."""
    sample = json.loads(data_path("locomo", "locomo-dev.json").read_text())[0]
    docs = [(t["speaker"], t["text"], t.get("blip_caption", "")) for key, turns in sample["conversation"].items()
            if re.fullmatch(r"session_\d+", key) for t in turns]
    con = sqlite3.connect(":memory:", isolation_level=None)
    create_schema(con)
    engine = Engine()
    con.execute("BEGIN")
    for i, d in enumerate(docs):
        con.execute("INSERT INTO files(rid, id, seq, state, timed) VALUES (?, ?, 0, 1, ?)",
                    (i, f"{i:05d}", int(any(mentions_time(f) for f in d))))
        engine.put(con, i, None, (*d, ""))
    engine.flush(con)
    con.execute("COMMIT")
    reference = LexicalIndex(docs)
    for qa in sample["qa"]:
        ranked = engine.search(con, qa["question"], 10, None)
        got = boost([(mid, s) for s, _, mid in ranked], {mid: t for _, t, mid in ranked}, qa["question"], 10)
        assert [(int(mid), round(s, 9)) for mid, s in got] == \
            [(i, round(s, 9)) for i, s in reference.search(qa["question"], 10)]
