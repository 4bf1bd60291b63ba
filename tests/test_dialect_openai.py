"""The OpenAI Chat Completions adapter: lossless round trip, rounds that group, errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from lossless.dialects.anthropic import from_anthropic
from lossless.dialects.openai import from_openai, to_openai
from lossless.errors import FormatError, InputError
from lossless.messages import Image, Message, Text, Thinking, ToolResult, ToolUse
from lossless.rounds import group_rounds, validate
from lossless.tokens import default_counter

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
text = st.text(max_size=30)
names = st.sampled_from(["alice", "bob_2"])


@st.composite
def part(draw) -> dict:
    kind = draw(st.sampled_from(["text", "url", "data"]))
    if kind == "text":
        return {"type": "text", "text": draw(text)}
    url = "https://example.com/x.png" if kind == "url" else "data:image/png;base64,iVBORw0KGgo="
    image_url = {"url": url}
    if draw(st.booleans()):
        image_url["detail"] = draw(st.sampled_from(["low", "high", "auto"]))
    return {"type": "image_url", "image_url": image_url}


@st.composite
def arguments(draw) -> str:
    """Raw arguments as models write them: compact, spaced, broken or not an object."""
    value = draw(st.dictionaries(st.text(max_size=6), json_values, max_size=3))
    style = draw(st.integers(0, 3))
    if style == 0:
        return json.dumps(value)
    if style == 1:
        return json.dumps(value, indent=draw(st.integers(0, 3)), separators=(",", ": "))
    if style == 2:
        return draw(st.sampled_from(['{"a": ', "", "[1, 2]", "null", "  {}  "]))
    return json.dumps(value, ensure_ascii=False)


@st.composite
def tool_call(draw, i: int) -> dict:
    call: dict = {"id": f"call_{i}", "type": "function",
                  "function": {"name": draw(st.sampled_from(["bash", "read"])), "arguments": draw(arguments())}}
    if draw(st.integers(0, 5)) == 0:
        del call["type"]
    if draw(st.integers(0, 5)) == 0:
        call["index"] = i
    return call


@st.composite
def conversation(draw) -> list[dict]:
    out: list[dict] = []
    if draw(st.booleans()):
        out.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(text)})
    for turn in range(draw(st.integers(0, 5))):
        user: dict = {"role": "user", "content": draw(text | st.lists(part(), min_size=1, max_size=3))}
        if draw(st.integers(0, 4)) == 0:
            user["name"] = draw(names)
        out.append(user)
        n_calls = draw(st.integers(0, 3))
        asst: dict = {"role": "assistant"}
        shape = draw(st.sampled_from(["string", "null", "absent", "list"]))
        if shape == "string" or (shape in ("null", "absent") and n_calls == 0):
            asst["content"] = draw(text)
        elif shape == "null":
            asst["content"] = None
        elif shape == "list":
            asst["content"] = [{"type": "text", "text": draw(text)}]
        if n_calls:
            asst["tool_calls"] = [draw(tool_call(turn * 10 + k)) for k in range(n_calls)]
        if draw(st.integers(0, 5)) == 0:
            asst["refusal"] = None
        out.append(asst)
        for k in range(n_calls):
            tool: dict = {"role": "tool", "tool_call_id": f"call_{turn * 10 + k}",
                          "content": draw(text | st.lists(st.builds(lambda t: {"type": "text", "text": t}, text), max_size=2))}
            if draw(st.integers(0, 4)) == 0:
                tool["name"] = "bash"
            out.append(tool)
    return out


@given(conversation())
def test_round_trip_is_lossless(messages):
    assert to_openai(from_openai(messages)) == messages


@given(conversation())
def test_converted_conversations_are_valid_and_group_into_rounds(messages):
    neutral = from_openai(messages)
    assume(neutral)
    validate(neutral, "openai")
    rounds = group_rounds(neutral)
    assert [m for r in rounds for m in neutral[r.start:r.stop]] == neutral
    for r in rounds:
        if r.kind == "round" and neutral[r.start].tool_uses:
            assert len(r) == 2


# -- examples ----------------------------------------------------------------

EXAMPLE = [
    {"role": "developer", "content": "be brief"},
    {"role": "user", "name": "ana", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
    ]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command":  "ls"}'}},
        {"id": "c2", "type": "function", "function": {"name": "read", "arguments": "{not json"}},
    ]},
    {"role": "tool", "tool_call_id": "c1", "content": "a.png"},
    {"role": "tool", "tool_call_id": "c2", "content": "error: bad arguments"},
    {"role": "assistant", "content": "an image"},
]


def test_example_maps_to_neutral_messages():
    system, user, asst, results, final = from_openai(EXAMPLE)
    assert system.role == "system" and system.meta["openai_role"] == "developer"
    assert user.meta["openai_extra"] == {"name": "ana"}
    assert isinstance(user.content[1], Image)
    assert user.content[1].source == {"type": "url", "url": "https://example.com/a.png"}
    u1, u2 = asst.content
    assert isinstance(u1, ToolUse) and u1.input == {"command": "ls"}
    assert u1.extra["openai_arguments"] == '{"command":  "ls"}'
    assert u2.input == {}  # invalid JSON: raw string kept, input empty
    assert results.role == "user" and results.meta["openai_role"] == "tool"
    assert [r.tool_use_id for r in results.content] == ["c1", "c2"]
    assert final.text == "an image"
    assert to_openai([system, user, asst, results, final]) == EXAMPLE


def test_data_url_becomes_a_base64_source():
    [m] = from_openai([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}}]}])
    assert m.content[0].source == {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}


def test_changed_input_is_serialised_again():
    _, _, asst, _, _ = from_openai(EXAMPLE)
    from dataclasses import replace

    changed = asst.with_content([replace(asst.content[0], input={"command": "pwd"})])
    [d] = to_openai([changed])
    assert json.loads(d["tool_calls"][0]["function"]["arguments"]) == {"command": "pwd"}


def test_anthropic_history_renders_as_chat_completions():
    neutral = from_anthropic([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "text", "text": "running"},
            {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x", "is_error": True},
                                     {"type": "text", "text": "and then?"}]},
    ])
    assert to_openai(neutral) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "running", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "x"},
        {"role": "user", "content": "and then?"},
    ]


def test_fresh_neutral_messages_render_plainly():
    msgs = [Message(role="system", content=(Text(text="sys"),)),
            Message(role="user", content=(Text(text="a"), Text(text="b"))),
            Message(role="assistant", content=(Thinking(thinking="x", signature="y"),
                                               ToolUse(id="u", name="n", input={}))),
            Message(role="user", content=(ToolResult(tool_use_id="u", content=()),))]
    assert to_openai(msgs) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "u", "type": "function", "function": {"name": "n", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "u", "content": []},
    ]


@pytest.mark.parametrize(
    ("message", "pattern"),
    [
        ("x", r"message 1: a message must be an object"),
        ({"content": "x"}, r"message 1: unknown or missing role None"),
        ({"role": "function", "content": "x"}, r"message 1: unknown or missing role 'function'"),
        ({"role": "user"}, r"message 1: the user message has no 'content'"),
        ({"role": "user", "content": [{"type": "text"}]}, r"message 1: unsupported content part type 'text' \(or it lacks"),
        ({"role": "user", "content": [{"input_audio": {}}]}, r"message 1: unsupported content part type None"),
        ({"role": "assistant", "content": None, "tool_calls": [{"id": "a"}]}, r"message 1: a tool call must be an object"),
        ({"role": "tool", "content": "x"}, r"message 1: a tool message needs a string 'tool_call_id'"),
    ],
)
def test_malformed_messages_name_the_index(message, pattern):
    with pytest.raises(FormatError, match=pattern):
        from_openai([{"role": "user", "content": "ok"}, message])


def test_tool_result_in_an_assistant_message_cannot_render():
    with pytest.raises(InputError, match="message 0"):
        to_openai([Message(role="assistant", content=(ToolResult(tool_use_id="a", content="x"),))])


@given(kind=st.sampled_from(["refusal", "audio", "function_call", None]),
       text=st.text(min_size=1, max_size=40), null=st.booleans())
def test_an_assistant_message_answered_without_content_is_valid_and_round_trips(kind, text, null):
    """What an SDK hands back for a refusal (``"content": null, "refusal": …``), an audio answer
    (``"audio": {"id": …}``) or a legacy function call is a valid assistant message as it came:
    valid, kept by ``repair``, written back exactly. With none of them, no content is still refused."""
    from lossless.errors import InvalidRequest
    from lossless.rounds import repair

    answer = {"refusal": text, "audio": {"id": "audio_" + str(len(text))},
              "function_call": {"name": "f", "arguments": "{}"}}.get(kind)
    assistant = {"role": "assistant", **({"content": None} if null else {})}
    if kind is not None:
        assistant[kind] = answer
    history = [{"role": "user", "content": "hi"}, assistant, {"role": "user", "content": "go on"}]
    neutral = from_openai(history)
    assert to_openai(neutral) == history
    if kind is None:
        with pytest.raises(InvalidRequest, match="message 1: the message has no content"):
            validate(neutral, "openai")
        return
    validate(neutral, "openai")
    kept, notes = repair(neutral, "openai")
    assert to_openai(kept) == history and not notes
    bare = from_openai([{"role": "assistant", "content": None}])[0]
    counter = default_counter()  # what is sent in place of content is counted too
    assert counter.count_message(neutral[1]) >= counter.count_message(bare) + counter.count_text(
        answer if isinstance(answer, str) else json.dumps(answer))
