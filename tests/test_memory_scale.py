"""The memory store at 10,000 memories, and its persistent index staying right.

The 10,000-memory store is written once per module, file by file (as a person or
another tool would), then opened: the first open builds the catalog."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from lossless.cli import main
from lossless.memory import MemoryStore, frontmatter, recall_memories
from lossless.memory.catalog import SCAN_RATE, SLICE, racy
from lossless.memory.index import MAX_LINES

SIZE = 10_000
TOPICS = ("deploy", "staging", "database", "migration", "review", "tabs", "python", "rust", "docker", "helm",
          "invoice", "customer", "latency", "cache", "kafka", "terraform", "oncall", "release", "budget", "design")
VERBS = ("prefers", "asked for", "decided on", "moved to", "dropped", "documented", "measured", "fixed")


def _file(i: int, rng: random.Random, updated: str, *, name: str | None = None, body: str | None = None) -> str:
    a, b, c = rng.sample(TOPICS, 3)
    name = name or f"{a} {b} note {i}"
    desc = f"The team {rng.choice(VERBS)} {b} for {c}"
    body = body or " ".join(f"{rng.choice(TOPICS)} {rng.choice(VERBS)} {rng.choice(TOPICS)}." for _ in range(6))
    return (f"---\nname: {name}\ndescription: {desc}\ntype: {rng.choice(('user', 'project', 'reference'))}\n"
            f"created: '{updated}'\nupdated: '{updated}'\n---\n\n{body}\n")


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    d = tmp_path_factory.mktemp("big") / "memory"
    d.mkdir()
    rng = random.Random(5)
    for i in range(SIZE):
        stamp = f"2026-0{1 + i % 9}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z"
        if i == 5:  # the oldest memory, and the only one about this
            text = _file(i, rng, "2020-01-01T00:00:00Z", name="Pottery glaze recipe",
                         body="The celadon glaze needs three parts feldspar to one of silica.")
        else:
            text = _file(i, rng, stamp)
        (d / f"m{i:05d}.md").write_text(text)
        os.utime(d / f"m{i:05d}.md", (1.7e9, 1.7e9))  # written long ago, as a real store's files were
    store = MemoryStore(d)
    assert len(store.memories()) == SIZE  # the cold open: every file read once, into the catalog
    return store


def test_an_old_memory_is_found_among_10000(big, capsys):
    hits = recall_memories("what was the celadon glaze recipe with feldspar?", big)
    assert hits and hits[0].memory.id == "m00005"
    assert big.recent()[-1].id == "m00005"  # the oldest of all: outside any "most recent" window
    assert main(["memory", "--dir", str(big.dir), "search", "celadon", "feldspar"]) == 0
    assert "m00005" in capsys.readouterr().out


def test_the_index_cap_is_memory_md_alone_and_add_needs_no_rescan(big):
    with big.lock():  # the store's first lock creates .lock, a change to the directory like any other
        pass
    sweeps = big.catalog.sweeps
    m = big.add(name="Newest fact", description="The kiln fires at cone six", type="project", body="cone 6 kiln")
    assert big.catalog.sweeps == sweeps  # add() synced its own file: no sweep of the 10,000
    lines = big.index_text().splitlines()
    assert len(lines) == MAX_LINES and f"({m.filename})" in big.index_text()
    assert f"{SIZE + 1 - (MAX_LINES - 1)} more memories are not listed" in lines[-1]
    assert [h.memory.id for h in recall_memories("kiln cone", big)][:1] == [m.id]
    big.delete(m.id)
    assert big.catalog.sweeps == sweeps and recall_memories("kiln cone", big) == []


def test_a_hand_edit_among_10000_is_seen_within_the_promised_refreshes(big):
    path = big.dir / "m07777.md"
    text = path.read_text()
    with open(path, "r+") as f:  # in place: the directory's mtime does not change
        f.write(text.replace("name: ", "name: Sourdough starter ", 1))
    big.catalog.scan_rate = 10**9  # as if SIZE / SCAN_RATE seconds passed between refreshes: SLICE files each
    for _ in range(-(-SIZE // SLICE) + 1):
        big.catalog.refresh()
    big.catalog.scan_rate = SCAN_RATE
    assert [h.memory.id for h in recall_memories("sourdough starter", big)] == ["m07777"]
    path.write_text(text)


def _store(tmp_path, n=5):
    store = MemoryStore(tmp_path / "mem")
    for i in range(n):
        store.add(name=f"fact {i}", description=f"about topic{i}", type="project", body=f"body {i}")
    return store


def _ids(store, query):
    return [h.memory.id for h in recall_memories(query, store)]


def test_edits_by_hand_are_seen_at_the_next_call(tmp_path):
    store = _store(tmp_path)
    assert _ids(store, "topic1") == ["fact-1"]
    p = store.dir / "fact-1.md"
    tmp = store.dir / "fact-1.md~"  # an editor that saves by writing a copy and renaming it over
    tmp.write_text(p.read_text().replace("about topic1", "about gardening"))
    os.replace(tmp, p)
    assert _ids(store, "topic1") == [] and _ids(store, "gardening") == ["fact-1"]
    with open(p, "a") as f:  # in place, appended: a store below SLICE memories stats them all each call
        f.write("Also tomatoes.\n")
    assert _ids(store, "tomatoes") == ["fact-1"]
    (store.dir / "fact-2.md").unlink()
    assert _ids(store, "topic2") == [] and "fact-2" not in store.index_text()  # MEMORY.md catches up
    (store.dir / "new.md").write_text("---\nname: new\ndescription: about cheese\ntype: user\n---\n\nbrie\n")
    assert _ids(store, "cheese") == ["new"] and {m.id for m in store.memories()} >= {"new", "fact-1"}
    (store.dir / "bad.md").write_text("---\nname: x\ntype: nope\n---\n")
    assert [i.path.name for i in store.scan().issues] == ["bad.md"]


WRITER = textwrap.dedent("""
    import sys
    from lossless.memory import MemoryStore
    store = MemoryStore(sys.argv[1])
    for i in range(15):
        store.add(name=f"{sys.argv[2]} item {i}", description=f"written by {sys.argv[2]}", type="project",
                  body=f"parallel body {sys.argv[2]} {i}")
