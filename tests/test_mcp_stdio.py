"""`lossless mcp` as a client sees it: the real command in a subprocess, driven over stdio by the
MCP SDK's own client (`mcp.client.stdio` + `ClientSession`).  One server process serves the module."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import ContextManager
from lossless.config import ContextConfig
from lossless.dialects.anthropic import from_anthropic
from lossless.dialects.detect import read_any
from lossless.inspect import inspect_messages
from lossless.markers import handles_in
from lossless.messages import block_text
from lossless.store import ArtifactStore
from lossless.transcript import read_entries

pytest.importorskip("mcp")

from anyio.from_thread import start_blocking_portal  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

SESSION = "loop"
WINDOW = 16_000
LONG = "".join(f"{i:05d} the quick brown fox jumps over the lazy dog\n" for i in range(2_000))


def lossless_command() -> list[str]:
    """The installed `lossless` entry point beside this interpreter (a venv), else the module."""
    beside = Path(sys.executable).parent / "lossless"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("lossless")
    return [found] if found else [sys.executable, "-m", "lossless.cli"]


def make_round(i: int, size: int) -> list[dict]:
    tid = f"toolu_{i:05d}"
    return [
        {"role": "assistant", "content": [{"type": "text", "text": f"step {i}"},
                                          {"type": "tool_use", "id": tid, "name": "Bash",
                                           "input": {"command": f"cat f{i}"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": f"line {i}\n" * size}]},
    ]


def run_session(store: Path, session: str, rounds: int) -> list[dict]:
    """A real ContextManager loop through a small window: it persists, clears and compacts.
    Returns the last request's messages: the context the model last saw."""
    # Snip held off, so the loop compacts by summaries too: compactions for context_stats to count.
    cm = ContextManager(config=ContextConfig(window=WINDOW, snip_trigger_fraction=5.0), store=str(store),
                        session_id=session)
    sent = [{"role": "user", "content": "Find the slow handler."}]
    for i in range(rounds):
        new = make_round(i, 50 + (i * 37) % 900 + (8_000 if i == 2 else 0))
        sent = cm.prepare(sent + new).messages
    cm.close()
    return sent


class Client:
    """A synchronous face on one MCP client session (the SDK's, in a blocking portal)."""

    def __init__(self, portal, session) -> None:
        self.portal, self.session = portal, session

    def call(self, name: str, arguments: dict | None = None):
        return self.portal.call(self.session.call_tool, name, arguments or {})

    def text(self, name: str, arguments: dict | None = None) -> str:
        result = self.call(name, arguments)
        assert not result.is_error, result.content[0].text
        return result.content[0].text

    def error(self, name: str, arguments: dict | None = None) -> str:
        result = self.call(name, arguments)
        assert result.is_error, result
        (block,) = result.content
        assert "\n" not in block.text and "Traceback" not in block.text
        return block.text


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("mcp")
    store, memory = base / "store", base / "mem"
    run_session(store, "older", 3)
    last_sent = run_session(store, SESSION, 30)
    handle = ArtifactStore(store).put(LONG)
    return {"base": base, "store": store, "memory": memory, "handle": handle, "last_sent": last_sent}


@pytest.fixture(scope="module")
def client(world):
    params = StdioServerParameters(
        command=lossless_command()[0],
        args=[*lossless_command()[1:], "mcp", "--store", str(world["store"]), "--memory", str(world["memory"])],
        cwd=str(world["base"]),
    )
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(stdio_client(params)) as (read, write):
            with portal.wrap_async_context_manager(ClientSession(read, write)) as session:
                portal.call(session.initialize)
                yield Client(portal, session)


def test_lists_its_tools_with_descriptions_that_say_when_to_use_them(client):
    tools = {t.name: t for t in client.portal.call(client.session.list_tools).tools}
    assert set(tools) == {"recall", "memory_search", "memory_view", "memory_add", "memory_list", "context_stats"}
    for t in tools.values():
        assert t.input_schema["type"] == "object" and len(t.description) > 60
    assert tools["recall"].input_schema["required"] == ["handle"]
    assert "handle" in tools["recall"].description
    assert tools["memory_add"].annotations.read_only_hint is False
    assert tools["memory_search"].annotations.read_only_hint is True


