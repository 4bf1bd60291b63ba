"""Snip serialises each removed message once while it grows the range: the archive it stores is
still exactly ``account.flat_archive`` of the range (the bytes behind the range's handle)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from strategies import histories

from lossless import account
from lossless.messages import Message, Text
from lossless.stages.snip import _archive
from lossless.store import ArtifactStore


@settings(max_examples=60, deadline=None)
@given(histories(max_rounds=8), st.integers(0, 3), st.booleans())
def test_the_archive_grown_a_round_at_a_time_is_the_flat_archive(tmp_path_factory: pytest.TempPathFactory, messages: list[Message],
                                                                  start: int, with_account: bool) -> None:
    store = ArtifactStore(tmp_path_factory.mktemp("store"))
    if with_account:  # an earlier account in the range is left out of the archive
        messages = [*messages[:start], Message(role="user", content=(Text(text="<lossless-snipped x>"),),
                                               meta={"lossless": {"kind": "snip"}}), *messages[start:]]
    pieces: list[str] = []
    for stop in range(start, len(messages) + 1):
        assert _archive(messages[start:stop], store, pieces) == account.flat_archive(messages[start:stop], store)
