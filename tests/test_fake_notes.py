"""The fake model writes session notes: a ContextManager with FakeProvider runs the
notes path end to end (the notes are written, then stand for the history), and a
scripted answer that is not notes is still refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from lossless import ContextManager, validate
from lossless.config import ContextConfig
from lossless.memory.session import NOTES_SYSTEM, SessionNotes, looks_like_notes
from lossless.messages import Message, Text, ToolResult, ToolUse, assistant, user
from lossless.providers.base import Request
from lossless.stages.session_memory import MIN_NOTES_TOKENS
from lossless.testing import FakeProvider
from lossless.testing.fake_provider import wants_notes
from lossless.testing.notes import SECTIONS, build_notes, notes_turns
from lossless.testing.summaries import turns_from_messages
from lossless.tokens import default_counter

from strategies import histories

TASK = Message(role="user", content=(Text(text="Fix the flaky test in tests/test_api.py. Never touch the public API."),))


def work(i: int, size: int = 20) -> list[Message]:
    tid = f"toolu_{i:05d}"
    output = f"line {i} of src/mod{i % 7}.py\n" * size + ("ERROR: flaky timeout in test_api\n" if i % 9 == 0 else "")
    return [Message(role="assistant", content=(Text(text=f"step {i}"),
                                               ToolUse(id=tid, name="Bash", input={"command": f"cat src/mod{i % 7}.py"}))),
            Message(role="user", content=(ToolResult(tool_use_id=tid, content=output),))]


def run(cm: ContextManager, turns: int, size: int = 20):
    sent, views = [TASK], []
    for i in range(turns):
        view = cm.prepare(sent + work(i, size))
        validate(view.neutral)
        sent = view.neutral
        views.append(view)
    return views


def manager(tmp_path, provider, window=32_000) -> ContextManager:
    cfg = ContextConfig(window=window, micro_trigger_fraction=5.0, snip_trigger_fraction=5.0)
    return ContextManager(config=cfg, store=tmp_path, transcript=False, provider=provider, session_id="s1")


def notes_calls(fake: FakeProvider) -> list[Request]:
    return [r for r in fake.requests if r.purpose == "session-notes"]


def fired(view, stage: str) -> bool:
    return any(e.stage == stage and e.fired for e in view.events)


def test_a_manager_with_the_fake_model_writes_its_notes_and_compacts_with_them(tmp_path):
    fake = FakeProvider()
    cm = manager(tmp_path, fake)
    views = run(cm, 300, size=30)
    assert notes_calls(fake)
    # Written: the fake's notes, from the conversation it was sent.
    written = SessionNotes("s1", root=tmp_path).read()
    assert looks_like_notes(written, sections=len(SECTIONS)) and "Never touch the public API" in written
    assert "src/mod" in written and "flaky timeout" in written
    # Used: the session-memory stage stood the notes in for the history, before any model summary.
    used = [v for v in views if fired(v, "session_memory")]
    assert used, [e.detail for e in views[-1].events]
    first = next(i for i, v in enumerate(views) if fired(v, "session_memory") or fired(v, "autocompact"))
    assert fired(views[first], "session_memory") and not fired(views[first], "autocompact")
    head = used[0].neutral[0]
    assert 'kind="session-notes"' in head.text and "# Decisions and constraints" in head.text
    assert "Never touch the public API" in head.text
    # After compaction the notes are refreshed from the compacted view and keep the user's words.
    assert len(notes_calls(fake)) >= 2
    assert "Never touch the public API" in SessionNotes("s1", root=tmp_path).read()
    assert not any(m.text.strip() == "OK." for v in views for m in v.neutral)


@pytest.mark.parametrize("junk", ["OK.", "", "I'm sorry, I can't help with that.",
                                  lambda request: "Sure! Here are the notes you asked for."])
def test_a_scripted_answer_that_is_not_notes_is_refused(tmp_path, junk):
    fake = FakeProvider(notes=junk)
    cm = manager(tmp_path, fake)
    views = run(cm, 300, size=30)
    assert notes_calls(fake)
    assert SessionNotes("s1", root=tmp_path).read() == ""  # never written
    assert not any(fired(v, "session_memory") for v in views)
    assert any(fired(v, "autocompact") for v in views)  # the model's summary did the work instead


def test_scripted_notes_are_written_as_given_and_leave_the_script_alone(tmp_path):
    given_notes = "# Task\nShip 1.0.\n# Next steps\n- tag the release\n" + "- check the changelog entry\n" * 20
    fake = FakeProvider(["first", "second"], notes=lambda request: given_notes)
    notes = SessionNotes("s1", root=tmp_path)
    assert notes.update(fake, [TASK, assistant("ok")], history_tokens=12_000)
    assert notes.read() == given_notes
    assert fake.complete(Request(messages=(user("hi"),))).text == "first"  # the script was not consumed
    assert notes.update(fake, [TASK, assistant("ok")], history_tokens=20_000, in_conversation=True)
    assert fake.complete(Request(messages=(user("hi"),))).text == "second"
    # A notes request is known by its instruction, as on the wire, not by its purpose label.
    asked = Request(messages=(user("x"),), system=NOTES_SYSTEM)
    assert FakeProvider(notes=given_notes).complete(asked).text == given_notes
    assert FakeProvider().complete(Request(messages=(user("x"),), purpose="session-notes")).text == "OK."


def test_notes_requests_are_recognised_in_both_shapes_and_carry_the_current_notes(tmp_path):
    history = [TASK, *work(0), assistant("Next, we need to rerun pytest."), user("Use pytest -x, never -n auto.")]
    notes = SessionNotes("s1", root=tmp_path)
    fake = FakeProvider()
    assert notes.update(fake, history, history_tokens=12_000)  # the excerpt shape: system prompt + one message
    excerpt = fake.requests[-1]
    assert excerpt.system == NOTES_SYSTEM and len(excerpt.messages) == 1 and wants_notes(excerpt)
    first = notes.read()
    assert first.startswith("# Task\nFix the flaky test") and "Use pytest -x, never -n auto." in first
    # The conversation shape: the history, then one user message with the instruction and current notes.
    later = [user("Also keep the changelog updated."), assistant("Updating CHANGELOG.md.")]
    assert notes.update(fake, later, history_tokens=20_000, in_conversation=True)
    request = fake.requests[-1]
    assert list(request.messages[:-1]) == later and wants_notes(request)
    second = notes.read()
    # The task and the decisions come over from the current notes; the new words join them.
    assert second.startswith("# Task\nFix the flaky test")
    assert "Use pytest -x, never -n auto." in second and "Also keep the changelog updated." in second
    assert "CHANGELOG.md" in second and "tests/test_api.py" in second
    # Deterministic: the same request gets the same notes.
    assert fake.complete(request).text == fake.complete(request).text
    # A request that is not about notes is answered as before.
    assert not wants_notes(Request(messages=(user("hello"),)))
    assert FakeProvider().complete(Request(messages=(user("hello"),))).text == "OK."


def test_notes_turns_reads_the_excerpt_back_into_turns():
    ask = ("Current notes:\n# Task\nold task\n# Decisions and constraints\n- keep it\n\n"
           "Recent conversation:\nuser: do A\n\nassistant: did A in src/a.py\n\nuser: now B")
    turns, current = notes_turns([("user", ask)])
    assert turns == [("user", "do A"), ("assistant", "did A in src/a.py"), ("user", "now B")]
    assert current.startswith("# Task\nold task")
    text = build_notes(turns, current)
    assert text.startswith("# Task\nold task") and "- keep it" in text and "- do A" in text and "- now B" in text and "src/a.py" in text
    assert notes_turns([("user", "Current notes:\n(none yet)")]) == ([], "")


@settings(max_examples=40)
@given(histories(max_rounds=30))
def test_notes_of_any_history_are_valid_and_small(messages):
    text = build_notes(turns_from_messages(messages))
    assert looks_like_notes(text, sections=len(SECTIONS))
    assert [line[2:] for line in text.splitlines() if line.startswith("# ")] == list(SECTIONS)
    assert MIN_NOTES_TOKENS <= default_counter().count_text(text) <= 3_000
