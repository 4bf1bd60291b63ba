"""lossless for pydantic-ai: one capability, the ``recall`` tool included.

    from pydantic_ai import Agent
    from lossless.adapters.pydantic_ai import Lossless
    agent = Agent(model, instructions=INSTRUCTIONS, tools=TOOLS,
                  capabilities=[Lossless()])   # the window: the model's
    result = agent.run_sync(task)

A capability rather than ``ProcessHistory``: a history processor's output *replaces* the
run's history, while this one changes only what each model request carries
(``before_model_request``), so the history you get back (``result.all_messages()``) is
whole and every request is fitted from it, valid and under the threshold.  The
capability registers ``recall`` so the model can bring back what was moved out.  Messages
lossless did not change are sent as the very objects the history holds; a changed tool
result goes as a new ``ToolReturnPart`` for the same call, a summary as a new request.

Without ``window=``, each request is budgeted by its model's window: the smaller of the
model profile's ``context_window`` (genai-prices', or yours: ``profile={"context_window": N}``;
input and output together) and the input window of its name in the models' data.

Needs ``pip install 'lossless[pydantic-ai]'``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence, Unpack

try:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import (
        ModelMessage, ModelRequest, ModelResponse, RetryPromptPart, SystemPromptPart, TextPart, ThinkingPart,
        ToolCallPart, ToolReturnPart, UserPromptPart,
    )
    from pydantic_ai.tools import Tool
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"lossless.adapters.pydantic_ai needs pydantic-ai: pip install 'lossless[pydantic-ai]' "
                      f"({exc})") from exc

from ..manager import ContextManager, Prepared
from ..modelinfo import context_window
from ._options import ManagerOptions, ModelWindow, model_name, openai_manager
from ..messages import Block, Message, Text, Thinking, ToolResult, ToolUse, result_text
from ..tools import RECALL_TOOL

__all__ = ["Lossless", "from_pydantic_ai"]

Origin = dict[int, tuple[Any, Any]]  # id(neutral value) → (that value, the pydantic-ai message or part)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _request_blocks(m: ModelRequest, origin: Origin) -> list[Block]:
    blocks: list[Block] = []
    for part in m.parts:
        if isinstance(part, SystemPromptPart):
            continue  # the system prompt is passed beside the messages (see Lossless._fit)
        if isinstance(part, ToolReturnPart):
            text = part.model_response_str(wrap_if_error=False)  # the error is is_error, as Anthropic has it
            block: Block = ToolResult(tool_use_id=part.tool_call_id, content=text, is_error=part.outcome != "success")
        elif isinstance(part, RetryPromptPart) and part.tool_name is not None:
            block = ToolResult(tool_use_id=part.tool_call_id, content=part.model_response(), is_error=True)
        elif isinstance(part, UserPromptPart):
            content = part.content
            block = Text(text=content if isinstance(content, str) else " ".join(_text(c) for c in content))
        else:
            block = Text(text=_text(getattr(part, "content", "")))
        origin[id(block)] = (block, part)
        blocks.append(block)
    # Results first, as a round's user message carries them.
    return [b for b in blocks if isinstance(b, ToolResult)] + [b for b in blocks if not isinstance(b, ToolResult)]


def _response_blocks(m: ModelResponse, origin: Origin) -> list[Block]:
    blocks: list[Block] = []
    for part in m.parts:
        if isinstance(part, TextPart):
            block: Block = Text(text=part.content)
        elif isinstance(part, ToolCallPart):
            block = ToolUse(id=part.tool_call_id, name=part.tool_name, input=part.args_as_dict())
        elif isinstance(part, ThinkingPart):
            block = Thinking(thinking=part.content, signature=part.signature or "-")
        else:
            block = Text(text=_text(getattr(part, "content", "")))
        origin[id(block)] = (block, part)
        blocks.append(block)
    return blocks


def from_pydantic_ai(messages: Sequence[ModelMessage], origin: Origin | None = None) -> list[Message]:
    """pydantic-ai messages → neutral messages, one each (a request's system prompt parts are
    left out: pass them as the system prompt).  ``origin`` collects where each came from."""
    origin = {} if origin is None else origin
    out: list[Message] = []
    for m in messages:
        if isinstance(m, ModelResponse):
            msg = Message(role="assistant", content=tuple(_response_blocks(m, origin) or [Text(text="")]))
        else:
            msg = Message(role="user", content=tuple(_request_blocks(m, origin) or [Text(text="")]))
        origin[id(msg)] = (msg, m)
        out.append(msg)
    return out


def _kept(value: Any, origin: Origin) -> Any:
    found = origin.get(id(value))
    return found[1] if found is not None and found[0] is value else None


def _to_pydantic_ai(m: Message, origin: Origin, names: dict[str, str]) -> ModelMessage:
    if (kept := _kept(m, origin)) is not None:
        return kept
    parts: list[Any] = []
    for b in m.content:
        if (part := _kept(b, origin)) is not None:
            parts.append(part)
        elif isinstance(b, ToolResult):
            parts.append(ToolReturnPart(tool_name=names.get(b.tool_use_id, "tool"), content=result_text(b),
                                        tool_call_id=b.tool_use_id, outcome="failed" if b.is_error else "success"))
        elif isinstance(b, ToolUse):
            parts.append(ToolCallPart(tool_name=b.name, args=dict(b.input), tool_call_id=b.id))
        elif isinstance(b, Text):
            parts.append(TextPart(content=b.text) if m.role == "assistant" else UserPromptPart(content=b.text))
    return ModelResponse(parts=parts) if m.role == "assistant" else ModelRequest(parts=parts)


@dataclass(init=False)
class Lossless(AbstractCapability[Any]):
    """``ContextManager``'s arguments (or ``manager=``).  ``last`` is the view of the last
    model request; ``manager.run_tool`` answers ``recall`` (in ``get_toolset``)."""

    manager: ContextManager = field(repr=False)
    last: Prepared | None = field(default=None, repr=False)

    def __init__(self, manager: ContextManager | None = None, **kwargs: Unpack[ManagerOptions]) -> None:
        self.manager = manager if manager is not None else openai_manager(kwargs)
        self._window = ModelWindow(manager, kwargs)
        self.last = None
        self._seen: list[ModelMessage] = []
        self._neutral: list[Message] = []
        self._origin: Origin = {}

        def recall(handle: str, offset: int | None = None, limit: int | None = None) -> str:
            return self.manager.run_tool("recall", {"handle": handle, "offset": offset, "limit": limit})

        self._toolset = FunctionToolset([Tool.from_schema(recall, name=RECALL_TOOL["name"],
                                                          description=RECALL_TOOL["description"],
                                                          json_schema=RECALL_TOOL["input_schema"])])

    def get_toolset(self) -> Any:
        return self._toolset

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        request_context.messages = self._fit(list(request_context.messages), request_context)
        return request_context

    async def after_model_request(self, ctx: Any, *, request_context: Any, response: ModelResponse) -> ModelResponse:
        """The usage the provider reported calibrates the next estimate (see ``ContextManager.observe``)."""
        self.manager.observe(response.usage)
        return response

    def _fit(self, messages: list[ModelMessage], request_context: Any) -> list[ModelMessage]:
        model = getattr(request_context, "model", None)
        name = model_name(model)
        stated = [w for w in (getattr(model, "context_window", None), context_window(name) if name else None)
                  if isinstance(w, int) and w > 0]
        self._window.fit(self.manager, min(stated, default=None), name)
        neutral = self._convert(messages)
        system_parts = [p for m in messages[:1] if isinstance(m, ModelRequest)
                        for p in m.parts if isinstance(p, SystemPromptPart)]
        params = request_context.model_request_parameters
        instructions = "\n\n".join(getattr(p, "content", "") for p in getattr(params, "instruction_parts", None) or [])
        system = "\n\n".join(t for t in [instructions, *(p.content for p in system_parts)] if t) or None
        tools = [{"name": t.name, "description": t.description, "parameters": t.parameters_json_schema}
                 for t in getattr(params, "function_tools", None) or []]
        self.last = self.manager.prepare(neutral, system=system, tools=tools)
        names = {u.id: u.name for m in self.last.neutral for u in m.tool_uses}
        out = [_to_pydantic_ai(m, self._origin, names) for m in self.last.neutral]
        if system_parts and not (out and out[0] is messages[0]):
            out.insert(0, ModelRequest(parts=system_parts))  # the system prompt left with the first message
        return out

    def _convert(self, messages: list[ModelMessage]) -> list[Message]:
        """Neutral messages for ``messages``, reading only what was appended since last time
        (the history's messages are the same objects from request to request)."""
        k = len(self._seen)
        if not (0 < k <= len(messages) and (messages[0] is self._seen[0] and messages[k - 1] is self._seen[k - 1]
                                            or messages[:k] == self._seen)):
            k, self._neutral, self._origin = 0, [], {}
        self._neutral = self._neutral + from_pydantic_ai(messages[k:], self._origin)
        self._seen = messages
        return self._neutral
