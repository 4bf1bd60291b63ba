"""``lossless memory …`` as a person types it: store options on either side of the action, every
change undoable, a dry run that prints its plan, duplicates named, counts in words, help on every option."""

from __future__ import annotations

import argparse
import json

from lossless.cli import main
from lossless.cli import memory as memory_cli
from lossless.memory import MemoryStore
from lossless.testing.fake_provider import FakeProvider


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _seed(tmp_path) -> MemoryStore:
    store = MemoryStore(tmp_path / "memory")
    store.add(name="acme deploy", description="acme deploys on fridays", type="project", body="b",
              scope="project:acme")
    store.add(name="other deploy", description="other deploys on mondays", type="project", body="b",
              scope="project:other")
    store.add(name="tabs", description="the user indents with tabs", type="user", body="Tabs.")
    return store


def test_store_options_go_before_or_after_the_action(tmp_path, capsys):
    d = str(_seed(tmp_path).dir)
    before = _run(capsys, "memory", "--dir", d, "--project", "acme", "list", "--json")
    after = _run(capsys, "memory", "list", "--dir", d, "--project", "acme", "--json")
    mixed = _run(capsys, "memory", "--dir", d, "list", "--project", "acme", "--json")
    assert before[0] == after[0] == mixed[0] == 0
    ids = {m["id"] for m in json.loads(after[1])["memories"]}
    assert ids == {"acme-deploy", "tabs"} and json.loads(before[1]) == json.loads(after[1]) == json.loads(mixed[1])
    code, out, _ = _run(capsys, "memory", "search", "deploys", "--dir", d, "--agent", "x", "--project", "other")
    assert code == 0 and "other-deploy" in out and "acme-deploy" not in out


def test_rm_edit_and_add_are_undone_by_memory_undo(tmp_path, capsys):
    store = _seed(tmp_path)
    d = str(store.dir)
    text = store.path_for("tabs").read_text()
    code, out, _ = _run(capsys, "memory", "rm", "tabs", "--dir", d)
    run = out.split("undo with: lossless memory undo ")[1].strip()
    assert code == 0 and not store.exists("tabs")
    code, out, _ = _run(capsys, "memory", "undo", run, "--dir", d)
    assert code == 0 and "reverted 1 change of" in out and store.path_for("tabs").read_text() == text
    code, out, _ = _run(capsys, "memory", "edit", "tabs", "--body", "Spaces now.", "--dir", d)
    run = out.split("undo with: lossless memory undo ")[1].strip()
    assert _run(capsys, "memory", "undo", run, "--dir", d)[0] == 0 and store.get("tabs").body == "Tabs."


def test_an_exact_duplicate_is_added_with_a_warning_naming_the_other(tmp_path, capsys):
    d = str(_seed(tmp_path).dir)
    code, out, err = _run(capsys, "memory", "add", "--dir", d, "--name", "tabs again", "--type", "user",
                          "--description", "the user indents with tabs", "--body", "Tabs.")
    assert code == 0 and "added tabs-again" in out
    assert err.count("\n") == 1 and "warning: tabs-again has the same description and text as tabs" in err
    code, _, err = _run(capsys, "memory", "add", "--dir", d, "--name", "spaces", "--type", "user",
                        "--description", "the user indents with spaces", "--body", "Spaces.")
    assert code == 0 and err == ""


def test_a_dry_run_prints_its_plan_and_changes_nothing(tmp_path, capsys):
    store = _seed(tmp_path)
    files = {p.name: p.read_text() for p in store.dir.glob("*.md")}
    plan = '{"actions": [{"op": "delete", "id": "other-deploy", "reason": "that project ended"}]}'
    parser = argparse.ArgumentParser()
    memory_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["memory", "consolidate", "--dry-run", "--dir", str(store.dir)])
    assert memory_cli.run(args, provider=FakeProvider(default=plan)) == 0
    out = capsys.readouterr().out
    assert out.startswith("dry run: 1 change planned, nothing written\n  delete other-deploy: that project ended\n")
    assert "-description: other deploys on mondays" in out and "undo with" not in out
    assert {p.name: p.read_text() for p in store.dir.glob("*.md")} == files
    args = parser.parse_args(["memory", "consolidate", "--dry-run", "--dir", str(store.dir)])
    assert memory_cli.run(args, provider=FakeProvider(default='{"actions": []}')) == 0
    assert capsys.readouterr().out.startswith("dry run: 0 changes planned, nothing written")


def test_every_option_of_every_memory_action_has_help():
    parser = argparse.ArgumentParser()
    memory = memory_cli.register(parser.add_subparsers(dest="command"))
    actions = next(a for a in memory._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"memory {name} {opt.dest}" for name, sub in actions.choices.items() for opt in sub._actions
               if not isinstance(opt, argparse._HelpAction) and not opt.help]
    missing += [f"memory {opt.dest}" for opt in memory._actions if opt is not actions and not opt.help]
    assert missing == []


def test_a_missing_file_or_a_dir_that_is_a_file_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(capsys, "memory", "add", "nonexist.md")
    assert code == 2 and err == "lossless memory: error: nonexist.md: No such file or directory\n"
    (tmp_path / "garbage.bin").write_bytes(b"\x00\x01junk")
    for argv in (["list"], ["add", "--name", "a", "--description", "b", "--type", "user", "--body", "c"]):
        code, out, err = _run(capsys, "memory", *argv, "--dir", "garbage.bin")
        assert code == 2 and err.startswith("lossless memory: error: garbage.bin: not a directory") and not out
    assert (tmp_path / "garbage.bin").read_bytes() == b"\x00\x01junk"


def test_a_reader_that_stops_early_is_not_an_error(tmp_path):
    """`lossless memory show big | head -1`: the rest is not wanted; no 'Broken pipe' error, exit 0."""
    import subprocess
    import sys

    store = MemoryStore(tmp_path / "mem")
    store.add(name="big", description="d", type="user", body="line\n" * 50_000)
    proc = subprocess.run(f"{sys.executable} -m lossless.cli memory show big --dir {tmp_path / 'mem'} | head -c 10; "
                          "exit ${PIPESTATUS[0]}", shell=True, executable="/bin/bash", capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout == "---\nname: "
