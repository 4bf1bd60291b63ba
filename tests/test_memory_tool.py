"""The memory tool (Anthropic's command set) over the store, and the memory CLI."""

from __future__ import annotations

import argparse
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.memory import TOOL_DEFINITION, MemoryStore, MemoryTool
from lossless.cli import memory as memory_cli
from lossless.memory.tool import wrote_memories
from lossless.messages import ToolUse


@pytest.fixture
def tool(tmp_path):
    return MemoryTool(MemoryStore(tmp_path / "mem"))


def test_definition_is_a_tool_schema():
    assert TOOL_DEFINITION["name"] == "memory" and TOOL_DEFINITION["input_schema"]["required"] == ["command"]
    assert set(TOOL_DEFINITION["input_schema"]["properties"]["command"]["enum"]) == {
        "view", "create", "str_replace", "insert", "delete", "rename"}


def test_command_set_round_trip(tool):
    assert tool.run({"command": "view", "path": "/memories"}).endswith("(empty)")
    assert tool.run({"command": "create", "path": "/memories/db.md",
                     "file_text": "Do not mock the database\nuse postgres\n"}) == "Created /memories/db.md"
    shown = tool.run({"command": "view", "path": "/memories/db.md"})
    assert "type: project" in shown and "\tuse postgres" in shown
    assert "     9\tDo not mock" in tool.run({"command": "view", "path": "/memories/db.md", "view_range": [9, 9]})
    assert tool.run({"command": "str_replace", "path": "/memories/db.md", "old_str": "postgres",
                     "new_str": "PostgreSQL 16"}).startswith("Edited")
    assert tool.run({"command": "insert", "path": "/memories/db.md", "insert_line": 10,
                     "insert_text": "even in CI"}).startswith("Inserted")
    assert tool.store.get("db").body == "Do not mock the database\nuse PostgreSQL 16\neven in CI"
    assert tool.run({"command": "rename", "old_path": "/memories/db.md", "new_path": "/memories/database.md"}) \
        == "Renamed /memories/db.md to /memories/database.md"
    assert "/memories/database.md" in tool.run({"command": "view", "path": "/memories"})
    assert tool.run({"command": "delete", "path": "/memories/database.md"}).startswith("Deleted")
    assert tool.store.memories() == () and list(tool.store.dir.glob(".trash/*/database.md"))


def test_errors_are_text_never_exceptions(tool):
    tool.run({"command": "create", "path": "/memories/a.md", "file_text": "x x\n"})
    cases = [
        {"command": "launch"}, {}, {"command": "view", "path": "/etc/passwd"},
        {"command": "view", "path": "/memories/../../etc/passwd"}, {"command": "create", "path": "/memories/a.md",
                                                                     "file_text": "again"},
        {"command": "create", "path": "/memories/sub/dir.md", "file_text": "x"},
        {"command": "create", "path": "/memories/x.txt", "file_text": "x"},
        {"command": "create", "path": "/memories/MEMORY.md", "file_text": "x"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "x", "new_str": "y"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "zzz", "new_str": "y"},
        {"command": "str_replace", "path": "/memories/nope.md", "old_str": "x", "new_str": "y"},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "breaks frontmatter"},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 99, "insert_text": "x"},
        {"command": "delete", "path": "/memories"}, {"command": "rename", "old_path": "/memories/a.md"},
        {"command": "view", "path": "/memories/a.md", "view_range": [5, 1]},
        {"command": "create", "path": "/memories/bad.md", "file_text": "---\ntype: nonsense\n---\n"},
    ]
    for params in cases:
        out = tool.run(params)
        assert out.startswith("Error: "), (params, out)
    assert [m.id for m in tool.store.memories()] == ["a"] and tool.store.get("a").body == "x x"


@given(st.lists(st.sampled_from(["..", ".", "memories", "a.md", "", "~", "etc", "%2e%2e", "..\\"]), max_size=6))
def test_paths_never_escape(tmp_path_factory, parts):
    tool = MemoryTool(MemoryStore(tmp_path_factory.mktemp("m") / "mem"))
    path = "/" + "/".join(parts)
    tool.run({"command": "create", "path": path, "file_text": "x"})
    root = tool.store.dir
    outside = [p for p in root.parent.rglob("*") if p.is_file() and root not in p.parents]
    assert outside == []


def test_secret_written_through_the_tool_is_redacted(tool):
    tool.run({"command": "create", "path": "/memories/k.md", "file_text": "key: sk-ant-api03-" + "Q" * 30})
    assert "Q" * 30 not in tool.store.path_for("k").read_text()


