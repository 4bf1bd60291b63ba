"""ContextManager with a model: auto-compact, manual compact, reactive recovery, the
breaker handing over to the fallback, and a soak replay of every shared session."""

from __future__ import annotations

import pytest

from lossless import ContextManager, validate
from lossless.config import ContextConfig
from lossless.dialects.detect import read_any
from lossless.errors import ContextTooLong, ProviderHTTPError
from lossless.markers import handles_in
from lossless.messages import Message, Text, ToolResult, ToolUse, block_text
from lossless.providers.anthropic import AnthropicProvider
from lossless.replay import replay
from lossless.store import ArtifactStore
from lossless.testing import FakeProvider, FakeServer
from conftest import DATA, data_path


def round_msgs(i: int, size: int) -> list[Message]:
    tid = f"toolu_{i:05d}"
    return [
        Message(role="assistant", content=(Text(text=f"step {i}"), ToolUse(id=tid, name="Bash", input={"command": f"cat f{i}"}))),
        Message(role="user", content=(ToolResult(tool_use_id=tid, content=f"line {i} of the output\n" * size),)),
    ]


def grow(cm, rounds: int, size: int = 60, start: list[Message] | None = None):
    sent = start or [Message(role="user", content=(Text(text="Fix the bug. Never touch the public API."),))]
    views = []
    for i in range(rounds):
        view = cm.prepare(sent + round_msgs(i, size))
        validate(view.neutral)
        sent = view.neutral
        views.append(view)
    return sent, views


def test_auto_compact_with_a_model_summary(tmp_path):
    fake = FakeProvider()
    cfg = ContextConfig(window=16_000, micro_trigger_fraction=5.0, snip_trigger_fraction=5.0)  # leave it to the LLM
    cm = ContextManager(config=cfg, store=tmp_path, transcript=False, provider=fake, session_notes=False)
    sent, views = grow(cm, 40)
    fired = [e.stage for v in views for e in v.fired]
    assert "autocompact" in fired or "collapse" in fired
    assert "fallback_summary" not in fired  # the model's summaries sufficed: no fallback
    assert all(v.state.tokens <= cfg.budget.threshold for v in views)
    assert cm.llm_calls == len(fake.requests) > 0
    store = ArtifactStore(tmp_path)
    for h in {h for m in sent for b in m.content for h in handles_in(block_text(b))}:
        assert store.get(h)


def test_breaker_opens_after_three_failures_and_fallback_takes_over(tmp_path):
    # A 400 is not transient: the provider is up, the summaries fail (a 500 would pause them instead).
    fake = FakeProvider(script=[ProviderHTTPError("boom", status=400)] * 50)
    cfg = ContextConfig(window=16_000, micro_trigger_fraction=5.0, snip_trigger_fraction=5.0)
    cm = ContextManager(config=cfg, store=tmp_path, transcript=False, provider=fake, session_notes=False)
    cm.collapser = None
    cm.stages = tuple(s for s in cm.stages if s[0] != "collapse")
    sent, views = grow(cm, 200)
    auto = [e for v in views for e in v.events if e.stage == "autocompact"]
    failures = [e for e in auto if not e.fired and "boom" in e.detail]
    assert len(failures) == 3  # then the breaker is open: no more calls
    assert cm.compactor.is_open
    assert any(e.stage == "fallback_summary" and e.fired for v in views for e in v.events)  # the fallback took over
    assert all(v.state.tokens <= cfg.budget.threshold for v in views)
    # a manual compaction with the breaker open uses the fallback, without asking the model
    fake.script.clear()
    asked = len(fake.requests)
    view = cm.compact(sent, instructions="keep the file names")
    assert view.fired and len(fake.requests) == asked and "circuit breaker open" in view.events[-1].detail
    validate(view.neutral)


def test_manual_compact_without_a_model_uses_the_fallback(tmp_path):
    cm = ContextManager(window=64_000, store=tmp_path, transcript=False)
    sent, _ = grow(cm, 10)
    view = cm.compact(sent)
    assert [e.stage for e in view.fired] == ["fallback_summary"]
    assert view.neutral[0].text.startswith("<lossless-summary")
    validate(view.neutral)


def test_call_recovers_once_from_prompt_too_long_through_the_real_sdk(tmp_path):
    with FakeServer() as srv:
        provider = AnthropicProvider("claude-test", api_key="k", base_url=srv.base_url, max_retries=0)
        cm = ContextManager(window=200_000, store=tmp_path, transcript=False, provider=provider, session_notes=False)
        history = [Message(role="user", content=(Text(text="Summarise the logs."),))]
        for i in range(30):
            history += round_msgs(i, 200)
        srv.set_faults(max_prompt_tokens=20_000)
        response, view = cm.call(history, system="be brief", max_tokens=1000)
        assert response.text
        assert any(e.stage == "reactive" and e.fired for e in view.events)
        validate(view.neutral)
        srv.set_faults(max_prompt_tokens=10)
        with pytest.raises(ContextTooLong, match="still too long after reactive compaction"):
            cm.call(view.neutral, system="be brief", max_tokens=1000)


SESSIONS = sorted(DATA.glob("claude-code/*.jsonl")) + sorted(DATA.glob("mini-swe-agent/*.traj.json"))


@pytest.mark.parametrize("window", [32_000, 64_000])
@pytest.mark.parametrize("path", SESSIONS, ids=[p.name[:24] for p in SESSIONS])
def test_soak_replay_with_the_fake_summarizer(path, window):
    session = read_any(data_path(*path.parts[-2:]))
    report = replay(session, window, provider=FakeProvider())
    assert report.over_window_calls == 0
    assert report.invalid_requests == 0
    compactions = sum(report.stages.get(s, 0) for s in ("autocompact", "fallback_summary", "collapse", "session_memory"))
    assert compactions <= report.calls // 3 + 2  # bounded: no compaction loop
