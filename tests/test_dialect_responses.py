"""The OpenAI Responses dialect: lossless round trip, rounds that group, validity by item, errors."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lossless import ContextManager
from lossless.dialects.anthropic import from_anthropic
from lossless.dialects.responses import from_responses, problems_responses, to_responses
from lossless.errors import ConfigError, FormatError, InputError
from lossless.messages import Image, Message, Opaque, RedactedThinking, Text, Thinking, ToolResult, ToolUse
from lossless.messages import result_text
from lossless.rounds import group_rounds, validate
from strategies import histories

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
text = st.text(max_size=30)


@st.composite
def arguments(draw) -> str:
    """Raw arguments as models write them: compact, spaced, broken or not an object."""
    value = draw(st.dictionaries(st.text(max_size=6), json_values, max_size=3))
    style = draw(st.integers(0, 2))
    if style == 0:
        return json.dumps(value)
    if style == 1:
        return json.dumps(value, indent=draw(st.integers(0, 3)), ensure_ascii=False)
    return draw(st.sampled_from(['{"a": ', "", "[1, 2]", "null", "  {}  "]))


@st.composite
def input_part(draw) -> dict:
    kind = draw(st.sampled_from(["text", "url", "data", "file"]))
    if kind == "text":
        return {"type": "input_text", "text": draw(text)}
    if kind == "file":
        return {"type": "input_image", "file_id": "file-abc", "detail": draw(st.sampled_from(["low", "auto"]))}
    url = "https://example.com/x.png" if kind == "url" else "data:image/png;base64,iVBORw0KGgo="
    return {"type": "input_image", "image_url": url, "detail": draw(st.sampled_from(["low", "high", "auto"]))}


@st.composite
def user_item(draw, role: str = "user") -> dict:
    item: dict = {"role": role, "content": draw(text | st.lists(input_part(), min_size=1, max_size=3))}
    if draw(st.booleans()):
        item = {"type": "message", **item}
    return item


@st.composite
def assistant_message(draw, n: int) -> dict:
    parts = [draw(st.sampled_from([{"type": "output_text", "text": draw(text), "annotations": []},
                                   {"type": "output_text", "text": draw(text)},
                                   {"type": "refusal", "refusal": draw(text)}])) for _ in range(draw(st.integers(0, 2)))]
    if draw(st.integers(0, 3)) == 0:
        return {"role": "assistant", "content": draw(text)}
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "status": "completed", "content": parts}


def reasoning(n: int, encrypted: bool) -> dict:
    item: dict = {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": "thinking"}]}
    if encrypted:
        item["encrypted_content"] = f"gAAAA{n:04d}opaque=="
    return item


@st.composite
def conversation(draw) -> list[dict]:
    out: list[dict] = []
    if draw(st.booleans()):
        out.append(draw(user_item(draw(st.sampled_from(["system", "developer"])))))
    for turn in range(draw(st.integers(0, 5))):
        out.append(draw(user_item()))
        if draw(st.integers(0, 2)) == 0:
            out.append(reasoning(turn, draw(st.booleans())))
        if draw(st.integers(0, 4)) == 0:
            out.append({"id": f"ws_{turn}", "type": "web_search_call", "status": "completed",
                        "action": {"type": "search", "query": draw(text)}})
        n_calls = draw(st.integers(0, 3))
        if draw(st.booleans()) or n_calls == 0:
            out.append(draw(assistant_message(turn)))
        custom = [draw(st.integers(0, 3)) == 0 for _ in range(n_calls)]  # a free-form tool (Codex's apply_patch)
        for k in range(n_calls):
            call: dict = ({"type": "custom_tool_call", "call_id": f"call_{turn}_{k}", "name": "apply_patch",
                           "input": draw(text)} if custom[k] else
                          {"type": "function_call", "call_id": f"call_{turn}_{k}",
                           "name": draw(st.sampled_from(["bash", "read"])), "arguments": draw(arguments())})
            if draw(st.booleans()):
                call = {"id": f"fc_{turn}_{k}", **call, "status": "completed"}
            out.append(call)
        for k in range(n_calls):
            output = draw(text | st.lists(st.builds(lambda t: {"type": "input_text", "text": t}, text), max_size=2))
            kind = "custom_tool_call_output" if custom[k] else "function_call_output"
            out.append({"type": kind, "call_id": f"call_{turn}_{k}", "output": output})
    return out


def as_json(items) -> str:
    return json.dumps(items, ensure_ascii=False)


@given(conversation())
def test_round_trip_is_lossless_byte_for_byte(items):
    assert as_json(to_responses(from_responses(items))) == as_json(items)


@given(conversation())
def test_converted_conversations_are_valid_and_group_into_rounds(items):
    assume(items)
    assert problems_responses(items) == []
    neutral = from_responses(items)
    validate(neutral, "openai")
    rounds = group_rounds(neutral)
    assert [m for r in rounds for m in neutral[r.start:r.stop]] == neutral
    for r in rounds:
        if r.kind == "round" and neutral[r.start].tool_uses:
            assert len(r) == 2  # the calls and their outputs: one API round


@settings(max_examples=30)
@given(conversation(), st.data())
def test_removing_an_output_or_a_call_is_named_by_item(items, data):
    paired = [i for i, it in enumerate(items) if "call_id" in it]
    assume(paired)
    i = data.draw(st.sampled_from(paired))
    broken = items[:i] + items[i + 1:]
    found = problems_responses(broken)
    assert found, "a lone call or output must be refused"
    assert found[0].tool_id == items[i]["call_id"]
    assert f"item {found[0].index}:" in str(found[0])
    assert broken[found[0].index]["call_id"] == items[i]["call_id"]


# -- examples ----------------------------------------------------------------

EXAMPLE = [
    {"role": "developer", "content": "be brief"},
    {"role": "user", "content": [{"type": "input_text", "text": "what is here?"},
                                 {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAsecret=="},
    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "bash", "arguments": '{"command":  "ls"}'},
    {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "read", "arguments": "{not json"},
    {"type": "function_call_output", "call_id": "c1", "output": "a.png"},
    {"type": "function_call_output", "call_id": "c2", "output": "error: bad arguments"},
    {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "an image", "annotations": []}]},
]


def test_example_maps_to_neutral_messages():
    system, user, asst, results, final = from_responses(EXAMPLE)
    assert system.role == "system" and system.text == "be brief"
    assert isinstance(user.content[1], Image) and user.content[1].source["url"] == "https://example.com/a.png"
    thought, u1, u2 = asst.content
    assert isinstance(thought, RedactedThinking) and thought.data == "gAAAAsecret=="
    assert thought.extra["openai_responses_item"] == EXAMPLE[2]  # the reasoning item, as-is
    assert isinstance(u1, ToolUse) and u1.input == {"command": "ls"}
    assert u2.input == {}  # invalid JSON: raw string kept, input empty
    assert results.role == "user" and [r.tool_use_id for r in results.content] == ["c1", "c2"]
    assert final.role == "assistant" and final.text == "an image"
    assert to_responses([system, user, asst, results, final]) == EXAMPLE


def test_a_hosted_call_stays_opaque_in_its_round():
    search = {"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "q"}}
    image = {"id": "ig_1", "type": "image_generation_call", "status": "completed", "result": "iVBOR" * 10_000}
    items = [{"role": "user", "content": "look it up"}, search, image, EXAMPLE[-1]]
    user, asst = from_responses(items)
    assert [type(b).__name__ for b in asst.content] == ["RedactedThinking", "RedactedThinking", "Text"]
    assert "iVBOR" not in asst.content[1].data  # a generated image's bytes are not counted as text
    assert to_responses([user, asst]) == items


def test_a_bare_string_is_one_user_message():
    [m] = from_responses("hello")
    assert m.role == "user" and m.text == "hello"


def test_changed_input_and_a_cleared_output_are_written_again():
    from dataclasses import replace

    _, _, asst, results, _ = from_responses(EXAMPLE)
    changed = asst.with_content([asst.content[0], replace(asst.content[1], input={"command": "pwd"}), asst.content[2]])
    items = to_responses([changed])
    assert items[0] == EXAMPLE[2]
    assert json.loads(items[1]["arguments"]) == {"command": "pwd"} and items[1]["id"] == "fc_1"
    cleared = results.with_content([replace(results.content[0], content="[cleared: sha256:ab]"), results.content[1]])
    assert to_responses([cleared])[0] == {"type": "function_call_output", "call_id": "c1", "output": "[cleared: sha256:ab]"}


def test_anthropic_history_renders_as_items():
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
    assert to_responses(neutral) == [
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "message", "role": "assistant", "content": "running"},
        {"type": "function_call", "call_id": "t1", "name": "bash", "arguments": '{"command": "ls"}'},
        {"type": "function_call_output", "call_id": "t1", "output": "x"},
        {"type": "message", "role": "user", "content": "and then?"},
    ]


def test_fresh_neutral_messages_render_plainly():
    msgs = [Message(role="system", content=(Text(text="sys"),)),
            Message(role="user", content=(Text(text="a"), Image(source={"type": "url", "url": "https://x/y.png"}))),
            Message(role="assistant", content=(Thinking(thinking="x", signature="y"), ToolUse(id="u", name="n", input={}))),
            Message(role="user", content=(ToolResult(tool_use_id="u", content=(Text(text="r"),)),))]
    assert to_responses(msgs) == [
        {"type": "message", "role": "system", "content": "sys"},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"}]},
        {"type": "function_call", "call_id": "u", "name": "n", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "u", "output": [{"type": "input_text", "text": "r"}]},
    ]


@pytest.mark.parametrize(
    ("item", "pattern"),
    [
        ("x", r"item 1: an item must be an object"),
        ({"content": "x"}, r"item 1: unknown or missing role None"),
        ({"role": "tool", "content": "x"}, r"item 1: unknown or missing role 'tool'"),
        ({"type": "computer_call", "call_id": "c"}, r"item 1: unsupported item type 'computer_call'"),
        ({"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}, r"item 1: unsupported content part type 'input_file'"),
        ({"role": "user", "content": [{"type": "input_image"}]}, r"item 1: an input_image part needs"),
        ({"role": "user", "content": 3}, r"item 1: content must be a string or a list"),
        ({"type": "function_call", "call_id": "a", "name": "n"}, r"item 1: a function_call item needs a string 'arguments'"),
        ({"type": "function_call_output", "output": "x"}, r"item 1: a function_call_output item needs a string 'call_id'"),
    ],
)
def test_malformed_items_name_the_index(item, pattern):
    with pytest.raises(FormatError, match=pattern):
        from_responses([{"role": "user", "content": "ok"}, item])


def test_an_orphan_output_is_named():
    [p] = problems_responses([{"role": "user", "content": "hi"},
                              {"type": "function_call_output", "call_id": "zz", "output": "x"}])
    assert str(p).startswith("item 1: function_call_output answers no function_call before it") and p.tool_id == "zz"


def test_a_tool_result_in_an_assistant_message_cannot_render():
    with pytest.raises(InputError, match="message 0"):
        to_responses([Message(role="assistant", content=(ToolResult(tool_use_id="a", content="x"),))])


@pytest.mark.parametrize("dialect", ["OpenAI", "responses", "", "chat"])
def test_an_unknown_dialect_is_refused_at_construction(dialect, tmp_path):
    with pytest.raises(ConfigError, match=f"dialect {dialect!r} is not 'anthropic' or 'openai'"):
        ContextManager(dialect=dialect, store=str(tmp_path))


@settings(max_examples=40)
@given(histories(max_rounds=8))
def test_any_valid_history_renders_as_valid_items(history):
    """A neutral history from another dialect, rendered as items: valid, the same calls and
    results (thinking, and parts of another API's kind, from elsewhere have no item and are dropped)."""
    items = to_responses(history)
    assert problems_responses(items) == []
    back = from_responses(items)
    assert [(u.id, u.name, dict(u.input)) for m in back for u in m.tool_uses] == \
        [(u.id, u.name, dict(u.input)) for m in history for u in m.tool_uses]
    assert [result_text(r) for m in back for r in m.tool_results] == \
        [result_text(replace(r, content=tuple(b for b in r.content if not isinstance(b, Opaque)))
                     if isinstance(r.content, tuple) else r) for m in history for r in m.tool_results]
