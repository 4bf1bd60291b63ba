"""The LangChain v1 middleware, run by a real ``create_agent`` agent and ``ChatOpenAI`` against
lossless's fake server: every request valid and under the threshold, recall bringing the log back."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings

pytest.importorskip("langchain.agents", reason="LangChain is not installed (pip install 'lossless[adapters]')")
pytest.importorskip("langchain_openai", reason="langchain-openai is not installed (pip install 'lossless[adapters]')")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

from lossless.adapters.langchain import LosslessMiddleware, from_langchain  # noqa: E402
from lossless.rounds import validate  # noqa: E402
from lossless.testing import FakeServer  # noqa: E402
from lossless.testing.wire import estimate  # noqa: E402
from strategies import histories  # noqa: E402

LOG = "".join(f"line {i}: compiled module_{i}.py OK\n" for i in range(3_000))  # ~100k characters
DEEP = "line 400: compiled module_400.py OK"  # past the marker's preview, within recall's first page


@tool
def read_log() -> str:
    """Read the build log."""
    return LOG


def test_an_agent_stays_valid_and_small_and_recall_brings_the_log_back(tmp_path):
    middleware = LosslessMiddleware(window=30_000, max_output=4_000, store=str(tmp_path))
    with FakeServer() as srv:
        model = ChatOpenAI(model="gpt-fake", base_url=srv.openai_base_url, api_key="k", max_retries=0)
        agent = create_agent(model, tools=[read_log], system_prompt="You build things.", middleware=[middleware])
        srv.enqueue([{"type": "tool_use", "id": "call_1", "name": "read_log", "input": {}}], "The log is long.")
        state = agent.invoke({"messages": [{"role": "user", "content": "read the build log"}]})
        assert state["messages"][-1].content == "The log is long."
        assert LOG in [m.content for m in state["messages"]]  # the agent's own state keeps everything
        [handle] = set(re.findall(r"sha256:[0-9a-f]{12,}", json.dumps(srv.requests[-1].body["messages"])))

        srv.enqueue([{"type": "tool_use", "id": "call_2", "name": "recall", "input": {"handle": handle}}], "Fine.")
        state = agent.invoke({"messages": [*state["messages"], HumanMessage("what does line 400 say?")]})
        assert state["messages"][-1].content == "Fine."
        bodies = [r.body for r in srv.requests]

    assert len(bodies) == 4
    threshold = middleware.manager.budget.threshold
    for body in bodies:  # the fake answers 400 to an invalid request: four 200s mean four valid ones
        assert estimate(body["messages"]) + estimate(body.get("tools") or []) < threshold
        assert body["messages"][0] == {"role": "system", "content": "You build things."}
        assert {t["function"]["name"] for t in body["tools"]} == {"read_log", "recall"}
    assert DEEP not in json.dumps(bodies[1])
    recalled = [m for m in bodies[-1]["messages"] if m.get("tool_call_id") == "call_2"]
    assert recalled and DEEP in recalled[0]["content"]
    assert middleware.last is not None and middleware.last.state.calibrated  # by the usage the model reported


def test_untouched_messages_are_passed_as_the_same_objects(tmp_path):
    middleware = LosslessMiddleware(window=200_000, store=str(tmp_path))
    seen = []

    class Request:
        def __init__(self, messages):
            self.messages, self.system_message, self.tools = messages, None, []

        def override(self, messages):
            seen.append(messages)
            return self

    history = [HumanMessage("hi"), AIMessage("", tool_calls=[{"id": "c1", "name": "bash", "args": {}}]),
               ToolMessage("ok", tool_call_id="c1"), AIMessage("done")]
    middleware.wrap_model_call(Request(history), lambda r: r)
    assert all(a is b for a, b in zip(seen[-1], history)) and len(seen[-1]) == len(history)
    longer = [*history, HumanMessage("more")]
    middleware.wrap_model_call(Request(longer), lambda r: r)
    assert all(a is b for a, b in zip(seen[-1], longer))


def test_tool_messages_group_into_rounds():
    neutral = from_langchain([HumanMessage("hi"),
                              AIMessage("", tool_calls=[{"id": "a", "name": "x", "args": {}},
                                                        {"id": "b", "name": "y", "args": {"k": 1}}]),
                              ToolMessage("1", tool_call_id="a"), ToolMessage("2", tool_call_id="b", status="error")])
    validate(neutral, "openai")
    assert [m.role for m in neutral] == ["user", "assistant", "user"]
    assert [r.is_error for r in neutral[2].tool_results] == [False, True]


def test_thinking_reaches_anthropic_unchanged_next_to_its_tool_call(tmp_path):
    langchain_anthropic = pytest.importorskip("langchain_anthropic")
    middleware = LosslessMiddleware(window=30_000, max_output=4_000, store=str(tmp_path))
    thinking = {"type": "thinking", "thinking": "the log will be long; read it once", "signature": "EqQBCkYIBxgCKkD="}
    with FakeServer() as srv:
        model = langchain_anthropic.ChatAnthropic(model="claude-fake", base_url=srv.base_url, api_key="k",
                                                  max_retries=0, max_tokens=4_000)
        agent = create_agent(model, tools=[read_log], system_prompt="You build things.", middleware=[middleware])
        srv.enqueue([thinking, {"type": "tool_use", "id": "toolu_1", "name": "read_log", "input": {}}], "Long.")
        state = agent.invoke({"messages": [{"role": "user", "content": "read the build log"}]})
        assert state["messages"][-1].content == "Long."
        body = srv.requests[-1].body

    assert middleware.last is not None and middleware.last.fired  # the log was moved out of this request
    assert estimate(body["messages"]) < middleware.manager.budget.threshold
    call, results = body["messages"][1:3]
    assert call["role"] == "assistant" and call["content"][0] == thinking  # byte for byte, first, before its call
    assert call["content"][1]["type"] == "tool_use" and results["content"][0]["tool_use_id"] == "toolu_1"
    assert "persisted-output" in json.dumps(results)


@settings(max_examples=30)
@given(histories(max_rounds=8))
def test_any_valid_history_survives_langchain_messages(history):
    """A valid history written as LangChain messages and read back is still valid, with the
    same calls, the same results (text) and the same rounds."""
    from lossless.adapters.langchain import _to_langchain
    from lossless.messages import result_text
    from lossless.rounds import group_rounds

    lc = [m for n in history for m in _to_langchain(n, {})]
    back = from_langchain(lc)
    validate(back, "openai")
    assert [u.id for m in back for u in m.tool_uses] == [u.id for m in history for u in m.tool_uses]
    assert [(result_text(r), r.is_error) for m in back for r in m.tool_results] == \
        [(result_text(r), r.is_error) for m in history for r in m.tool_results]
    assert len(group_rounds(back)) >= len([m for m in history if m.role == "assistant"])
