"""The adapters budget each call by its model's window when not given one: LangChain from the chat
model's profile, pydantic-ai from its model profile and the models' data, the OpenAI Agents SDK
and ``ResponsesContext`` from the model's name — real frameworks against lossless's fake servers."""

from __future__ import annotations

import asyncio

import pytest

from lossless import modelinfo

pytest.importorskip("genai_prices")
pytest.importorskip("langchain.agents", reason="LangChain is not installed (pip install 'lossless[adapters]')")
pytest.importorskip("langchain_openai")
pytest.importorskip("pydantic_ai")
pytest.importorskip("agents")

from agents import Agent, OpenAIResponsesModel, RunConfig, Runner  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from pydantic_ai import Agent as PydanticAgent  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from lossless.adapters.langchain import LosslessMiddleware  # noqa: E402
from lossless.adapters.openai_agents import Lossless as AgentsLossless  # noqa: E402
from lossless.adapters.pydantic_ai import Lossless as PydanticLossless  # noqa: E402
from lossless.adapters.responses import ResponsesContext  # noqa: E402
from lossless.testing import FakeServer  # noqa: E402
from lossless.testing.responses import ResponsesServer  # noqa: E402

LOG = "".join(f"line {i}: compiled module_{i}.py OK\n" for i in range(1_200))  # ~40k characters: kept whole
# by a large window (under the size at which a tool result is stored whatever the window), not by a 12k one


@tool
def read_log() -> str:
    """Read the build log."""
    return LOG


def _langchain_run(srv: FakeServer, middleware: LosslessMiddleware, model: ChatOpenAI) -> list[dict]:
    agent = create_agent(model, tools=[read_log], system_prompt="You build things.", middleware=[middleware])
    srv.enqueue([{"type": "tool_use", "id": "call_1", "name": "read_log", "input": {}}], "The log is long.")
    agent.invoke({"messages": [{"role": "user", "content": "read the build log"}]})
    return [r.body for r in srv.requests]


def test_langchain_budgets_by_the_chat_models_profile(tmp_path):
    with FakeServer() as srv:
        known = ChatOpenAI(model="gpt-4.1", base_url=srv.openai_base_url, api_key="k", max_retries=0)
        middleware = LosslessMiddleware(store=str(tmp_path / "a"))
        bodies = _langchain_run(srv, middleware, known)
    assert known.profile is not None  # langchain-openai's own data for the model
    assert middleware.manager.config.window == known.profile["max_input_tokens"] > 200_000
    assert _sent_whole(bodies[-1])  # a 1M window has room for the log: nothing moved out


def test_langchain_a_small_profile_window_compacts_and_window_overrides_it(tmp_path):
    with FakeServer() as srv:
        small = ChatOpenAI(model="my-local-model", base_url=srv.openai_base_url, api_key="k", max_retries=0,
                           profile={"max_input_tokens": 12_000})
        by_profile = LosslessMiddleware(store=str(tmp_path / "a"))
        bodies = _langchain_run(srv, by_profile, small)
        told = LosslessMiddleware(window=300_000, store=str(tmp_path / "b"))
        told_bodies = _langchain_run(srv, told, small)
    assert by_profile.manager.config.window == 12_000 and not _sent_whole(bodies[-1])
    assert told.manager.config.window == 300_000 and _sent_whole(told_bodies[-1])


def _sent_whole(body: dict) -> bool:
    return LOG in [m.get("content") for m in body["messages"]]


async def _pydantic_run(srv: FakeServer, rc: PydanticLossless, name: str, **profile: int) -> OpenAIChatModel:
    async with AsyncOpenAI(base_url=srv.openai_base_url, api_key="k", max_retries=0) as client:
        model = OpenAIChatModel(name, provider=OpenAIProvider(openai_client=client), profile=profile or None)
        await PydanticAgent(model, capabilities=[rc]).run("hello")
    return model


# pydantic-ai warns of a model its provider retires (GPT-5 from 2026-12-11): its notice, not this test's matter
@pytest.mark.filterwarnings("ignore:Model .* is deprecated by its provider")
def test_pydantic_ai_budgets_by_the_smaller_of_its_profile_and_the_data(tmp_path):
    with FakeServer() as srv:
        gpt5 = PydanticLossless(store=str(tmp_path / "a"))
        model = asyncio.run(_pydantic_run(srv, gpt5, "gpt-5"))
        local = PydanticLossless(store=str(tmp_path / "b"))
        asyncio.run(_pydantic_run(srv, local, "my-local-model", context_window=24_000))
    # pydantic-ai's profile says 400k (input and output together); GPT-5 takes 272k of input.
    assert model.context_window is not None and modelinfo.context_window("gpt-5") is not None
    assert gpt5.manager.config.window == min(model.context_window, modelinfo.context_window("gpt-5"))
    assert gpt5.manager.config.window < model.context_window
    assert local.manager.config.window == 24_000


def test_openai_agents_budget_by_the_agents_model(tmp_path):
    rc = AgentsLossless(store=str(tmp_path))

    async def run(srv: ResponsesServer) -> None:
        async with AsyncOpenAI(base_url=srv.openai_base_url, api_key="k", max_retries=0) as client:
            agent = Agent(name="a", instructions="Be brief.", model=OpenAIResponsesModel("gpt-4o", client))
            await Runner.run(agent, "hello", run_config=RunConfig(call_model_input_filter=rc, tracing_disabled=True))

    with ResponsesServer() as srv:
        asyncio.run(run(srv))
    assert rc.manager.config.window == modelinfo.context_window("gpt-4o") is not None


def test_responses_context_follows_the_model_it_is_told_and_keeps_a_given_window(tmp_path):
    rc = ResponsesContext(store=str(tmp_path / "a"))
    rc.prepare("hello", model="gpt-5")
    assert rc.manager.config.window == modelinfo.context_window("gpt-5")
    rc.prepare([{"role": "user", "content": "hello"}], model="gpt-4o")
    assert rc.manager.config.window == modelinfo.context_window("gpt-4o")
    fixed = ResponsesContext(window=50_000, store=str(tmp_path / "b"))
    fixed.prepare("hello", model="gpt-5")
    assert fixed.manager.config.window == 50_000
