"""``ResponsesContext``: the manager over Responses items — valid, under the window, recallable, O(new)."""

from __future__ import annotations

import json
import re
import tempfile

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lossless import ContextManager
from lossless.adapters.responses import ResponsesContext
from lossless.dialects.responses import problems_responses
from lossless.errors import ConfigError, InvalidRequest
from test_dialect_responses import conversation

LOG = "".join(f"line {i}: compiled module_{i}.py OK\n" for i in range(3_000))  # ~100k chars: persisted


def turn(n: int, output: str) -> list[dict]:
    return [
        {"role": "user", "content": f"step {n}: build it"},
        {"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": f"gAAAA-opaque-{n}=="},
        {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "bash",
         "arguments": json.dumps({"command": f"make step{n}"})},
        {"type": "function_call_output", "call_id": f"call_{n}", "output": output},
        {"id": f"msg_{n}", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": f"step {n} done", "annotations": []}]},
    ]


def history(turns: int, *, log: str = LOG) -> list[dict]:
    items = [{"role": "developer", "content": "You build things."}]
    for n in range(turns):
        items += turn(n, log if n == 0 else f"built step {n}\n" * 300)
    return items


def handles(items: list[dict]) -> set[str]:
    return set(re.findall(r"sha256:[0-9a-f]{12,}", json.dumps(items)))


def test_a_long_history_comes_back_valid_under_the_threshold_and_recallable(tmp_path):
    rc = ResponsesContext(window=24_000, max_output=4_000, store=str(tmp_path))
    items = history(40)
    view = rc.prepare(items, instructions="Be careful.")
    assert view.fired, "a history this size must be compacted"
    assert problems_responses(view.messages) == []
    assert view.state.tokens <= view.state.threshold
    assert view.messages[0] == items[0]  # the developer message stays first, untouched
    # Reasoning is never edited and never separated from the call it preceded.
    for i, item in enumerate(view.messages):
        if item.get("type") == "reasoning":
            j = items.index(item)
            assert view.messages[i + 1] == items[j + 1]
    found = handles(view.messages)
    assert found
    texts = [rc.run_tool("recall", {"handle": h, "limit": 200_000}) for h in found]
    assert any("line 2999: compiled module_2999.py OK" in t for t in texts)  # the persisted log, whole


def test_appended_items_are_read_once_and_the_prefix_is_reused(tmp_path):
    rc = ResponsesContext(window=1_000_000, store=str(tmp_path))
    items = history(3, log="short")
    first = rc.prepare(items)
    assert not first.fired and first.messages == items
    more = items + turn(3, "ok")
    second = rc.prepare(more)
    assert second.messages == more
    assert all(a is b for a, b in zip(first.neutral, second.neutral))  # nothing re-read, nothing re-rendered
    assert all(a is b for a, b in zip(first.messages, second.messages))
    # Copies (as the Agents SDK passes them) are recognised by value.
    third = rc.prepare(json.loads(json.dumps(more + [{"role": "user", "content": "and now?"}])))
    assert all(a is b for a, b in zip(second.neutral, third.neutral))


def test_an_invalid_history_is_named_by_item(tmp_path):
    rc = ResponsesContext(store=str(tmp_path))
    items = history(2)
    del items[4]  # the first function_call_output
    with pytest.raises(InvalidRequest, match=r"item 3: function_call has no function_call_output after it") as e:
        rc.prepare(items)
    assert e.value.tool_id == "call_0"


def test_only_the_openai_rules_fit_responses_items(tmp_path):
    with pytest.raises(ConfigError, match="dialect='openai'"):
        ResponsesContext(ContextManager(store=str(tmp_path)))


@settings(max_examples=25)
@given(conversation(), st.integers(0, 3))
def test_whatever_the_pipeline_does_the_items_sent_are_valid(items, bulk):
    """Any valid item list, made big enough to compact, comes back valid, with reasoning
    untouched and still in front of what followed it."""
    assume(any(i.get("type") == "function_call_output" for i in items))
    big = [{**i, "output": i["output"] + "x" * (20_000 * bulk)} if i.get("type") == "function_call_output" and
           isinstance(i["output"], str) else i for i in items] + [{"role": "user", "content": "go on"}]
    with tempfile.TemporaryDirectory() as store:
        view = ResponsesContext(window=24_000, max_output=4_000, store=store).prepare(big)
    assert problems_responses(view.messages) == []
    for i, item in enumerate(view.messages):
        if item.get("type") == "reasoning":
            j = big.index(item)
            assert i + 1 == len(view.messages) or j + 1 == len(big) or view.messages[i + 1] == big[j + 1]


def test_items_that_continue_the_last_turn_are_read_with_it(tmp_path):
    rc = ResponsesContext(window=1_000_000, store=str(tmp_path))
    items = history(2, log="short")
    assert items[-1]["role"] == "assistant"
    rc.prepare(items)
    more = items + [{"role": "assistant", "content": "one more thing"}, {"role": "user", "content": "ok"}]
    view = rc.prepare(more)
    assert view.messages == more
    assert [m.role for m in view.neutral[-2:]] == ["assistant", "user"]
    assert view.neutral[-2].text == "step 1 done\none more thing"  # one turn, one neutral message


def test_the_responses_adapters_load_no_framework_or_sdk():
    import subprocess
    import sys

    code = ("import sys, lossless.adapters, lossless.adapters.responses, lossless.adapters.openai_agents, "
            "lossless.dialects.responses, lossless.testing.responses; "
            "print(sorted(m for m in ('agents', 'langchain', 'pydantic_ai', 'openai', 'anthropic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
