"""The transcript writes what it wrote before its fast paths: each line the entry's JSON with characters
as UTF-8 (escaped only where a lone surrogate has no UTF-8 form), and each uuid a version-4 UUID."""

from __future__ import annotations

import json
import re
import uuid

from hypothesis import given, settings, strategies as st

from lossless import transcript

_TEXT = st.one_of(st.text(st.characters(blacklist_categories=()), max_size=30),
                  st.sampled_from(["plain", "\\u00e9", "é", "→", "\ud800", "\x00\x1f", "\\", '"', "\u2028", "😀"]))
_BLOCK = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}),
    st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": _TEXT,
                           "content": st.one_of(_TEXT, st.lists(st.fixed_dictionaries(
                               {"type": st.just("text"), "text": _TEXT}), max_size=3))}),
    st.fixed_dictionaries({"type": st.just("tool_use"), "id": _TEXT, "name": _TEXT,
                           "input": st.dictionaries(_TEXT, st.one_of(_TEXT, st.integers(), st.floats()), max_size=3)}),
)
_MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                  "content": st.one_of(_TEXT, st.lists(_BLOCK, max_size=4))})


def _as_before(entry: dict[str, object]) -> bytes:
    text = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(entry, separators=(",", ":")).encode("ascii") + b"\n"


@settings(max_examples=400, deadline=None)
@given(_MESSAGE, _TEXT)
def test_a_line_is_the_json_it_was(message: dict[str, object], session: str) -> None:
    entry = {"parentUuid": None, "isSidechain": False, "sessionId": session, "type": message["role"],
             "message": message, "uuid": "u", "timestamp": "t"}
    assert transcript._encode(entry) == _as_before(entry)


def test_uuids_are_version_4_and_distinct() -> None:
    made = transcript._uuid4s(200)
    assert len(set(made)) == 200
    for u in made:
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", u)
        parsed = uuid.UUID(u)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == u
