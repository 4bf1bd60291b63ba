"""docs/frameworks.md's snippets, run as written: each framework's real agent (or the
OpenAI SDK) against lossless's fake servers, with ``model``, ``TOOLS``, ``task``… defined first."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from conftest import ROOT
from lossless.testing import FakeServer
from lossless.testing.responses import ResponsesServer


def snippets() -> dict[str, str]:
    """The page's Python blocks, keyed by the adapter module each imports."""
    text = (ROOT / "docs" / "frameworks.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    found = {}
    for block in blocks:
        imported = re.search(r"lossless\.adapters\.(\w+)", block)
        assert imported, f"a snippet that imports no adapter: {block!r}"
        found[imported.group(1)] = block
    return found


def test_the_section_has_one_snippet_per_adapter_and_each_is_at_most_five_lines():
    found = snippets()
    assert set(found) == {"langchain", "pydantic_ai", "openai_agents", "responses"}
    for name, code in found.items():
        lines = [line for line in code.splitlines() if line.strip() and not line.startswith(("from ", "import "))]
        assert len(lines) <= 5, (name, lines)


def test_langchain_snippet(store_dir):
    pytest.importorskip("langchain.agents", reason="needs pip install 'lossless[adapters]'")
    langchain_openai = pytest.importorskip("langchain_openai", reason="needs pip install 'lossless[adapters]'")
    with FakeServer() as srv:
        srv.enqueue("Done.")
        model = langchain_openai.ChatOpenAI(model="gpt-fake", base_url=srv.openai_base_url, api_key="k", max_retries=0)
        ns = {"model": model, "TOOLS": [], "task": "say done"}
        exec(snippets()["langchain"], ns)
        assert ns["state"]["messages"][-1].content == "Done."
        assert [t["function"]["name"] for t in srv.requests[-1].body["tools"]] == ["recall"]


def test_pydantic_ai_snippet(store_dir):
    pytest.importorskip("pydantic_ai", reason="needs pip install 'lossless[adapters]'")
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    with FakeServer() as srv:
        srv.enqueue("Done.")

        async def run() -> dict:
            async with AsyncOpenAI(base_url=srv.openai_base_url, api_key="k", max_retries=0) as client:
                model = OpenAIChatModel("gpt-fake", provider=OpenAIProvider(openai_client=client))
                code = snippets()["pydantic_ai"].replace("agent.run_sync(task)", "await agent.run(task)")
                ns: dict[str, Any] = {"model": model, "TOOLS": [], "task": "say done"}
                exec(compile(f"async def _snippet():\n{_indent(code)}\n    return locals()", "docs/frameworks.md", "exec"), ns)
                return await ns["_snippet"]()

        ns = asyncio.run(run())
        assert ns["result"].output == "Done."
        assert [t["function"]["name"] for t in srv.requests[-1].body["tools"]] == ["recall"]


def test_openai_agents_snippet(store_dir):
    agents = pytest.importorskip("agents", reason="needs pip install 'lossless[adapters]'")
    from openai import AsyncOpenAI

    with ResponsesServer() as srv:
        srv.enqueue("Done.")

        async def run() -> dict:
            async with AsyncOpenAI(base_url=srv.openai_base_url, api_key="k", max_retries=0) as client:
                agents.set_default_openai_client(client, use_for_tracing=False)
                agents.set_tracing_disabled(True)  # no trace export: nothing leaves the machine
                code = snippets()["openai_agents"].replace("Runner.run_sync(", "await Runner.run(")
                ns: dict[str, Any] = {"TOOLS": [], "task": "say done"}
                exec(compile(f"async def _snippet():\n{_indent(code)}\n    return locals()", "docs/frameworks.md", "exec"), ns)
                return await ns["_snippet"]()

        ns = asyncio.run(run())
        assert ns["result"].final_output == "Done."
        assert [t["name"] for t in srv.requests[-1].body["tools"]] == ["recall"]


def test_responses_snippet(store_dir):
    from openai import OpenAI

    with ResponsesServer() as srv, OpenAI(base_url=srv.openai_base_url, api_key="k", max_retries=0) as client:
        srv.enqueue("Done.")
        items = [{"role": "user", "content": "say done"}]
        ns = {"client": client, "items": items, "INSTRUCTIONS": "Be brief.", "TOOLS": [], "MODEL": "gpt-fake"}
        exec(snippets()["responses"], ns)
        assert ns["response"].output_text == "Done."
        assert srv.requests[-1].body["input"] == items
        assert ns["rc"].manager.calibrator.ratio is not None  # observe() took the reported usage


def _indent(code: str) -> str:
    return "\n".join("    " + line for line in code.splitlines())
