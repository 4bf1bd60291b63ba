"""The memory store under hostile input: frontmatter bombs, racing creators, kill -9,
planted symbolic links, permissions.  Every case ends in a one-line error or an intact store."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.cli import main as cli_main
from lossless.errors import MemoryError_
from lossless.memory import MemoryStore, MemoryTool
from lossless.memory._fs import MAX_FILE
from lossless.memory.consolidate import Consolidator
from lossless.memory.frontmatter import MAX_DEPTH, MAX_FRONTMATTER
from lossless.memory.inject import SessionInjector, inject
from lossless.memory.model import Memory, MemoryFileError, parse_memory
from lossless.messages import Message, Text
from lossless.testing import FakeProvider

PEAK_LIMIT = 20 * 1024 * 1024
"""Bytes a hostile file may cost: a billion-laughs expansion at 6+ levels needs gigabytes."""


def laughs(levels: int) -> str:
    """A memory file whose frontmatter expands 10x per level through anchors and aliases."""
    lines = ['lol0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "---\nname: bomb\ndescription: d\ntype: user\n" + "\n".join(lines) + "\n---\nbody\n"


HOSTILE = {
    **{f"laughs-{n}": laughs(n) for n in range(1, 10)},
    "alias-only": "---\nname: x\ntype: user\ndescription: *nowhere\n---\n",
    "merge-key": "---\nbase: &b {k: v}\nname: x\ntype: user\nother:\n  <<: *b\n---\n",
    "python-tag": "---\nname: x\ntype: user\nrun: !!python/object/apply:os.system ['echo pwned']\n---\n",
    "custom-tag": "---\nname: !secret x\ntype: user\n---\n",
    "deep": "---\nname: x\ntype: user\nd: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n---\n",
    "huge": "---\nname: x\ntype: user\npad: '" + "x" * (MAX_FRONTMATTER + 10) + "'\n---\n",
    "bad-date": "---\nname: x\ntype: user\ncreated: 2026-13-45\n---\n",
}


def bounded(fn):
    """Run ``fn`` and return (its result, peak bytes it allocated)."""
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def one_line_naming(text: str, name: str) -> bool:
    return text.count("\n") <= 1 and name in text and "Traceback" not in text


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_frontmatter_is_refused_by_every_reader(tmp_path, capsys, case):
    text = HOSTILE[case]
    store = MemoryStore(tmp_path / "mem")
    store.add(name="good", description="a good memory", type="user", body="kept")
    (store.dir / "bomb.md").write_text(text)

    scan, peak = bounded(store.scan)
    assert [m.id for m in scan.memories] == ["good"] and peak < PEAK_LIMIT
    assert len(scan.issues) == 1 and one_line_naming(str(scan.issues[0]), str(store.dir / "bomb.md"))
    with pytest.raises(MemoryFileError, match=r"bomb\.md:\d+: "):
        store.get("bomb")
    assert [m.id for m in store.recent()] == ["good"]  # retrieval goes on without it

    code, peak = bounded(lambda: cli_main(["memory", "--dir", str(store.dir), "list", "--json"]))
    out, err = capsys.readouterr()
    assert code == 0 and peak < PEAK_LIMIT
    listed = json.loads(out)
    assert [m["id"] for m in listed["memories"]] == ["good"] and "bomb.md" in listed["issues"][0]
    assert one_line_naming(err, "bomb.md") and "warning" in err

    source = tmp_path / "incoming.md"
    source.write_text(text)
    code, peak = bounded(lambda: cli_main(["memory", "--dir", str(store.dir), "add", str(source)]))
    out, err = capsys.readouterr()
    assert code == 2 and peak < PEAK_LIMIT and one_line_naming(err, str(source)), err

    tool = MemoryTool(store)
    reply, peak = bounded(lambda: tool.run({"command": "create", "path": "/memories/new.md", "file_text": text}))
    assert reply.startswith("Error: ") and "new.md" in reply and "\n" not in reply and peak < PEAK_LIMIT
    assert not (store.dir / "new.md").exists() and {m.id for m in store.memories()} == {"good"}


def test_a_number_as_a_key_is_read_as_text(tmp_path):
    memory = parse_memory("---\nname: x\ntype: user\n2026: year\nnested: {1: one}\n---\n", tmp_path / "x.md")
    assert memory.extra == {"2026": "year", "nested": {"1": "one"}}


def test_what_lossless_writes_it_can_read_back(tmp_path):
    """A value shared by two keys is written twice, never as an anchor the reader would refuse."""
    store = MemoryStore(tmp_path / "mem")
    shared = ["a", "b"]
    m = store.add(name="x", description="d", type="user", body="b", extra={"one": shared, "two": shared})
    assert "&" not in store.path_for(m.id).read_text()
    assert store.get(m.id).extra == {"one": ["a", "b"], "two": ["a", "b"]}


def test_what_it_could_not_read_back_it_never_writes(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    with pytest.raises(MemoryFileError, match=r"big\.md:\d+: frontmatter is \d+ bytes, over the"):
        store.add(name="big", description="d", type="user", body="b", extra={"notes": "x" * MAX_FRONTMATTER})
    with pytest.raises(MemoryError_, match="over the .*-byte limit of a memory file"):
        store.add(name="huge", description="d", type="user", body="y" * (MAX_FILE + 1))
    assert sorted(p.name for p in store.dir.glob("*.md")) == [] and store.changes() == []


TOKENS = list(":-[]{}&*!|>'\"\n #,?%@`\\=~.\t") + ["a", "1", "é", "name", "type", "user", "  ", "!!", "<<"]
YAMLISH = st.lists(st.sampled_from(TOKENS), max_size=60).map("".join)


@given(st.one_of(YAMLISH, st.text(max_size=120)), st.text(max_size=40))
def test_arbitrary_frontmatter_gives_a_memory_or_one_line_error(tmp_path_factory, front, body):
    path = tmp_path_factory.getbasetemp() / "fuzz.md"
    for text in (f"---\n{front}\n---\n{body}", f"---\ntype: user\n{front}\n---\n{body}"):
        try:
            memory = parse_memory(text, path)
        except MemoryFileError as exc:
            assert str(exc).startswith(f"{path}:") and "\n" not in str(exc), str(exc)
        else:
            assert isinstance(memory, Memory) and memory.type in ("user", "feedback", "project", "reference")
            assert all(isinstance(k, str) for k in memory.extra)


# -- racing creators ------------------------------------------------------------------------------

RACER = textwrap.dedent("""
    import os, sys, time
    from lossless.memory import MemoryStore, MemoryTool
    directory, me, go = sys.argv[1], sys.argv[2], sys.argv[3]
    tool = MemoryTool(MemoryStore(directory))
    while not os.path.exists(go):
        time.sleep(0.001)
    print(tool.run({"command": "create", "path": "/memories/same.md", "file_text": f"written by {me}\\n"}))