def test_wrote_memories_detects_tool_writes():
    assert wrote_memories([ToolUse(id="1", name="memory", input={"command": "create"})])
    assert not wrote_memories([ToolUse(id="1", name="memory", input={"command": "view"})])


def _cli(argv, capsys, **kw):
    parser = argparse.ArgumentParser(prog="lossless")
    memory_cli.register(parser.add_subparsers(dest="command"))
    code = memory_cli.run(parser.parse_args(argv), **kw)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_end_to_end(tmp_path, capsys):
    d = ["memory", "--dir", str(tmp_path / "mem")]
    code, out, _ = _cli(d + ["add", "--name", "Use tabs", "--description", "tabs not spaces", "--type", "user",
                             "--body", "Indent with tabs."], capsys)
    assert code == 0 and "use-tabs" in out
    f = tmp_path / "m.md"
    f.write_text("---\nname: DB\ndescription: real database in tests\ntype: feedback\nowner: qa\n---\nNo mocks.\n")
    assert _cli(d + ["add", str(f), "--json"], capsys)[1].count('"owner": "qa"') == 1
    code, out, _ = _cli(d + ["list", "--json"], capsys)
    assert {m["id"] for m in json.loads(out)["memories"]} == {"use-tabs", "db"}
    assert "No mocks." in _cli(d + ["show", "db"], capsys)[1]
    assert _cli(d + ["edit", "db", "--body", "Never mock."], capsys)[0] == 0
    assert json.loads(_cli(d + ["search", "mock", "database", "--json"], capsys)[1])[0]["id"] == "db"
    assert "(nothing relevant)" in _cli(d + ["search", "weather"], capsys)[1]
    assert "(use-tabs.md)" in _cli(d + ["index"], capsys)[1]
    assert _cli(d + ["rm", "db"], capsys)[0] == 0


@pytest.mark.parametrize("argv", [["show", "nope"], ["show", "../x"], ["add", "--name", "x"],
                                  ["edit", "nope", "--body", "b"], ["consolidate"], ["rm", "nope"],
                                  ["add", "/nonexistent.md"], ["consolidate", "--undo", "nope"]])
def test_cli_errors_are_one_line_exit_2(tmp_path, capsys, argv):
    code, _, err = _cli(["memory", "--dir", str(tmp_path / "mem"), *argv], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_symlinks_pointing_outside_are_refused(tool, tmp_path):
    outside = tmp_path / "passwd.md"
    outside.write_text("---\nname: p\ndescription: d\ntype: user\n---\nroot:x:0:0\n")
    tool.run({"command": "create", "path": "/memories/a.md", "file_text": "x\n"})
    (tool.store.dir / "link.md").symlink_to(outside)
    (tool.store.dir / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    for params in ({"command": "view", "path": "/memories/link.md"},
                   {"command": "str_replace", "path": "/memories/link.md", "old_str": "root", "new_str": "x"},
                   {"command": "insert", "path": "/memories/link.md", "insert_line": 0, "insert_text": "x"},
                   {"command": "delete", "path": "/memories/link.md"},
                   {"command": "create", "path": "/memories/dangling.md", "file_text": "x"},
                   {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/link.md"}):
        out = tool.run(params)
        assert out.startswith("Error: ") and "outside" in out, (params, out)
    assert "link.md" not in tool.run({"command": "view", "path": "/memories"})
    assert outside.read_text().endswith("root:x:0:0\n") and not (tmp_path / "nowhere.md").exists()


@pytest.mark.parametrize("path", ["/memories/../../etc/passwd", "/etc/passwd", "/memories/../x.md",
                                  "/memories/./../memories/../../x.md", "memories/../../x.md",
                                  "/memories/a/../../../etc/passwd"])
def test_traversal_is_named_in_one_line(tool, path):
    out = tool.run({"command": "view", "path": path})
    assert out.startswith("Error: ") and repr(path) in out and "\n" not in out


def test_cli_names_the_file_and_line_of_a_broken_memory(tmp_path, capsys):
    d = ["memory", "--dir", str(tmp_path / "mem")]
    _cli(d + ["add", "--name", "ok", "--description", "d", "--type", "user", "--body", "b"], capsys)
    (tmp_path / "mem" / "broken.md").write_text("---\nname: x\ntype: [unclosed\n---\nbody\n")
    code, _, err = _cli(d + ["show", "broken"], capsys)
    assert code == 2 and f"{tmp_path / 'mem' / 'broken.md'}:3: bad frontmatter" in err and err.count("\n") == 1
    code, out, _ = _cli(d + ["list"], capsys)
    assert code == 0 and "ok" in out and "broken.md:3:" in out
    code, _, err = _cli(d + ["show", "missing"], capsys)
    assert code == 2 and "no memory 'missing'" in err and "lossless memory list" in err