def test_recall_returns_the_artifact_and_pages_it(client, world):
    handle = world["handle"]
    first = client.text("recall", {"handle": handle, "offset": 0, "limit": 1_000})
    header, page = first.split("\n", 1)
    assert page == LONG[:1_000]
    assert f"of {len(LONG):,}" in header and "offset=1000" in header
    middle = client.text("recall", {"handle": handle, "offset": 5_000, "limit": 300})
    assert middle.split("\n", 1)[1] == LONG[5_000:5_300]
    small = ArtifactStore(world["store"]).put("short and whole")
    assert client.text("recall", {"handle": small}) == "short and whole"


@settings(max_examples=25)
@given(start=st.integers(min_value=0, max_value=len(LONG)),
       limits=st.lists(st.integers(min_value=1, max_value=30_000), max_size=6))
def test_pages_walked_from_any_offset_with_any_limits_rebuild_the_artifact(client, world, start, limits):
    """Given limits first, then the default page size until the end: the pages join into the artifact's tail.
    The artifact is longer than any page, so every answer carries its header line."""
    assert len(LONG) > 30_000
    pieces, offset = [], start
    for limit in [*limits, *[None] * len(LONG)]:
        if offset >= len(LONG):
            break
        args = {"handle": world["handle"], "offset": offset} | ({"limit": limit} if limit else {})
        answer = client.text("recall", args)
        header, page = answer.split("\n", 1)
        assert header.startswith(f"[{world['handle']}: characters {offset:,}–{offset + len(page):,} of {len(LONG):,}")
        assert 0 < len(page) <= (limit or 20_000)
        pieces.append(page)
        offset += len(page)
    assert "".join(pieces) == LONG[start:]


@pytest.mark.parametrize("arguments, says", [
    ({"handle": "sha256:" + "0" * 24}, "no artifact"),
    ({"handle": "../../etc/passwd"}, "not a lossless handle"),
    ({"handle": "sha256:" + "0" * 24, "offset": -1}, "offset"),
    ({"handle": "sha256:" + "0" * 24, "limit": "ten"}, "limit"),
    ({"handle": "sha256:" + "0" * 24, "page": 2}, "'page'"),
    ({"handle": "HANDLE", "offset": len(LONG)}, f"past the end of HANDLE ({len(LONG):,} characters)"),
])
def test_bad_recalls_are_one_line_tool_errors(client, world, arguments, says):
    arguments = {k: v.replace("HANDLE", world["handle"]) if isinstance(v, str) else v for k, v in arguments.items()}
    assert says.replace("HANDLE", world["handle"]) in client.error("recall", arguments)


def test_memories_added_are_searched_viewed_and_listed(client, world):
    added = client.call("memory_add", {"name": "Indent with tabs", "description": "The user indents with tabs",
                                       "type": "user", "body": "Always indent Python with tabs, never spaces."})
    assert not added.is_error and added.structured_content["id"] == "indent-with-tabs"
    client.text("memory_add", {"name": "Deploy target", "description": "Production runs on the staging cluster",
                               "type": "project", "body": "Deploys go to the cluster named blue."})
    found = client.call("memory_search", {"query": "how should I indent code?"})
    assert [h["id"] for h in found.structured_content["hits"]][0] == "indent-with-tabs"
    view = client.text("memory_view", {"id": "indent-with-tabs"})
    assert view.startswith("---\nname: Indent with tabs\n") and "never spaces." in view
    assert view == (world["memory"] / "indent-with-tabs.md").read_text().rstrip("\n")
    listed = client.call("memory_list", {})
    assert {m["id"] for m in listed.structured_content["memories"]} >= {"indent-with-tabs", "deploy-target"}
    only = client.call("memory_list", {"type": "project"}).structured_content["memories"]
    assert "deploy-target" in [m["id"] for m in only] and {m["type"] for m in only} == {"project"}
    assert "already exists" in client.error("memory_add", {"name": "Indent with tabs", "description": "again",
                                                           "type": "user", "body": "dup"})


