"""The calls README.md and docs/ show, as a user's code makes them, for the type checker (not a test module).

``tests/test_types.py`` runs mypy over the package and this file: a change to a public
signature that would break these calls — or let a wrong one through as ``Any`` — fails
the suite.  Nothing here runs; each function only has to type-check.
"""

from __future__ import annotations

from typing import Any

from lossless import ContextManager, Message, Prepared, recall
from lossless.adapters.langchain import LosslessMiddleware
from lossless.adapters.openai_agents import Lossless as AgentsLossless
from lossless.adapters.pydantic_ai import Lossless as PydanticLossless
from lossless.adapters.responses import RECALL_FUNCTION, ResponsesContext
from lossless.compaction import COMPACT_TOOL
from lossless.dialects.anthropic import message_to_dict
from lossless.dialects.openai import to_openai
from lossless.memory import MemoryStore
from lossless.providers import AnthropicProvider, OpenAIProvider, Response
from lossless.proxy import ProxyServer, ProxySettings
from lossless.tools import DEFINITIONS, run_recall

SYSTEM = "You are a careful engineer."
TOOLS: list[dict[str, Any]] = [{"name": "bash", "description": "run a command", "input_schema": {"type": "object"}}]


def run_tools(response: Response) -> list[dict[str, Any]]:
    return []


def prepare_loop(usage: Any) -> list[dict[str, Any]]:
    cm = ContextManager(window=200_000, max_output=32_000)
    history: list[dict[str, Any]] = [{"role": "user", "content": "Find and fix the flaky test."}]
    view: Prepared = cm.prepare(history, system=SYSTEM, tools=[*TOOLS, *DEFINITIONS])
    cm.observe(usage)
    tokens: int = view.state.tokens
    assert tokens >= 0 and not view.state.blocking
    return list(view.messages)


def call_loop(history: list[dict[str, Any]]) -> str:
    cm = ContextManager(window=200_000, max_output=32_000, provider=AnthropicProvider("claude-sonnet-4-6"),
                        memory=MemoryStore())
    response, view = cm.call(history, system=SYSTEM, tools=TOOLS)
    assistant = message_to_dict(Message(role="assistant", content=response.content))
    history = view.messages + [assistant, *run_tools(response)]
    if response.stop_reason != "tool_use":
        history = cm.compact(history, instructions="keep the API decisions").messages
    chat: list[dict[str, Any]] = to_openai([Message(role="assistant", content=response.content)])
    return response.text + str(len(history) + len(chat))


def openai_compatible() -> ContextManager:
    provider = OpenAIProvider("qwen3", base_url="http://127.0.0.1:11434/v1")
    return ContextManager(window=32_000, dialect="openai", provider=provider)


def recall_page(cm: ContextManager, handle: str) -> str:
    return recall(handle) + run_recall({"handle": handle}, cm.store) + str(COMPACT_TOOL["name"])


def proxy() -> str:
    with ProxyServer(ProxySettings(upstream="http://127.0.0.1:8080", window=32_000)) as server:
        stats: dict[str, Any] = server.stats()
        return server.base_url + str(len(stats))


def responses(items: list[dict[str, Any]], usage: Any) -> str:
    rc = ResponsesContext(window=128_000, max_output=16_000)
    view = rc.prepare(items, instructions=SYSTEM, tools=[*TOOLS, RECALL_FUNCTION])
    rc.observe(usage)
    return rc.run_tool("recall", '{"handle": "sha256:0"}') + str(len(view.messages))


def openai_agents() -> Any:
    rc = AgentsLossless(window=128_000, max_output=16_000)
    return rc.recall_tool, rc.hooks


def frameworks() -> tuple[LosslessMiddleware, PydanticLossless]:
    return (LosslessMiddleware(window=128_000, max_output=16_000),
            PydanticLossless(window=128_000, max_output=16_000))


def wrong_calls_stay_errors(cm: ContextManager) -> None:
    """Each line is an error the checker must report; ``warn_unused_ignores`` turns an ignore
    that matches nothing (the name became ``Any``, the check went blind) into a failure."""
    ContextManager(windw=200_000)  # type: ignore[call-arg]  # a typo in a keyword
    ProxySettings(window="200k")  # type: ignore[arg-type]  # a string for a token count
    cm.prepare([{"role": "user", "content": "hi"}], tools="bash")  # type: ignore[arg-type]  # tools is a list
    ResponsesContext(window=128_000).prepare(items=7)  # type: ignore[arg-type]  # items are a list or a string


def adapter_keywords_are_checked() -> None:
    ResponsesContext(window=128_000, max_outpt=16_000)  # type: ignore[call-arg]  # a typo in a keyword
    AgentsLossless(window="128k")  # type: ignore[arg-type]  # a string for a token count
    LosslessMiddleware(dialect="anthropc")  # type: ignore[arg-type]  # not a dialect
    PydanticLossless(window=128_000, unseen_tokens=None)  # type: ignore[arg-type]  # a count, not None
