"""What the real APIs refuse: the fake server's 400s, one pure function per API.

    problem = invalid("anthropic", body)   # the API's own error message, or None

Each rule is one the real API enforces, with its wording, so a client (or a proxy)
that would be refused in use is refused in tests: tool calls and results that do
not pair up, unknown keys on a tool_use, unsigned thinking, a first message that is
not the user's, and — with thinking enabled — a tool loop sent back without the
thinking its last call began with.
"""

from __future__ import annotations

from email.message import Message
from typing import Any, Literal, Mapping

__all__ = ["MID_CONVERSATION_SYSTEM", "TOOL_USE_KEYS", "anthropic_problem", "betas_of", "invalid", "openai_problem"]


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else [content]


# What the real Anthropic API accepts on a tool_use block (``anthropic.types.ToolUseBlockParam``).
TOOL_USE_KEYS = frozenset({"type", "id", "name", "input", "cache_control", "caller", "toolset_name"})


def _ids(blocks: list[Any], kind: str, key: str) -> list[str]:
    return [str(b.get(key)) for b in blocks if isinstance(b, Mapping) and b.get("type") == kind]


MID_CONVERSATION_SYSTEM = "mid-conversation-system-"
"""The beta (``anthropic-beta: mid-conversation-system-2026-04-07``) under which a
``role: "system"`` message may sit among the messages; Claude Code 2.1 sends newer
models one (its agent and skill listings)."""


def anthropic_problem(body: Mapping[str, Any], betas: frozenset[str] = frozenset()) -> str | None:
    """The real API's 400 message for the first pairing or shape rule ``body`` breaks, else None.

    Checked like the Messages API does: each tool_use answered by a tool_result in the
    next message, each tool_result answering a tool_use of the message before, the
    first message from the user, a ``system`` message only under its beta (``betas``:
    the request's ``anthropic-beta`` values), thinking signed, no unknown keys on
    tool_use, and — with thinking enabled — a tool loop's last call sent back with its
    thinking first."""
    messages = body.get("messages") or []
    if messages and isinstance(messages[0], Mapping) and messages[0].get("role") != "user":
        return 'messages: first message must use the "user" role'
    system_allowed = any(beta.startswith(MID_CONVERSATION_SYSTEM) for beta in betas)
    previous: list[Any] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            return f"messages.{i}: Input should be a valid dictionary"
        if message.get("role") == "system" and not system_allowed:
            return (f'messages.{i}: Unexpected role "system". The Messages API accepts a top-level `system` '
                    f'parameter, not "system" as an input message role.')
        blocks = _blocks(message.get("content"))
        asked = _ids(previous, "tool_use", "id")
        answered = _ids(blocks, "tool_result", "tool_use_id") if message.get("role") == "user" else []
        missing = [t for t in asked if t not in answered]
        if missing:
            return (f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block in "
                    f"the next message.")
        for j, block in enumerate(blocks):
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "tool_result" and block.get("tool_use_id") not in asked:
                return (f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                        f"`tool_use` block in the previous message.")
            if kind == "tool_use":
                for key in block:
                    if key not in TOOL_USE_KEYS:
                        return f"messages.{i}.content.{j}.tool_use.{key}: Extra inputs are not permitted"
            if kind == "thinking" and not block.get("signature"):
                return f"messages.{i}.content.{j}.thinking.signature: Field required"
        previous = blocks if message.get("role") == "assistant" else []
    if previous and _ids(previous, "tool_use", "id"):
        return (f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` blocks immediately "
                f"after: {', '.join(_ids(previous, 'tool_use', 'id'))}. Each `tool_use` block must have a "
                f"corresponding `tool_result` block in the next message.")
    return _unthought_tool_loop(body)


def _unthought_tool_loop(body: Mapping[str, Any]) -> str | None:
    """With thinking ``enabled``, a request that continues a tool loop (it ends with
    tool results) must send the assistant message that called the tools with its
    thinking first, as the model wrote it (adaptive thinking may skip thinking: no rule)."""
    thinking, messages = body.get("thinking"), body.get("messages") or []
    if not (isinstance(thinking, Mapping) and thinking.get("type") == "enabled" and len(messages) >= 2):
        return None
    before, last = messages[-2], messages[-1]
    if before.get("role") != "assistant" or not _ids(_blocks(last.get("content")), "tool_result", "tool_use_id"):
        return None
    first = next(iter(_blocks(before.get("content"))), None)
    kind = first.get("type") if isinstance(first, Mapping) else None
    if kind in ("thinking", "redacted_thinking"):
        return None
    return (f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
            f"`{kind}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block "
            f"(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include "
            f"thinking blocks from previous turns. To avoid this requirement, disable `thinking`.")


def openai_problem(body: Mapping[str, Any]) -> str | None:
    """The real API's 400 message when tool calls and tool messages do not pair up, else None."""
    pending: list[str] = []
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in pending:
                return ("Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
                        "with 'tool_calls'.")
            pending.remove(call_id)
            continue
        if pending:
            break
        pending = [str(c.get("id")) for c in message.get("tool_calls") or [] if isinstance(c, Mapping)]
    if pending:
        return ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(pending)}")
    return None


def invalid(api: Literal["anthropic", "openai"], body: Mapping[str, Any],
            betas: frozenset[str] = frozenset()) -> str | None:
    return anthropic_problem(body, betas) if api == "anthropic" else openai_problem(body)


def betas_of(headers: Mapping[str, str] | Message[str, str]) -> frozenset[str]:
    """The ``anthropic-beta`` values of a request (comma-separated, as the SDKs send them);
    ``headers`` is a mapping or the ``http.server`` request's own header message."""
    raw = next((v for k, v in headers.items() if k.lower() == "anthropic-beta"), "")
    return frozenset(part.strip() for part in raw.split(",") if part.strip())
