"""With a model configured, the model summarises what leaves the context.

In a live loop (prepare, adopt the view, append the next round) with the package's
fake provider, snip decides what leaves — the recent rounds stay verbatim, as without a
model — and every range it removes is summarised by the model into its account; the
fallback summary stays unused while the model answers.  Every request stays valid and
under the window.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import markers, account
from lossless.manager import ContextManager
from lossless.messages import Message, Text, ToolResult, ToolUse
from lossless.rounds import validate
from lossless.testing import FakeProvider

FLOOR = {"fallback_summary"}


def _round(i: int, size: int) -> list[Message]:
    use = ToolUse(id=f"t{i}", name="Bash" if i % 3 else "Read",
                  input={"command": f"pytest -x -k case{i}"} if i % 3 else {"file_path": f"src/m{i}.py"})
    body = (f"<returncode>1</returncode>\n<output>\nFAILED case{i}: expected {i}\n" + "log line\n" * size
            + "</output>") if i % 3 else f"{i}: code\n" * size
    return [Message(role="assistant", content=(Text(text=f"Looking at case {i}."), use)),
            Message(role="user", content=(ToolResult(tool_use_id=use.id, content=body),))]


def _loop(tmp_path, rounds: int, size: int, episode: int, window: int) -> tuple[set[str], list[Message]]:
    cm = ContextManager(window=window, provider=FakeProvider(), store=str(tmp_path), transcript=False)
    history: list[Message] = [Message(role="user", content=(Text(text="Fix every failing case; keep the API."),))]
    fired: set[str] = set()
    for i in range(rounds):
        if i and i % episode == 0:
            history.append(Message(role="assistant", content=(Text(text=f"Episode {i // episode} done."),)))
            history.append(Message(role="user", content=(Text(text=f"Next: cases from {i} on."),)))
        else:
            history += _round(i, size)
            history.append(Message(role="assistant", content=(Text(text="ok"),)))
            history.append(Message(role="user", content=(Text(text=f"continue {i}"),)))
        view = cm.prepare(history)
        validate(view.neutral)
        assert view.state.tokens <= cm.budget.blocking
        fired |= {e.stage for e in view.events if e.fired}
        history = list(view.neutral)
    return fired, history


def test_the_model_summarises_what_snip_removes_and_the_floor_stays_unused(tmp_path):
    fired, history = _loop(tmp_path, rounds=120, size=120, episode=12, window=32_000)
    assert "snip" in fired and not fired & FLOOR, fired
    accounts = [m for m in history if account.is_account(m)]
    assert len(accounts) == 1  # one account, merged as snips repeat
    (acc,) = accounts
    assert "<earlier-summary>" in acc.text  # the model's summary, in the account
    recent = [m for m in history[-6:] if m.tool_results]
    # the recent outputs stay: verbatim, or echoed (their repeated lines are shown by an earlier output)
    assert recent and not any(r.content.startswith("[lossless") and markers.echoed_handle(r.content) is None
                              for m in recent for r in m.tool_results if isinstance(r.content, str))


@settings(max_examples=6, deadline=None)
@given(st.integers(40, 90), st.sampled_from([40, 120, 300]), st.integers(4, 20))
def test_any_session_shape_keeps_the_floor_unused(tmp_path_factory, rounds, size, episode):
    fired, _ = _loop(tmp_path_factory.mktemp("s"), rounds=rounds, size=size, episode=episode, window=32_000)
    assert not fired & FLOOR, fired
