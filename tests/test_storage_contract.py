"""The same behaviour from both stores: the directory (the embedded default) and PostgreSQL.

Every test here runs once per implementation (``store`` is parametrised over ``dir`` and
``pg``); the PostgreSQL run uses a fresh database on the session's throwaway server and
skips, saying why, only where no server can be started.
"""

from __future__ import annotations

import pytest

from lossless import ContextManager
from lossless.dialects.anthropic import message_from_dict
from lossless.errors import HandleNotFound, MemoryError_
from lossless.memory import recall_memories
from lossless.memory.index import MAX_BYTES, MAX_LINES
from lossless.storage import open_store
from lossless.storage.base import ArtifactBackend, MemoryBackend, TranscriptBackend
from lossless.store import handle_for


@pytest.fixture(params=["dir", "pg"])
def spec(request, tmp_path):
    if request.param == "dir":
        return str(tmp_path / ".lossless")
    return request.getfixturevalue("pg_url")


@pytest.fixture
def store(spec, tmp_path, monkeypatch):
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "local"))
    s = open_store(spec)
    yield s
    s.close()


def _msgs(*texts):
    out = []
    for i, t in enumerate(texts):
        out.append(message_from_dict({"role": "user" if i % 2 == 0 else "assistant", "content": t}, i))
    return out


# -- the protocols ---------------------------------------------------------------------------------
def test_each_part_meets_its_protocol(store):
    assert isinstance(store.artifacts, ArtifactBackend)
    assert isinstance(store.transcripts, TranscriptBackend)
    assert isinstance(store.memory, MemoryBackend)


# -- artifacts -------------------------------------------------------------------------------------
def test_artifacts_round_trip_exact_bytes_and_deduplicate(store):
    data = b"\x00\xffbinary\n" * 100
    h = store.artifacts.put(data)
    assert h == handle_for(data)
    assert store.artifacts.put(data) == h
    assert store.artifacts.get_bytes(h) == data
    assert store.artifacts.size(h) == len(data)
    assert h in store.artifacts
    t = store.artifacts.put("text with a lone surrogate \udc80 and é")
    assert store.artifacts.get(t) == "text with a lone surrogate \udc80 and é"


def test_missing_and_malformed_handles_are_named(store):
    missing = handle_for(b"never written")
    assert missing not in store.artifacts
    assert "not a handle" not in store.artifacts
    with pytest.raises(HandleNotFound, match=missing):
        store.artifacts.get_bytes(missing)
    with pytest.raises(HandleNotFound, match="not a lossless handle"):
        store.artifacts.get("sha256:xyz")


def test_a_batch_reads_its_own_artifacts_and_publishes_them_all_at_its_end(store, spec):
    other = open_store(spec)  # another opener: another process, or another machine on the database
    try:
        with store.artifacts.batch():
            handles = [store.artifacts.put(f"batched {i} " * 50) for i in range(5)]
            assert store.artifacts.put("batched 0 " * 50) == handles[0]  # deduplicated within the batch too
            assert all(h in store.artifacts for h in handles)
            assert store.artifacts.get(handles[3]) == "batched 3 " * 50
            assert store.artifacts.size(handles[1]) == len("batched 1 " * 50)
            assert not any(h in other.artifacts for h in handles)  # nothing is visible before the commit
        assert [other.artifacts.get(h) for h in handles] == [f"batched {i} " * 50 for i in range(5)]
    finally:
        other.close()


def test_a_batch_left_by_an_exception_keeps_nothing(store, spec, tmp_path):
    with pytest.raises(RuntimeError):
        with store.artifacts.batch():
            h = store.artifacts.put("never committed")
            raise RuntimeError("a stage failed")
    assert h not in store.artifacts
    if not spec.startswith("postgres"):
        assert not [p for p in (tmp_path / ".lossless" / "artifacts").iterdir() if p.name.endswith(".tmp")]
    with store.artifacts.batch():  # the store is usable afterwards
        h = store.artifacts.put("committed")
    assert store.artifacts.get(h) == "committed"


