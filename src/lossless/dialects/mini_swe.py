"""Read a mini-swe-agent trajectory (``<instance>.traj.json``) and write it back.

    s = read_trajectory("django__django-11087.traj.json")
    raw = to_mini_swe(s.messages, s.system)      # == the file's "messages", exactly

mini-swe-agent speaks OpenAI-style chat without native tool calls: the model
writes ``THOUGHT: …`` and one fenced ``bash`` block, and the environment answers
with a user message ``<returncode>N</returncode><output>…</output>``.  The mapping:

- the leading ``system`` message → ``Session.system`` (not in ``messages``);
- each assistant message keeps its full text as one ``Text`` block; when it holds
  exactly one ```` ```bash ```` block *and* a user message follows, it also gets
  ``ToolUse(id=f"mswe-{n}", name="bash", input={"command": ...},
  extra={"synthetic": True})`` (``n`` counts assistant messages from 0);
- that following user message (the observation, a timeout notice or the final
  submission — whatever the environment answered) becomes
  ``ToolResult(tool_use_id=f"mswe-{n}", content=<full original text>)``;
- an assistant message without exactly one bash block stays text only, and the
  user message after it (the format-error feedback) stays plain text;
- every other key of a message (the assistant's ``extra`` with the raw provider
  response) is kept in ``meta["mswe_keys"]``.

So ``group_rounds`` sees one API round per command, and ``to_mini_swe`` renders
the exact original list back (synthetic ``ToolUse`` blocks dropped, ``ToolResult``
content written as the user's text).  One ``Call`` per assistant message, usage
from ``extra.response.usage`` when recorded.

mini-swe-agent v2 (``trajectory_format: mini-swe-agent-1.1``) keeps each model's own message
and adds ``extra``.  Read as well:

- a text model's ```` ```mswea_bash_command ```` block, as a ``bash`` one;
- a tool-calling model's messages (assistant ``tool_calls``, ``role: "tool"`` observations,
  content as a list of parts): read as the OpenAI chat they are, with real tool calls; the
  Responses API's items (``function_call``, ``function_call_output``) likewise;
- the closing ``role: "exit"`` message (its exit status and submission): never sent to a
  model, so not a message here; kept on the last message and written back at the end.  Where
  the run ended on a tool call (the submit command), its content, the command's output, becomes
  that call's result (``extra={"mswe_exit": True}``, dropped on the way back).
"""

from __future__ import annotations

import re
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

from ._json import load_json
from ..errors import FormatError, InputError
from ..messages import Message, Text, ToolResult, ToolUse, result_text
from ..session import Call, Session

__all__ = ["BASH_BLOCK", "from_mini_swe", "read_trajectory", "to_mini_swe", "trajectory_session"]

BASH_BLOCK = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)
"""mini-swe-agent's own action regex (v1's ``bash`` fence, v2's ``mswea_bash_command``): the
command is the block's inner text."""
_RESPONSES_ITEMS = ("function_call", "function_call_output", "reasoning", "message")


def _native(raw: Sequence[Any]) -> bool:
    """Whether a trajectory holds a tool-calling model's own messages (mini-swe-agent v2)."""
    return any(isinstance(d, Mapping) and (d.get("role") == "tool" or d.get("tool_calls") or d.get("object") == "response"
                                           or d.get("type") in _RESPONSES_ITEMS or not isinstance(d.get("content"), str))
               for d in raw if not (isinstance(d, Mapping) and d.get("role") == "exit"))


