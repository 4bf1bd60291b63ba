"""A session read from disk: messages plus what the file recorded about them.

Every reader in ``lossless.dialects`` returns a ``Session``::

    from lossless.dialects import read_any
    s = read_any("~/.claude/projects/x/abc.jsonl")
    for call in s.calls:                      # one per recorded API response
        request = s.messages[s.request_start(call):call.index]
        response = s.messages[call.index]

``messages`` never contains the system prompt (it is in ``system``, or absent from
the file, as with Claude Code).  ``warnings`` lists, one line each, everything
the reader skipped or repaired; a reader never repairs silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping

from .messages import Message

Format = Literal["claude-code", "mini-swe-agent", "anthropic", "openai"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One recorded API call.

    The response is ``messages[index]``; the request was ``messages[start:index]``
    where ``start`` is the latest boundary index ≤ ``index`` (0 if none) — see
    ``Session.request_start``.  ``usage`` is the provider's usage dict as recorded
    (Anthropic ``input_tokens``/``cache_creation_input_tokens``/
    ``cache_read_input_tokens``/``output_tokens`` or OpenAI ``prompt_tokens``/
    ``completion_tokens``), counted once per response.
    """

    index: int
    usage: Mapping[str, Any] | None
    message_id: str | None
    model: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Boundary:
    """A compaction recorded in the file: ``messages[index]`` is the summary that
    begins the post-compaction context; ``trigger`` is ``"auto"`` or ``"manual"``."""

    index: int
    trigger: str
    pre_tokens: int | None
    post_tokens: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    path: Path | None
    format: Format
    messages: tuple[Message, ...]
    system: str | None = None
    calls: tuple[Call, ...] = ()
    boundaries: tuple[Boundary, ...] = ()
    warnings: tuple[str, ...] = ()
    session_id: str | None = None

    @property
    def dialect(self) -> Literal["anthropic", "openai"]:
        """The wire dialect the messages came from (mini-swe-agent speaks OpenAI)."""
        return "anthropic" if self.format in ("claude-code", "anthropic") else "openai"

    def request_start(self, call: Call) -> int:
        """Index of the first message of ``call``'s request (the latest boundary ≤ it)."""
        start = 0
        for b in self.boundaries:
            if b.index <= call.index:
                start = b.index
        return start

    def segments(self) -> list[tuple[int, int]]:
        """``(start, stop)`` of each context between compactions, oldest first."""
        starts = [0] + [b.index for b in self.boundaries if b.index > 0]
        stops = starts[1:] + [len(self.messages)]
        return list(zip(starts, stops))
