"""Extraction, consolidation (gates, contradictions, concurrency, undo) and session notes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from lossless.errors import ProviderHTTPError, RateLimited
from lossless.memory import ConsolidationConfig, Consolidator, Extractor, MemoryStore, SessionNotes
from lossless.memory.consolidate import PROTECTED_TYPES
from lossless.messages import Text, ToolUse, assistant, user
from conftest import Scripted


class Clock:
    def __init__(self, t=1_000_000.0):
        self.t = t

    def __call__(self):
        return self.t


def ops(*items):
    return json.dumps({"operations": list(items)})


HISTORY = (user("I prefer tabs. Remember that."), assistant("Noted: tabs."))


def test_extraction_adds_dedups_and_redacts(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    store.add(name="Use tabs", description="User indents with tabs", type="user", body="tabs")
    p = Scripted(ops({"op": "add", "name": "Use tabs", "type": "user", "description": "x", "body": "y"},
                     {"op": "add", "name": "Tabs again", "type": "user", "description": "user indents with TABS",
                      "body": "z"},
                     {"op": "add", "name": "Deploy key", "type": "reference", "description": "where the key is",
                      "body": "token ghp_" + "a" * 36},
                     {"op": "update", "id": "use-tabs", "body": "tabs, width 4"},
                     {"op": "update", "id": "ghost", "body": "?"}, {"op": "delete", "id": "ghost"}))
    ex = Extractor(store, p, debounce=0)
    ex.turn_ended(HISTORY)
    result = ex.poll()
    assert result.added == ("deploy-key",) and result.updated == ("use-tabs",) and len(result.skipped) == 4
    assert "a" * 36 not in store.path_for("deploy-key").read_text()
    assert "Existing memories" in p.requests[0].messages[0].text and "use-tabs" in p.requests[0].messages[0].text


def test_extraction_is_debounced_and_skipped_when_agent_wrote(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    clock = Clock()
    p = Scripted(ops({"op": "add", "name": "Quotes", "type": "user", "description": "single quotes", "body": "q"}))
    ex = Extractor(store, p, debounce=30, clock=clock)
    for i in range(5):  # a burst of turns
        ex.turn_ended(HISTORY + (user(f"turn {i}"),))
        clock.t += 2
        assert ex.poll() is None
    clock.t += 30
    assert ex.poll().added == ("quotes",) and len(p.requests) == 1 and "turn 4" in p.requests[0].messages[0].text
    assert ex.poll() is None
    wrote = assistant(ToolUse(id="t1", name="memory", input={"command": "create", "path": "/memories/x.md"}))
    ex.turn_ended(HISTORY * 2 + (user("more"), wrote, user("x")))
    assert ex.flush().reason == "agent-wrote-memories" and len(p.requests) == 1


@pytest.mark.parametrize("reply", [RateLimited("slow", status=429), ProviderHTTPError("500", status=500),
                                   ValueError("adapter bug"), "no json here", '{"operations": "add"}'])
def test_extraction_failure_writes_nothing(tmp_path, reply):
    store = MemoryStore(tmp_path / "mem")
    ex = Extractor(store, Scripted(reply), debounce=0)
    ex.turn_ended(HISTORY)
    result = ex.poll()
    assert result.error and store.memories() == ()


def _seed_store(tmp_path, clock):
    store = MemoryStore(tmp_path / "mem", clock=clock)
    store.add(name="indent-old", description="User indents with spaces", type="user", body="spaces")
    clock.t += 100
    store.add(name="indent-new", description="User indents with tabs", type="user", body="tabs now")
    store.add(name="dup-a", description="Tests use pytest", type="project", body="pytest")
    store.add(name="dup-b", description="We test with pytest", type="project", body="pytest -q")
    store.add(name="stale", description="Sprint 3 ends Friday", type="project", body="old")
    return store


ACTIONS = json.dumps({"actions": [
    {"op": "supersede", "old": "indent-new", "new": "indent-old", "reason": "contradiction"},  # named backwards
    {"op": "merge", "ids": ["dup-a", "dup-b"], "description": "Tests run with pytest -q", "body": "pytest -q"},
    {"op": "delete", "id": "stale", "reason": "past sprint"},
    {"op": "delete", "id": "ghost"},
]})


def test_consolidation_resolves_contradictions_logs_and_undoes(tmp_path):
    clock = Clock()
    store = _seed_store(tmp_path, clock)
    before = {m.id: store.path_for(m.id).read_text() for m in store.memories()}
    c = Consolidator(store, Scripted(ACTIONS, ACTIONS), clock=clock)
    dry = c.run(dry_run=True)
    assert dry.status == "dry-run" and "-User indents with" not in dry.plan.diff()
    assert "+superseded_by: indent-new" in dry.plan.diff() and "/dev/null" in dry.plan.diff()
    assert {m.id: store.path_for(m.id).read_text() for m in store.memories()} == before
    result = c.run()
    assert result.status == "applied" and any("ghost" in s for s in result.plan.skipped)
    old = store.get("indent-old")
    assert old.extra["superseded_by"] == "indent-new" and not store.get("indent-new").superseded
    assert store.get("dup-b").body == "pytest -q" and not store.exists("dup-a") and not store.exists("stale")
    assert "indent-old" not in store.index_text() and "(indent-new.md)" in store.index_text()
    assert len(list(store.dir.glob(".trash/*/*.md"))) == 2
    assert {e["run"] for e in store.changes() if e["op"].startswith("consolidate") or e["op"] == "delete"} \
        == {result.run}
    assert store.undo(result.run) == 4
    assert {m.id: store.get(m.id).body for m in store.memories()} == {
        "indent-old": "spaces", "indent-new": "tabs now", "dup-a": "pytest", "dup-b": "pytest -q", "stale": "old"}
    assert "superseded_by" not in store.get("indent-old").extra


def test_gates_and_lock(tmp_path):
    clock = Clock(10 * 86400.0)
    store = _seed_store(tmp_path, clock)
    sessions = tmp_path / "sessions"
    cfg = ConsolidationConfig()
    c = Consolidator(store, Scripted('{"actions": []}', "garbage"), sessions_dir=sessions, clock=clock, config=cfg)
    assert c.gate() == "few-sessions"  # never consolidated, no sessions
    clock.t += 1
    assert c.gate() == "throttled"
    for i in range(5):
        (sessions / f"s{i}").mkdir(parents=True)
        os.utime(sessions / f"s{i}", (clock.t, clock.t))
    clock.t += 601
    assert c.gate() is None
    result = c.run()
    assert result.status == "nothing-to-do" and c.last_consolidated() == clock.t
    clock.t += 3600
    assert c.gate() == "too-soon"
    clock.t += 86400
    failed = c.run()  # garbage reply: nothing changes and the gate time is rolled back
    assert failed.status == "failed" and c.last_consolidated() == clock.t - 86400 - 3600
    # A live holder blocks; a holder that died more than an hour ago does not.
    c.lock_path.write_text(json.dumps({"pid": 999999, "prior": 5.0}))
    os.utime(c.lock_path, (clock.t - 60, clock.t - 60))
    assert c.run().status == "locked" and c.last_consolidated() == 5.0
    os.utime(c.lock_path, (clock.t - 3601, clock.t - 3601))
    c.provider = Scripted('{"actions": []}')
    assert c.run().status == "nothing-to-do" and c.last_consolidated() == clock.t


def test_every_consolidation_failure_changes_nothing(tmp_path):
    for reply in (RateLimited("x"), RuntimeError("boom"), "", '{"actions": {}}'):
        clock = Clock()
        store = _seed_store(tmp_path / str(len(str(reply))) / type(reply).__name__, clock)
        before = {m.id: store.path_for(m.id).read_text() for m in store.memories()}
        result = Consolidator(store, Scripted(reply), clock=clock).run()
        assert result.status == "failed" and result.error
        assert {m.id: store.path_for(m.id).read_text() for m in store.memories()} == before


WRITER = textwrap.dedent("""
    import sys
    from lossless.memory import MemoryStore
    store = MemoryStore(sys.argv[1])
    for i in range(10):
        store.add(name=f"{sys.argv[2]}-{i}", description=f"fact {i}", type="project", body=f"body {i}")
    if sys.argv[2] == "w0":
        store.update("dup-a", body="edited while consolidating")