def test_a_secret_in_an_added_memory_never_reaches_the_disk(client, world):
    key = "sk-ant-api03-" + "Zq9x" * 12
    answer = client.text("memory_add", {"name": "CI access", "description": "How CI reaches the API",
                                        "type": "reference", "body": f"CI uses ANTHROPIC_API_KEY={key} for tests."})
    assert "redacted" in answer
    on_disk = (world["memory"] / "ci-access.md").read_text()
    assert key not in on_disk and "[REDACTED:" in on_disk and "CI uses ANTHROPIC_API_KEY=" in on_disk
    assert key not in client.text("memory_view", {"id": "ci-access"})


@pytest.mark.parametrize("bad", ["../../etc/passwd", "/memories/../secrets.md", "a/b", "..", "notes.txt"])
def test_a_path_traversal_id_is_refused_in_one_line(client, world, bad):
    message = client.error("memory_view", {"id": bad})
    assert "invalid memory id" in message and "try" in message
    assert not any(p.name == "passwd" for p in world["base"].rglob("*"))


def test_bad_memory_calls_are_one_line_errors(client):
    assert "type must be one of" in client.error("memory_add", {"name": "x", "description": "y", "type": "secret",
                                                                "body": "z"})
    assert "needs 'body'" in client.error("memory_add", {"name": "x", "description": "y", "type": "user"})
    assert "no memory 'never-added'" in client.error("memory_view", {"id": "never-added"})
    assert "unknown tool 'delete_everything'" in client.error("delete_everything", {})


def test_context_stats_reports_the_latest_session_as_inspect_counts_it(client, world):
    answer = client.call("context_stats", {})
    assert not answer.is_error
    data = answer.structured_content
    path = world["store"] / "sessions" / SESSION / "transcript.jsonl"
    assert data["session"] == SESSION and data["transcript"] == str(path)
    boundaries = [e for e in read_entries(path).entries if e.get("subtype") == "compact_boundary"]
    assert len(data["compactions"]) == len(boundaries) > 0
    assert [c["tokens_before"] for c in data["compactions"]] == [e["compactMetadata"]["preTokens"] for e in boundaries]
    session = read_any(path)
    context = session.messages[session.boundaries[-1].index:]
    assert data["context"]["tokens"] == inspect_messages(context, window=200_000)["tokens"]
    seen_by_the_model = {h for m in from_anthropic(world["last_sent"]) for b in m.content
                         for h in handles_in(block_text(b))}
    assert {h["handle"] for h in data["handles"]["listed"]} == seen_by_the_model
    assert data["handles"]["count"] == data["handles"]["recallable"] == len(seen_by_the_model) > 0
    assert data["moved_out"]["results"] > 0  # the transcript logs originals; the model saw their markers
    text = answer.content[0].text
    assert f"compactions: {len(boundaries)}" in text and "handles in context" in text


def test_context_stats_of_a_named_session_and_errors(client, world):
    older = client.call("context_stats", {"session": "older", "window": 8_000}).structured_content
    assert older["session"] == "older" and older["context"]["window"] == 8_000
    assert "no session 'nope'" in client.error("context_stats", {"session": "nope"})
    assert "no session '../loop'" in client.error("context_stats", {"session": "../loop"})


def test_the_server_keeps_serving_after_errors(client):
    for _ in range(3):
        client.error("recall", {"handle": "nonsense"})
    assert client.text("memory_list", {})


def test_concurrent_calls_are_all_answered(client, world):
    import anyio

    names = [f"parallel fact {i}" for i in range(6)]
    results: dict[str, object] = {}

    async def fire() -> None:
        async def one(key: str, tool: str, arguments: dict) -> None:
            results[key] = await client.session.call_tool(tool, arguments)

        async with anyio.create_task_group() as tg:
            for n in names:
                tg.start_soon(one, n, "memory_add", {"name": n, "description": n, "type": "project", "body": n})
                tg.start_soon(one, n + " recall", "recall", {"handle": world["handle"], "limit": 100})

    client.portal.call(fire)
    assert not any(r.is_error for r in results.values())
    listed = {m["id"] for m in client.call("memory_list", {}).structured_content["memories"]}
    assert {n.replace(" ", "-") for n in names} <= listed
    assert all((world["memory"] / f"{n.replace(' ', '-')}.md").read_text().rstrip().endswith(n) for n in names)
