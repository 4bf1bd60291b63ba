"""Where the context goes: tokens by role, block type and tool, and the biggest items."""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from .messages import Message, ToolResult, ToolUse, block_text, tool_names
from .tokens import TokenCounter, default_counter


def inspect_messages(
    messages: Sequence[Message],
    *,
    system: Any = None,
    window: int = 200_000,
    counter: TokenCounter | None = None,
    top: int = 10,
) -> dict[str, Any]:
    """A report (plain data, JSON-ready) of how the tokens of a history are spent."""
    counter = counter or default_counter()
    names = tool_names(messages)
    by_role: Counter[str] = Counter()
    by_type: Counter[str] = Counter()
    by_tool: Counter[str] = Counter()
    items: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        by_role[m.role] += counter.count_message(m)
        for b in m.content:
            n = counter.count_block(b)
            by_type[b.type] += n
            tool = b.name if isinstance(b, ToolUse) else names.get(b.tool_use_id) if isinstance(b, ToolResult) else None
            if tool:
                by_tool[tool] += n
            preview = " ".join(block_text(b)[:100].split())
            items.append({"message": i, "role": m.role, "type": b.type, "tool": tool, "tokens": n, "preview": preview})
    system_tokens = counter.count_system(system)
    total = system_tokens + sum(by_role.values())
    items.sort(key=lambda it: -it["tokens"])
    return {
        "messages": len(messages),
        "tokens": total,
        "system_tokens": system_tokens,
        "window": window,
        "percent_of_window": round(100.0 * total / window, 1),
        "by_role": dict(by_role.most_common()),
        "by_type": dict(by_type.most_common()),
        "by_tool": dict(by_tool.most_common()),
        "biggest": items[:top],
    }
