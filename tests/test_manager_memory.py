"""Memories reach the context through the newest user request, never earlier messages."""

from __future__ import annotations

import json

from lossless import ContextManager
from lossless.memory import MemoryStore


def test_relevant_memories_attach_to_the_new_request_once(tmp_path):
    store = MemoryStore(tmp_path / "memory")
    store.add(name="tabs", description="the user wants tabs for indentation", type="user",
              body="Indent Python with tabs, never spaces.")
    store.add(name="db", description="integration tests use a real database", type="feedback",
              body="Do not mock the database in tests.")
    cm = ContextManager(window=200_000, store=tmp_path, transcript=False, memory=store)
    history = [{"role": "user", "content": "Reformat the module: which indentation style?"}]
    view = cm.prepare(history)
    sent = json.dumps(view.messages)
    assert "Indent Python with tabs" in sent and set(view.messages[0]["content"][-1]) == {"type", "text"}
    assert history[0]["content"].startswith("Reformat")  # the caller's message is not modified
    # the next request gets what is relevant to it, and tabs is not injected again
    history2 = view.messages + [{"role": "assistant", "content": "Tabs."},
                                {"role": "user", "content": "Now write tests; should I mock the database? Also indentation?"}]
    view2 = cm.prepare(history2)
    assert view2.messages[:2] == view.messages + [history2[1]]  # the prefix is untouched
    last = json.dumps(view2.messages[-1])
    assert "Do not mock the database" in last and "Indent Python with tabs" not in last


def test_a_turn_without_tool_use_proposes_memories_through_call(tmp_path):
    from lossless.providers.base import Response
    from lossless.messages import Text
    from lossless.testing import FakeProvider

    store = MemoryStore(tmp_path / "memory")
    ops = '{"operations": [{"op": "add", "name": "tabs", "type": "user", "description": "prefers tabs", "body": "Use tabs. key sk-abcdefghijklmnopqrstuvwxyz123456"}]}'
    fake = FakeProvider(script=[Response(content=(Text(text="Done: I will use tabs."),), stop_reason="end_turn"), ops])
    cm = ContextManager(window=200_000, store=tmp_path, transcript=False, memory=store, provider=fake,
                        session_notes=False)
    cm.extractor.debounce = 0
    response, view = cm.call([{"role": "user", "content": "Always use tabs, please."}], max_tokens=100)
    assert response.text.startswith("Done")
    cm.close()  # flushes a pending extraction
    saved = store.get("tabs")
    assert "Use tabs" in saved.body and "sk-abcdef" not in saved.body  # the secret was redacted
