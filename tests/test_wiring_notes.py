"""How the manager keeps session notes: refreshed past the warning line, never with a
reply that is not notes, backing off after a failure, refreshed again after each
compaction, and never carrying a secret into the context."""

from __future__ import annotations

import re

from lossless import ContextManager, validate
from lossless.config import ContextConfig
from lossless.errors import ProviderHTTPError
from lossless.memory.session import SessionNotes
from lossless.messages import Message, Text, ToolResult, ToolUse
from lossless.providers.base import Request
from lossless.testing import FakeProvider

TASK = Message(role="user", content=(Text(text="Fix the flaky test. Never touch the public API."),))
HAND_NOTES = ("# Task\nFix the flaky test in tests/test_api.py; keep the public API.\n"
              "# Decisions and constraints\n- never mock the database\n- run pytest -x\n" * 4)


def rounds(i: int, size: int = 20) -> list[Message]:
    tid = f"toolu_{i:05d}"
    return [
        Message(role="assistant", content=(Text(text=f"step {i}"), ToolUse(id=tid, name="Bash", input={"command": f"cat f{i}"}))),
        Message(role="user", content=(ToolResult(tool_use_id=tid, content=f"line {i} of the output\n" * size),)),
    ]


def loop(cm: ContextManager, turns: int, size: int = 20):
    sent, views = [TASK], []
    for i in range(turns):
        view = cm.prepare(sent + rounds(i, size))
        validate(view.neutral)
        sent = view.neutral
        views.append(view)
    return views


def manager(tmp_path, provider, window=64_000, **kw):
    cfg = ContextConfig(window=window, micro_trigger_fraction=5.0, snip_trigger_fraction=5.0)
    return ContextManager(config=cfg, store=tmp_path, transcript=False, provider=provider, session_id="s1", **kw)


def notes_requests(fake: FakeProvider) -> list[Request]:
    return [r for r in fake.requests if r.purpose == "session-notes"]


def test_a_reply_that_is_not_notes_never_replaces_the_users_notes(tmp_path):
    notes = SessionNotes("s1", root=tmp_path)
    notes.write(HAND_NOTES)
    fake = FakeProvider(notes="OK.")  # a notes request gets "OK."
    cm = manager(tmp_path, fake)
    views = loop(cm, 200)
    assert notes_requests(fake)  # the refresh was tried past the warning line...
    assert notes.read() == HAND_NOTES  # ...and "OK." was not taken for notes
    assert not any(m.text.strip() == "OK." for v in views for m in v.neutral)


def test_a_failed_or_junk_refresh_backs_off_instead_of_retrying_every_turn(tmp_path):
    for provider in (FakeProvider(script=[ProviderHTTPError("boom", status=500)] * 1000), FakeProvider(notes="OK.")):
        cm = manager(tmp_path, provider, session_notes=True)
        cm.collapser = cm.compactor = None
        cm.stages = tuple(s for s in cm.stages if s[0] not in ("collapse", "autocompact"))
        views = loop(cm, 200)
        between = [v for v in views if cm.budget.warning <= v.events[0].tokens_before]
        assert len(between) > 10
        # one attempt per 5,000 tokens of growth, as after a success — not one per turn
        grown = max(v.events[0].tokens_before for v in views) - cm.budget.warning
        assert len(notes_requests(provider)) <= grown // 5_000 + 2, len(notes_requests(provider))


def good_notes(request: Request) -> str:
    steps = re.findall(r"step (\d+)", "\n".join(m.text for m in request.messages))
    last = max(map(int, steps)) if steps else -1
    body = "\n".join(f"- did step {k}, read f{k}" for k in range(max(0, last - 30), last + 1))
    return f"# Task\nFix the flaky test.\n# Current state\nlast step {last}\n{body}\n# Next steps\n- step {last + 1}\n"


def test_notes_are_refreshed_again_after_each_compaction(tmp_path):
    fake = FakeProvider(notes=good_notes)  # every notes request gets these notes
    cm = manager(tmp_path, fake, window=32_000)
    cm.collapser = cm.compactor = None
    cm.stages = tuple(s for s in cm.stages if s[0] not in ("collapse", "autocompact"))
    views = loop(cm, 300, size=30)
    used = [(i, v) for i, v in enumerate(views) if any(e.stage == "session_memory" and e.fired for e in v.events)]
    assert len(used) >= 3
    for i, view in used:
        # the notes that stood for the history were written recently, not before the first compaction
        last = int(re.search(r"last step (\d+)", view.neutral[0].text)[1])
        assert i - last <= 40, (i, last)


def test_hand_written_notes_with_a_secret_never_reach_the_context(tmp_path):
    notes = SessionNotes("s1", root=tmp_path)
    secret = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
    notes.write("x")
    notes.path.write_text(HAND_NOTES + f"# Files and places\n- the key is {secret}\n- password=hunter2secret\n")
    cm = manager(tmp_path, None, window=16_000)  # no model: the notes are still used first
    views = loop(cm, 80)
    fired = [v for v in views if any(e.stage == "session_memory" and e.fired for e in v.events)]
    assert fired
    sent = "\n".join(m.text for v in views for m in v.neutral)
    assert secret not in sent and "hunter2secret" not in sent
    assert "never mock the database" in fired[0].neutral[0].text


def test_a_refresh_sends_the_conversation_so_it_reads_the_cached_prefix(tmp_path):
    """While the history fits the window, the notes request is the conversation the model
    sees (its system prompt and tools too) plus one user message asking for the notes: the
    request starts with the prefix the provider has cached."""
    fake = FakeProvider()
    system = "You are a careful engineer."
    tools = [{"name": "Bash", "description": "run a command", "input_schema": {"type": "object"}}]
    cm = manager(tmp_path, fake)
    sent = [TASK]
    for i in range(200):
        history = sent + rounds(i)
        view = cm.prepare(history, system=system, tools=tools)
        sent = view.neutral
        asked = notes_requests(fake)
        if asked:
            break
    request = asked[0]
    assert request.system == system and [t["name"] for t in request.tools] == ["Bash"]
    assert list(request.messages[:-1]) == history  # the conversation as it stood, unchanged
    assert request.messages[-1].role == "user" and "Current notes" in request.messages[-1].text
    validate(list(request.messages))


def test_a_refresh_near_the_window_sends_an_excerpt_instead(tmp_path):
    """Where the conversation plus the notes request and its answer would not fit the window,
    the refresh falls back to one message holding an excerpt of the dialogue."""
    notes = SessionNotes("s1", root=tmp_path)
    fake = FakeProvider(notes="OK.")
    history = [TASK, *[m for i in range(40) for m in rounds(i, size=60)]]
    tokens = sum(ContextManager(window=64_000, transcript=False, store=tmp_path).counter.count_message(m)
                 for m in history)
    assert notes.update(fake, history, history_tokens=tokens, in_conversation=False) is False  # "OK." is not notes
    request = fake.requests[-1]
    assert len(request.messages) == 1 and "Recent conversation" in request.messages[0].text
    cm = manager(tmp_path, fake, window=tokens + 2_000)  # past the warning line, but no room for a notes call
    cm.notes.every_tokens = 1
    cm.prepare(history)
    last = notes_requests(fake)[-1]
    assert len(last.messages) == 1 and "Recent conversation" in last.messages[0].text
