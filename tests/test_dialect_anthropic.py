"""The Anthropic adapter: lossless round trip, clear errors, private extras stay private."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.dialects.anthropic import block_to_dict, from_anthropic, message_from_dict, to_anthropic
from lossless.errors import FormatError, InputError
from lossless.messages import Image, Message, RedactedThinking, Text, Thinking, ToolResult, ToolUse

# -- strategies for valid Messages-API lists -----------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
ids = st.text("abcdef0123456789", min_size=4, max_size=12).map(lambda s: "toolu_" + s)
cache = st.sampled_from([{"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}, None])


@st.composite
def optional(draw, block: dict, **choices) -> dict:
    """Add each optional key with probability ½ (``None`` values included as given)."""
    for key, strategy in choices.items():
        if draw(st.booleans()):
            block[key] = draw(strategy)
    return block


@st.composite
def text_block(draw) -> dict:
    b = {"type": "text", "text": draw(st.text(max_size=30))}
    return draw(optional(b, cache_control=cache, citations=st.lists(json_values, max_size=2)))


@st.composite
def image_block(draw) -> dict:
    src = draw(st.sampled_from([
        {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        {"type": "url", "url": "https://example.com/a.png"},
    ]))
    return draw(optional({"type": "image", "source": src}, cache_control=cache))


@st.composite
def tool_result_block(draw) -> dict:
    b: dict = {"type": "tool_result", "tool_use_id": draw(ids)}
    return draw(optional(
        b,
        content=st.text(max_size=40) | st.lists(text_block() | image_block(), max_size=3),
        is_error=st.booleans(),
        cache_control=cache,
    ))


@st.composite
def assistant_block(draw) -> dict:
    kind = draw(st.sampled_from(["text", "thinking", "redacted", "tool_use"]))
    if kind == "text":
        return draw(text_block())
    if kind == "thinking":
        return {"type": "thinking", "thinking": draw(st.text(max_size=30)), "signature": draw(st.text(min_size=1, max_size=10))}
    if kind == "redacted":
        return {"type": "redacted_thinking", "data": draw(st.text(min_size=1, max_size=20))}
    b = {"type": "tool_use", "id": draw(ids), "name": draw(st.sampled_from(["Bash", "Read", "x_y"])),
         "input": draw(st.dictionaries(st.text(max_size=8), json_values, max_size=4))}
    return draw(optional(b, cache_control=cache, caller=st.just({"type": "direct"})))


@st.composite
def wire_message(draw) -> dict:
    role = draw(st.sampled_from(["user", "assistant"]))
    if draw(st.integers(0, 3)) == 0:
        return {"role": role, "content": draw(st.text(max_size=40))}
    block = (text_block() | image_block() | tool_result_block()) if role == "user" else assistant_block()
    return {"role": role, "content": draw(st.lists(block, max_size=4))}


@given(st.lists(wire_message(), max_size=8))
def test_round_trip_is_lossless(messages):
    assert to_anthropic(from_anthropic(messages)) == messages


@given(st.lists(wire_message(), max_size=6))
def test_round_trip_does_not_mutate_input(messages):
    import copy

    before = copy.deepcopy(messages)
    to_anthropic(from_anthropic(messages))
    assert messages == before


# -- examples ----------------------------------------------------------------


def test_string_content_comes_back_as_a_string():
    [m] = from_anthropic([{"role": "user", "content": "hi"}])
    assert m.content == (Text(text="hi"),) and m.meta["string_content"] is True
    assert to_anthropic([m]) == [{"role": "user", "content": "hi"}]


def test_a_fresh_message_renders_as_a_list():
    assert to_anthropic([Message(role="user", content=(Text(text="hi"),))]) == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]


def test_blocks_map_to_neutral_types():
    wire = [
        {"role": "user", "content": [{"type": "text", "text": "go", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "xyz"},
            {"type": "text", "text": "see [1]", "citations": [{"type": "char_location", "cited_text": "a"}]},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [
                {"type": "text", "text": "out"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}},
            ], "is_error": False},
        ]},
    ]
    user, asst, res = from_anthropic(wire)
    assert user.content[0].cache_control == {"type": "ephemeral"}
    assert [type(b) for b in asst.content] == [Thinking, RedactedThinking, Text, ToolUse]
    assert asst.content[2].extra == {"citations": [{"type": "char_location", "cited_text": "a"}]}
    r = res.content[0]
    assert isinstance(r, ToolResult) and r.is_error is False and isinstance(r.content[1], Image)
    assert to_anthropic([user, asst, res]) == wire


def test_is_error_absent_stays_absent_and_true_stays_true():
    for block in ({"type": "tool_result", "tool_use_id": "a", "content": "x"},
                  {"type": "tool_result", "tool_use_id": "a", "content": "x", "is_error": True}):
        wire = [{"role": "user", "content": [block]}]
        assert to_anthropic(from_anthropic(wire)) == wire


def test_tool_result_without_content():
    wire = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]}]
    [m] = from_anthropic(wire)
    assert m.content[0].content == ""
    assert to_anthropic([m]) == wire


def test_message_keys_beyond_role_and_content_are_kept():
    wire = [{"role": "assistant", "content": "x", "id": "msg_1", "model": "m"}]
    [m] = from_anthropic(wire)
    assert m.meta["anthropic_extra"] == {"id": "msg_1", "model": "m"}
    assert to_anthropic([m]) == wire


def test_kinds_the_model_does_not_describe_come_back_exactly():
    """A document, a server tool's call and result, a search result inside a tool result: kept
    as they came (``Opaque``), counted by their size, and written back byte for byte."""
    from lossless.messages import Opaque
    from lossless.tokens import default_counter

    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Q3 figures"},
                "title": "report", "citations": {"enabled": True}}
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q3"}}
    found = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
             "content": [{"type": "web_search_result", "url": "https://example.com", "title": "Ex",
                          "encrypted_content": "E" * 400, "page_age": None}]}
    wire = [{"role": "user", "content": [document, {"type": "text", "text": "Summarise it."}]},
            {"role": "assistant", "content": [search, found, {"type": "text", "text": "Done."},
                                              {"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": [{"type": "search_result", "source": "s", "title": "t",
                                                       "content": [{"type": "text", "text": "hit"}]}]}]}]
    messages = from_anthropic(wire)
    assert to_anthropic(messages) == wire
    kept = messages[1].content[1]
    assert isinstance(kept, Opaque) and kept.kind == "web_search_tool_result" and kept.data == found
    assert messages[1].tool_uses[0].id == "t1"  # a server tool's call is not the client's to answer
    count = default_counter().count_message
    assert count(messages[1]) > count(from_anthropic([{**wire[1], "content": wire[1]["content"][2:]}])[0]) + 100


def test_a_block_without_a_type_names_its_message_and_block():
    wire = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": [{"source": {}}]}]
    with pytest.raises(FormatError, match=r"message 2, block 0: a content block needs a 'type' string, not None"):
        from_anthropic(wire)


def test_a_tool_call_inside_a_tool_result_is_rejected():
    wire = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a",
                                          "content": [{"type": "tool_use", "id": "b", "name": "x", "input": {}}]}]}]
    with pytest.raises(FormatError, match="message 0.*content item 0 has type 'tool_use'"):
        from_anthropic(wire)


@pytest.mark.parametrize(
    ("message", "pattern"),
    [
        ("hello", r"message 1: a message must be an object"),
        ({"content": "x"}, r"message 1: the message has no 'role'"),
        ({"role": "system", "content": "x"}, r"message 1: role 'system' is not an Anthropic"),
        ({"role": "user"}, r"message 1: the message has no 'content'"),
        ({"role": "user", "content": 3}, r"message 1: content must be a string or a list"),
        ({"role": "user", "content": [{"type": "text"}]}, r"message 1, block 0: text block has no 'text'"),
        ({"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]}, r"has no 'signature'"),
    ],
)
def test_malformed_messages_name_the_index(message, pattern):
    with pytest.raises(FormatError, match=pattern):
        from_anthropic([{"role": "user", "content": "ok"}, message])


def test_message_from_dict_without_index_still_explains():
    with pytest.raises(FormatError, match="^the message has no 'role'$"):
        message_from_dict({})


def test_system_message_cannot_be_rendered():
    with pytest.raises(InputError, match="message 0: a system message"):
        to_anthropic([Message(role="system", content=(Text(text="s"),))])


def test_private_extras_never_reach_the_wire():
    use = ToolUse(id="mswe-0", name="bash", input={"command": "ls"},
                  extra={"synthetic": True, "openai_arguments": "{}", "lossless_x": 1, "caller": {"type": "direct"}})
    assert block_to_dict(use) == {"type": "tool_use", "id": "mswe-0", "name": "bash",
                                  "input": {"command": "ls"}, "caller": {"type": "direct"}}


def test_is_error_set_later_wins_over_a_recorded_false():
    from dataclasses import replace

    [m] = from_anthropic([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "is_error": False}]}])
    flipped = replace(m.content[0], is_error=True)
    assert block_to_dict(flipped)["is_error"] is True
