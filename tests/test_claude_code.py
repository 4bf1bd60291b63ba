"""Reading Claude Code session JSONL: the live branch, split responses, parallel
results on side branches, compaction boundaries, damaged files — and the real data."""

from __future__ import annotations

import json
import time

import pytest

from conftest import data_path
from lossless.dialects.claude_code import read_session
from lossless.errors import FormatError
from lossless.messages import Text, Thinking, ToolResult, ToolUse
from lossless.rounds import INTERRUPTED, validate

USAGE = {"input_tokens": 3, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000, "output_tokens": 5}


class Log:
    """Builds a session file entry by entry; each entry's parent defaults to the previous one."""

    def __init__(self) -> None:
        self.entries: list[dict] = []
        self.n = 0

    def _add(self, entry: dict, parent: str | None | bool) -> str:
        self.n += 1
        uuid = f"u{self.n}"
        prev = next((e["uuid"] for e in reversed(self.entries) if "uuid" in e), None)
        base = {"parentUuid": prev if parent is True else parent, "isSidechain": False, "sessionId": "s1",
                "uuid": uuid, "timestamp": f"2026-01-01T00:00:{self.n:02d}Z"}
        self.entries.append({**base, **entry})
        return uuid

    def user(self, content, parent=True, **kw) -> str:
        return self._add({"type": "user", "message": {"role": "user", "content": content}, **kw}, parent)

    def assistant(self, mid: str, block: dict, parent=True, usage=USAGE, **kw) -> str:
        message = {"model": "claude-x", "id": mid, "type": "message", "role": "assistant",
                   "content": [block], "stop_reason": None, "usage": usage}
        return self._add({"type": "assistant", "message": message, "requestId": "req_" + mid, **kw}, parent)

    def result(self, tid: str, parent=True, content="ok") -> str:
        return self.user([{"type": "tool_result", "tool_use_id": tid, "content": content}], parent)

    def progress(self, parent=True) -> str:
        return self._add({"type": "progress", "data": {"type": "hook_progress"}}, parent)

    def system(self, subtype: str, parent=True, **kw) -> str:
        return self._add({"type": "system", "subtype": subtype, "content": "x", **kw}, parent)

    def write(self, path, tail: bytes = b"") -> None:
        path.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in self.entries) + tail)


def tool(tid: str, name: str = "Bash") -> dict:
    return {"type": "tool_use", "id": tid, "name": name, "input": {"command": "ls"}, "caller": {"type": "direct"}}


def parallel_log() -> Log:
    """One response over four lines, two parallel tools, the first result on a side branch."""
    log = Log()
    log.entries.append({"type": "file-history-snapshot", "messageId": "x", "snapshot": {}})
    log.user("start the server")
    log.assistant("m1", {"type": "text", "text": "\n\n"})
    log.assistant("m1", {"type": "thinking", "thinking": "plan", "signature": "sig"})
    first = log.assistant("m1", tool("t1"))
    log.progress()
    log.assistant("m1", tool("t2", "Glob"), usage={**USAGE, "output_tokens": 40})
    log.result("t1", parent=first, content="first")   # side branch, written late
    log.result("t2", parent=log.entries[-2]["uuid"], content="second")
    log.user("thanks", isMeta=True)
    log.assistant("m2", {"type": "text", "text": "done"}, parent=log.entries[-2]["uuid"])
    return log


def test_split_response_is_merged_and_results_regathered(tmp_path):
    path = tmp_path / "s.jsonl"
    parallel_log().write(path)
    s = read_session(path)
    assert s.format == "claude-code" and s.dialect == "anthropic" and s.session_id == "s1"
    user, asst, results, final = s.messages
    assert user.text == "start the server" and user.meta["string_content"]
    assert [type(b) for b in asst.content] == [Thinking, ToolUse, ToolUse]  # "\n\n" dropped
    assert asst.meta["uuids"] == ("u2", "u3", "u4", "u6") and asst.meta["uuid"] == "u2"
    assert [r.tool_use_id for r in results.content] == ["t1", "t2"]
    assert [r.content for r in results.content] == ["first", "second"]
    assert final.text == "done"
    assert [c.index for c in s.calls] == [1, 3]
    assert s.calls[0].usage["output_tokens"] == 40  # the last line's usage, counted once
    assert s.calls[0].message_id == "m1" and s.calls[0].model == "claude-x"
    validate(s.messages)
    assert s.warnings == ()