def test_a_batch_in_one_thread_does_not_hold_back_another_threads_put(store, spec):
    import threading

    done = threading.Event()
    got: list[str] = []

    def other() -> None:
        got.append(store.artifacts.put("from another thread"))
        done.set()

    with store.artifacts.batch():
        store.artifacts.put("from the batch")
        t = threading.Thread(target=other)
        t.start()
        assert done.wait(30)
        t.join()
        fresh = open_store(spec)
        try:
            assert fresh.artifacts.get(got[0]) == "from another thread"  # durable when its put returned
        finally:
            fresh.close()


# -- transcripts -----------------------------------------------------------------------------------
def test_transcript_reads_back_in_order_and_resumes_its_chain(store):
    log = store.transcript("s-1")
    uuids = log.append(_msgs("one", "two"))
    b = log.boundary("auto", pre_tokens=100, post_tokens=10)
    log.close()
    again = store.transcript("s-1")
    more = again.append(_msgs("three"))
    again.close()
    entries = store.transcripts.entries("s-1")
    assert [e["uuid"] for e in entries] == [*uuids, b, *more]
    assert entries[0]["parentUuid"] is None and entries[1]["parentUuid"] == uuids[0]
    assert entries[2]["logicalParentUuid"] == uuids[1] and entries[2]["subtype"] == "compact_boundary"
    assert entries[3]["parentUuid"] == b
    assert entries[3]["message"]["content"] == "three"
    assert store.transcripts.sessions() == ["s-1"]
    assert store.transcripts.entries("no-such-session") == []


def test_transcript_keeps_text_postgres_json_cannot_hold(store):
    log = store.transcript("s-2")
    log.append(_msgs("nul \x00 and surrogate \ud800 end"))
    log.close()
    (entry,) = store.transcripts.entries("s-2")
    assert entry["message"]["content"] == "nul \x00 and surrogate \ud800 end"


def test_append_entries_is_what_entries_returns(store):
    entries = [{"type": "user", "uuid": f"u{i}", "n": i, "nested": {"a": [1, 2.5, None, True]}} for i in range(5)]
    store.transcripts.append_entries("s-3", entries[:2])
    store.transcripts.append_entries("s-3", entries[2:])
    assert store.transcripts.entries("s-3") == entries


# -- the manager -----------------------------------------------------------------------------------
def test_context_manager_writes_artifacts_and_transcript_to_the_store(spec, tmp_path, monkeypatch):
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "local"))
    big = "x" * 60_000
    history = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": big}]},
    ]
    with ContextManager(window=200_000, store=spec, session_id="cm-1") as cm:
        view = cm.prepare(history)
        handles = [h for h in cm.store.handles()] if hasattr(cm.store, "handles") else None
    assert any(e.fired for e in view.events)
    reopened = open_store(spec)
    entries = reopened.transcripts.entries("cm-1")
    assert len(entries) == 3
    text = str(view.messages[-1])
    handle = text[text.index("sha256:"):text.index("sha256:") + 31]
    assert reopened.artifacts.get(handle) == big
    if handles is not None:
        assert handle in handles
    reopened.close()


def test_environment_variable_chooses_the_store(spec, tmp_path, monkeypatch):
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "local"))
    monkeypatch.setenv("LOSSLESS_STORE", spec)
    s = open_store()
    h = s.artifacts.put(b"via env")
    assert open_store(spec).artifacts.get_bytes(h) == b"via env"
    assert s.kind == ("postgresql" if spec.startswith("postgresql://") else "directory")


# -- memories --------------------------------------------------------------------------------------
def test_memory_crud_and_change_log(store):
    ms = store.memory
    m = ms.add(name="Use tabs", description="User indents with tabs", type="user", body="Always tabs.",
               extra={"tags": ["style"]}, scope="user")
    assert m.id == "use-tabs" and ms.exists("use-tabs")
    assert ms.get("use-tabs") == m
    assert ms.get("use-tabs").extra == {"tags": ["style"]} and ms.get("use-tabs").scope == "user"
    with pytest.raises(MemoryError_, match="use-tabs"):
        ms.add(name="Use tabs", description="again", type="user", body="dup")
    u = ms.update("use-tabs", body="Always indent with tabs.")
    assert ms.get("use-tabs").body == "Always indent with tabs." == u.body
    assert "Always indent with tabs." in ms.text_of("use-tabs")
    r = ms.rename("use-tabs", "indent-tabs")
    assert r.id == "indent-tabs" and not ms.exists("use-tabs")
    ms.delete("indent-tabs", reason="test")
    assert not ms.exists("indent-tabs") and ms.memories() == ()
    ops = [c["op"] for c in ms.changes()]
    assert ops == ["add", "update", "rename-to", "rename-from", "delete"]
    with pytest.raises(MemoryError_, match="no memory"):
        ms.get("indent-tabs")


