"""FakeProvider and the deterministic summary it shares with the fake server."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings

from lossless.errors import RateLimited
from lossless.messages import Message, Text, ToolResult, ToolUse, assistant, user
from lossless.providers import Provider, Request, Response, Usage
from lossless.testing import SECTIONS, FakeProvider, build_summary
from lossless.testing.summaries import malformed_summary, turns_from_messages, wants_summary

from strategies import histories

INSTRUCTION = "Summarise the conversation. Answer with <analysis> then <summary> with nine sections."

HISTORY = (
    user("Please fix the failing test in src/app/models.py and keep the public API unchanged."),
    Message(role="assistant", content=(Text(text="Reading the file."),
                                       ToolUse(id="t1", name="Read", input={"path": "src/app/models.py"}))),
    Message(role="user", content=(ToolResult(tool_use_id="t1", content="def area(r):\n    return 3 * r * r\n"),)),
    assistant("Found it: area uses 3 instead of math.pi. TODO: add a regression test."),
    user("Also run pytest afterwards; earlier it said AssertionError: 27 != 28.27"),
    assistant("Changed area() to use math.pi in src/app/models.py; running pytest now."),
)


def test_is_a_provider():
    assert isinstance(FakeProvider(), Provider)


def test_script_in_order_then_default_and_every_request_recorded():
    canned = Response(content=(Text(text="canned"),), usage=Usage(input_tokens=1))
    fake = FakeProvider(["first", RateLimited("slow", retry_after=1), canned, lambda r: f"saw {len(r.messages)}"],
                        default="done")
    requests = [Request(messages=(user(f"q{i}"),)) for i in range(5)]
    assert fake.complete(requests[0]).text == "first"
    with pytest.raises(RateLimited):
        fake.complete(requests[1])
    assert fake.complete(requests[2]) is canned
    assert fake.complete(requests[3]).text == "saw 1"
    assert fake.complete(requests[4]).text == "done"
    assert fake.requests == requests


def test_push_extends_the_script():
    fake = FakeProvider()
    fake.push("later")
    assert fake.complete(Request(messages=(user("x"),))).text == "later"


def test_bad_script_items_are_refused():
    with pytest.raises(TypeError, match="script item"):
        FakeProvider([42]).complete(Request(messages=(user("x"),)))  # type: ignore[list-item]


def test_usage_is_an_estimate_of_the_request():
    small = FakeProvider().complete(Request(messages=(user("x"),)))
    big = FakeProvider().complete(Request(messages=(user("x " * 4000),), system="s" * 400))
    assert 0 < small.usage.input_tokens < big.usage.input_tokens
    assert small.usage.output_tokens > 0
    assert FakeProvider().count_tokens(Request(messages=(user("x " * 4000),))) > 1000


def test_stream_yields_words_and_returns_the_response():
    gen = FakeProvider(["alpha beta gamma"]).stream(Request(messages=(user("x"),)))
    deltas = []
    with pytest.raises(StopIteration) as stop:
        while True:
            deltas.append(next(gen))
    assert deltas == ["alpha ", "beta ", "gamma"]
    assert stop.value.value.text == "alpha beta gamma"


@pytest.mark.parametrize("how", ["purpose", "instruction"])
def test_summary_requests_get_the_nine_sections(how):
    if how == "purpose":
        request = Request(messages=HISTORY, purpose="summary")
    else:
        request = Request(messages=HISTORY + (user(INSTRUCTION),))
    text = FakeProvider().complete(request).text
    assert text.startswith("<analysis>") and "</analysis>" in text
    summary = re.search(r"<summary>\n(.*)\n</summary>$", text, re.S)
    assert summary is not None
    numbered = re.findall(r"^(\d)\. ([^:\n]+):", summary.group(1), re.M)
    assert numbered == [(str(i), name) for i, name in enumerate(SECTIONS, 1)]


def test_summary_is_deterministic_and_built_from_the_conversation():
    turns = turns_from_messages(HISTORY)
    text = build_summary(turns)
    assert text == build_summary(turns_from_messages(HISTORY))
    assert "src/app/models.py" in text  # files
    assert "AssertionError" in text  # errors
    assert "TODO: add a regression test." in text  # pending tasks
    assert "Also run pytest afterwards" in text  # every user message
    assert "Please fix the failing test" in text  # primary request
    assert INSTRUCTION not in build_summary(turns + [("user", INSTRUCTION)])


def test_summary_is_smaller_than_a_real_history():
    long_history = HISTORY + tuple(
        m for i in range(30) for m in (user(f"step {i}: please continue with the refactor of module_{i}.py"),
                                       assistant(f"Done with module_{i}.py. " + "Details of the change. " * 20))
    )
    request = Request(messages=long_history + (user(INSTRUCTION),))
    fake = FakeProvider()
    response = fake.complete(request)
    assert response.usage.output_tokens < response.usage.input_tokens / 2


def test_chat_requests_are_not_summaries():
    assert not wants_summary([("user", "hello")])
    assert not wants_summary([("user", "<summary> please"), ("assistant", "x"), ("user", "thanks")])
    assert wants_summary([("user", "x")], purpose="summary")


def test_malformed_summary_is_visibly_malformed():
    text = malformed_summary([])
    assert "<summary>" in text and "</summary>" not in text


@settings(max_examples=20)
@given(histories(max_rounds=10))
def test_summary_of_any_history_has_every_section(history):
    text = build_summary(turns_from_messages(history))
    assert all(f"{i}. {name}:" in text for i, name in enumerate(SECTIONS, 1))
    assert text.endswith("</summary>")
