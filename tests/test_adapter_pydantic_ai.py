"""The pydantic-ai capability, run by a real ``Agent`` on ``OpenAIChatModel`` against lossless's
fake server: every request valid and under the threshold, the history whole, recall bringing the log back."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from hypothesis import given, settings

pytest.importorskip("pydantic_ai", reason="pydantic-ai is not installed (pip install 'lossless[adapters]')")

from openai import AsyncOpenAI  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from lossless.adapters.pydantic_ai import from_pydantic_ai  # noqa: E402
from lossless.adapters.pydantic_ai import Lossless  # noqa: E402
from lossless.rounds import validate  # noqa: E402
from lossless.testing import FakeServer  # noqa: E402
from lossless.testing.wire import estimate  # noqa: E402
from strategies import histories  # noqa: E402

LOG = "".join(f"line {i}: compiled module_{i}.py OK\n" for i in range(3_000))  # ~100k characters
DEEP = "line 400: compiled module_400.py OK"  # past the marker's preview, within recall's first page


def read_log() -> str:
    """Read the build log."""
    return LOG


async def session(srv: FakeServer, rc: Lossless):
    """Two runs of one agent on one client (one event loop): read the log, then ask about it."""
    async with AsyncOpenAI(base_url=srv.openai_base_url, api_key="k", max_retries=0) as client:
        model = OpenAIChatModel("gpt-fake", provider=OpenAIProvider(openai_client=client))
        agent = Agent(model, instructions="You build things.", tools=[read_log], capabilities=[rc])
        srv.enqueue([{"type": "tool_use", "id": "call_1", "name": "read_log", "input": {}}], "The log is long.")
        first = await agent.run("read the build log")
        assert first.output == "The log is long."
        kept = [p.content for m in first.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
        assert kept == [LOG]  # the run's own history is whole: only the requests were fitted
        [handle] = set(re.findall(r"sha256:[0-9a-f]{12,}", json.dumps(srv.requests[-1].body["messages"])))
        srv.enqueue([{"type": "tool_use", "id": "call_2", "name": "recall", "input": {"handle": handle}}], "Fine.")
        second = await agent.run("what does line 400 say?", message_history=first.all_messages())
        assert second.output == "Fine."


def test_an_agent_stays_valid_and_small_and_recall_brings_the_log_back(tmp_path):
    rc = Lossless(window=30_000, max_output=4_000, store=str(tmp_path))
    with FakeServer() as srv:
        asyncio.run(session(srv, rc))
        bodies = [r.body for r in srv.requests]

    assert len(bodies) == 4
    threshold = rc.manager.budget.threshold
    for body in bodies:  # the fake answers 400 to an invalid request: four 200s mean four valid ones
        assert estimate(body["messages"]) + estimate(body.get("tools") or []) < threshold
        assert body["messages"][0]["role"] == "system" and "You build things." in json.dumps(body["messages"][0])
        assert {t["function"]["name"] for t in body["tools"]} == {"read_log", "recall"}
    assert DEEP not in json.dumps(bodies[1])
    recalled = [m for m in bodies[-1]["messages"] if m.get("tool_call_id") == "call_2"]
    assert recalled and DEEP in json.dumps(recalled[0]["content"])
    assert rc.last is not None and rc.last.state.calibrated  # by the usage the model reported


def test_requests_and_responses_become_rounds():
    neutral = from_pydantic_ai([
        ModelRequest(parts=[UserPromptPart(content="hi")]),
        ModelResponse(parts=[TextPart(content="looking"), ToolCallPart(tool_name="x", args={"k": 1}, tool_call_id="a"),
                             ToolCallPart(tool_name="y", args='{"k": 2}', tool_call_id="b")]),
        ModelRequest(parts=[ToolReturnPart(tool_name="x", content="1", tool_call_id="a"),
                            ToolReturnPart(tool_name="y", content={"v": 2}, tool_call_id="b")]),
    ])
    validate(neutral, "openai")
    assert [m.role for m in neutral] == ["user", "assistant", "user"]
    assert [u.input for u in neutral[1].tool_uses] == [{"k": 1}, {"k": 2}]
    assert [r.tool_use_id for r in neutral[2].tool_results] == ["a", "b"]


def test_thinking_reaches_anthropic_unchanged_next_to_its_tool_call(tmp_path):
    """Through pydantic-ai's Anthropic model and the Anthropic path of the fake server: the
    thinking block before a call is sent again byte for byte while the log beside it is moved out."""
    from anthropic import AsyncAnthropic
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    rc = Lossless(window=30_000, max_output=4_000, store=str(tmp_path))
    thinking = {"type": "thinking", "thinking": "the log will be long; read it once", "signature": "EqQBCkYIBxgCKkD="}

    async def go(srv: FakeServer) -> None:
        async with AsyncAnthropic(base_url=srv.base_url, api_key="k", max_retries=0) as client:
            model = AnthropicModel("claude-fake", provider=AnthropicProvider(anthropic_client=client))
            agent = Agent(model, instructions="You build things.", tools=[read_log], capabilities=[rc])
            srv.enqueue([thinking, {"type": "tool_use", "id": "toolu_1", "name": "read_log", "input": {}}], "Long.")
            assert (await agent.run("read the build log")).output == "Long."

    with FakeServer() as srv:
        asyncio.run(go(srv))
        body = srv.requests[-1].body
    assert rc.last is not None and rc.last.fired  # the log was moved out of this request
    assert estimate(body["messages"]) < rc.manager.budget.threshold
    call, results = body["messages"][1:3]
    assert call["role"] == "assistant" and call["content"][0] == thinking  # byte for byte, first, before its call
    assert call["content"][1]["type"] == "tool_use" and results["content"][0]["tool_use_id"] == "toolu_1"
    assert "persisted-output" in json.dumps(results)


@settings(max_examples=30)
@given(histories(max_rounds=8))
def test_any_valid_history_survives_pydantic_ai_messages(history):
    """A valid history written as pydantic-ai messages and read back is still valid, with the
    same calls, the same results (text) and error flags, one message each."""
    from lossless.adapters.pydantic_ai import _to_pydantic_ai
    from lossless.messages import result_text, tool_names

    names = tool_names(history)
    back = from_pydantic_ai([_to_pydantic_ai(m, {}, names) for m in history])
    validate(back, "openai")
    assert [m.role for m in back] == [m.role for m in history]
    assert [(u.id, u.name, dict(u.input)) for m in back for u in m.tool_uses] == \
        [(u.id, u.name, dict(u.input)) for m in history for u in m.tool_uses]
    assert [(result_text(r), r.is_error) for m in back for r in m.tool_results] == \
        [(result_text(r), r.is_error) for m in history for r in m.tool_results]
