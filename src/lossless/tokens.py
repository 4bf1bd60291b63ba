"""Token accounting: the ``TokenCounter`` protocol and its implementations.

- ``ContentAwareEstimator`` (the default, ``default_counter()``): no dependency, ~linear
  time, estimates o200k-class tokenizers by content class (prose, code, JSON, shell
  output, listings, non-Latin scripts, base64/hex blobs), biased slightly high.
- ``TiktokenCounter``: exact o200k/cl100k counts of the text (the ``tokenizers`` extra).
- ``ProviderCounter``: wraps a provider's count-tokens call for whole requests.
- ``Calibrator``: the next call's size = what the provider reported for the last call
  plus an estimate of what was appended since.

Invariant: every counter caches ``count_message`` in ``Message._memo[counter.name]``,
so counting a history again costs O(new messages); two counters that could disagree
never share a ``name``.  Overheads for roles, block framing, tool ids and images are
included, so ``sum(count_message) + count_system + count_tools`` approximates the
provider's input-token figure for the request.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from dataclasses import astuple, dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from .messages import Block, Image, Message, Opaque, RedactedThinking, Text, Thinking, ToolResult, ToolUse, block_text

__all__ = [
    "ContentAwareEstimator",
    "ProviderCounter",
    "TiktokenCounter",
    "TokenCounter",
    "Weights",
    "count_request",
    "default_counter",
    "image_tokens",
]

System = str | Sequence[Mapping[str, Any]] | None
Tools = Sequence[Mapping[str, Any]] | None


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens. ``count_message`` is cached per message object (in
    ``Message._memo[name]``), so counting a history again costs O(new messages)."""

    @property
    def name(self) -> str:
        """Which counter and settings: part of the memo key, so different counts never mix."""
        ...

    def count_text(self, text: str) -> int: ...

    def count_block(self, block: Block) -> int: ...

    def count_message(self, message: Message) -> int: ...

    def count_system(self, system: str | Sequence[Mapping[str, Any]] | None) -> int: ...

    def count_tools(self, tools: Sequence[Mapping[str, Any]] | None) -> int: ...


# --- structure: what every counter adds around the text ---------------------------------

MESSAGE_OVERHEAD = 4
"""Role and turn delimiters of one message."""
BLOCK_OVERHEAD = 3
"""Framing of one content block."""
TOOL_USE_OVERHEAD = 12
"""A tool_use block's id, name field and input wrapper."""
TOOL_RESULT_OVERHEAD = 8
"""A tool_result block's tool_use_id and wrapper."""
TOOLS_PREAMBLE = 350
"""The provider's own tool-use system prompt, added once when any tool is declared
(Anthropic documents 313–346 tokens for its current models)."""
TOOL_OVERHEAD = 8
"""Framing of one tool definition, on top of its JSON text."""
IMAGE_TOKENS = 1_600
"""An image whose size is unknown: Anthropic's cost of a full-size image."""


def image_tokens(source: Mapping[str, Any], extra: Mapping[str, Any] | None = None, default: int = IMAGE_TOKENS) -> int:
    """Anthropic's image cost, ``width × height / 750`` after its resize (long edge ≤ 1568 px,
    capped at ``default``).  The size comes from ``width``/``height`` in ``source`` or ``extra``,
    else from the PNG/GIF/JPEG/WebP header of base64 data; unknown → ``default``."""
    size = _declared_size(source) or _declared_size(extra or {}) or _sniff_size(source)
    if size is None:
        return default
    w, h = size
    scale = min(1.0, 1568 / max(w, h, 1))
    return max(1, min(default, math.ceil(w * scale * h * scale / 750)))


def _declared_size(d: Mapping[str, Any]) -> tuple[int, int] | None:
    w, h = d.get("width"), d.get("height")
    return (w, h) if isinstance(w, int) and isinstance(h, int) and w > 0 and h > 0 else None