def test_memory_secrets_never_stored(store):
    m = store.memory.add(name="Deploy key", description="how to deploy", type="project",
                         body="use token ghp_" + "A" * 36 + " for pushes")
    assert "ghp_" + "A" * 36 not in store.memory.text_of(m.id)
    assert all("ghp_" + "A" * 36 not in str(c) for c in store.memory.changes())


def test_search_finds_by_field_and_skips_superseded(store):
    ms = store.memory
    ms.add(name="Indentation", description="User indents with tabs", type="user", body="Tabs, width 4.")
    ms.add(name="Database", description="Project uses PostgreSQL 15", type="project", body="Port 5432.")
    ms.add(name="Old db", description="Project used MySQL", type="project", body="PostgreSQL replaced it.",
           extra={"superseded_by": "database"})
    hits = ms.search("which database does the project use postgresql", 5)
    assert hits and hits[0][0].id == "database"
    assert "old-db" not in [m.id for m, _ in hits]
    found = recall_memories("tabs indentation", ms, limit=3)
    assert found and found[0].memory.id == "indentation"
    assert ms.search("the", 5) == []


def test_a_memory_in_another_script_is_written_and_found(store):
    """Both stores take a name with no ASCII form (a digest id) and find a memory by words of its
    own script."""
    ms = store.memory
    ms.add(name="Indentation", description="User indents with tabs", type="user", body="Tabs, width 4.")
    m = ms.add(name="ключ развёртывания", description="где хранится ключ", type="project",
               body="Ключ развёртывания хранится в хранилище секретов.")
    assert m.id.startswith("note-") and ms.get(m.id).name == "ключ развёртывания"
    hits = ms.search("хранилище секретов", 5)
    assert hits and hits[0][0].id == m.id


def test_recent_orders_by_update_and_touch_records_use(store):
    ms = store.memory
    ticks = iter(range(1_800_000_000, 1_800_001_000, 10))
    ms.clock = lambda: float(next(ticks))  # each write a later second, as in a real session
    for i in range(3):
        ms.add(name=f"Fact {i}", description=f"fact number {i}", type="project", body=str(i))
    ms.update("fact-0", body="changed")
    assert ms.recent(1)[0].id == "fact-0"
    ms.touch(["fact-1"])
    assert "fact-1" in ms.usage()


def test_index_stays_within_its_cap(store):
    ms = store.memory
    with ms.lock():
        for i in range(MAX_LINES + 20):
            ms.add(name=f"Memory {i}", description="d" * 150, type="project", body="b")
    text = ms.index_text()
    assert len(text.splitlines()) <= MAX_LINES and len(text.encode()) <= MAX_BYTES
    assert "more" in text.splitlines()[-1] or "not listed" in text.splitlines()[-1] or text.count("\n") == MAX_LINES


def test_undo_reverts_a_run_and_refuses_after_a_later_edit(store):
    ms = store.memory
    ms.add(name="Alpha", description="a", type="project", body="one")
    ms.update("alpha", body="two", run="r1")
    ms.add(name="Beta", description="b", type="project", body="x", run="r1")
    assert ms.undo("r1") == 2
    assert ms.get("alpha").body == "one" and not ms.exists("beta")
    ms.update("alpha", body="three", run="r2")
    ms.update("alpha", body="four")
    with pytest.raises(MemoryError_, match="changed since"):
        ms.undo("r2")
    assert ms.get("alpha").body == "four"


