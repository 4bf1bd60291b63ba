"""Read a Codex CLI session (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

    s = read_rollout(path)       # → Session in the OpenAI dialect: s.messages, s.calls, s.boundaries

Each line is ``{"timestamp", "type", "payload"}``; what the reader takes:

- ``session_meta`` (the first line): the session id; its ``instructions``, with every
  ``developer``/``system`` message, become ``Session.system``;
- ``response_item``: what the model saw.  A user ``message`` is a user message; a run of
  assistant ``message``, ``function_call``, ``custom_tool_call`` and ``local_shell_call``
  items is ONE assistant message (a ``ToolUse`` per call, its input the parsed
  arguments); a run of ``*_output`` items is ONE user message of ``ToolResult``s.  Each
  call and output keeps its item (``extra["openai_responses_item"]``, as the Responses
  door's reader does), so ``to_responses`` writes a custom tool's call back as one;
  ``reasoning`` is encrypted and ``web_search_call`` needs no answer: both are left out;
- ``event_msg`` of type ``token_count``: one call, answered by the last assistant
  message; its usage is the event's ``last_token_usage`` as ``prompt_tokens``/
  ``completion_tokens`` (a repeated event, whose running total did not grow, is not a call);
- ``compacted``: Codex's own compaction — a ``Boundary``, then its
  ``replacement_history`` (or, in older files, its summary as a user message).

Other lines (``turn_context``, other events) are not sent to the model and are skipped.
A call left without its output (an interrupted turn) is repaired with a warning, as
the Claude Code reader does.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import FormatError
from ..messages import Block, Message, Text, ToolResult, ToolUse
from ..rounds import problems, repair
from ..session import Boundary, Call, Session
from ._json import iter_jsonl
from .openai import parse_arguments

__all__ = ["COPY_MARK", "read_rollout"]

COPY_MARK = "[lossless compact]"
"""How the ``compacted`` line of a copy ``lossless compact --codex`` wrote begins its message."""

_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def _text(content: Any, where: str, what: str = "content") -> str:
    """The text of a message's content or an output: a string, or the ``text`` of its parts; None is
    empty.  Anything else (a number, an object) is a ``FormatError`` at ``where``, as every other
    reader refuses it, rather than an empty message."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    raise FormatError(f"{where}: {what} must be text or a list of parts, not {type(content).__name__}")


def _call(item: Mapping[str, Any], where: str) -> ToolUse:
    kind = item["type"]
    cid = item.get("call_id") or item.get("id")
    if not isinstance(cid, str):
        raise FormatError(f"{where}: a {kind} item without a call_id")
    kept = {"openai_responses_item": dict(item)}  # written back as the same kind of item (dialects.responses)
    if kind == "function_call":
        raw = item.get("arguments")
        return ToolUse(id=cid, name=str(item.get("name") or "?"), input=parse_arguments(raw) if isinstance(raw, str)
                       else {}, extra=kept)
    if kind == "custom_tool_call":
        return ToolUse(id=cid, name=str(item.get("name") or "?"), input={"input": str(item.get("input") or "")},
                       extra=kept)
    action = item.get("action")
    return ToolUse(id=cid, name="shell", input=dict(action) if isinstance(action, Mapping) else {}, extra=kept)


def _output(item: Mapping[str, Any], where: str) -> ToolResult:
    cid = item.get("call_id")
    if not isinstance(cid, str):
        raise FormatError(f"{where}: a {item['type']} item without a call_id")
    out = item.get("output")
    kept = {"openai_responses_item": {k: v for k, v in item.items() if k != "output"}}
    if isinstance(out, Mapping):  # older files: {"content": ..., "success": ...}
        text = _text(out.get("content"), where, "the output's content")
        return ToolResult(tool_use_id=cid, content=text, is_error=out.get("success") is False, extra=kept)
    text = _text(out, where, f"a {item['type']} item's output")
    return ToolResult(tool_use_id=cid, content=text, extra=kept)