def _sniff_size(source: Mapping[str, Any]) -> tuple[int, int] | None:
    data = source.get("data")
    if source.get("type") != "base64" or not isinstance(data, str):
        return None
    try:
        head = base64.b64decode(data[:87_384])  # 64 KiB: JPEG's frame header can follow EXIF
    except (binascii.Error, ValueError):
        return None
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24:
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP" and head[12:16] == b"VP8X" and len(head) >= 30:
        return 1 + int.from_bytes(head[24:27], "little"), 1 + int.from_bytes(head[27:30], "little")
    if head[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(head) and head[i] == 0xFF:
            marker, length = head[i + 1], int.from_bytes(head[i + 2 : i + 4], "big")
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                return int.from_bytes(head[i + 7 : i + 9], "big"), int.from_bytes(head[i + 5 : i + 7], "big")
            i += 2 + length
    return None


class _Structured:
    """Counts messages, blocks, system prompts and tool schemas from ``count_text``.

    Subclasses set ``name`` and implement ``count_text``; everything else (overheads,
    images, the per-message memo) is shared, so counters differ only in the text."""

    name: str
    image_default: int = IMAGE_TOKENS

    def count_text(self, text: str) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def count_block(self, block: Block) -> int:
        match block:
            case Text() | Thinking():
                return BLOCK_OVERHEAD + self.count_text(block_text(block))
            case RedactedThinking():
                # Opaque ciphertext: counted as the blob it is, which errs high.
                return BLOCK_OVERHEAD + self.count_text(block.data)
            case ToolUse():
                return TOOL_USE_OVERHEAD + self.count_text(block_text(block))
            case ToolResult():
                if isinstance(block.content, str):
                    return TOOL_RESULT_OVERHEAD + self.count_text(block.content)
                return TOOL_RESULT_OVERHEAD + sum(self.count_block(b) for b in block.content)
            case Image():
                return BLOCK_OVERHEAD + image_tokens(block.source, block.extra, self.image_default)
            case Opaque():  # counted as its JSON, which errs high (an encrypted or base64 field)
                return BLOCK_OVERHEAD + self.count_text(block_text(block))
        raise TypeError(f"unknown block type {type(block).__name__!r}")

    def count_message(self, message: Message) -> int:
        """Tokens of one message, computed once per message object and counter name."""
        n = message._memo.get(self.name)
        if n is None:
            n = MESSAGE_OVERHEAD + sum(self.count_block(b) for b in message.content)
            extra = message.meta.get("openai_extra")
            if extra:  # what a Chat Completions assistant sends in place of content: its refusal, …
                n += sum(self.count_text(v if isinstance(v, str) else _json(v))
                         for k, v in extra.items() if k in _OPENAI_ANSWERS and v)
            message._memo[self.name] = n
        return n

    def count_system(self, system: System) -> int:
        """A system prompt: a string or a list of ``{"type": "text", "text": ...}`` blocks."""
        if not system:
            return 0
        if isinstance(system, str):
            return MESSAGE_OVERHEAD + self.count_text(system)
        return MESSAGE_OVERHEAD + sum(
            BLOCK_OVERHEAD + self.count_text(b["text"] if isinstance(b.get("text"), str) else _json(b)) for b in system
        )

    def count_tools(self, tools: Tools) -> int:
        """Tool definitions (Anthropic or OpenAI shape), counted as their JSON text plus the
        provider's tool-use preamble."""
        if not tools:
            return 0
        return TOOLS_PREAMBLE + sum(TOOL_OVERHEAD + self.count_text(_json(t)) for t in tools)

    def count_request(self, messages: Sequence[Message], system: System = None, tools: Tools = None) -> int:
        """The whole request: messages, system prompt and tool definitions."""
        return self.count_system(system) + self.count_tools(tools) + sum(self.count_message(m) for m in messages)


_OPENAI_ANSWERS = frozenset({"refusal", "audio", "function_call"})


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


# --- the content-aware estimator --------------------------------------------------------


def _table(default: str, **classes: Sequence[int]) -> bytes:
    """A ``bytes.translate`` table mapping each byte to a one-letter class."""
    out = bytearray(default.encode() * 256)
    for cls, members in classes.items():
        for byte in members:
            out[byte] = ord(cls[0])
    return bytes(out)


_LOWER, _UPPER, _DIGIT = range(0x61, 0x7B), range(0x41, 0x5B), range(0x30, 0x3A)
_LETTER = (*_LOWER, *_UPPER)
_PUNCT = tuple(b for b in range(0x80) if not (chr(b).isalnum() or b in b" \t\n\r"))
# One letter per class of UTF-8 byte: a/A letters, d digits, s blanks, n newlines, p punctuation,
# c continuation bytes; leads: l Latin supplements (U+0080–037F), y Greek/Cyrillic/Hebrew/Arabic…
# (U+0380–07FF), i Indic/Thai/Georgian/Vietnamese (U+0800–1FFF), x symbols, arrows, box drawing
# (U+2000–2FFF), k CJK, kana, Hangul, full-width forms (U+3000–FFFF), e emoji and beyond.
_CLASS = _table(
    "p", a=_LOWER, A=_UPPER, d=_DIGIT, s=b" \t", n=b"\n\r", c=range(0x80, 0xC0), l=range(0xC0, 0xCE),
    y=range(0xCE, 0xE0), i=(0xE0, 0xE1), x=(0xE2,), k=range(0xE3, 0xF0), e=range(0xF0, 0x100),
)
_LETTERS = _table(".", a=_LETTER)
_DIGITS = _table(".", d=_DIGIT)
_PUNCTS = _table(".", p=_PUNCT)
_BLANKS = _table(".", s=b" \t")

# The same classes as bits (``_features``): each byte becomes one bit per class it is in, the text one
# integer, and each count a few operations on whole integers (shift, and, popcount) — C loops over
# machine words, where a ``bytes.count`` compares byte after byte.  ASCII classes in ``_BITS``, the
# classes of UTF-8 lead bytes in ``_HIGH_BITS`` (with a bit for what may come before a word of them).
_LO, _UP, _DI, _BL, _NL, _PU, _BS = range(7)
_BITS = bytes(
    (1 << _LO) * (b in _LOWER) | (1 << _UP) * (b in _UPPER) | (1 << _DI) * (b in _DIGIT) | (1 << _BL) * (b in b" \t")
    | (1 << _NL) * (b in b"\n\r") | (1 << _PU) * (b in _PUNCT) | (1 << _BS) * (b == 0x5C)
    for b in range(256)
)
_HIGH = "lyixke"  # the lead-byte classes of ``_CLASS``, one bit each, in this order
_BEFORE_WORD = len(_HIGH)
_HIGH_BITS = bytes(
    sum(1 << k for k, c in enumerate(_HIGH) if _CLASS[b] == ord(c)) | (1 << _BEFORE_WORD) * (_CLASS[b] in b"spn")
    for b in range(256)
)
_ONES_BYTES = 1 << 18
_ONES = int.from_bytes(b"\x01" * _ONES_BYTES, "little")
"""0x01 in each of 256 KiB: ``(x >> k) & _ONES`` is bit ``k`` of every byte of a text up to that size (the
``&`` of two non-negative integers is as long as the shorter).  Longer texts are scanned (``_scanned``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Weights:
    """Tokens per feature of a text, fitted on real agent transcripts against o200k_base
    (``bench/token_accuracy.py``) and raised ~4 % so errors lean high.

    Features follow how o200k pre-splits text: a word, a camelCase hump, a group of up to
    three digits, a punctuation run and an indentation run each start a new piece; the
    per-character terms pay for pieces longer than one token.  All weights are ≥ 0, so
    appending text never lowers a count."""

    letter: float = 0.095
    """Each ASCII letter (long words and identifiers split into several tokens)."""
    word: float = 0.65
    """Each run of ASCII letters."""
    hump: float = 2.0
    """Each lower→upper case change (camelCase, and the mixed case of base64)."""
    number: float = 1.22
    """Each run of digits."""
    digit_triple: float = 1.04
    """Each full group of three digits (o200k cuts numbers into groups of ≤ 3)."""
    space_digit: float = 1.26
    """A blank right before a digit: o200k never glues it to the number (aligned columns, line numbers)."""
    punct: float = 0.084
    """Each ASCII punctuation character."""
    punct_run: float = 0.60
    """Each run of punctuation."""
    backslash: float = 0.49
    """Each backslash (escapes in JSON strings and regexes)."""
    blank_run: float = 0.57
    """Each run of two or more blanks (indentation, aligned columns)."""
    newline: float = 0.64
    """Each line break."""
    latin_ext: float = 0.3
    """Each accented Latin or other U+0080–037F character."""
    alpha2: float = 0.085
    """Each Greek, Cyrillic, Armenian, Hebrew or Arabic character (U+0380–07FF)."""
    alpha2_word: float = 1.29
    """Each word of those scripts (a blank or punctuation before one of them)."""
    brahmic: float = 0.5
    """Each U+0800–1FFF character: Indic scripts, Thai, Georgian, Vietnamese letters."""
    symbol: float = 0.83
    """Each U+2000–2FFF character: dashes, quotes, arrows (Read's ``→``), box drawing."""
    cjk: float = 0.79
    """Each CJK ideograph, kana, Hangul syllable or full-width form (≈ 1 token per character)."""
    astral: float = 2.0
    """Each character beyond U+FFFF (emoji mostly)."""


DEFAULT_WEIGHTS = Weights()


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentAwareEstimator(_Structured):
    """The default counter: an estimate of o200k-class token counts with no dependency.

    Use it as ``default_counter()`` or ``ContentAwareEstimator()``; wrap it in a
    ``Calibrator`` to anchor it to the provider's reported usage.  ``count_text`` makes one
    UTF-8 encoding, five ``bytes.translate`` passes and about a dozen ``bytes.count`` scans,
    all in C and linear (2–4× the speed of tiktoken); ``count_message`` is memoised per
    message object.

    On the bench data (``bench/token_accuracy.py``) its mean error per content class stays
    within −1…+10 % of o200k, leaning high (undercounting is the dangerous direction), where
    chars/4 misses code by a quarter and base64, hex and CJK by 55–65 %.  Single languages
    within a script vary more (Ukrainian and Greek run ~20 % under, Russian ~10 % over).
    Claude's own tokenizer counts more than o200k: anchor it with a ``Calibrator``.
    Changing ``weights`` or ``image_default`` changes ``name``, so cached counts of
    different settings never mix.
    """

    weights: Weights = DEFAULT_WEIGHTS
    image_default: int = IMAGE_TOKENS
    name: str = field(init=False, default="estimate-v1")

    def __post_init__(self) -> None:
        if self.weights != DEFAULT_WEIGHTS or self.image_default != IMAGE_TOKENS:
            digest = hashlib.blake2b(repr((astuple(self.weights), self.image_default)).encode(), digest_size=4)
            object.__setattr__(self, "name", f"estimate-v1-{digest.hexdigest()}")

    def count_text(self, text: str) -> int:
        """Estimated tokens of ``text``: ≥ 1 for any non-empty text, never lower after appending."""
        if not text:
            return 0
        w = self.weights
        raw = text.encode("utf-8", "surrogatepass")
        fast = len(raw) <= _ONES_BYTES
        (letter, word, hump, number, triple, space_digit, punct, punct_run, backslash, blank_run,
         newline) = _features(raw) if fast else _scanned(raw)
        total = (
            w.letter * letter
            + w.word * word
            + w.hump * hump
            + w.number * number
            + w.digit_triple * triple
            + w.space_digit * space_digit
            + w.punct * punct
            + w.punct_run * punct_run
            + w.backslash * backslash
            + w.blank_run * blank_run
            + w.newline * newline
        )
        if not text.isascii():  # O(1) in CPython: the flag is stored on the string
            latin, alpha2, alpha2_word, brahmic, symbol, cjk, astral = (_high_features(raw) if fast
                                                                       else _scanned_high(raw))
            total += (
                w.latin_ext * latin
                + w.alpha2 * alpha2
                + w.alpha2_word * alpha2_word
                + w.brahmic * brahmic
                + w.symbol * symbol
                + w.cjk * cjk
                + w.astral * astral
            )
        return max(1, math.ceil(total))


Features = tuple[int, int, int, int, int, int, int, int, int, int, int]
"""Letters, letter runs, lower→upper changes, digit runs, full digit triples, blanks before a digit,
punctuation, punctuation runs, backslashes, runs of two or more blanks, line breaks."""
HighFeatures = tuple[int, int, int, int, int, int, int]
"""Lead bytes of Latin supplements, of Greek/Cyrillic/… (and how many of those follow a blank,
punctuation or a line break), of Indic/…, of symbols, of CJK, of astral characters."""


def _features(raw: bytes) -> Features:
    """``_scanned(raw)``, from one integer of class bits (``raw`` at most ``_ONES_BYTES`` long).

    A run of a class starts where a byte of it follows one that is not (or at byte 0): the class's
    count minus its bytes whose predecessor (``<< 8``: the byte before) is of it too."""
    x = int.from_bytes(raw.translate(_BITS), "little")
    ones = _ONES
    lower, upper, digit = x & ones, (x >> _UP) & ones, (x >> _DI) & ones
    blank, punct = (x >> _BL) & ones, (x >> _PU) & ones
    letter = lower | upper
    n_letter, n_digit, n_punct = letter.bit_count(), digit.bit_count(), punct.bit_count()
    blanks2 = blank & (blank >> 8)  # a blank followed by a blank
    return (
        n_letter,
        n_letter - (letter & (letter << 8)).bit_count(),
        (upper & (lower << 8)).bit_count(),
        n_digit - (digit & (digit << 8)).bit_count(),
        raw.translate(_DIGITS).count(b"ddd") if digit & (digit << 8) & (digit << 16) else 0,
        (digit & (blank << 8)).bit_count(),
        n_punct,
        n_punct - (punct & (punct << 8)).bit_count(),
        ((x >> _BS) & ones).bit_count() if b"\\" in raw else 0,
        blanks2.bit_count() - (blanks2 & (blank << 8)).bit_count(),
        ((x >> _NL) & ones).bit_count(),
    )


def _high_features(raw: bytes) -> HighFeatures:
    """``_scanned_high(raw)``, from one integer of lead-byte class bits."""
    x = int.from_bytes(raw.translate(_HIGH_BITS), "little")
    ones = _ONES
    latin, alpha2, brahmic, symbol, cjk, astral = ((x >> k) & ones for k in range(len(_HIGH)))
    before = (x >> _BEFORE_WORD) & ones
    return (latin.bit_count(), alpha2.bit_count(), (alpha2 & (before << 8)).bit_count(), brahmic.bit_count(),
            symbol.bit_count(), cjk.bit_count(), astral.bit_count())


def _scanned(raw: bytes) -> Features:
    """The features by byte-class translations and ``bytes.count`` scans, for a text of any length.
    Each translation is dropped once counted: a 200 MB tool output peaks at three copies of its
    bytes, not six."""
    cls = raw.translate(_CLASS)
    # A run starts where a class byte follows a byte of another class (".X"), or at 0.
    letters = raw.translate(_LETTERS)
    n_letter, n_word = letters.count(b"a"), letters.count(b".a") + (letters[0] == 0x61)
    del letters
    digits = raw.translate(_DIGITS)
    n_number, n_triple = digits.count(b".d") + (digits[0] == 0x64), digits.count(b"ddd")
    del digits
    puncts = raw.translate(_PUNCTS)
    n_punct_run = puncts.count(b".p") + (puncts[0] == 0x70)
    del puncts
    blanks = raw.translate(_BLANKS)
    n_blank_run = blanks.count(b".ss") + (blanks[:2] == b"ss")
    del blanks
    return (n_letter, n_word, cls.count(b"aA"), n_number, n_triple, cls.count(b"sd"), cls.count(b"p"), n_punct_run,
            raw.count(b"\\"), n_blank_run, cls.count(b"n"))


def _scanned_high(raw: bytes) -> HighFeatures:
    cls = raw.translate(_CLASS)
    return (cls.count(b"l"), cls.count(b"y"), cls.count(b"sy") + cls.count(b"py") + cls.count(b"ny"), cls.count(b"i"),
            cls.count(b"x"), cls.count(b"k"), cls.count(b"e"))


def default_counter() -> TokenCounter:
    """The counter lossless uses when none is given: ``ContentAwareEstimator()``."""
    return ContentAwareEstimator()


# --- exact and provider counters ---------------------------------------------------------


class TiktokenCounter(_Structured):
    """Exact token counts of the text with a tiktoken encoding (default ``o200k_base``);
    structure overheads and images as in the estimator.

    Needs the ``tokenizers`` extra.  The import and the vocabulary load happen on first
    use; set ``TIKTOKEN_CACHE_DIR`` to a directory holding the BPE file to stay offline.
    Several times slower than ``ContentAwareEstimator``: a reference, not a default."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        self.encoding_name = encoding
        self.name = f"tiktoken-{encoding}"
        self._encoding: Any = None

    def __repr__(self) -> str:
        return f"TiktokenCounter(encoding={self.encoding_name!r})"

    @property
    def encoding(self) -> Any:
        if self._encoding is None:
            try:
                import tiktoken
            except ImportError as exc:
                raise ImportError(
                    "TiktokenCounter needs tiktoken: pip install 'lossless[tokenizers]'"
                ) from exc
            self._encoding = tiktoken.get_encoding(self.encoding_name)
        return self._encoding

    def count_text(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text)) if text else 0


RequestCounter = Callable[[Sequence[Message], System, Tools], int]


class ProviderCounter:
    """Whole-request counts from a callable, typically a provider's count-tokens endpoint:
    ``fn(messages, system, tools) -> int``.

    ``count_request`` calls ``fn`` (one network round trip, so call it per request, not per
    message); the per-text, per-message, system and tools counts that the pipeline sums
    come from ``fallback`` (the estimator by default) and share its name and memo."""

    def __init__(self, fn: RequestCounter, fallback: TokenCounter | None = None) -> None:
        self.fn = fn
        self.fallback = fallback if fallback is not None else default_counter()
        self.name = self.fallback.name

    def __repr__(self) -> str:
        return f"ProviderCounter({self.fn!r}, fallback={self.fallback!r})"

    def count_text(self, text: str) -> int:
        return self.fallback.count_text(text)

    def count_block(self, block: Block) -> int:
        return self.fallback.count_block(block)

    def count_message(self, message: Message) -> int:
        return self.fallback.count_message(message)

    def count_system(self, system: System) -> int:
        return self.fallback.count_system(system)

    def count_tools(self, tools: Tools) -> int:
        return self.fallback.count_tools(tools)

    def count_request(self, messages: Sequence[Message], system: System = None, tools: Tools = None) -> int:
        n = self.fn(messages, system, tools)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"count-tokens callable {self.fn!r} returned {n!r}, expected a non-negative int")
        return n


class ScaledCounter:
    """``base``'s counts times ``ratio``: a request's size in the provider's tokens, as calibration
    measured it (``ContextManager.prepare`` hands it to the stages when the calibrated estimate is
    not the raw count).  A stage then counts what it removes in the units the total is in: counted
    raw out of a calibrated total, every token the provider counts beyond the estimate stayed
    behind as if it were still there, and a compaction at a ratio of 1.4 landed at 42 % of the
    threshold instead of 60 %.  Counts come from ``base``'s memo (O(1) a message)."""

    def __init__(self, base: TokenCounter, ratio: float) -> None:
        self.base = base
        self.ratio = ratio
        self.name = f"{base.name}*{ratio:.6g}"

    def __repr__(self) -> str:
        return f"ScaledCounter({self.base!r}, {self.ratio:.6g})"

    def _scaled(self, n: int) -> int:
        return math.ceil(n * self.ratio) if n else 0

    def count_text(self, text: str) -> int:
        return self._scaled(self.base.count_text(text))

    def count_block(self, block: Block) -> int:
        return self._scaled(self.base.count_block(block))

    def count_message(self, message: Message) -> int:
        return self._scaled(self.base.count_message(message))

    def count_system(self, system: System) -> int:
        return self._scaled(self.base.count_system(system))

    def count_tools(self, tools: Tools) -> int:
        return self._scaled(self.base.count_tools(tools))


def count_request(counter: TokenCounter, messages: Sequence[Message], system: System = None, tools: Tools = None) -> int:
    """Tokens of a whole request with any counter: its own ``count_request`` when it has one
    (``ProviderCounter`` asks the provider), else the sum of the parts."""
    own = getattr(counter, "count_request", None)
    if own is not None:
        return own(messages, system, tools)
    return counter.count_system(system) + counter.count_tools(tools) + sum(counter.count_message(m) for m in messages)
