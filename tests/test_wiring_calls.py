"""What ``call()``, ``compact()``, ``recover()`` and ``run_tool()`` do with a model, wired
into the manager: the agent's own calls are never metered, memory extraction runs after a
quiet period (not only at close), and real SDK requests are all valid."""

from __future__ import annotations

import pytest

from lossless import ContextManager, validate
from lossless.config import ContextConfig
from lossless.memory import MemoryStore
from lossless.messages import Message, Text, ToolResult, ToolUse
from lossless.providers.anthropic import AnthropicProvider
from lossless.providers.base import Response
from lossless.providers.openai import OpenAIProvider
from lossless.testing import FakeProvider, FakeServer

OPS = '{"operations": [{"op": "add", "name": "tabs", "type": "user", "description": "prefers tabs", "body": "Use tabs."}]}'


def said(text: str, stop: str = "end_turn") -> Response:
    return Response(content=(Text(text=text),), stop_reason=stop)


def test_extraction_runs_once_the_burst_is_over_not_only_at_close(tmp_path):
    now = [0.0]
    store = MemoryStore(tmp_path / "memory")
    fake = FakeProvider(script=[said("Noted: tabs."), OPS])
    cm = ContextManager(window=200_000, store=tmp_path, transcript=False, memory=store, provider=fake,
                        session_notes=False)
    cm.extractor.clock = lambda: now[0]
    history = [{"role": "user", "content": "Always use tabs, please."}]
    _, view = cm.call(history, max_tokens=100)
    now[0] += 120.0  # the user takes two minutes to answer: the first burst is over
    history = view.messages + [{"role": "assistant", "content": "Noted: tabs."}, {"role": "user", "content": "Thanks."}]
    cm.call(history, max_tokens=100)
    # the extraction ran before the next call; the new memory then competes for the new request
    assert [r.purpose for r in fake.requests] == ["chat", "memory-extract", "memory-select", "chat"]
    assert store.get("tabs").body == "Use tabs."
    assert cm.llm_calls == 2  # the extraction and the selection, not the agent's two calls
    cm.close()


def test_a_turn_with_tool_use_never_triggers_extraction(tmp_path):
    store = MemoryStore(tmp_path / "memory")
    use = Response(content=(ToolUse(id="toolu_1", name="Bash", input={"command": "ls"}),), stop_reason="tool_use")
    fake = FakeProvider(script=[use])
    cm = ContextManager(window=200_000, store=tmp_path, transcript=False, memory=store, provider=fake,
                        session_notes=False)
    cm.extractor.debounce = 0
    cm.call([{"role": "user", "content": "Always use tabs, please."}], max_tokens=100)
    cm.close()
    assert [r.purpose for r in fake.requests] == ["chat"] and cm.llm_calls == 0


def rnd(i: int, size: int) -> list[Message]:
    tid = f"toolu_{i:05d}"
    return [Message(role="assistant", content=(Text(text=f"step {i}"), ToolUse(id=tid, name="Bash", input={"command": f"cat f{i}.py"}))),
            Message(role="user", content=(ToolResult(tool_use_id=tid, content=f"line {i} def f{i}(): pass\n" * size),))]


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_long_loop_through_the_real_sdk_meters_only_losslesss_calls(tmp_path, api):
    with FakeServer() as srv:
        if api == "anthropic":
            provider = AnthropicProvider("claude-x", api_key="k", base_url=srv.base_url, max_retries=0)
        else:
            provider = OpenAIProvider("gpt-x", api_key="k", base_url=srv.openai_base_url, max_retries=0)
        cfg = ContextConfig(window=32_000, max_output=4_000, micro_trigger_fraction=5.0, snip_trigger_fraction=5.0)
        cm = ContextManager(config=cfg, store=tmp_path, provider=provider, memory=MemoryStore(tmp_path / "memory"))
        history = [Message(role="user", content=(Text(text="Fix the flaky test. I prefer pytest -x."),))]
        stages: set[str] = set()
        for turn in range(30):
            response, view = cm.call(history, system="be brief", max_tokens=300)
            validate(view.neutral)
            assert view.state.tokens < cfg.budget.blocking
            stages |= {e.stage for e in view.events if e.fired}
            history = [*view.neutral, Message(role="assistant", content=response.content),
                       Message(role="user", content=(Text(text=f"Go on with step {turn}."),)), *rnd(2 * turn, 80),
                       *rnd(2 * turn + 1, 80)]
        cm.close()
        bodies = srv.requests
        assert "autocompact" in stages, stages  # snip is off here (its trigger at 5×): the model makes room
        assert cm.provider.failures == 0  # the server refuses what the real API refuses: nothing was refused
        assert cm.llm_calls == len(bodies) - 30 > 0  # every request but the agent's 30 is metered
        assert set(cm.provider.by_purpose) <= {"summary", "session-notes", "memory-extract", "memory-select"}
        assert 0 < cm.llm_cost < 10 * sum(len(str(r.body)) for r in bodies)
        provider.close()