def _without_exits(raw: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """The messages but the ``exit`` ones (the agent's last word: they close a run), and those."""
    kept = [d for d in raw if not (isinstance(d, Mapping) and d.get("role") == "exit")]
    return kept, [d for d in raw if isinstance(d, Mapping) and d.get("role") == "exit"]


def from_mini_swe(raw: Sequence[Any], where: str = "") -> tuple[str | None, list[Message]]:
    """A trajectory's ``messages`` list → ``(system prompt, messages)``.

    ``where`` (a path) prefixes error messages.
    """
    prefix = f"{where}: " if where else ""
    raw, exits = _without_exits(raw)
    if _native(raw):
        system, out = _from_native(raw, prefix)
        if exits and out and out[-1].role == "assistant" and out[-1].tool_uses:
            # The run ended on these calls (the submit command): the exit message holds their output.
            text = "\n".join(d["content"] for d in exits if isinstance(d.get("content"), str))
            status = next((d["extra"].get("exit_status") for d in exits if isinstance(d.get("extra"), Mapping)), None)
            out.append(Message(role="user", content=tuple(
                ToolResult(tool_use_id=u.id, content=text or f"(the run ended: {status or 'exit'})",
                           is_error=status not in (None, "Submitted"), extra={"mswe_exit": True})
                for u in out[-1].tool_uses)))
    else:
        system, out = _from_text(raw, prefix)
    if exits and out:  # the exit messages ride on the last message, and are written back after it
        out[-1] = Message(role=out[-1].role, content=out[-1].content, meta={**out[-1].meta, "mswe_after": exits})
    return system, out


def _from_native(raw: list[Any], prefix: str) -> tuple[str | None, list[Message]]:
    """A tool-calling model's messages: OpenAI chat, or the Responses API's items."""
    from .openai import from_openai
    from .responses import from_responses

    extras: list[Any] = []
    try:
        if any(isinstance(d, Mapping) and (d.get("type") in _RESPONSES_ITEMS or d.get("object") == "response")
               for d in raw):
            # A Responses model's answer is its whole response object: its output items are the turn.
            flat: list[Any] = []
            for d in raw:
                if isinstance(d, Mapping) and d.get("object") == "response":
                    flat += [{k: v for k, v in item.items() if k != "extra"} if isinstance(item, Mapping) else item
                             for item in d.get("output") or ()]
                    extras.append({"response": {k: d[k] for k in ("id", "model", "usage") if k in d}})
                else:
                    flat.append({k: v for k, v in d.items() if k != "extra"} if isinstance(d, Mapping) else d)
            out = from_responses(flat)
        else:  # chat: each answer's extra is set aside (re-attached below), the rest read as it is
            extras = [d.get("extra") for d in raw if isinstance(d, Mapping) and d.get("role") == "assistant"]
            out = from_openai([{k: v for k, v in d.items() if k != "extra"}
                               if isinstance(d, Mapping) and d.get("role") == "assistant" else d for d in raw])
    except FormatError as exc:
        raise FormatError(f"{prefix}{str(exc).replace('item ', 'message ', 1)}") from None
    system: str | None = None
    if out and out[0].role == "system" and all(isinstance(b, Text) for b in out[0].content):
        system = "\n".join(b.text for b in out[0].content if isinstance(b, Text))
        out = out[1:]
    answers = [i for i, m in enumerate(out) if m.role == "assistant"]
    if len(answers) == len(extras):  # each answer's own extra (its provider response, its usage)
        for i, extra in zip(answers, extras):
            if isinstance(extra, Mapping):
                out[i] = Message(role="assistant", content=out[i].content, meta={**out[i].meta, "mswe_extra": extra})
    return system, out


def _from_text(raw: list[Any], prefix: str) -> tuple[str | None, list[Message]]:
    """A text model's messages: one fenced command an answer, its observation a user message."""
    system: str | None = None
    out: list[Message] = []
    pending: str | None = None  # the synthetic tool id the next user message answers
    n = 0
    for i, d in enumerate(raw):
        if not isinstance(d, Mapping) or not isinstance(d.get("content"), str):
            raise FormatError(f"{prefix}message {i}: expected an object with a string 'content'")
        role, text = d.get("role"), d["content"]
        keys = {k: v for k, v in d.items() if k not in ("role", "content")}
        meta: dict[str, Any] = {"mswe_keys": keys} if keys else {}
        if role == "system" and i == 0 and not keys:
            system = text
            continue
        if role == "assistant":
            blocks: list[Any] = [Text(text=text)]
            commands = BASH_BLOCK.findall(text)
            nxt = raw[i + 1] if i + 1 < len(raw) else None
            pending = None
            if len(commands) == 1 and isinstance(nxt, Mapping) and nxt.get("role") == "user":
                pending = f"mswe-{n}"
                blocks.append(ToolUse(id=pending, name="bash", input={"command": commands[0]}, extra={"synthetic": True}))
            n += 1
            out.append(Message(role="assistant", content=tuple(blocks), meta=meta))
        elif role == "user":
            if pending is not None:
                out.append(Message(role="user", content=(ToolResult(tool_use_id=pending, content=text),), meta=meta))
            else:
                out.append(Message(role="user", content=(Text(text=text),), meta=meta))
            pending = None
        elif role == "system":
            out.append(Message(role="system", content=(Text(text=text),), meta=meta))
            pending = None
        else:
            raise FormatError(f"{prefix}message {i}: role {role!r} is not supported (mini-swe-agent uses "
                              "system/user/assistant, tool and exit)")
    return system, out


def to_mini_swe(messages: Sequence[Message], system: str | None = None) -> list[dict[str, Any]]:
    """Neutral messages (and the system prompt) → a mini-swe-agent ``messages`` list.

    Synthetic ``ToolUse`` blocks are dropped; a ``ToolResult`` is written as the
    user's text.  Messages read from a tool-calling model's trajectory (v2) are written
    back in that model's own form, OpenAI chat or Responses items, each answer with its
    ``extra``; an ``exit`` message read is written last.
    """
    exits = [d for m in messages for d in m.meta.get("mswe_after", ())]
    if any(_is_native(m) for m in messages):
        return _to_native(messages, system) + exits
    out: list[dict[str, Any]] = []
    if system is not None:
        out.append({"role": "system", "content": system})
    for i, m in enumerate(messages):
        parts: list[str] = []
        for b in m.content:
            match b:
                case Text():
                    parts.append(b.text)
                case ToolUse() if b.extra.get("synthetic"):
                    pass
                case ToolResult():
                    parts.append(result_text(b))
                case _:
                    raise InputError(f"message {i}: a {b.type} block has no mini-swe-agent form")
        out.append({"role": m.role, "content": "\n".join(parts), **m.meta.get("mswe_keys", {})})
    return out + exits


def _is_native(m: Message) -> bool:
    return any(k in m.meta for k in ("mswe_extra", "openai_role", "openai_content", "openai_responses_item",
                                      "openai_responses_role")) or \
        any(isinstance(b, ToolUse) and not b.extra.get("synthetic") for b in m.content)


def _to_native(messages: Sequence[Message], system: str | None) -> list[dict[str, Any]]:
    from .openai import to_openai
    from .responses import to_responses

    if any("openai_responses_item" in m.meta or "openai_responses_role" in m.meta for m in messages):
        head = [{"type": "message", "role": "system", "content": system}] if system is not None else []
        return head + to_responses(list(messages))
    messages = [m for m in messages if not (m.content and all(isinstance(b, ToolResult) and b.extra.get("mswe_exit")
                                                                  for b in m.content))]
    head = [{"role": "system", "content": system}] if system is not None else []
    out = head + to_openai(list(messages))
    extras = iter([m.meta.get("mswe_extra") for m in messages if m.role == "assistant"])
    for d in out:
        if d.get("role") == "assistant":
            extra = next(extras, None)
            if extra is not None:
                d["extra"] = extra
    return out


def _response(m: Message) -> Mapping[str, Any]:
    extra = m.meta.get("mswe_extra") or m.meta.get("mswe_keys", {}).get("extra")
    response = extra.get("response") if isinstance(extra, Mapping) else None
    return response if isinstance(response, Mapping) else {}


def read_trajectory(path: str | Path) -> Session:
    """Read a ``.traj.json`` file into a ``Session`` (see the module docstring)."""
    path = Path(path)
    data = load_json(path)
    if not isinstance(data, Mapping) or not isinstance(data.get("messages"), list):
        raise FormatError(f"{path}: not a mini-swe-agent trajectory (no top-level 'messages' list)")
    return trajectory_session(data, path)


def _check_usage(usage: Mapping[str, Any], where: str) -> None:
    for key, value in usage.items():
        if key.endswith("_tokens") and value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            raise FormatError(f"{where}: extra.response.usage.{key} must be a count of tokens, not {type(value).__name__}")


def trajectory_session(data: Mapping[str, Any], path: Path | None = None) -> Session:
    """A parsed trajectory object → ``Session`` (what ``read_trajectory`` uses)."""
    system, messages = from_mini_swe(data["messages"], str(path) if path else "")
    calls = []
    for i, m in enumerate(messages):
        if m.role == "assistant":
            r = _response(m)
            usage = r.get("usage")
            if isinstance(usage, Mapping):
                _check_usage(usage, f"{path}: message {i}" if path else f"message {i}")
            calls.append(Call(index=i, usage=usage if isinstance(usage, Mapping) else None,
                              message_id=r.get("id"), model=r.get("model")))
    sid = data.get("instance_id")
    return Session(path=path, format="mini-swe-agent", messages=tuple(messages), system=system,
                   calls=tuple(calls), session_id=sid if isinstance(sid, str) else None)
