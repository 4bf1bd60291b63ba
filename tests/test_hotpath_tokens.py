"""The estimator's integer-bit counts are its byte scans' counts: ``count_text`` gives the same number
whichever path counted a text (``_features`` up to 256 KiB, ``_scanned`` beyond)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from lossless import tokens

# Runs of each class (letters of both cases, digits, blanks, line breaks, backslashes, other ASCII
# punctuation and control bytes) and of UTF-8 lead bytes of every length, lone surrogates included.
_PIECES = st.sampled_from(["a", "Z", "aB", "Ab", "7", "123", "1234567", " ", "  ", "\t", " 1", "\n", "\r\n", "\\", "\\\\",
                           ".", "--", "{}", "\x00", "\x7f", "é", "ж", " ж", ".ж", "\nж", "अ", "→", "—", "中", "ア",
                           "😀", "\ud800", "\u0800", "\u07ff", "\u2fff", "\u3000"])
_TEXT = st.one_of(st.lists(_PIECES, max_size=60).map("".join),
                  st.text(st.characters(blacklist_categories=()), max_size=80))


@settings(max_examples=500, deadline=None)
@given(_TEXT)
def test_bit_counts_are_the_scanned_counts(text: str) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    if not raw:
        return
    assert tokens._features(raw) == tokens._scanned(raw)
    assert tokens._high_features(raw) == tokens._scanned_high(raw)


def test_a_text_beyond_the_bit_path_is_counted_by_the_scans() -> None:
    counter = tokens.ContentAwareEstimator()
    unit = "def f(x):  return x\\n + 1234 → 中\n"
    k = tokens._ONES_BYTES // len(unit.encode()) + 1
    long = unit * k
    assert len(long.encode()) > tokens._ONES_BYTES
    # The scans see k units: every feature of one unit k times (each unit starts after a line break).
    assert tokens._scanned(long.encode()) == tuple(k * n for n in tokens._features(unit.encode()))
    assert tokens._scanned_high(long.encode()) == tuple(k * n for n in tokens._high_features(unit.encode()))
    assert counter.count_text(long) >= k * counter.count_text(unit) - k