""")


def test_writers_during_consolidation_lose_nothing(tmp_path):
    clock = Clock(time.time())
    store = _seed_store(tmp_path, clock)
    store.clock = time.time
    env = {**os.environ, "PYTHONPATH": os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "src"))}

    def slow_model(request):
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(store.dir), f"w{k}"], env=env)
                 for k in range(4)]
        assert all(p.wait(timeout=60) == 0 for p in procs)  # the writers finish during the model call
        return ACTIONS

    result = Consolidator(store, Scripted(slow_model)).run()
    assert result.status == "applied"
    ids = {m.id for m in store.memories()}
    assert {f"w{k}-{i}" for k in range(4) for i in range(10)} <= ids
    assert store.get("dup-a").body == "edited while consolidating"  # changed during the call: not merged away
    assert any("dup-a" in s and "changed" in s for s in result.plan.skipped)
    assert store.scan().issues == () and not store.exists("stale")
    assert all(f"({i}.md)" in store.index_text() for i in ids if i != "indent-old")


def test_session_notes(tmp_path):
    notes = SessionNotes("abc-123", root=tmp_path)
    assert notes.path == tmp_path / "sessions" / "abc-123" / "notes.md" and notes.read() == ""
    assert not notes.due(9_999) and notes.due(10_000)
    assert notes.update(Scripted("# Task\nship it, key sk-ant-" + "z" * 30), HISTORY, history_tokens=12_000)
    assert notes.read().startswith("# Task") and "z" * 30 not in notes.read()
    assert not notes.due(16_000) and notes.due(17_000)
    assert not notes.update(Scripted(RuntimeError("down")), HISTORY) and notes.read().startswith("# Task")
    assert SessionNotes.substantial(10_000, 5, 40_000)
    assert not SessionNotes.substantial(9_999, 5, 100) and not SessionNotes.substantial(10_000, 4, 100)
    assert not SessionNotes.substantial(10_000, 5, 40_001)
    with pytest.raises(Exception, match="invalid session id"):
        SessionNotes("../x")


def test_a_resumed_session_counts_through_its_transcript(tmp_path):
    clock = Clock(10 * 86400.0)
    store = _seed_store(tmp_path, clock)
    sessions = tmp_path / "sessions"
    for i in range(5):
        d = sessions / f"s{i}"
        d.mkdir(parents=True)
        (d / "transcript.jsonl").write_text("{}\n")
        os.utime(d, (100.0, 100.0))  # created long ago...
        os.utime(d / "transcript.jsonl", (clock.t, clock.t))  # ...but appended to just now
    c = Consolidator(store, None, sessions_dir=sessions, clock=clock)
    assert c.sessions_since(1000.0) == 5 and c.gate() is None


def test_extraction_covers_every_new_message_after_a_stage_shortened_the_view(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    p = Scripted(ops(), ops())
    ex = Extractor(store, p, debounce=0)
    first = [user(f"old {i}") if i % 2 == 0 else assistant(f"reply {i}") for i in range(6)]
    ex.turn_ended(first)
    ex.poll()
    snipped = first[:1] + first[3:]  # a snip removed two middle messages...
    ex.turn_ended(snipped + [user("new A"), assistant("new B"), user("new C")])  # ...and three arrived
    ex.poll()
    prompt = p.requests[1].messages[0].text
    assert all(f"new {x}" in prompt for x in "ABC") and "old 0" not in prompt and "reply 5" not in prompt


def test_attached_memories_are_not_extracted_again(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    p = Scripted(ops())
    ex = Extractor(store, p, debounce=0)
    asked = user("which indent?").with_content(
        (Text(text="which indent?"), Text(text="<memory>SECRET-MEMORY-BODY</memory>", extra={"lossless": "memory"})))
    ex.turn_ended([asked, assistant("tabs")])
    ex.poll()
    prompt = p.requests[0].messages[0].text
    assert "which indent?" in prompt and "SECRET-MEMORY-BODY" not in prompt


def test_unattended_consolidation_never_deletes_what_the_user_said(tmp_path):
    clock = Clock()
    store = _seed_store(tmp_path, clock)
    actions = json.dumps({"actions": [{"op": "delete", "id": "indent-old", "reason": "looks stale"},
                                      {"op": "delete", "id": "stale", "reason": "past sprint"}]})
    c = Consolidator(store, Scripted(actions), clock=clock)
    before = store.path_for("indent-old").read_text()
    result = c.run(protect=PROTECTED_TYPES)  # what maybe_run() does once the gates open
    assert result.status == "applied"
    assert store.path_for("indent-old").read_text() == before  # a user memory: suggested to a person, untouched
    assert [(s.op, s.ids) for s in result.plan.suggestions] == [("delete", ("indent-old",))]
    assert not store.exists("stale")  # a project memory may be pruned
