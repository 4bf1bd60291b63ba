"""The texts lossless puts in place of what it moves out of the context.

Every marker names its handle in the same form, ``handle=sha256:<24 hex>``, and
tells the model how to get the original back.  An account line names an item by its short
handle (``short``: ``sha256:`` and the first 8 hex digits): the store resolves any unique
start of a handle of at least 8 digits, so the short form and the full one recall the same.  Stages recognise markers by their
text (not only by metadata) so that a history that went through JSON and back is
still compacted idempotently: a marker is never persisted, cleared or re-counted
as new content.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

HANDLE_HEX = 24
"""Hex digits of a full handle (of the content's SHA-256)."""
SHORT_HEX = 8
"""Hex digits of a short handle: one in 4 billion, so a store of a million artifacts has about
one chance in 4,000 that a given short handle is ambiguous — and then recall names the
candidates, each by its full handle."""
HANDLE_RE = re.compile(rf"sha256:[0-9a-f]{{{SHORT_HEX},{HANDLE_HEX}}}")
"""A handle, full or short (any start of a full one of at least ``SHORT_HEX`` digits)."""
_LOOSE_HANDLE = re.compile(rf"(?:handle\s*[=:]\s*)?(?:sha256:)?([0-9a-f]{{{SHORT_HEX},{HANDLE_HEX}}})", re.IGNORECASE)


def as_handle(text: str) -> str:
    """The handle a caller meant: ``text`` with what a model tends to wrap a handle in taken off —
    quotes, backticks, brackets, a ``handle=`` label, a missing ``sha256:``, upper-case hex.  Any other
    text comes back stripped, for the store to refuse by name."""
    bare = text.strip().strip("`'\"<>[](){}").strip()
    m = _LOOSE_HANDLE.fullmatch(bare)
    return f"sha256:{m.group(1).lower()}" if m else text.strip()


RECALL_HINT = "call the recall tool with this handle (or run `lossless recall {handle}`) to read it in full"
BRIEF_HINT = "the recall tool reads it in full"
"""The hint of the markers a context holds many of (a cleared result, a snip's header): the handle
once, not twice — a third of a cleared result's marker was the long hint."""

PERSISTED_OPEN = "<persisted-output"
KEY_LINE = "  | "
"""What stands before a line quoted verbatim from an output (an account's key lines, a stored output's)."""
CLEARED_PREFIX = "[lossless: cleared"
SNIPPED_PREFIX = "[lossless: snipped"
SUMMARY_OPEN = "<lossless-summary"
FOLDED_PREFIX = "[lossless: folded"
THINNED_PREFIX = "[lossless: thinned"


def persisted(*, handle: str, chars: int, lines: int, preview: str, tool: str | None, what: str | None = None,
              keys: Sequence[str] = ()) -> str:
    """A stored output's place in context: its size, a preview of its head and, when given, ``keys``:
    lines further on that stand out (``account.keylines``), each as it was, under ``KEY_LINE``."""
    what = what or (f"output of {tool}" if tool else "tool output")
    more = "".join(f"{KEY_LINE}{line}\n" for line in keys)
    return (
        f'{PERSISTED_OPEN} handle="{handle}" chars="{chars}" lines="{lines}">\n'
        f"The {what} was {chars:,} characters ({lines:,} lines), too large to keep in context. "
        f"It is stored in full; {RECALL_HINT.format(handle=handle)}. Do not assume what is not shown below.\n"
        f"Preview (first {len(preview):,} characters):\n{preview}\n"
        + (f"Lines further on that stand out (errors and warnings, definitions, identifiers, then the rarest):\n{more}"
           if more else "")
        + "</persisted-output>"
    )


def cleared(*, handle: str, tool: str | None, chars: int, outcome: str = "") -> str:
    """One line in place of an old tool result; the call itself stays in context, so the
    line names what the result said (``outcome``) and where the whole of it is."""
    what = f"{tool} result" if tool else "tool result"
    said = f" → {outcome}" if outcome else ""
    return f"{CLEARED_PREFIX} an older {what} ({chars:,} characters){said}; handle={handle} — {BRIEF_HINT}]"


def folded(*, handle: str, lines: int, repeated: int, body: str, inputs: bool = False) -> str:
    """An older tool result with the runs of lines a later output (``inputs``: or the input of its
    own or a later call) repeats taken out: what only it said stays verbatim, each run becomes
    ``fold_run`` (or ``echo_run``, naming the call) and the whole text is one recall away."""
    source = "a later output or a call's input" if inputs else "a later output"
    return (f"{FOLDED_PREFIX}: {repeated} of {lines} lines repeat {source} and are shown there; "
            f"whole output: handle={handle}]\n{body}")


def thinned(*, handle: str, chars: int, body: str) -> str:
    """An older reply of the model's with its reasoning taken out: its conclusion and code stay
    (``body``), and the whole text is one recall away."""
    return f"{THINNED_PREFIX} an older reply of {chars:,} characters to its conclusion and code; whole: handle={handle}]\n{body}"


def thinned_body(text: str) -> str:
    """What a thinned reply still shows (``text`` itself when it is not one)."""
    return text.split("\n", 1)[1] if text.startswith(THINNED_PREFIX) and "\n" in text else text


def fold_run(lines: int) -> str:
    """The line in place of a run of ``lines`` lines that a later output shows again."""
    return f"[… {counted(lines, 'line')} repeated in a later output …]"


ECHO_SOURCE = "an earlier output"
"""What an echoed result's header says its repeated lines are shown by (a folded one's: a later output)."""


ECHO_INPUT_SOURCE = f"{ECHO_SOURCE} or a call's input"
"""The same, when some of the lines are shown by what a call was given (a file written, a heredoc)."""


def echoed(*, handle: str, lines: int, repeated: int, body: str, inputs: bool = False) -> str:
    """A new tool result with the runs of lines an earlier output in context shows (``inputs``: or
    the input of a call in context) taken out."""
    source = ECHO_INPUT_SOURCE if inputs else ECHO_SOURCE
    return (f"{FOLDED_PREFIX}: {repeated} of {lines} lines repeat {source} and are shown there; "
            f"whole output: handle={handle}]\n{body}")


def echo_run(lines: int, where: str = "", *, given: bool = False) -> str:
    """The line in place of a run of ``lines`` lines that an earlier output (``where``: its call,
    when known) shows; ``given``: that the input of the call ``where`` shows."""
    if given:
        return f"[… {counted(lines, 'line')} as in the input of {where or 'a call'} …]"
    return f"[… {counted(lines, 'line')} as in the output of {where} …]" if where else \
        f"[… {counted(lines, 'line')} as in {ECHO_SOURCE} …]"


RUN_LINE = re.compile(r"\[… \d+ lines? (?:repeated in a later output|as in .*) …\]")
"""A line that stands for a run of lines shown elsewhere (``fold_run``, ``echo_run``): it says
nothing of the output it sits in."""


def without_runs(body: str) -> str:
    """A folded or echoed result's body without its run lines: what only it says."""
    if "[… " not in body:
        return body
    return "\n".join(line for line in body.split("\n") if not RUN_LINE.fullmatch(line))


def echoed_handle(text: str) -> str | None:
    """The handle of the whole output behind an echoed result, or None when ``text`` is not one."""
    handle = folded_handle(text)
    return handle if handle is not None and ECHO_SOURCE in _first_line(text) else None


def _first_line(text: str) -> str:
    """The first line of ``text``, without copying the rest (a result can be megabytes)."""
    end = text.find("\n")
    return text if end < 0 else text[:end]


def folded_handle(text: str) -> str | None:
    """The handle of the whole output behind a folded result, or None when ``text`` is not one."""
    if not text.startswith(FOLDED_PREFIX):
        return None
    found = HANDLE_RE.search(_first_line(text))
    return found.group(0) if found else None


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 ("1 round", "3 rounds")."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def snipped(*, handle: str, messages: int, rounds: int, tokens: int, account: str = "", brief: bool = False) -> str:
    """The message in place of snipped rounds: a header naming the range's handle, then
    the account of what the rounds held (``lossless.account``)."""
    # "N earlier messages" stays as it is for any N: account.py reads it back from the marker.
    if brief:
        head = f"{SNIPPED_PREFIX} {messages} earlier messages; handle={handle}]"
    else:
        head = (f"{SNIPPED_PREFIX} {messages} earlier messages ({counted(rounds, 'round')}, about {tokens:,} tokens) "
                f"to make room; handle={handle} — {BRIEF_HINT}]")
    if not account or brief:  # brief: a small window's account, its headings enough of a guide
        return f"{head}\n{account}" if account else head
    return (f"{head}\nWhat they held, item by item (recall a line's handle to read that item in full; "
            f"do not guess what is not shown):\n{account}")


LEGACY_PREFIXES = ("[recollect: cleared", "[recollect: snipped", "<recollect-summary")
"""The markers as the project wrote them under its former name: a history from then is still
recognised, never persisted or counted again as new content."""


def is_marker(text: str) -> bool:
    """True for any text lossless (or, before its rename, recollect) wrote in place of moved content."""
    return text.startswith((PERSISTED_OPEN, CLEARED_PREFIX, SNIPPED_PREFIX, SUMMARY_OPEN, FOLDED_PREFIX,
                            THINNED_PREFIX, *LEGACY_PREFIXES))


def handles_in(text: str) -> list[str]:
    return HANDLE_RE.findall(text)


def short(handle: str) -> str:
    """``handle`` as an account line shows it: ``sha256:`` and its first ``SHORT_HEX`` digits
    (a third of the tokens of the full form)."""
    return handle[: len("sha256:") + SHORT_HEX]


def is_full(handle: str) -> bool:
    return len(handle) == len("sha256:") + HANDLE_HEX


SUMMARY_CLOSE = "</lossless-summary>"


def summary(*, handle: str, messages: int, tokens: int, body: str) -> str:
    """The fallback summary: a structured state of ``messages`` replaced messages.

    ``body`` is Markdown (sections under ``## `` headers); the wrapper names the handle
    that recalls the exact replaced history.
    """
    return (
        f'{SUMMARY_OPEN} handle="{handle}" messages="{messages}" tokens="{tokens}">\n'
        f"This replaces {counted(messages, 'earlier message')} (about {tokens:,} tokens) with a summary built without a model. "
        f"The originals are stored in full; {RECALL_HINT.format(handle=handle)}.\n\n"
        f"{body}\n{SUMMARY_CLOSE}"
    )
