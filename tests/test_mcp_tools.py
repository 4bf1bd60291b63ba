"""lossless.mcp without a client: the toolbox's contract (an answer or one line, never anything else),
session lookup confined to the store, and a package that works without the SDK installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless.mcp import SPECS, Toolbox, ToolFailure
from lossless.mcp.stats import sessions
from lossless.memory import MemoryStore
from lossless.transcript import Transcript
from lossless.messages import Message, Text

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
KEYS = sorted({k for s in SPECS for k in s.input_schema["properties"]} | {"extra"})


@pytest.fixture
def box(tmp_path):
    return Toolbox.open(tmp_path / "store")


def failure(box: Toolbox, name: str, arguments: dict) -> str:
    with pytest.raises(ToolFailure) as exc:
        box.call(name, arguments)
    message = str(exc.value)
    assert message and "\n" not in message
    return message


@settings(max_examples=150)
@given(name=st.sampled_from([s.name for s in SPECS] + ["nope"]),
       arguments=st.dictionaries(st.sampled_from(KEYS), JSON, max_size=4))
def test_any_arguments_get_an_answer_or_one_line(tmp_path_factory, name, arguments):
    box = Toolbox.open(tmp_path_factory.getbasetemp() / "fuzz")
    try:
        answer = box.call(name, arguments)
    except ToolFailure as exc:
        assert str(exc) and "\n" not in str(exc) and "Traceback" not in str(exc)
    else:
        assert isinstance(answer.text, str) and answer.text
        json.dumps(answer.data)  # structured content must be JSON


def test_arguments_are_checked_against_the_schema(box):
    assert "recall takes handle, offset, limit, not 'page'" in failure(box, "recall", {"handle": "x", "page": 1})
    assert "needs 'handle'" in failure(box, "recall", {})
    assert "'offset' must be a whole number ≥ 0, not True" in failure(box, "recall", {"handle": "x", "offset": True})
    assert "'query' must be a string, not int" in failure(box, "memory_search", {"query": 3})
    assert "'query' is empty" in failure(box, "memory_search", {"query": "  "})
    h = box.artifacts.put("abcdef" * 10)
    assert box.call("recall", {"handle": h, "offset": 6.0, "limit": 6.0}).text.endswith("\nabcdef")


def test_memory_list_is_bounded_and_filters_by_type(box, monkeypatch):
    for i, kind in enumerate(["user", "project", "project"]):
        box.call("memory_add", {"name": f"fact {i}", "description": f"fact number {i}", "type": kind, "body": "b"})
    monkeypatch.setattr("lossless.mcp.tools.MAX_LISTED", 2)
    answer = box.call("memory_list", {})
    assert answer.data["total"] == 3 and len(answer.data["memories"]) == 2 and "1 older" in answer.text
    assert [m["id"] for m in box.call("memory_list", {"type": "user"}).data["memories"]] == ["fact-0"]
    assert "type must be one of" in failure(box, "memory_list", {"type": "secret"})


def test_an_unreadable_memory_file_is_reported_not_fatal(box):
    box.call("memory_add", {"name": "good", "description": "fine", "type": "user", "body": "ok"})
    (box.memory.dir / "broken.md").write_text("---\nname: [unclosed\n---\n")
    answer = box.call("memory_list", {})
    assert [m["id"] for m in answer.data["memories"]] == ["good"] and "1 unreadable" in answer.text
    assert "name: [unclosed" in box.call("memory_view", {"id": "broken"}).text  # shown as it is, to be fixed
    assert box.call("memory_view", {"id": "/memories/good.md"}).data["id"] == "good"


def _log(root, session: str, text: str) -> None:
    with Transcript(session, root=root) as t:
        t.append([Message(role="user", content=(Text(text=text),))])


def test_sessions_are_found_newest_first_and_never_outside_the_store(box, tmp_path):
    assert "no session transcripts in" in failure(box, "context_stats", {})
    _log(box.root, "first", "hello")
    _log(box.root, "second", "hello again")
    os.utime(box.root / "sessions" / "first" / "transcript.jsonl", (1, 1))
    assert [name for name, _ in sessions(box.root)] == ["second", "first"]
    assert box.call("context_stats", {}).data["session"] == "second"
    outside = tmp_path / "outside"
    _log(outside, "elsewhere", "not this store's")
    (box.root / "sessions" / "linked").symlink_to(outside / "sessions" / "elsewhere")
    assert "no session 'linked'" in failure(box, "context_stats", {"session": "linked"})
    assert "no session '..'" in failure(box, "context_stats", {"session": ".."})


def test_a_damaged_transcript_is_one_line_naming_the_file(box):
    path = box.root / "sessions" / "bad" / "transcript.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text('{"type": "user", "uuid": "u1", "message": {"role": "user", "content": 5}}\n')
    assert str(path) in failure(box, "context_stats", {"session": "bad"})


def test_the_session_option_is_the_default_for_context_stats(tmp_path):
    root = tmp_path / "store"
    _log(root, "pinned", "one")
    _log(root, "later", "two")
    assert Toolbox.open(root, session="pinned").call("context_stats", {}).data["session"] == "pinned"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_importing_the_package_and_the_cli_loads_no_sdk():
    proc = _run("import sys, lossless, lossless.cli, lossless.mcp; "
                "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_types'))))")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_without_the_sdk_the_command_says_how_to_install_it(tmp_path):
    proc = _run("import sys; sys.modules['mcp'] = None; from lossless.cli import main; "
                f"sys.exit(main(['mcp', '--store', {str(tmp_path)!r}]))")
    assert proc.returncode == 2
    assert proc.stdout == "" and proc.stderr.count("\n") == 1
    assert "pip install 'lossless[mcp]'" in proc.stderr
    other = _run("import sys; sys.modules['mcp'] = None; from lossless.cli import main; "
                 f"sys.exit(main(['memory', '--dir', {str(tmp_path / 'm')!r}, 'list']))")
    assert other.returncode == 0 and "no memories" in other.stdout, other.stderr


def test_the_docs_snippets_run_the_real_command():
    import re
    import shlex

    from conftest import ROOT
    from lossless.cli import build_parser
    from lossless.cli import mcp as command

    section = (ROOT / "docs" / "mcp.md").read_text()
    config = json.loads(re.search(r"```json\n(.*?)```", section, re.S).group(1))["mcpServers"]["lossless"]
    add = next(line.removeprefix("$ ") for line in section.splitlines() if line.startswith("$ claude mcp add lossless -- "))
    for argv in (config["args"], shlex.split(add.split(" -- ", 1)[1])[1:]):
        assert build_parser().parse_args(argv).func is command.run
    assert config["command"] == shlex.split(add.split(" -- ", 1)[1])[0] == "lossless"


def test_a_project_and_agent_view_serves_only_its_memories(tmp_path):
    """``lossless mcp --project P --agent A``: two agents sharing one store see their own memories,
    the user's and the project's, never each other's; what one adds lands in its own view."""
    admin = MemoryStore(tmp_path / "memory")
    admin.add(name="Tabs", description="the user indents with tabs", type="user", body="b", scope="user")
    admin.add(name="Deploy day", description="acme deploys on fridays", type="project", body="b",
              scope="project:acme")
    admin.add(name="Reviewer notes", description="reviewer checks the deploy diff", type="project", body="b",
              scope="agent:reviewer")
    reviewer = Toolbox.open(tmp_path, project="acme", agent="reviewer")
    writer = Toolbox.open(tmp_path, project="acme", agent="writer")
    listed = {name: {m["id"] for m in box.call("memory_list", {}).data["memories"]}
              for name, box in (("reviewer", reviewer), ("writer", writer))}
    assert listed == {"reviewer": {"tabs", "deploy-day", "reviewer-notes"}, "writer": {"tabs", "deploy-day"}}
    assert "reviewer-notes" not in writer.call("memory_search", {"query": "reviewer deploy diff"}).text
    writer.call("memory_add", {"name": "Writer draft", "description": "the writer drafts release notes",
                               "type": "project", "body": "b"})
    assert "writer-draft" in {m["id"] for m in writer.call("memory_list", {}).data["memories"]}
    assert admin.get("writer-draft").scope == "project:acme"