def test_a_view_sees_its_scopes_only(store):
    acme = store.memory_view(project="acme", agent="reviewer")
    other = store.memory_view(project="other")
    acme.add(name="Tabs", description="the user indents with tabs", type="user", body="tabs")  # scope user
    acme.add(name="Acme build", description="acme builds with make", type="project", body="make all")
    acme.add(name="Review notes", description="reviewer checks tests first", type="project", body="tests",
             scope="agent:reviewer")
    other.add(name="Other build", description="other builds with bazel", type="project", body="bazel build")
    store.memory.add(name="Unscoped", description="everyone sees this build fact", type="project", body="x")
    assert acme.get("acme-build").scope == "project:acme" and acme.get("tabs").scope == "user"
    assert {m.id for m in acme.memories()} == {"tabs", "acme-build", "review-notes", "unscoped"}
    assert {m.id for m in other.memories()} == {"tabs", "other-build", "unscoped"}
    assert len(store.memory.memories()) == 5  # unrestricted: every scope
    assert not other.exists("acme-build") and acme.exists("acme-build")
    with pytest.raises(MemoryError_, match="no memory 'acme-build'"):
        other.get("acme-build")
    with pytest.raises(MemoryError_, match="no memory"):
        other.delete("review-notes")
    with pytest.raises(MemoryError_, match="outside this store's view"):
        other.add(name="Acme build", description="clash", type="project", body="y")
    with pytest.raises(MemoryError_, match="outside this store's view"):
        other.add(name="Sneaky", description="x", type="project", body="y", scope="project:acme")
    assert [m.id for m, _ in other.search("build", 10)] and "acme-build" not in [m.id for m, _ in other.search("build", 10)]
    assert "Acme build" in acme.index_text() and "Acme build" not in other.index_text()
    assert "Acme build" in store.memory.index_text() and "Other build" in store.memory.index_text()


def test_memory_tool_and_injection_over_the_store(store):
    from lossless.memory import MemoryTool, SessionInjector, inject, system_index
    from lossless.messages import user

    tool = MemoryTool(store.memory)
    out = tool.run({"command": "create", "path": "/memories/deploy-day.md",
                    "file_text": "When the team deploys.\n\nThe team deploys on Fridays after the freeze."})
    assert "deploy-day" in out
    done = tool.run({"command": "str_replace", "path": "/memories/deploy-day.md", "old_str": "Fridays",
                     "new_str": "Thursdays"})
    assert "error" not in done.lower(), done
    assert "Thursdays" in tool.run({"command": "view", "path": "/memories/deploy-day.md"})
    assert "deploy-day" in system_index(store.memory)
    (msg,) = inject([user("which day does the team deploy?")], store.memory, SessionInjector())
    assert "Thursdays" in msg.text
    assert "deploy-day" in store.memory.usage()


def test_dense_side_finds_a_paraphrase_over_either_store(store, monkeypatch):
    from lossless.errors import ConfigError
    from lossless.memory import LexicalRetriever, embed
    from lossless.memory.retrieval import HybridRetriever

    try:
        embed.model_dir()
    except ConfigError:
        pytest.skip("the embed extra is not installed")
    monkeypatch.setenv(embed.ENV, "1")
    ms = store.memory
    ms.add(name="pet rest", description="The kitten is resting on a rug by the heater.", type="user", body="")
    ms.add(name="Revenue", description="Quarterly revenue grew by ten percent.", type="project", body="")
    query = "Where does my cat sleep?"
    assert LexicalRetriever().select_store(query, ms) == []
    hits = HybridRetriever(embedder=embed.shared_embedder()).select_store(query, ms)
    assert [h.memory.id for h in hits] == ["pet-rest"]
    assert [h.memory.id for h in recall_memories(query, ms)] == ["pet-rest"]


def test_undoing_a_run_twice_says_it_is_already_undone(store):
    """The second undo said the memory 'changed since it ran; revert them by hand'. Taking the
    undo back (undoing 'undo-RUN') makes the run undoable again."""
    ms = store.memory
    ms.add(name="Deploy day", description="deploys on fridays", type="project", body="Fridays.", run="r1")
    assert ms.undo("r1") == 1 and not ms.exists("deploy-day")
    with pytest.raises(MemoryError_, match="run 'r1' is already undone"):
        ms.undo("r1")
    assert ms.undo("undo-r1") == 1 and ms.exists("deploy-day")
    assert ms.undo("r1") == 1 and not ms.exists("deploy-day")