class _Builder:
    """Neutral messages from response items, grouping runs as the module docstring says."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.system: list[str] = []
        self.run: list[Block] = []
        self.kind = ""
        self.when: Any = None

    def close(self) -> None:
        if self.run:
            self.messages.append(Message(role="assistant" if self.kind == "assistant" else "user", content=tuple(self.run), meta={"timestamp": self.when}))
        self.run, self.kind = [], ""

    def add(self, item: Mapping[str, Any], where: str, when: Any) -> None:
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role in ("developer", "system"):
                self.system.append(_text(item.get("content"), where))
                return
            if role == "assistant":
                block: Block = Text(text=_text(item.get("content"), where))
                group = "assistant"
            elif role == "user":
                self.close()
                self.messages.append(Message(role="user", content=(Text(text=_text(item.get("content"), where)),),
                                             meta={"timestamp": when}))
                return
            else:
                raise FormatError(f"{where}: a message with unknown role {role!r}")
        elif kind in _CALLS:
            block, group = _call(item, where), "assistant"
        elif kind in _OUTPUTS:
            block, group = _output(item, where), "tool"
        else:
            return  # reasoning (encrypted), web_search_call (answered by the API), what later versions add
        if group != self.kind:
            self.close()
            self.kind, self.when = group, when
        self.run.append(block)


def read_rollout(path: str | Path) -> Session:
    """Read a Codex CLI rollout into a ``Session`` (see the module docstring)."""
    path = Path(path)
    warnings: list[str] = []
    b = _Builder()
    session_id: str | None = None
    calls: list[Call] = []
    boundaries: list[Boundary] = []
    total = -1
    model: str | None = None
    for line, entry in iter_jsonl(path, warnings):
        payload = entry.get("payload")
        kind = entry.get("type")
        where = f"{path}:{line}"
        if not isinstance(payload, Mapping):
            if kind in ("session_meta", "response_item", "compacted"):
                raise FormatError(f"{where}: a {kind} line without a payload object")
            continue
        if kind == "session_meta":
            session_id = payload.get("id") if isinstance(payload.get("id"), str) else session_id
            if isinstance(payload.get("instructions"), str) and payload["instructions"]:
                b.system.append(payload["instructions"])
        elif kind == "turn_context" and isinstance(payload.get("model"), str):
            model = payload["model"]
        elif kind == "response_item":
            b.add(payload, where, entry.get("timestamp"))
        elif kind == "compacted":
            b.close()
            boundaries.append(Boundary(index=len(b.messages), trigger="auto", pre_tokens=None, post_tokens=None))
            history = payload.get("replacement_history")
            if isinstance(history, list):
                for item in history:
                    if isinstance(item, Mapping):
                        b.add(item, where, entry.get("timestamp"))
                b.close()
            else:
                b.messages.append(Message(role="user", content=(Text(text=str(payload.get("message") or "")),),
                                          meta={"timestamp": entry.get("timestamp"), "is_compact_summary": True}))
        elif kind == "event_msg" and payload.get("type") == "token_count" and isinstance(payload.get("info"), Mapping):
            info = payload["info"]
            running = info.get("total_token_usage")
            now = running.get("total_tokens") if isinstance(running, Mapping) else None
            if not isinstance(now, int) or now == total:
                continue
            total = now
            b.close()
            last = info.get("last_token_usage") if isinstance(info.get("last_token_usage"), Mapping) else {}
            index = len(b.messages) - 1
            if index < 0 or b.messages[index].role != "assistant" or (calls and calls[-1].index == index):
                continue
            usage = {"prompt_tokens": last.get("input_tokens", 0), "completion_tokens": last.get("output_tokens", 0),
                     "cached_tokens": last.get("cached_input_tokens", 0)}
            if isinstance(info.get("model_context_window"), int):
                usage["model_context_window"] = info["model_context_window"]
            m = b.messages[index]
            b.messages[index] = Message(role=m.role, content=m.content, meta={**m.meta, "model": model, "usage": usage})
            calls.append(Call(index=index, usage=usage, message_id=None, model=model))
    b.close()
    messages = b.messages
    if problems(messages, "openai"):
        messages, notes = repair(messages, "openai")
        warnings += [f"{path}: repaired: {n}" for n in notes]
        if len(messages) != len(b.messages):  # a message dropped: the recorded call indexes no longer hold
            calls = []
            warnings.append(f"{path}: the repair dropped messages; recorded usage is not used")
    system = "\n\n".join(s for s in b.system if s) or None
    return Session(path=path, format="openai", messages=tuple(messages), system=system, calls=tuple(calls),
                   boundaries=tuple(boundaries), warnings=tuple(warnings), session_id=session_id)

