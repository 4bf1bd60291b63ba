"""What a library caller passes by mistake is named in one line: the messages, the system prompt
and the tools by what they are, a window by its type; never a ``TypeError`` from inside a count."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless import ContextManager
from lossless.errors import ConfigError, FormatError

HELLO = [{"role": "user", "content": "hello"}]
NOT_A_LIST = st.one_of(st.text(max_size=20), st.binary(max_size=20), st.integers(), st.floats(allow_nan=False),
                       st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3), st.none(),
                       st.booleans())


@given(NOT_A_LIST)
def test_messages_that_are_not_a_list_are_named_as_such(value):
    with pytest.raises(FormatError) as e:
        ContextManager(window=8_000, transcript=False).prepare(value)
    text = str(e.value)
    assert "\n" not in text and text.startswith("messages must be a list of messages, not ")


@given(st.one_of(st.integers(), st.floats(allow_nan=False), st.binary(max_size=5), st.booleans(),
                 st.dictionaries(st.text(max_size=5), st.text(max_size=5), min_size=1, max_size=3),
                 st.lists(st.one_of(st.text(max_size=5), st.integers()), min_size=1, max_size=3)))
def test_a_system_prompt_or_tools_of_the_wrong_shape_are_named(value):
    cm = ContextManager(window=8_000, transcript=False)
    with pytest.raises(FormatError, match=r"^system"):
        cm.prepare(HELLO, system=value)
    if not isinstance(value, list) or any(not isinstance(v, dict) for v in value):
        with pytest.raises(FormatError, match=r"^tools"):
            cm.prepare(HELLO, tools=value if not isinstance(value, (str,)) else [value])


def test_the_right_shapes_still_pass():
    cm = ContextManager(window=8_000, transcript=False)
    tools = [{"name": "bash", "description": "run", "input_schema": {"type": "object"}}]
    assert cm.prepare(HELLO, system="be brief", tools=tools).messages == HELLO
    assert cm.prepare(tuple(HELLO), system=[{"type": "text", "text": "be brief"}], tools=tuple(tools)).messages == HELLO
    assert cm.prepare(iter(HELLO)).messages == HELLO


@pytest.mark.parametrize("window", ["32000", 32000.0, True, None, [32000]])
def test_a_window_that_is_not_a_whole_number_is_a_config_error(window):
    with pytest.raises(ConfigError, match="whole number of tokens"):
        ContextManager(window=window)
    with pytest.raises(ConfigError, match="whole number of tokens"):
        ContextManager(window=8_000, max_output=str(1000))
