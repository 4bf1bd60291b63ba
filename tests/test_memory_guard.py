"""Unattended consolidation only suggests changes to what the user said; it runs when a
session ends, in the background; the session's injection budget is exact to the byte."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import ContextManager
from lossless.errors import MemoryError_
from lossless.memory import ConsolidationConfig, Consolidator, MemoryStore, SessionInjector, lifecycle, suggestions
from lossless.memory.consolidate import PROTECTED_TYPES
from lossless.memory.model import Memory
from conftest import Scripted


class Clock:
    def __init__(self, t=10 * 86400.0):
        self.t = t

    def __call__(self):
        return self.t


def _store(tmp_path, clock):
    store = MemoryStore(tmp_path / "mem", clock=clock)
    store.add(name="editor", description="I use vim, keep it.", type="user", body="I use vim, keep it.")
    clock.t += 10
    store.add(name="review", description="Short reviews please", type="feedback", body="Keep reviews short.")
    clock.t += 10
    store.add(name="editor-2", description="The user edits in vim", type="project", body="vim")
    store.add(name="build", description="Build with make", type="project", body="make all")
    store.add(name="build-2", description="Build with make -j", type="project", body="make -j8")
    return store


# Each unattended operation the model may propose against a user or feedback memory.
PROTECTED_ACTIONS = {
    "delete-user": {"op": "delete", "id": "editor", "reason": "stale"},
    "delete-feedback": {"op": "delete", "id": "review"},
    "merge-away-user": {"op": "merge", "ids": ["editor", "editor-2"], "body": "(dropped)"},
    "merge-into-user": {"op": "merge", "ids": ["editor-2", "editor"], "body": "(dropped)", "type": "project"},
    "supersede-user": {"op": "supersede", "old": "editor", "new": "editor-2", "reason": "contradiction"},
    "supersede-feedback-named-backwards": {"op": "supersede", "old": "build", "new": "review"},
    "update-user": {"op": "update", "id": "editor", "body": "I use emacs"},
    "rename-feedback": {"op": "update", "id": "review", "name": "Long reviews"},
}


@pytest.mark.parametrize("name", sorted(PROTECTED_ACTIONS))
def test_unattended_consolidation_only_suggests_changes_to_user_and_feedback(tmp_path, name):
    clock = Clock()
    store = _store(tmp_path, clock)
    before = {m.id: store.path_for(m.id).read_bytes() for m in store.memories()}
    actions = [PROTECTED_ACTIONS[name], {"op": "merge", "ids": ["build", "build-2"], "body": "make -j8"}]
    result = Consolidator(store, Scripted(json.dumps({"actions": actions})), clock=clock).run(protect=PROTECTED_TYPES)
    assert result.status == "applied"
    for mid in ("editor", "review"):
        assert store.path_for(mid).read_bytes() == before[mid]  # byte for byte, not even a mark
    assert not store.exists("build")  # the unprotected merge in the same run went through
    assert len(result.plan.suggestions) == 1 and "suggested" in result.plan.diff()
    [pending] = suggestions.pending(store)
    assert pending["op"] == PROTECTED_ACTIONS[name]["op"] and pending["run"] == result.run
    assert not any(c.id in ("editor", "review") for c in result.plan.changes)
    assert all(e["id"] not in ("editor", "review") for e in store.changes() if e["run"] == result.run)


def test_a_person_accepts_a_suggestion_and_can_undo_it(tmp_path):
    clock = Clock()
    store = _store(tmp_path, clock)
    original = store.path_for("editor").read_text()
    reply = json.dumps({"actions": [{"op": "merge", "ids": ["editor", "editor-2"], "body": "(dropped)"},
                                    {"op": "delete", "id": "review"}]})
    Consolidator(store, Scripted(reply), clock=clock).run(protect=PROTECTED_TYPES)
    merge, delete = suggestions.pending(store)
    run = suggestions.accept(store, merge["sid"])
    assert not store.exists("editor") and store.get("editor-2").body == "(dropped)"
    assert [s["sid"] for s in suggestions.pending(store)] == [delete["sid"]]
    suggestions.dismiss(store, delete["sid"])
    assert suggestions.pending(store) == [] and store.exists("review")
    assert store.undo(run) == 2 and store.path_for("editor").read_text().split("updated")[0] == \
        original.split("updated")[0]
    with pytest.raises(MemoryError_, match="no pending suggestion"):
        suggestions.accept(store, merge["sid"])


def test_a_suggestion_is_refused_once_the_memory_changed(tmp_path):
    clock = Clock()
    store = _store(tmp_path, clock)
    reply = json.dumps({"actions": [{"op": "update", "id": "editor", "body": "I use emacs"}]})
    Consolidator(store, Scripted(reply), clock=clock).run(protect=PROTECTED_TYPES)
    clock.t += 5
    store.update("editor", body="I use vim and neovim")
    [s] = suggestions.pending(store)
    with pytest.raises(MemoryError_, match="changed since it was suggested"):
        suggestions.accept(store, s["sid"])
    assert store.get("editor").body == "I use vim and neovim"


def _open_gates(tmp_path, store, clock):
    sessions = store.dir.parent / "sessions"
    for i in range(5):
        (sessions / f"s{i}").mkdir(parents=True)
        os.utime(sessions / f"s{i}", (clock.t, clock.t))


def test_session_end_runs_consolidation_in_the_background(tmp_path):
    clock = Clock()
    store = _store(tmp_path, clock)
    _open_gates(tmp_path, store, clock)
    reply = json.dumps({"actions": [{"op": "delete", "id": "editor"}, {"op": "delete", "id": "build"}]})
    provider = Scripted(reply)
    cm = ContextManager(window=50_000, memory=store, provider=provider, transcript=False)
    lifecycle._consolidators.clear()
    cm.close()
    thread = lifecycle._running[str(store.dir.resolve())]
    thread.join(timeout=30)
    assert not thread.is_alive() and thread.name == "lossless-consolidate" and not thread.daemon
    assert [r.purpose for r in provider.requests] == ["memory-consolidate"]
    assert store.exists("editor") and not store.exists("build")  # unattended: the user memory only suggested
    assert lifecycle.last_result[str(store.dir.resolve())].status == "applied"
    # A second session end in the same process is throttled by the gates: no model call.
    again = lifecycle.session_ended(store, provider)
    again.join(timeout=30)
    assert len(provider.requests) == 1 and lifecycle.last_result[str(store.dir.resolve())] is None


def test_session_end_without_a_model_or_a_store_does_nothing(tmp_path):
    assert lifecycle.session_ended(None, Scripted()) is None
    assert lifecycle.session_ended(MemoryStore(tmp_path / "m"), None) is None


def test_a_failing_gate_check_never_reaches_the_caller(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    store.add(name="a", description="a", type="project", body="a")
    (store.dir / ".consolidate-lock").symlink_to(tmp_path / "elsewhere")
    lifecycle._consolidators.clear()
    thread = lifecycle.session_ended(store, Scripted(), config=ConsolidationConfig())
    thread.join(timeout=30)
    assert "symbolic link" in lifecycle.last_error[str(store.dir.resolve())]


def _memory(i: int, body: str) -> Memory:
    return Memory(id=f"m{i}", name=f"m{i}", description="d", type="project", body=body,
                  created="2026-01-01T00:00:00Z", updated="2026-01-01T00:00:00Z")


@settings(max_examples=40)
@given(bodies=st.lists(st.lists(st.text(min_size=0, max_size=3000), min_size=0, max_size=6), max_size=8),
       budget=st.integers(min_value=0, max_value=20_000))
def test_the_session_budget_counts_every_byte_attached(bodies, budget):
    inj = SessionInjector(session_bytes=budget)
    attached, n = 0, 0
    for turn in bodies:
        text = inj.attachment([_memory(n + k, b) for k, b in enumerate(turn)])
        n += len(turn)
        attached += len(text.encode("utf-8"))
        assert inj.used_bytes == attached  # exact to the byte, wrapper included
    assert attached <= budget


def test_the_default_budget_holds_at_61440_bytes():
    inj = SessionInjector()
    total = sum(len(inj.attachment([_memory(i * 10 + k, "é" * 1500) for k in range(10)]).encode()) for i in range(20))
    assert total == inj.used_bytes <= 60 * 1024 and total > 60 * 1024 - 4096


def test_the_cli_lists_accepts_and_dismisses_suggestions(tmp_path, capsys):
    from lossless.cli import main

    clock = Clock()
    store = _store(tmp_path, clock)
    reply = json.dumps({"actions": [{"op": "delete", "id": "editor"}, {"op": "update", "id": "review", "body": "x"}]})
    Consolidator(store, Scripted(reply), clock=clock).run(protect=PROTECTED_TYPES)
    d = str(store.dir)
    assert main(["memory", "--dir", d, "suggestions"]) == 0
    out = capsys.readouterr().out
    first, second = (s["sid"] for s in suggestions.pending(store))
    assert first in out and "/dev/null (to trash)" in out and "+x" in out
    assert main(["memory", "--dir", d, "suggestions", "--accept", first]) == 0
    assert not store.exists("editor") and "--undo accept-" in capsys.readouterr().out
    assert main(["memory", "--dir", d, "suggestions", "--dismiss", second, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"dismissed": second}
    assert main(["memory", "--dir", d, "suggestions", "--accept", "s-nope"]) == 2
    assert "no pending suggestion 's-nope'" in capsys.readouterr().err
