"""The default store is found as git finds its repository: a command run in a project's subfolder
uses the project's ``.lossless`` rather than starting a second one.  The walk stops at a project's
root (a folder holding ``.git``) and never climbs to the home directory or ``/`` from below."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from lossless.cli import main
from lossless.store import nearest_store_folder


def _cli(capsys, monkeypatch, cwd: Path, *argv: str) -> tuple[int, str, str]:
    monkeypatch.chdir(cwd)
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _no_env(monkeypatch, home: Path) -> None:
    for name in ("LOSSLESS_HOME", "LOSSLESS_STORE", "RECOLLECT_HOME", "RECOLLECT_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))


def test_memory_in_a_subfolder_uses_the_projects_store(tmp_path, monkeypatch, capsys):
    _no_env(monkeypatch, tmp_path / "home")
    project = tmp_path / "home" / "acme"
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    (project / ".git").mkdir()
    code, _, err = _cli(capsys, monkeypatch, project, "memory", "add", "--name", "deploy day", "--type", "project",
                        "--description", "acme deploys on fridays", "--body", "Fridays.")
    assert code == 0, err
    code, out, err = _cli(capsys, monkeypatch, deep, "memory", "list", "--json")
    assert code == 0, err
    assert [m["id"] for m in json.loads(out)["memories"]] == ["deploy-day"]
    code, _, err = _cli(capsys, monkeypatch, deep, "memory", "add", "--name", "tabs", "--type", "user",
                        "--description", "the user indents with tabs", "--body", "Tabs.")
    assert code == 0, err
    assert not (deep / ".lossless").exists() and not (project / "src" / ".lossless").exists()
    assert sorted(p.name for p in (project / ".lossless" / "memory").glob("*.md")) == [
        "MEMORY.md", "deploy-day.md", "tabs.md"]


def test_a_project_root_and_the_home_directory_bound_the_walk(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    _no_env(monkeypatch, home)
    (home / ".lossless" / "memory").mkdir(parents=True)  # a store left in ~
    (tmp_path / ".lossless").mkdir()  # and one above ~
    loose = home / "notes" / "week"
    loose.mkdir(parents=True)
    assert nearest_store_folder(loose) == loose / ".lossless"
    assert nearest_store_folder(home) == home / ".lossless"  # standing in ~ itself, its store is the one
    outer = home / "work"
    (outer / ".lossless").mkdir(parents=True)
    repo = outer / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "docs").mkdir()
    assert nearest_store_folder(repo / "docs") == repo / "docs" / ".lossless"  # not the one past the root
    assert nearest_store_folder(outer / "scratch") == outer / ".lossless"
    code, out, err = _cli(capsys, monkeypatch, loose, "memory", "list", "--json")
    assert code == 0 and json.loads(out)["memories"] == [], err
    assert not (loose / ".lossless").exists()  # a read makes nothing


def test_a_store_under_the_old_name_is_found_from_a_subfolder(tmp_path, monkeypatch, capsys):
    _no_env(monkeypatch, tmp_path / "home")
    project = tmp_path / "home" / "p"
    (project / ".recollect").mkdir(parents=True)
    (project / "a" / "b").mkdir(parents=True)
    assert nearest_store_folder(project / "a" / "b") == project / ".recollect"
    assert "old name" in capsys.readouterr().err


_LEVELS = 5


@settings(max_examples=200, deadline=None)
@given(stores=st.sets(st.integers(0, _LEVELS)), gits=st.sets(st.integers(0, _LEVELS)),
       home_at=st.integers(-1, _LEVELS), start=st.integers(0, _LEVELS))
def test_the_store_found_is_the_nearest_within_the_bounds(tmp_path_factory, stores, gits, home_at, start):
    """Folders d0/d1/…/d5 under a fresh root; a store, a ``.git`` or ``~`` at any level.  The
    answer is the nearest store at or above the start, looking no higher than the first project
    root, and not at ``~`` or above from below it; else the start's own folder."""
    root = tmp_path_factory.mktemp("tree")
    levels = [root]
    for i in range(1, _LEVELS + 1):
        levels.append(levels[-1] / f"d{i}")
    levels[-1].mkdir(parents=True)
    for i in stores:
        (levels[i] / ".lossless").mkdir()
    for i in gits:
        (levels[i] / ".git").mkdir()
    old = os.environ.get("HOME")
    os.environ["HOME"] = str(levels[home_at]) if home_at >= 0 else "/nonexistent-home"
    try:
        found = nearest_store_folder(levels[start])
    finally:
        if old is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = old
    expected = levels[start] / ".lossless"
    for i in range(start, -1, -1):
        if i != start and i == home_at:
            break
        if i in stores:
            expected = levels[i] / ".lossless"
            break
        if i in gits:
            break
    assert found == expected
    if found != levels[start] / ".lossless":
        assert found.is_dir() and levels[start].is_relative_to(found.parent)


def test_chat_refusing_an_empty_task_leaves_no_store_behind(tmp_path, monkeypatch, capsys):
    _no_env(monkeypatch, tmp_path / "home")
    work = tmp_path / "home" / "w"
    work.mkdir(parents=True)
    code, _, err = _cli(capsys, monkeypatch, work, "chat", str(work), "--provider", "fake", "-p", "  ")
    assert code == 2 and err.strip().count("\n") == 0 and "-p needs a task" in err
    assert not (work / ".lossless").exists()


def test_chat_in_a_subfolder_records_its_session_in_the_projects_store(tmp_path, monkeypatch, capsys):
    _no_env(monkeypatch, tmp_path / "home")
    project = tmp_path / "home" / "p"
    (project / ".lossless").mkdir(parents=True)
    (project / "sub").mkdir()
    code, _, err = _cli(capsys, monkeypatch, project / "sub", "chat", "--provider", "fake", "-p", "hello")
    assert code == 0, err
    assert not (project / "sub" / ".lossless").exists()
    assert list((project / ".lossless" / "sessions").glob("*/transcript.jsonl"))
