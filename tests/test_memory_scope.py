"""Scopes: several agents and projects share one memory directory without seeing each other's memories."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import ContextManager
from lossless.errors import MemoryError_
from lossless.memory import MemoryStore, MemoryTool, apply_operations, recall_memories, system_index
from lossless.memory._rows import SCHEMA
from lossless.memory.consolidate import Consolidator
from lossless.memory.scope import View, default_scope, parse_scope
from lossless.memory.model import parse_memory

from conftest import Scripted


def add(store, name, *, type="project", scope=None, body=None):
    return store.add(name=name, description=f"{name} notes about the deploy pipeline", type=type,
                     body=body or f"{name}: the deploy pipeline runs on fridays", scope=scope)


def _env():
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    return {**os.environ, "PYTHONPATH": os.path.abspath(src)}


def test_scope_values_are_checked_and_a_bad_one_in_a_file_is_an_issue_naming_its_line(tmp_path):
    assert [parse_scope(v) for v in ("user", "project:acme", "agent:code-reviewer", None, "")] == \
        ["user", "project:acme", "agent:code-reviewer", None, None]
    for bad in ("team", "project:", "agent:Has Space", "project:../x", 3):
        with pytest.raises(ValueError, match="scope must be user, project:<name> or agent:<name>"):
            parse_scope(bad)
    with pytest.raises(MemoryError_):
        View(agent="no/slash")
    store = MemoryStore(tmp_path / "mem")
    add(store, "fine")
    (store.dir / "broken.md").write_text("---\nname: b\ndescription: d\ntype: user\nscope: everyone\n---\nbody\n")
    issues = store.scan().issues
    assert [(i.path.name, i.line) for i in issues] == [("broken.md", 5)] and "everyone" in issues[0].message
    assert [m.id for m in store.memories()] == ["fine"]


def test_a_view_writes_default_scopes_by_type_and_refuses_a_scope_it_could_not_read(tmp_path):
    store = MemoryStore(tmp_path / "mem", project="acme", agent="reviewer")
    assert default_scope("reference", project=None) is None
    made = {t: add(store, f"a {t}", type=t).scope for t in ("user", "feedback", "project", "reference")}
    assert made == {"user": "user", "feedback": "user", "project": "project:acme", "reference": "project:acme"}
    assert add(store, "mine", scope="agent:reviewer").scope == "agent:reviewer"
    text = store.path_for("mine").read_text()
    assert text.split("---")[1].strip().splitlines()[3] == "scope: agent:reviewer"  # after type
    with pytest.raises(MemoryError_, match="outside this store's view"):
        add(store, "theirs", scope="agent:writer")
    assert not store.path_for("theirs").exists()
    assert add(MemoryStore(tmp_path / "mem"), "plain").scope is None  # no view: today's behaviour
    agent_only = MemoryStore(tmp_path / "mem", agent="reviewer")
    assert add(agent_only, "fact", type="project").scope is None


def _shared(tmp_path):
    d = tmp_path / "shared"
    admin = MemoryStore(d)
    add(admin, "style", type="user", scope="user")
    add(admin, "legacy")  # written before scopes: seen by everyone
    add(admin, "acme-deploy", scope="project:acme")
    add(admin, "other-deploy", scope="project:other")
    add(admin, "reviewer-notes", scope="agent:reviewer")
    add(admin, "writer-notes", scope="agent:writer")
    return d


def test_two_agents_sharing_a_directory_never_see_each_others_memories(tmp_path):
    d = _shared(tmp_path)
    reviewer = MemoryStore(d, project="acme", agent="reviewer")
    writer = MemoryStore(d, project="acme", agent="writer")
    assert {m.id for m in reviewer.memories()} == {"style", "legacy", "acme-deploy", "reviewer-notes"}
    assert {m.id for m in writer.memories()} == {"style", "legacy", "acme-deploy", "writer-notes"}
    assert len(MemoryStore(d).memories()) == 6
    for store, other in ((reviewer, "writer-notes"), (writer, "reviewer-notes")):
        found = {m.id for m, _ in store.search("deploy pipeline fridays notes", 10)}
        assert other not in found and len(found) == 4
        assert other not in {h.memory.id for h in recall_memories(f"{other} deploy notes", store)}
        assert f"({other}.md)" not in store.index_text() and "(acme-deploy.md)" in store.index_text()
        assert not store.exists(other)
        with pytest.raises(MemoryError_, match=f"no memory '{other}'"):
            store.get(other)
        for change in (lambda: store.update(other, body="x"), lambda: store.delete(other),
                       lambda: store.rename(other, "stolen")):
            with pytest.raises(MemoryError_):
                change()
        tool = MemoryTool(store)
        assert other not in tool.run({"command": "view", "path": "/memories"})
        assert other not in tool.run({"command": "view", "path": "/memories/MEMORY.md"})
        assert tool.run({"command": "view", "path": f"/memories/{other}.md"}).startswith("Error:")
        refused = tool.run({"command": "create", "path": f"/memories/{other}.md", "file_text": "mine now"})
        assert refused.startswith("Error:") and "taken by a memory outside this store's view" in refused
    # MEMORY.md on disk is the directory's: every memory, for the person who keeps it
    on_disk = (d / "MEMORY.md").read_text()
    assert all(f"({i}.md)" in on_disk for i in ("writer-notes", "reviewer-notes", "other-deploy"))
    assert (d / "writer-notes.md").read_text().count("writer-notes") >= 1  # untouched by the refusals


def test_an_agent_never_sees_what_another_process_writes_for_another_agent(tmp_path):
    d = _shared(tmp_path)
    reviewer = MemoryStore(d, agent="reviewer")
    writer = MemoryStore(d, agent="writer")
    for s in (reviewer, writer):  # warm: catalog open, in-process ranking index built
        assert s.search("deploy", 10)
    script = textwrap.dedent("""
        import sys
        from lossless.memory import MemoryStore
        s = MemoryStore(sys.argv[1], agent="writer")
        s.add(name="secret-plan", description="the writer's deploy rollout plan", type="project",
              body="deploy rollout in three waves", scope="agent:writer")
        s.update("writer-notes", body="the deploy pipeline now runs on mondays, rollout daily")
    """)
    subprocess.run([sys.executable, "-c", script, str(d)], env=_env(), check=True, timeout=60)
    assert "secret-plan" in {m.id for m, _ in writer.search("deploy rollout", 10)}
    assert {m.id for m, _ in reviewer.search("deploy rollout waves mondays", 10)}.isdisjoint(
        {"secret-plan", "writer-notes"})
    assert "secret-plan" not in {m.id for m in reviewer.memories()} and "secret-plan" not in reviewer.index_text()
    assert reviewer.catalog.count() == 3 and writer.catalog.count() == 4
    assert "(secret-plan.md)" in (d / "MEMORY.md").read_text()


def test_a_view_ranks_with_the_statistics_of_what_it_sees(tmp_path):
    d = _shared(tmp_path)
    reviewer = MemoryStore(d, project="acme", agent="reviewer")
    alone = MemoryStore(tmp_path / "alone")
    for m in reviewer.memories():  # the same memories, in a directory of their own
        alone.put(m)
    query = "deploy pipeline fridays notes"
    assert [(m.id, round(s, 9)) for m, s in reviewer.search(query, 10)] == \
        [(m.id, round(s, 9)) for m, s in alone.search(query, 10)]


SCOPES = st.sampled_from([None, "user", "project:a", "project:b", "agent:x", "agent:y"])


@settings(max_examples=15)
@given(scopes=st.lists(SCOPES, min_size=1, max_size=12), project=st.sampled_from([None, "a", "b"]),
       agent=st.sampled_from([None, "x", "y"]))
def test_every_query_of_a_view_answers_from_exactly_the_memories_it_sees(tmp_path_factory, scopes, project, agent):
    d = tmp_path_factory.mktemp("prop")
    admin = MemoryStore(d)
    for k, scope in enumerate(scopes):
        add(admin, f"m{k}", scope=scope)
    view = View(project=project, agent=agent)
    expected = {f"m{k}" for k, s in enumerate(scopes) if view.sees(s)}
    store = MemoryStore(d, project=project, agent=agent)
    assert {m.id for m in store.memories()} == expected
    assert {m.id for m, _ in store.search("deploy pipeline fridays", 50)} == expected
    assert {m.id for m in store.catalog.top(50)[0]} == expected and store.catalog.count() == len(expected)
    listed = {line.split("(")[1].split(".md")[0] for line in store.index_text().splitlines()}
    assert listed == expected
    assert {k for k in expected if store.exists(k)} == expected


def test_a_view_index_stays_byte_identical_while_memories_are_only_used(tmp_path):
    d = _shared(tmp_path)
    store = MemoryStore(d, project="acme", agent="reviewer")
    before = system_index(store)
    store.touch(["legacy", "style"])
    assert system_index(store) == before
    add(MemoryStore(d, agent="writer"), "writer-two", scope="agent:writer")
    assert system_index(store) == before  # another agent's write changes nothing it sees
    add(store, "new-acme-fact")
    assert "(new-acme-fact.md)" in system_index(store)


def test_consolidation_never_merges_or_supersedes_across_scopes(tmp_path):
    d = _shared(tmp_path)
    admin = MemoryStore(d)
    add(admin, "acme-deploy-2", scope="project:acme")
    reply = json.dumps({"actions": [
        {"op": "merge", "ids": ["acme-deploy", "other-deploy"], "name": "deploy", "body": "merged"},
        {"op": "supersede", "old": "legacy", "new": "acme-deploy"},
        {"op": "merge", "ids": ["acme-deploy", "acme-deploy-2"], "name": "acme deploy", "body": "one fact"}]})
    result = Consolidator(admin, Scripted(reply)).run()
    assert [c.op for c in result.plan.changes] == ["merge", "merge-remove"]
    assert sum("different scopes" in s for s in result.plan.skipped) == 2
    merged = admin.get(result.plan.changes[0].id)
    assert merged.scope == "project:acme" and admin.get("other-deploy").body.endswith("fridays")
    # a view's consolidation sees only its view: the model is never shown another agent's memories
    asked = Scripted('{"actions": []}')
    Consolidator(MemoryStore(d, agent="reviewer"), asked).run(dry_run=True)
    prompt = asked.requests[0].messages[0].text
    assert "reviewer-notes" in prompt and "scope: agent:reviewer" in prompt
    assert "writer-notes" not in prompt and "other-deploy" not in prompt


def test_extraction_in_a_view_writes_default_scopes_and_cannot_touch_other_agents(tmp_path):
    d = _shared(tmp_path)
    store = MemoryStore(d, project="acme", agent="reviewer")
    ops = [{"op": "add", "name": "tabs", "type": "user", "description": "prefers tabs", "body": "Use tabs."},
           {"op": "add", "name": "ci", "type": "project", "description": "CI runs on pushes", "body": "CI."},
           {"op": "add", "name": "writer notes", "type": "project", "description": "how I review", "body": "Mine."},
           {"op": "update", "id": "writer-notes", "body": "overwritten"},
           {"op": "delete", "id": "other-deploy"}]
    result = apply_operations(store, ops)
    assert result.added == ("tabs", "ci", "writer-notes-2") and not result.updated and not result.deleted
    assert [s.split(":")[0] for s in result.skipped] == ["update 'writer-notes'", "delete 'other-deploy'"]
    assert store.get("tabs").scope == "user" and store.get("ci").scope == "project:acme"
    assert "overwritten" not in (d / "writer-notes.md").read_text() and (d / "other-deploy.md").exists()


def test_the_manager_injects_only_what_its_store_view_sees(tmp_path):
    d = _shared(tmp_path)
    cm = ContextManager(window=200_000, store=tmp_path / "art", transcript=False,
                        memory=MemoryStore(d, project="acme", agent="reviewer"))
    view = cm.prepare([{"role": "user", "content": "what are the deploy pipeline notes?"}])
    sent = json.dumps(view.messages)
    assert "acme-deploy" in sent and "reviewer-notes" in sent
    assert "writer-notes" not in sent and "other-deploy" not in sent


def test_a_catalog_of_the_previous_schema_is_rebuilt_with_scopes(tmp_path):
    d = _shared(tmp_path)
    db = d / ".index" / "catalog.sqlite3"
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE files DROP COLUMN scope")
    con.execute("PRAGMA user_version=1")
    con.commit()
    con.close()
    reviewer = MemoryStore(d, agent="reviewer")
    assert {m.id for m in reviewer.memories()} == {"style", "legacy", "reviewer-notes"}
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == SCHEMA


def test_a_scoped_memory_reads_back_with_its_scope(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    m = add(store, "x", scope="agent:bot")
    again = parse_memory(store.path_for(m.id).read_text(), store.path_for(m.id))
    assert again.scope == "agent:bot" and "scope" not in again.extra
    assert store.update("x", scope="project:p").scope == "project:p"


def test_an_agent_that_drops_the_scope_line_through_the_memory_tool_keeps_its_memory_private(tmp_path):
    d = _shared(tmp_path)
    reviewer = MemoryStore(d, project="acme", agent="reviewer")
    tool = MemoryTool(reviewer)
    text = tool.run({"command": "view", "path": "/memories/reviewer-notes.md"})
    scope_line = next(line for line in text.splitlines() if "scope:" in line)
    edited = tool.run({"command": "str_replace", "path": "/memories/reviewer-notes.md",
                       "old_str": scope_line.split("\t")[-1].split("|")[-1].strip(), "new_str": ""})
    assert not edited.startswith("Error:"), edited
    assert parse_memory((d / "reviewer-notes.md").read_text(), d / "reviewer-notes.md").scope == "agent:reviewer"
    writer = MemoryStore(d, project="acme", agent="writer")
    assert not writer.exists("reviewer-notes")
    # the person administering the directory may still unscope it on purpose
    admin = MemoryStore(d)
    plain = admin.text_of("reviewer-notes").replace("scope: agent:reviewer\n", "")
    assert admin.write_text("reviewer-notes", plain).scope is None
    assert MemoryStore(d, project="acme", agent="writer").exists("reviewer-notes")