""")


def test_other_processes_writes_are_seen_without_a_sweep(tmp_path):
    store = _store(tmp_path)
    assert _ids(store, "topic3") == ["fact-3"]
    sweeps = store.catalog.sweeps
    env = {**os.environ, "PYTHONPATH": os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "src"))}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(store.dir), f"w{k}"], env=env) for k in range(3)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    assert _ids(store, "w2 item 7")[:1] == ["w2-item-7"]
    assert store.catalog.sweeps == sweeps  # each writer updated the shared catalog itself
    ids = {m.id for m in store.memories()}
    assert {f"w{k}-item-{i}" for k in range(3) for i in range(15)} <= ids and len(ids) == 50
    assert store.scan().issues == () and all(f"({i}.md)" in store.index_text() for i in ids)


def test_the_catalog_is_a_cache_it_is_rebuilt_when_removed_or_torn(tmp_path):
    store = _store(tmp_path)
    before = _ids(store, "topic4")
    db = store.dir / ".index" / "catalog.sqlite3"
    store.catalog.close()
    for suffix in ("-wal", "-shm"):
        (store.dir / ".index" / f"catalog.sqlite3{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"not a database" * 100)
    again = MemoryStore(store.dir)
    assert _ids(again, "topic4") == before and len(again.memories()) == 5
    assert oct(db.stat().st_mode & 0o777) == "0o600" and oct((store.dir / ".index").stat().st_mode & 0o777) == "0o700"


def test_no_secret_from_a_hand_edited_file_reaches_the_catalog(tmp_path):
    store = _store(tmp_path)
    key = "ghp_" + "Zq8" * 12
    (store.dir / "creds.md").write_text(f"---\nname: creds\ndescription: token {key}\ntype: reference\n"
                                        f"api_key: {key}\n---\n\nthe key is {key}\n")
    assert _ids(store, "creds") == ["creds"]
    assert key not in json.dumps([h.memory.body for h in recall_memories("creds key", store)])
    store.catalog.close()
    con = sqlite3.connect(store.dir / ".index" / "catalog.sqlite3")
    dump = "\n".join(con.iterdump())
    con.close()
    assert "creds" in dump and key not in dump


def test_racy_reads_are_read_again_once_the_tick_has_passed():
    s = 1_000_000_000
    assert racy(10 * s, 10 * s + 1, 20 * s)  # read right after the write: read again later
    assert not racy(10 * s, 10 * s + 1, 11 * s)  # ...but not before the racy window has passed
    assert not racy(10 * s, 13 * s, 20 * s)  # read well after the write: trusted


HOSTILE = ["a: &x 1\nb: *x\n", "a: !!python/object:os.system x\n", "a: " + "[" * 20 + "]" * 20 + "\n",
           "a: [unclosed\n", "name: ok\nlist: [1, 2]\nwhen: 2026-01-02\n", "a: 1\n\x07: 2\n"]


@pytest.mark.parametrize("text", HOSTILE)
def test_the_c_and_python_loaders_agree(text, monkeypatch):
    def load():
        try:
            return frontmatter.load_frontmatter(text)
        except frontmatter.FrontmatterError as exc:
            return ("error", exc.line, exc.message.split(":")[0])

    fast = load()
    monkeypatch.setattr(frontmatter, "_CLoader", None)
    assert load() == fast


def test_a_read_only_store_is_read_through_an_index_in_memory(tmp_path, monkeypatch):
    store = _store(tmp_path)
    from lossless.memory import catalog

    def refuse(path):
        raise PermissionError(13, "Read-only file system", str(path))

    monkeypatch.setattr(catalog, "ensure_dir", refuse)
    reader = MemoryStore(store.dir)
    assert _ids(reader, "topic1") == ["fact-1"] and len(reader.memories()) == 5


def test_a_planted_link_at_the_index_never_stops_a_model_call(tmp_path):
    from lossless.errors import MemoryError_
    from lossless.memory import SessionInjector, inject
    from lossless.messages import user

    store = _store(tmp_path)
    store.catalog.close()
    (tmp_path / "elsewhere").mkdir()
    index = store.dir / ".index"
    for p in index.iterdir():
        p.unlink()
    index.rmdir()
    index.symlink_to(tmp_path / "elsewhere")
    fresh = MemoryStore(store.dir)
    out = inject([user("anything about topic1?")], fresh, SessionInjector())
    assert out[-1].text == "anything about topic1?" and list((tmp_path / "elsewhere").iterdir()) == []
    with pytest.raises(MemoryError_, match="symbolic link"):
        fresh.scan()
