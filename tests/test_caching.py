"""Prompt-cache breakpoints: ``lossless.caching.with_breakpoints`` and ``ContextManager.call()``.

The rule (tools, system prompt, newest message; at most four marks; the caller's marks kept;
the request marked, never the history) as a property over generated histories, then through
the real SDKs against the fake server: the marks are where they belong on the wire, and the
second call reads the prefix the first wrote.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import ContextManager
from lossless.caching import EPHEMERAL, breakpoints, with_breakpoints
from lossless.messages import Message, Text, ToolResult, ToolUse
from lossless.providers.anthropic import AnthropicProvider
from lossless.providers.openai import OpenAIProvider
from lossless.rounds import MAX_CACHE_BREAKPOINTS, problems
from lossless.testing import FakeServer

from strategies import histories

TOOLS = [{"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}},
         {"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}}]


def _premarked(messages: list[Message], picks: list[int]) -> list[Message]:
    """``messages`` with the caller's own marks on the last block of the messages at ``picks``."""
    out = list(messages)
    for k in picks:
        i = k % len(out)
        blocks = list(out[i].content)
        for j in range(len(blocks) - 1, -1, -1):
            if isinstance(blocks[j], (Text, ToolResult, ToolUse)):
                blocks[j] = replace(blocks[j], cache_control={"type": "ephemeral"})
                out[i] = out[i].with_content(blocks)
                break
    return out


@settings(max_examples=60, deadline=None)
@given(messages=histories(max_rounds=8), picks=st.lists(st.integers(0, 10_000), max_size=MAX_CACHE_BREAKPOINTS),
       system=st.sampled_from([None, "", "Be brief.", ({"type": "text", "text": "Be brief."},),
                               ({"type": "text", "text": "A"}, {"type": "text", "text": "B", "cache_control": EPHEMERAL})]),
       tools=st.sampled_from([None, [], TOOLS]))
def test_marks_stay_within_the_limit_keep_the_callers_and_leave_the_inputs_alone(messages, picks, system, tools):
    messages = _premarked(messages, picks)
    before = (list(messages), copy.deepcopy(system), copy.deepcopy(tools))
    mine = breakpoints(messages, system, tools)
    out, sys_out, tools_out = with_breakpoints(messages, system, tools)
    assert (list(messages), system, tools) == before  # nothing the caller holds was changed
    added = breakpoints(out, sys_out, tools_out) - mine
    assert 0 <= added <= min(3, max(0, MAX_CACHE_BREAKPOINTS - mine))
    # the caller's marks all stay where they were, and only marks were added
    assert len(out) == len(messages)
    for a, b in zip(messages, out):
        assert len(a.content) == len(b.content)
        for x, y in zip(a.content, b.content):
            if y is x:
                continue
            assert x.cache_control is None and y.cache_control == EPHEMERAL  # only an added mark
            assert replace(y, cache_control=None) == x
    if mine == 0:  # an unmarked request: the newest message, the system prompt and the tools each get one
        newest = [b for b in out[-1].content if isinstance(b, (Text, ToolResult, ToolUse))]
        assert not newest or newest[-1].cache_control == EPHEMERAL
        if system:
            assert sys_out[-1]["cache_control"] == EPHEMERAL
        if tools:
            assert tools_out[-1]["cache_control"] == EPHEMERAL and "cache_control" not in tools_out[0]
    assert not [p for p in problems(list(out), "anthropic") if "breakpoints" in str(p)]


def test_a_request_full_of_the_callers_marks_gets_none_of_ours():
    marked = [Message(role="user", content=(Text(text=f"q{i}", cache_control=EPHEMERAL),)) if i % 2 == 0 else
              Message(role="assistant", content=(Text(text=f"a{i}", cache_control=EPHEMERAL),)) for i in range(5)]
    out, system, tools = with_breakpoints(marked[:4], "Be brief.", TOOLS)
    assert out == tuple(marked[:4]) and system == "Be brief." and tools == tuple(TOOLS)
    # three free slots but only one left in the limit: the newest message gets it
    out, system, tools = with_breakpoints([*marked[:3], Message(role="assistant", content=(Text(text="a"),))],
                                          "Be brief.", TOOLS)
    assert out[-1].content[-1].cache_control == EPHEMERAL and system == "Be brief." and tools == tuple(TOOLS)


def _marks(body: dict) -> list[str]:
    """Where a wire request's marks are: "tools[i]", "system[i]", "messages[i][j]"."""
    where = [f"tools[{i}]" for i, t in enumerate(body.get("tools") or []) if "cache_control" in t]
    system = body.get("system")
    if isinstance(system, list):
        where += [f"system[{i}]" for i, b in enumerate(system) if "cache_control" in b]
    for i, m in enumerate(body["messages"]):
        content = m["content"] if isinstance(m["content"], list) else []
        where += [f"messages[{i}][{j}]" for j, b in enumerate(content) if "cache_control" in b]
    return where


def test_call_places_the_marks_and_the_next_call_reads_the_cached_prefix(tmp_path):
    with FakeServer() as srv:
        provider = AnthropicProvider("claude-x", api_key="k", base_url=srv.base_url, max_retries=0)
        cm = ContextManager(window=200_000, store=tmp_path, provider=provider, session_notes=False)
        history: list = [{"role": "user", "content": "Find the slow handler. " * 200}]
        usages = []
        for turn in range(3):
            response, view = cm.call(history, system="You are a careful engineer.", tools=TOOLS, max_tokens=200)
            usages.append(response.usage)
            assert not any(getattr(b, "cache_control", None) for m in view.neutral for b in m.content)  # the view is clean
            history = [*view.messages, {"role": "assistant", "content": response.text or "ok"},
                       {"role": "user", "content": f"Go on with step {turn}. " * 100}]
        bodies = [r.body for r in srv.requests if r.path.endswith("/messages")]
        assert len(bodies) == 3
        for body in bodies:
            n = len(body["messages"])
            last = len(body["messages"][-1]["content"]) - 1 if isinstance(body["messages"][-1]["content"], list) else 0
            assert _marks(body) == [f"tools[{len(TOOLS) - 1}]", "system[0]", f"messages[{n - 1}][{last}]"]
        assert usages[0].cache_read_tokens == 0 and usages[0].cache_write_tokens > 0
        # each later call reads everything the one before sent, and writes only what was appended
        assert all(u.cache_read_tokens > 0 for u in usages[1:])
        assert all(u.input_tokens < u.cache_read_tokens for u in usages[1:])
        cm.close()
        provider.close()  # its connection, not the garbage collector's


def test_call_through_openai_sends_no_marks_and_stays_valid(tmp_path):
    with FakeServer() as srv:
        provider = OpenAIProvider("gpt-x", api_key="k", base_url=srv.openai_base_url, max_retries=0)
        cm = ContextManager(window=200_000, store=tmp_path, provider=provider, session_notes=False, dialect="openai")
        response, _ = cm.call([{"role": "user", "content": "Hello."}], system="Be brief.", tools=TOOLS, max_tokens=50)
        assert response.text
        [body] = [r.body for r in srv.requests if r.path.endswith("/chat/completions")]
        assert "cache_control" not in str(body) and srv.statuses == [200]
        cm.close()
        provider.close()


@pytest.mark.parametrize("system", [None, "", []])
def test_no_system_prompt_gets_no_mark(system):
    out, sys_out, tools = with_breakpoints([Message(role="user", content=(Text(text="hi"),))], system, None)
    assert sys_out == (system if not isinstance(system, list) else ()) and tools == ()
    assert out[0].content[0].cache_control == EPHEMERAL
