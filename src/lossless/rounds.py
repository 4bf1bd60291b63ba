"""API rounds, request validity and explicit repair.

An **API round** is one assistant message plus the user message that carries the
results of its tool calls.  It is the only unit any stage may remove: removing
less orphans a tool_result or leaves a tool_use unanswered, and the provider
rejects the request with a 400.

``validate()`` enforces what the real APIs enforce and names the message index
and tool id of the first problem.  ``repair()`` fixes messy input (an unanswered
call gets an "interrupted" result, an orphan result is dropped) and says what it
did; nothing in lossless calls it silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping, Sequence

from .errors import InvalidRequest
from .markers import counted
from .messages import Message, Text, Thinking, ToolResult, ToolUse

Dialect = Literal["anthropic", "openai"]
MAX_CACHE_BREAKPOINTS = 4
INTERRUPTED = "[interrupted: the tool call was not answered; no result was recorded]"


@dataclass(frozen=True, slots=True)
class Round:
    """Messages ``start`` (inclusive) to ``stop`` (exclusive) of a history.

    ``kind`` is ``"round"`` (an assistant message and the results of its calls),
    ``"user"`` (a user message that answers nothing) or ``"system"``.
    """

    start: int
    stop: int
    kind: Literal["round", "user", "system"]

    def __len__(self) -> int:
        return self.stop - self.start


def _answers(message: Message, previous: Message | None) -> bool:
    if message.role != "user" or previous is None or previous.role != "assistant":
        return False
    ids = {u.id for u in previous.tool_uses}
    return bool(ids) and any(r.tool_use_id in ids for r in message.tool_results)


def group_rounds(messages: Sequence[Message]) -> list[Round]:
    """Split a history into rounds; concatenating them gives the history back."""
    rounds: list[Round] = []
    i, n = 0, len(messages)
    while i < n:
        m = messages[i]
        if m.role == "assistant":
            stop = i + 1
            if stop < n and _answers(messages[stop], m):
                stop += 1
            rounds.append(Round(i, stop, "round"))
            i = stop
        else:
            rounds.append(Round(i, i + 1, "system" if m.role == "system" else "user"))
            i += 1
    return rounds


def problems(
    messages: Sequence[Message], dialect: Dialect = "anthropic", *, whole: bool = True
) -> list[InvalidRequest]:
    """Every rule the provider would enforce that this history breaks, in order.

    ``whole=False`` checks a slice that starts at a round boundary inside a longer
    history (the rules about the first message are then skipped)."""
    out: list[InvalidRequest] = []

    def bad(msg: str, index: int | None = None, tool_id: str | None = None) -> None:
        where = f"message {index}: " if index is not None else ""
        what = f" (tool id {tool_id!r})" if tool_id else ""
        out.append(InvalidRequest(f"{where}{msg}{what}", index=index, tool_id=tool_id))

    if not messages:
        bad("the request has no messages")
        return out
    if dialect == "anthropic" and whole:
        if messages[0].role != "user":
            bad(f"the first message must come from the user, not the {messages[0].role}", 0)
    seen_ids: set[str] = set()
    pending: dict[str, int] = {}  # tool_use id -> index of its assistant message
    breakpoints = 0
    for i, m in enumerate(messages):
        if m.role == "system" and dialect == "anthropic":
            bad("a system message inside the list (Anthropic takes the system prompt separately)", i)
        if not m.content and not (dialect == "openai" and (m.role == "system" or _answered_otherwise(m))):
            bad("the message has no content", i)
        results = m.tool_results
        if pending:
            # Every call of the previous assistant message is answered here, results first.
            if m.role != "user":
                for tid in pending:
                    bad("tool_use has no tool_result in the next message", pending[tid], tid)
                pending = {}
            else:
                leading = 0
                for b in m.content:
                    if not isinstance(b, ToolResult):
                        break
                    leading += 1
                if dialect == "anthropic" and leading != len(results):
                    bad("tool_result blocks must come first in the user message", i)
                answered = {r.tool_use_id for r in results}
                for tid in pending:
                    if tid not in answered:
                        bad("tool_use has no tool_result in the next message", pending[tid], tid)
                for r in results:
                    if r.tool_use_id not in pending:
                        bad("tool_result answers no tool_use in the message before", i, r.tool_use_id)
                pending = {}
                results = ()
        for r in results:
            bad("tool_result answers no tool_use in the message before", i, r.tool_use_id)
        for b in m.content:
            if getattr(b, "cache_control", None):
                breakpoints += 1
            match b:
                case Text() if not b.text.strip() and dialect == "anthropic":
                    bad("a text block is empty or only white space", i)
                case Thinking() if not b.signature:
                    bad("a thinking block has no signature", i)
                case ToolUse():
                    if m.role != "assistant":
                        bad("tool_use outside an assistant message", i, b.id)
                    if b.id in seen_ids:
                        bad("tool_use id is not unique", i, b.id)
                    seen_ids.add(b.id)
                    pending[b.id] = i
                case _:
                    pass
    for tid, idx in pending.items():
        bad("tool_use has no tool_result in the next message", idx, tid)
    if breakpoints > MAX_CACHE_BREAKPOINTS:
        bad(f"{breakpoints} cache_control breakpoints; the API allows at most {MAX_CACHE_BREAKPOINTS}")
    return out


_OPENAI_ANSWERS = ("refusal", "audio", "function_call")
"""What a Chat Completions assistant message may carry instead of content: the model's refusal,
a previous audio answer's id, a legacy function call (an SDK's ``choices[0].message`` appended
as it came back has ``"content": null`` and one of these)."""


def _answered_otherwise(m: Message) -> bool:
    extra = m.meta.get("openai_extra")
    return m.role == "assistant" and isinstance(extra, Mapping) and any(extra.get(k) for k in _OPENAI_ANSWERS)


def validate(messages: Sequence[Message], dialect: Dialect = "anthropic") -> None:
    """Raise ``InvalidRequest`` for the first rule the provider would enforce that fails."""
    found = problems(messages, dialect)
    if found:
        raise found[0]


def repair(messages: Sequence[Message], dialect: Dialect = "anthropic") -> tuple[list[Message], list[str]]:
    """Make a messy history valid and say what was changed.

    - a tool call with no answer gets an error result saying it was interrupted;
    - a tool result that answers nothing is dropped;
    - tool results are moved to the front of their user message;
    - empty text blocks and then empty messages are dropped;
    - an Anthropic history that starts with the assistant gets a user message first.
    """
    notes: list[str] = []
    out: list[Message] = []
    seen: set[str] = set()
    for i, m in enumerate(messages):
        content = [b for b in m.content if not (isinstance(b, Text) and not b.text.strip())]
        if len(content) != len(m.content):
            notes.append(f"message {i}: dropped {counted(len(m.content) - len(content), 'empty text block')}")
        if m.role == "assistant":
            uses = []
            for b in content:
                if isinstance(b, ToolUse) and b.id in seen:
                    notes.append(f"message {i}: dropped a tool_use with a repeated id {b.id!r}")
                    continue
                if isinstance(b, ToolUse):
                    seen.add(b.id)
                uses.append(b)
            content = uses
        prev = out[-1] if out else None
        expected = {u.id for u in prev.tool_uses} if prev is not None and prev.role == "assistant" else set()
        if m.role == "user":
            results = [b for b in content if isinstance(b, ToolResult) and b.tool_use_id in expected]
            for b in content:
                if isinstance(b, ToolResult) and b.tool_use_id not in expected:
                    notes.append(f"message {i}: dropped an orphan tool_result for {b.tool_use_id!r}")
            answered = {r.tool_use_id for r in results}
            missing = [tid for tid in _ordered_ids(prev) if tid not in answered] if expected else []
            for tid in missing:
                notes.append(f"message {i}: added an interrupted result for {tid!r}")
            results += [ToolResult(tool_use_id=tid, content=INTERRUPTED, is_error=True) for tid in missing]
            others = [b for b in content if not isinstance(b, ToolResult)]
            content = results + others
        elif expected and prev is not None:  # expected is only ever non-empty with a previous message
            out.append(_interrupted(prev))
            notes.append(f"message {i}: added interrupted results for {_ids(prev)}, unanswered before it")
        if not content and not (dialect == "openai" and (m.role == "system" or _answered_otherwise(m))):
            notes.append(f"message {i}: dropped an empty {m.role} message")
            continue
        out.append(m if tuple(content) == m.content else m.with_content(content))
    if out and out[-1].role == "assistant" and out[-1].tool_uses:
        notes.append(f"message {len(messages) - 1}: added interrupted results for {_ids(out[-1])} after the last message")
        out.append(_interrupted(out[-1]))
    if dialect == "anthropic" and out and out[0].role != "user":
        out.insert(0, Message(role="user", content=(Text(text="[conversation start]"),)))
        notes.append("message 0: the history started with the assistant; added a user message first")
    return out, notes


def _ids(message: Message) -> str:
    return ", ".join(repr(tid) for tid in _ordered_ids(message))


def _ordered_ids(message: Message | None) -> list[str]:
    return [u.id for u in message.tool_uses] if message is not None else []


def _interrupted(assistant: Message) -> Message:
    return Message(
        role="user",
        content=tuple(ToolResult(tool_use_id=u.id, content=INTERRUPTED, is_error=True) for u in assistant.tool_uses),
    )
