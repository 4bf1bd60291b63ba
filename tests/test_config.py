from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.config import ContextConfig
from lossless.errors import ConfigError


def test_seed_defaults_on_a_200k_window():
    b = ContextConfig(window=200_000, max_output=32_000).budget
    assert b.effective == 180_000  # window − min(max_output, 20,000)
    assert b.threshold == 167_000  # effective − 13,000
    assert b.warning == 147_000  # threshold − 20,000
    assert b.blocking == 177_000  # effective − 3,000


@given(st.integers(1024, 2_000_000), st.none() | st.integers(1, 64_000))
def test_every_window_gets_an_ordered_positive_budget(window, max_output):
    if max_output is not None and (max_output >= window or window - min(max_output, 20_000) < window // 8):
        with pytest.raises(ConfigError):
            ContextConfig(window=window, max_output=max_output)
        return
    b = ContextConfig(window=window, max_output=max_output).budget
    assert 0 < b.warning <= b.threshold < b.blocking <= b.effective < b.window


def test_an_output_reserve_that_leaves_no_room_is_an_error_not_a_collapsed_budget():
    with pytest.raises(ConfigError, match="leaves only 9 tokens"):
        ContextConfig(window=1024, max_output=1015)
    b = ContextConfig(window=1024, max_output=896).budget  # an eighth left: still ordered
    assert 0 < b.warning <= b.threshold < b.blocking <= b.effective < b.window


@pytest.mark.parametrize("window", [16_000, 32_000])
def test_small_windows_keep_most_of_their_room(window):
    b = ContextConfig(window=window).budget
    assert b.threshold > window * 0.6


def test_unknown_keys_are_errors():
    with pytest.raises(ConfigError, match="'windw'"):
        ContextConfig.from_mapping({"windw": 1000})
    assert ContextConfig.from_mapping({"window": 64_000}).window == 64_000


def test_percent_left():
    b = ContextConfig(window=200_000).budget
    assert b.percent_left(0) == 100.0
    assert b.percent_left(b.window) == 0.0
    # Measured against the window, not the threshold (a paper cut: 15.9k of 24k read "1.8 % left").
    assert ContextConfig(window=24_000).budget.percent_left(15_900) == 33.8


@pytest.mark.parametrize("values", [
    {"collapse_target_fraction": 0.95},
    {"collapse_target_fraction": 0.0},
    {"collapse_trigger_fraction": 0.5, "collapse_target_fraction": 0.6},
    {"notes_every_tokens": 0},
])
def test_collapse_and_notes_knobs_refuse_values_that_cannot_work(values):
    with pytest.raises(ConfigError) as err:
        ContextConfig(window=64_000, **values)
    assert next(iter(values)) in str(err.value)
