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

BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
"""mini-swe-agent's own action regex: the command is the block's inner text."""


def from_mini_swe(raw: Sequence[Any], where: str = "") -> tuple[str | None, list[Message]]:
    """A trajectory's ``messages`` list → ``(system prompt, messages)``.

    ``where`` (a path) prefixes error messages.
    """
    prefix = f"{where}: " if where else ""
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
            raise FormatError(f"{prefix}message {i}: role {role!r} is not supported (mini-swe-agent v1 uses system/user/assistant)")
    return system, out


def to_mini_swe(messages: Sequence[Message], system: str | None = None) -> list[dict[str, Any]]:
    """Neutral messages (and the system prompt) → a mini-swe-agent ``messages`` list.

    Synthetic ``ToolUse`` blocks are dropped; a ``ToolResult`` is written as the
    user's text.  Any other tool call is an ``InputError``: mini-swe-agent has no
    native tool calls.
    """
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
    return out


def _response(m: Message) -> Mapping[str, Any]:
    extra = m.meta.get("mswe_keys", {}).get("extra")
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
