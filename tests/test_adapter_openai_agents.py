"""The OpenAI Agents SDK adapter, run by the real SDK against a fake Responses endpoint:
every request valid, a huge tool output moved out of the context, and recall bringing it back."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

agents = pytest.importorskip("agents", reason="the OpenAI Agents SDK is not installed (pip install 'lossless[adapters]')")

from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, function_tool  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

from lossless.adapters.openai_agents import Lossless  # noqa: E402
from lossless.dialects.responses import problems_responses  # noqa: E402
from lossless.testing.responses import ResponsesServer, problem  # noqa: E402
from lossless.testing.wire import estimate  # noqa: E402

LOG = "".join(f"line {i}: compiled module_{i}.py OK\n" for i in range(3_000))  # ~100k characters


@function_tool
def read_log() -> str:
    """Read the build log."""
    return LOG


async def session(srv: ResponsesServer, rc: Lossless):
    """Two runs of one agent on one client (one event loop): read the log, then ask about it."""
    async with AsyncOpenAI(base_url=srv.openai_base_url, api_key="k", max_retries=0) as client:
        agent = Agent(name="builder", instructions="You build things.", tools=[read_log, rc.recall_tool],
                      model=OpenAIResponsesModel("gpt-fake", client))
        config = RunConfig(call_model_input_filter=rc, tracing_disabled=True)
        srv.enqueue([{"type": "thinking", "thinking": "look at the log", "signature": "gAAAA-opaque=="},
                     {"type": "tool_use", "id": "call_1", "name": "read_log", "input": {}}],
                    "The build log is long.")
        first = await Runner.run(agent, "read the build log", run_config=config, hooks=rc.hooks)
        assert first.final_output == "The build log is long."
        sent = srv.requests[-1].body["input"]
        assert any(i.get("type") == "reasoning" and i.get("encrypted_content") == "gAAAA-opaque==" for i in sent)
        [handle] = set(re.findall(r"sha256:[0-9a-f]{12,}", json.dumps(sent)))
        srv.enqueue([{"type": "tool_use", "id": "call_2", "name": "recall", "input": {"handle": handle}}],
                    "Line 0 is fine.")
        follow_up: list[Any] = [*first.to_input_list(), {"role": "user", "content": "what does line 400 say?"}]
        second = await Runner.run(agent, follow_up, run_config=config, hooks=rc.hooks)
        assert second.final_output == "Line 0 is fine."


def test_a_run_stays_valid_and_small_and_recall_brings_the_log_back(tmp_path):
    rc = Lossless(window=30_000, max_output=4_000, store=str(tmp_path))
    with ResponsesServer() as srv:
        asyncio.run(session(srv, rc))
    bodies = [r.body for r in srv.requests]
    assert len(bodies) == 4
    for body in bodies:
        assert problem(body) is None and problems_responses(body["input"]) == []
        assert estimate({k: body.get(k) for k in ("instructions", "tools", "input")}) < rc.manager.budget.threshold
        assert body["instructions"] == "You build things."
    recalled = [i for i in bodies[-1]["input"] if i.get("type") == "function_call_output" and i["call_id"] == "call_2"]
    deep = "line 400: compiled module_400.py OK"  # past the marker's preview, within recall's first page
    assert deep not in json.dumps(bodies[1]) and recalled and deep in recalled[0]["output"]
    assert rc.last is not None and rc.last.state.tokens < rc.last.state.threshold
    assert rc.last.state.calibrated  # the hooks handed each response's usage to the manager


def test_without_lossless_the_same_run_sends_the_whole_log(tmp_path):
    # The baseline the test above is measured against: the SDK alone sends the log every call.
    async def alone(srv: ResponsesServer) -> None:
        async with AsyncOpenAI(base_url=srv.openai_base_url, api_key="k", max_retries=0) as client:
            agent = Agent(name="builder", instructions="You build things.", tools=[read_log],
                          model=OpenAIResponsesModel("gpt-fake", client))
            srv.enqueue([{"type": "tool_use", "id": "call_1", "name": "read_log", "input": {}}], "Long.")
            await Runner.run(agent, "read the build log", run_config=RunConfig(tracing_disabled=True))

    with ResponsesServer() as srv:
        asyncio.run(alone(srv))
    assert LOG in json.dumps(srv.requests[-1].body["input"], ensure_ascii=False).replace("\\n", "\n")


def test_on_chat_completions_the_same_filter_keeps_fake_server_requests_valid(tmp_path):
    """The SDK keeps Responses items whatever the model's API: on its Chat Completions model,
    against lossless's FakeServer (which answers 400 to an invalid request), the filter holds."""
    from agents import OpenAIChatCompletionsModel

    from lossless.testing import FakeServer

    rc = Lossless(window=30_000, max_output=4_000, store=str(tmp_path))

    async def go(srv: FakeServer) -> None:
        async with AsyncOpenAI(base_url=srv.openai_base_url, api_key="k", max_retries=0) as client:
            agent = Agent(name="builder", instructions="You build things.", tools=[read_log, rc.recall_tool],
                          model=OpenAIChatCompletionsModel("gpt-fake", client))
            config = RunConfig(call_model_input_filter=rc, tracing_disabled=True)
            srv.enqueue([{"type": "tool_use", "id": "call_1", "name": "read_log", "input": {}}], "Long.")
            first = await Runner.run(agent, "read the build log", run_config=config, hooks=rc.hooks)
            [handle] = set(re.findall(r"sha256:[0-9a-f]{12,}", json.dumps(srv.requests[-1].body["messages"])))
            srv.enqueue([{"type": "tool_use", "id": "call_2", "name": "recall", "input": {"handle": handle}}], "Fine.")
            follow_up: list[Any] = [*first.to_input_list(), {"role": "user", "content": "and line 400?"}]
            assert (await Runner.run(agent, follow_up, run_config=config, hooks=rc.hooks)).final_output == "Fine."

    with FakeServer() as srv:
        asyncio.run(go(srv))
        bodies = [r.body for r in srv.requests]
    assert len(bodies) == 4
    for body in bodies:
        assert estimate(body["messages"]) + estimate(body.get("tools") or []) < rc.manager.budget.threshold
    recalled = [m for m in bodies[-1]["messages"] if m.get("tool_call_id") == "call_2"]
    assert recalled and "line 400: compiled module_400.py OK" in json.dumps(recalled[0]["content"])