""")


def _env():
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    return {**os.environ, "PYTHONPATH": os.path.abspath(src)}


def test_racing_creates_have_exactly_one_winner(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    store.add(name="seed", description="d", type="user", body="b")  # the directory and lock exist
    go = tmp_path / "go"
    procs = {f"w{k}": subprocess.Popen([sys.executable, "-c", RACER, str(store.dir), f"w{k}", str(go)],
                                       env=_env(), stdout=subprocess.PIPE, text=True) for k in range(8)}
    go.touch()
    replies = {name: p.communicate(timeout=120)[0].strip() for name, p in procs.items()}
    winners = [name for name, reply in replies.items() if reply.startswith("Created")]
    assert len(winners) == 1, replies
    for name, reply in replies.items():
        if name != winners[0]:
            assert reply.startswith("Error: /memories/same.md already exists"), reply
    assert store.get("same").body == f"written by {winners[0]}"
    assert [e["op"] for e in store.changes() if e["id"] == "same"] == ["tool"]


# -- kill -9 ------------------------------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys
    from lossless.memory import MemoryStore
    store = MemoryStore(sys.argv[1])
    prefix = sys.argv[2]
    for i in range(10_000):
        store.add(name=f"{prefix}-{i}", description=f"fact {i}", type="project", body=f"{prefix} {i}\\n" * 400)
        print(i, flush=True)
""")


