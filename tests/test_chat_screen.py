"""The pure parts of the chat's screen: where a streaming answer's finished Markdown blocks end,
and the notice a stage's detail becomes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lossless.chat.screen import elapsed, settled
from lossless.chat.status import plural, tidy

LINES = st.lists(st.sampled_from(["", "text", "- item", "```", "```python", "x = 1", "# Head", "   "]), max_size=30)


@given(LINES, LINES)
def test_a_settled_block_stays_settled_as_the_answer_grows(first, more):
    """What was printed for good is never taken back: the boundary only moves forward, and it
    always lies after a blank line outside a code fence."""
    text = "\n".join(first)
    grown = text + "\n" + "\n".join(more)
    end = settled(text)
    assert 0 <= end <= len(text) and settled(grown) >= end
    if end:
        before = text[:end].splitlines()
        assert before[-1].strip() == ""
        assert sum(line.strip().startswith("```") for line in before) % 2 == 0


def test_a_code_block_is_not_cut_at_its_blank_lines():
    text = "Intro.\n\n```python\nx = 1\n\ny = 2\n```\n\nAfter"
    assert text[:settled(text)] == "Intro.\n\n```python\nx = 1\n\ny = 2\n```\n\n"
    assert settled("one paragraph, still being written") == 0


def test_a_notice_says_each_number_once_in_plain_english():
    detail = ("summarized 29 messages (6,427 tokens) with the model in 1 call(s), kept 5 round(s) verbatim, "
              "re-attached 5 file(s) and 0 instruction file(s): 11,095 → 9,398 tokens (threshold 10,800)")
    assert tidy(detail) == ("summarized 29 messages (6,427 tokens) with the model in 1 call, kept 5 rounds verbatim, "
                            "re-attached 5 files")
    assert tidy("summarized 1 messages (3 tokens)") == "summarized 1 message (3 tokens)"
    assert plural(1, "call") == "1 call" and plural(2_000, "call") == "2,000 calls"
    assert plural(1, "entry", "entries") == "1 entry" and plural(0, "entry", "entries") == "0 entries"
    assert [elapsed(s) for s in (0.4, 59.9, 61, 3_599)] == ["0s", "59s", "1m 01s", "59m 59s"]