def test_interleaved_results_on_the_chain_are_gathered(tmp_path):
    log = Log()
    log.user("go")
    log.assistant("m1", tool("t1"))
    log.result("t1")
    log.assistant("m1", tool("t2"))
    log.result("t2")
    path = tmp_path / "s.jsonl"
    log.write(path)
    s = read_session(path)
    assert [m.role for m in s.messages] == ["user", "assistant", "user"]
    assert [u.id for u in s.messages[1].tool_uses] == ["t1", "t2"]
    assert [r.tool_use_id for r in s.messages[2].tool_results] == ["t1", "t2"]
    assert len(s.calls) == 1


def test_compact_boundary_is_bridged_and_recorded(tmp_path):
    log = Log()
    log.user("first")
    before = log.assistant("m1", {"type": "text", "text": "answer"})
    log.system("compact_boundary", parent=None, logicalParentUuid=before,
               compactMetadata={"trigger": "auto", "preTokens": 170000})
    log.user("summary of it all", isCompactSummary=True)
    log.assistant("m2", {"type": "text", "text": "continuing"})
    log.system("turn_duration")
    path = tmp_path / "s.jsonl"
    log.write(path)
    s = read_session(path)
    assert [m.text for m in s.messages] == ["first", "answer", "summary of it all", "continuing"]
    assert len(s.boundaries) == 1
    b = s.boundaries[0]
    assert (b.index, b.trigger, b.pre_tokens, b.post_tokens) == (2, "auto", 170000, None)
    assert s.messages[2].meta["is_compact_summary"] is True
    assert [s.request_start(c) for c in s.calls] == [0, 2]
    assert s.segments() == [(0, 2), (2, 4)]


def test_boundary_with_a_missing_logical_parent_bridges_to_the_previous_line(tmp_path):
    log = Log()
    log.user("first")
    log.assistant("m1", {"type": "text", "text": "answer"})
    log.system("compact_boundary", parent=None, logicalParentUuid="gone",
               compactMetadata={"trigger": "manual", "preTokens": 9})
    log.user("summary", isCompactSummary=True)
    path = tmp_path / "s.jsonl"
    log.write(path)
    s = read_session(path)
    assert [m.text for m in s.messages] == ["first", "answer", "summary"]
    assert len(s.warnings) == 1 and "logicalParentUuid 'gone' is not in the file; bridged to line 2" in s.warnings[0]


def test_only_the_live_branch_is_read(tmp_path):
    log = Log()
    root = log.user("question")
    log.assistant("old", {"type": "text", "text": "abandoned answer"})
    log.user("edited question", parent=root)
    log.assistant("new", {"type": "text", "text": "kept answer"})
    log.user("side", isSidechain=True)  # a later sidechain entry is not the leaf
    path = tmp_path / "s.jsonl"
    log.write(path)
    s = read_session(path)
    assert [m.text for m in s.messages] == ["question", "edited question", "kept answer"]
    assert [c.message_id for c in s.calls] == ["new"]


def test_unanswered_call_is_repaired_with_a_warning(tmp_path):
    log = Log()
    log.user("go")
    log.assistant("m1", tool("t1"))
    log.user("[Request interrupted by user]")
    path = tmp_path / "s.jsonl"
    log.write(path)
    s = read_session(path)
    validate(s.messages)
    assert s.messages[2].content == (ToolResult(tool_use_id="t1", content=INTERRUPTED, is_error=True),
                                     Text(text="[Request interrupted by user]"))
    assert any("repaired: message 2: added an interrupted result for" in w for w in s.warnings)
    assert s.calls[0].index == 1


def test_whitespace_only_response_is_dropped_with_a_warning(tmp_path):
    log = Log()
    log.user("hi")
    log.assistant("m1", {"type": "text", "text": "  \n"})
    path = tmp_path / "s.jsonl"
    log.write(path)
    s = read_session(path)
    assert len(s.messages) == 1 and s.calls == ()
    assert "only white space text" in s.warnings[0]


def test_truncated_last_line_is_skipped_with_a_warning(tmp_path):
    path = tmp_path / "s.jsonl"
    parallel_log().write(path, tail=b'{"type": "user", "uuid": "zz", "mess')
    s = read_session(path)
    assert len(s.messages) == 4
    [warning] = s.warnings
    assert warning.startswith(f"{path}:12: truncated last line skipped (not JSON (Unterminated string")


