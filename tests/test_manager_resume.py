"""ContextManager.resume: a manager that takes up another's conversation from the view it last
sent and the usage reported for it compacts exactly as the first would have (a parked proxy
conversation restored, a process restarted)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import ContextManager


def _anthropic_round(i: int, chars: int) -> list[dict]:
    call = {"type": "tool_use", "id": f"toolu_{i:03d}", "name": "Bash", "input": {"command": f"cat f{i}"}}
    result = {"type": "tool_result", "tool_use_id": call["id"], "content": f"line {i}: " + "word " * (chars // 5)}
    return [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]


def _openai_round(i: int, chars: int) -> list[dict]:
    call = {"id": f"call_{i:03d}", "type": "function", "function": {"name": "Bash", "arguments": json.dumps({"i": i})}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": f"line {i}: " + "word " * (chars // 5)}]


def _drive(dialect: str, sizes: list[int], switch: int, store, ratio: float) -> list[list]:
    """What a manager sends on each turn; from turn ``switch`` on, a second manager resumed from
    the first's last view and usage (``switch`` past the end: one manager throughout)."""
    def make() -> ContextManager:
        return ContextManager(window=16_000, store=str(store), dialect=dialect)

    rnd = _anthropic_round if dialect == "anthropic" else _openai_round
    cm = make()
    history: list = [{"role": "user", "content": "Survey the repository."}]
    sent: list[list] = []
    last: list = []  # the view the manager last returned
    reported = None
    for i, chars in enumerate(sizes):
        if i == switch:
            cm = make()
            cm.resume(last, reported=reported)
        view = cm.prepare(history)
        last = view.messages
        sent.append(json.loads(json.dumps(view.messages)))
        reported = int(ratio * view.state.tokens)  # the provider's own count differs from the estimate
        cm.observe({"input_tokens": reported})
        history = [*view.messages, *rnd(i, chars)]
    return sent


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
@settings(max_examples=15, deadline=None)
@given(sizes=st.lists(st.integers(200, 6_000), min_size=4, max_size=14), data=st.data(),
       ratio=st.floats(0.95, 1.6))
def test_a_resumed_manager_sends_what_the_first_would_have(tmp_path_factory, dialect, sizes, data, ratio):
    switch = data.draw(st.integers(1, len(sizes) - 1))
    one = _drive(dialect, sizes, len(sizes) + 1, tmp_path_factory.mktemp("one"), ratio)
    two = _drive(dialect, sizes, switch, tmp_path_factory.mktemp("two"), ratio)
    assert one == two
