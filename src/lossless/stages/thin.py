"""Thin: an older reply of the model's keeps its conclusion and its code, not all its reasoning.

    thinned = thin(messages, start, stop, ctx)     # Thinned(messages, saved, blobs)

Past the newest rounds, what the model works from is what the tools told it — outputs it cannot
say again — while its own reasoning there has done its work: the calls it led to stand beside it,
and the newest rounds carry it on.  On the shared sessions a mini-swe-agent reply's reasoning is
about a third of the verbatim rounds a snip keeps, as much as the tool outputs they hold.

When snip fires, the assistant texts of at least ``MIN_THIN_CHARS`` beside a call in
``messages[start:stop]`` (the rounds it keeps, between the pinned head and the newest ones,
``ContextConfig.verbatim_tail_fraction`` of the threshold), oldest first and only as many as it takes
to reach the snip's target, become ``markers.thinned``: its conclusion (the
last paragraph, as an account quotes it) and its fenced code (the command a ReAct agent's
reply carries, its heads where long) under a line naming the handle of the whole text.  Nothing
else changes: no tool call, no result, no thinking block (its signature covers it), no user's
word, no answer without a call (the user read it); a reply already thinned, or one a thinned form
would hardly shorten, stays as it is.  A reply without a call that offers commands no tool ran —
two fenced blocks or more, the last its last words, as a ReAct harness rejects (mini-swe-agent's
"exactly one bash block") — is thinned like one that made a call: no reader is left waiting on it,
and on the shared and held-out runs every long reply of that shape is one the harness refused, none
an answer (none of the Claude Code sessions' answers ends in a fenced block).  The
prefix changes only where the snip changes it anyway, and one recall gives the reply back.

Pure: the originals to store are returned (``blobs``) and written by the caller only for the
replies that stay in context.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from .. import markers
from ..account import conclusion_of
from ..messages import Message, Text
from ..store import handle_for
from .base import StageContext

__all__ = ["MIN_THIN_CHARS", "Thinned", "thin", "thin_text", "unrun_commands"]

MIN_THIN_CHARS = 600
"""Replies shorter than this stay whole: the marker line alone is ~20 tokens."""
MIN_SAVED_CHARS = 300
"""A thinning must take out at least this many characters (and two fifths of the reply)."""
CODE_LINES = 12
"""The most lines of a fenced block kept whole; a longer one keeps its first and last lines."""
_FENCED = re.compile(r"^```[^\n]*\n.*?^```[ \t]*$", re.S | re.M)


@dataclass(frozen=True, slots=True)
class Thinned:
    messages: list[Message]
    saved: int
    """Tokens the thinning took out (the request's count falls by this much)."""
    blobs: dict[str, tuple[int, str]]
    """Handle → (message index, whole original text) of each thinned reply, for the caller to store
    (those of replies it keeps)."""


def _code(block: str) -> str:
    lines = block.split("\n")
    if len(lines) <= CODE_LINES + 2:  # the fences besides
        return block
    head, tail = lines[: CODE_LINES - 2], lines[-3:]
    return "\n".join([*head, f"[… {markers.counted(len(lines) - len(head) - len(tail), 'line')} …]", *tail])


def thin_text(text: str) -> tuple[str, str] | None:
    """``(handle, thinned text)`` of a reply, or None when it stays whole."""
    if len(text) < MIN_THIN_CHARS or markers.is_marker(text):
        return None
    conclusion = conclusion_of(text)
    blocks = [m.group(0) for m in _FENCED.finditer(text)]
    code = [_code(blocks[-1])] if blocks else []  # the action (a ReAct reply's command); the rest quote
    handle = markers.short(handle_for(text.encode("utf-8", "surrogatepass")))
    body = "\n".join(part for part in (conclusion, *code) if part)
    new = markers.thinned(handle=handle, chars=len(text), body=body)
    if len(text) - len(new) < max(MIN_SAVED_CHARS, 2 * len(text) // 5):
        return None
    return handle, new


def unrun_commands(message: Message) -> bool:
    """Whether a reply without a call offers commands no tool ran: two fenced blocks or more, and
    it ends in one (a harness's rejected action, not an answer to a reader)."""
    text = "\n".join(b.text for b in message.content if isinstance(b, Text)).rstrip()
    blocks = list(_FENCED.finditer(text))
    return len(blocks) >= 2 and blocks[-1].end() >= len(text)


def thin(messages: Sequence[Message], start: int, stop: int, ctx: StageContext, need: int | None = None) -> Thinned:
    """Thin the assistant replies in ``messages[start:stop]`` that made calls or offered commands no
    tool ran, oldest first, until ``need`` tokens are saved (all of them when None; see the module's
    docstring).  Any other reply without a call is an answer the user read: it stays whole."""
    out = list(messages)
    blobs: dict[str, tuple[int, str]] = {}
    saved = 0
    count = ctx.counter.count_message
    for i in range(max(0, start), min(stop, len(messages))):
        if need is not None and saved >= need:
            break
        m = messages[i]
        if m.role != "assistant" or not (m.tool_uses or unrun_commands(m)):
            continue
        blocks = list(m.content)
        changed = False
        for j, b in enumerate(blocks):
            if isinstance(b, Text):
                done = thin_text(b.text)
                if done is not None:
                    handle, new = done
                    blobs.setdefault(handle, (i, b.text))
                    blocks[j] = Text(text=new, cache_control=b.cache_control, extra=b.extra)
                    changed = True
        if changed:
            new_message = m.with_content(blocks)
            saved += count(m) - count(new_message)
            out[i] = new_message
    return Thinned(out, saved, blobs)