def test_kill_minus_nine_never_loses_a_created_memory(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    created: set[str] = set()
    for kill in range(15):
        prefix = f"r{kill}"
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(store.dir), prefix], env=_env(),
                                stdout=subprocess.PIPE, text=True)
        for _ in range(1 + kill % 3):  # kill during the next write, a different one each round
            line = proc.stdout.readline()
            assert line, "the writer died on its own"
            created.add(f"{prefix}-{int(line)}")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    reopened = MemoryStore(store.dir)
    scan = reopened.scan()
    assert scan.issues == ()
    ids = {m.id for m in scan.memories}
    assert created <= ids  # every create that returned is there
    for m in scan.memories:  # and every file there is whole (a kill leaves the old file or the new one)
        prefix, i = m.id.rsplit("-", 1)
        assert m.body == (f"{prefix} {i}\n" * 400).strip("\n")
    md = {p.name for p in store.dir.glob("*.md")}
    assert md == {f"{i}.md" for i in ids} | {"MEMORY.md"}  # no temp file reads as a memory
    reopened.add(name="after", description="d", type="user", body="b")  # the lock was not left held
    assert not list(store.dir.glob(".*.tmp"))  # the crashed writers' temp files were swept by the next writer
    assert all(f"({i}.md)" in reopened.index_text() for i in created)


# -- symbolic links -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [".changes.jsonl", "MEMORY.md", ".usage.json", ".lock", ".trash"])
def test_a_planted_link_is_refused_and_nothing_is_written_outside(tmp_path, capsys, name):
    store = MemoryStore(tmp_path / "mem")
    store.add(name="x", description="d", type="user", body="b")
    outside = tmp_path / "outside"
    if name == ".trash":
        outside.mkdir()
    else:
        outside.write_text("untouched\n")
    target = store.dir / name
    if target.is_dir():
        target.rename(tmp_path / "old-trash")
    elif target.exists():
        target.unlink()
    store = MemoryStore(store.dir)  # a fresh process's view
    target.symlink_to(outside)
    for attempt in (lambda: store.add(name="y", description="d", type="user", body="b"),
                    lambda: store.delete("x"), lambda: store.touch(["x"])):
        with pytest.raises(MemoryError_) as exc:
            attempt()
        assert str(target) in str(exc.value) and "symbolic link" in str(exc.value) and "\n" not in str(exc.value)
    code = cli_main(["memory", "--dir", str(store.dir), "add", "--name", "z", "--description", "d",
                     "--type", "user", "--body", "b"])
    err = capsys.readouterr().err
    assert code == 2 and one_line_naming(err, str(target))
    if name == ".trash":
        assert list(outside.iterdir()) == []
    else:
        assert outside.read_text() == "untouched\n"
    assert {m.id for m in store.memories()} == {"x"}


def test_reading_the_index_or_log_never_follows_a_link(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    store.add(name="x", description="d", type="user", body="b")
    secret = tmp_path / "private.txt"
    secret.write_text("private data\n")
    for name, read in (("MEMORY.md", store.index_text), (".changes.jsonl", store.changes)):
        (store.dir / name).unlink()
        (store.dir / name).symlink_to(secret)
        with pytest.raises(MemoryError_, match="symbolic link"):
            read()


def test_a_planted_link_never_stops_retrieval(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    store.add(name="tabs", description="the user indents with tabs", type="user", body="Always tabs.")
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    (store.dir / ".usage.json").symlink_to(outside)
    out = inject((Message(role="user", content=(Text(text="how does the user indent, tabs?"),)),),
                 MemoryStore(store.dir), SessionInjector())
    assert "Always tabs." in out[-1].content[-1].text and outside.read_text() == "{}"


# -- permissions ----------------------------------------------------------------------------------------


def test_everything_the_store_creates_is_owner_only(tmp_path):
    old = os.umask(0o022)
    try:
        store = MemoryStore(tmp_path / "home" / "mem")
        store.add(name="a", description="d", type="user", body="b")
        store.add(name="b", description="d", type="project", body="b")
        store.touch(["a"])
        store.delete("b")
        Consolidator(store, FakeProvider(default='{"actions": []}')).run()
    finally:
        os.umask(old)
    seen = {p.relative_to(store.dir).as_posix(): stat.S_IMODE(os.lstat(p).st_mode) for p in store.dir.rglob("*")}
    assert {".lock", ".changes.jsonl", "MEMORY.md", ".usage.json", ".trash", "a.md", ".consolidate-lock"} <= set(seen)
    assert stat.S_IMODE(store.dir.stat().st_mode) == 0o700
    for rel, mode in seen.items():
        expected = 0o700 if (store.dir / rel).is_dir() else 0o600
        assert mode == expected, (rel, oct(mode))


def test_an_old_world_readable_change_log_becomes_owner_only(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    store.add(name="a", description="d", type="user", body="b")
    os.chmod(store.dir / ".changes.jsonl", 0o644)
    store.update("a", body="c")
    assert stat.S_IMODE((store.dir / ".changes.jsonl").stat().st_mode) == 0o600