def test_invalid_line_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / "s.jsonl"
    log = parallel_log()
    log.write(path)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b"{oops\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(FormatError, match=rf"^{path}:3: not JSON \("):
        read_session(path)


def test_non_utf8_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type": "user"}\n{"x": "\xff"}\n{"type": "user"}\n')
    with pytest.raises(FormatError, match=rf"^{path}:2: not UTF-8 \(byte 0xff at column 8\)$"):
        read_session(path)


def test_non_utf8_last_line_counts_as_truncated(tmp_path):
    path = tmp_path / "s.jsonl"
    log = Log()
    log.user("hi")
    log.write(path, tail=b'{"x": "\xe2\x82')
    s = read_session(path)
    assert len(s.messages) == 1 and "truncated last line skipped (not UTF-8" in s.warnings[0]


def test_a_non_object_line_is_an_error(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type": "user"}\n[1, 2]\n')
    with pytest.raises(FormatError, match=":2: an entry must be a JSON object, not an array"):
        read_session(path)


def test_a_huge_line_is_read_in_linear_time(tmp_path):
    log = Log()
    log.user("go")
    log.assistant("m1", tool("t1"))
    log.result("t1", content="x" * 20_000_000)
    path = tmp_path / "big.jsonl"
    log.write(path)
    t0 = time.perf_counter()
    s = read_session(path)
    assert len(s.messages[2].content[0].content) == 20_000_000
    assert time.perf_counter() - t0 < 5


# -- real data ------------------------------------------------------------------

REAL = {
    # file: (boundaries, trigger)
    "4d5611e5-241a-462a-8d15-5122611a9569.jsonl": (1, "auto"),
    "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl": (1, "auto"),
    "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl": (1, "manual"),
    "short.jsonl": (0, None),
    "subagent.jsonl": (0, None),
    "tool_heavy.jsonl": (0, None),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_sessions_load_and_validate(name):
    path = data_path("claude-code", name)
    s = read_session(path)
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    response_ids = {e["message"]["id"] for e in raw if e.get("type") == "assistant"}
    assert len(s.calls) == len(response_ids)  # one call per API response, none lost
    assert len({c.message_id for c in s.calls}) == len(s.calls)
    for a, z in s.segments():
        validate(s.messages[a:z])
    n_bounds, trigger = REAL[name]
    assert len(s.boundaries) == n_bounds
    for b in s.boundaries:
        assert b.trigger == trigger and 100_000 < b.pre_tokens < 200_000
        assert s.messages[b.index].meta["is_compact_summary"] is True
        assert s.messages[b.index].text.startswith("This session is being continued")
    for c in s.calls:
        assert s.messages[c.index].role == "assistant"
        assert set(c.usage) >= {"input_tokens", "cache_read_input_tokens", "output_tokens"}
    for m in s.messages:
        assert "uuid" in m.meta and "timestamp" in m.meta
        if m.role == "assistant":
            assert all(b.text.strip() for b in m.content if isinstance(b, Text))


def test_real_short_session_matches_what_was_verified_by_hand():
    s = read_session(data_path("claude-code", "short.jsonl"))
    assert [m.role for m in s.messages] == ["user", "assistant", "user", "user"]
    asst = s.messages[1]
    assert [b.type for b in asst.content] == ["thinking", "text", "tool_use", "tool_use"]
    assert [r.tool_use_id for r in s.messages[2].tool_results] == [u.id for u in asst.tool_uses]
    assert s.messages[3].text == "[Request interrupted by user for tool use]"
    assert s.calls[0].usage["cache_creation_input_tokens"] == 13835


def test_real_subagent_transcripts_load():
    folder = data_path("claude-code", "4d5611e5-241a-462a-8d15-5122611a9569", "subagents")
    for path in sorted(folder.glob("*.jsonl")):
        s = read_session(path)
        assert s.calls and s.messages[0].role == "user"
        validate(s.messages)


def test_a_huge_line_is_not_held_twice_while_parsed(tmp_path):
    import json as _json
    import tracemalloc

    from lossless.dialects.claude_code import read_session

    size = 10_000_000
    user = {"type": "user", "uuid": "a", "parentUuid": None, "sessionId": "s", "message": {"role": "user", "content": "y" * size}}
    f = tmp_path / "big.jsonl"
    f.write_text(_json.dumps(user) + "\n")
    tracemalloc.start()
    try:
        s = read_session(f)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert s.messages[0].text == "y" * size
    assert peak < 2.5 * size, peak  # the parsed text and one copy of the line, not the raw bytes too
