"""lossless for LangChain v1 agents: one middleware, the ``recall`` tool included.

    from langchain.agents import create_agent
    from lossless.adapters.langchain import LosslessMiddleware
    agent = create_agent(model, tools=TOOLS, system_prompt=SYSTEM,
                         middleware=[LosslessMiddleware()])   # the window: the model's profile
    agent.invoke({"messages": [{"role": "user", "content": task}]})

Before every model call the middleware hands the model a view of the agent's messages
made to fit (valid: every tool call answered, rounds whole), and the usage the model
reports calibrates the next estimate; the agent's state keeps the full history, so
nothing is rewritten there.  The middleware registers ``recall``, so the
model can bring back what was moved out.  Messages lossless did not change are passed as
the very objects the state holds (thinking blocks, ids and metadata untouched); a changed
tool result goes as a new ``ToolMessage`` for the same call, a summary as a new message.

Without ``window=``, each call is budgeted by its chat model's window: its profile's
``max_input_tokens`` (langchain-core ≥ 1.0 bundles one per known model; set
``profile={"max_input_tokens": N}`` on the model for others), else its name's in the models' data.

Needs ``pip install 'lossless[langchain]'``.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable, Sequence, Unpack

try:
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.tools import StructuredTool
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"lossless.adapters.langchain needs LangChain v1: pip install 'lossless[langchain]' ({exc})") from exc

from ..manager import ContextManager, Prepared
from ._options import ManagerOptions, ModelWindow, model_name, openai_manager
from ..messages import Block, Image, Message, Text, Thinking, ToolResult, ToolUse, result_text
from ..tools import RECALL_TOOL

__all__ = ["LosslessMiddleware", "from_langchain"]


# -- LangChain messages → neutral ----------------------------------------------------
def _image(block: dict[str, Any]) -> Image | None:
    url = block.get("image_url", {}).get("url") if isinstance(block.get("image_url"), dict) else block.get("url")
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return Image(source={"type": "base64", "media_type": media_type, "data": data})
    if isinstance(url, str):
        return Image(source={"type": "url", "url": url})
    if isinstance(block.get("base64"), str) or isinstance(block.get("data"), str):
        return Image(source={"type": "base64", "media_type": block.get("mime_type", "image/png"),
                             "data": block.get("base64") or block.get("data")})
    return None


def _blocks(content: Any, *, assistant: bool) -> list[Block]:
    """Content as lossless counts it: text, images, thinking; anything else as its JSON."""
    if isinstance(content, str):
        return [Text(text=content)] if content or not assistant else []
    out: list[Block] = []
    for block in content or []:
        if isinstance(block, str):
            out.append(Text(text=block))
            continue
        kind = block.get("type")
        if kind == "text":
            out.append(Text(text=str(block.get("text", ""))))
        elif kind in ("image_url", "image") and (image := _image(block)) is not None:
            out.append(image)
        elif kind == "thinking" and assistant:
            out.append(Thinking(thinking=str(block.get("thinking", "")), signature=str(block.get("signature", "-"))))
        elif kind in ("tool_use", "tool_call", "function_call") and assistant:
            continue  # the same calls are in AIMessage.tool_calls
        else:
            out.append(Text(text=json.dumps(block, ensure_ascii=False, default=str)))
    return out


def from_langchain(messages: Sequence[BaseMessage]) -> list[Message]:
    """LangChain messages → neutral messages (consecutive ``ToolMessage``s → one user
    message of results, so a round is an ``AIMessage`` and the results of its calls)."""
    out: list[Message] = []
    for m in messages:
        if isinstance(m, ToolMessage):
            content = m.content if isinstance(m.content, str) else tuple(
                b for b in _blocks(m.content, assistant=False) if isinstance(b, (Text, Image)))
            result = ToolResult(tool_use_id=m.tool_call_id, content=content, is_error=m.status == "error")
            if out and out[-1].meta.get("langchain") == "tool":
                out[-1] = out[-1].with_content([*out[-1].content, result])
            else:
                out.append(Message(role="user", content=(result,), meta={"langchain": "tool"}))
        elif isinstance(m, AIMessage):
            uses = [ToolUse(id=str(c["id"]), name=c["name"], input=c.get("args") or {}) for c in m.tool_calls]
            blocks = _blocks(m.content, assistant=True) + uses
            out.append(Message(role="assistant", content=tuple(blocks or [Text(text="")])))
        else:
            said: tuple[Block, ...] = tuple(_blocks(m.content, assistant=False)) or (Text(text=""),)
            out.append(Message(role="system", content=said) if isinstance(m, SystemMessage)
                       else Message(role="user", content=said))
    return out


# -- neutral → LangChain ---------------------------------------------------------------
def _text(m: Message) -> str:
    return "\n".join(b.text if isinstance(b, Text) else "" for b in m.content if isinstance(b, Text))


def _to_langchain(m: Message, origin: dict[int, tuple[Any, BaseMessage]]) -> list[BaseMessage]:
    """The original LangChain messages where lossless left ``m`` (or a result) untouched;
    new messages where it changed them."""
    kept = origin.get(id(m))
    if kept is not None and kept[0] is m:
        return [kept[1]]
    if m.role == "assistant":
        calls = [{"id": u.id, "name": u.name, "args": dict(u.input), "type": "tool_call"} for u in m.tool_uses]
        return [AIMessage(content=_text(m), tool_calls=calls)]
    out: list[BaseMessage] = []
    for r in m.tool_results:
        kept = origin.get(id(r))
        if kept is not None and kept[0] is r:
            out.append(kept[1])
        else:
            out.append(ToolMessage(content=result_text(r), tool_call_id=r.tool_use_id,
                                   status="error" if r.is_error else "success"))
    if any(isinstance(b, (Text, Image)) for b in m.content):
        out.append(SystemMessage(content=_text(m)) if m.role == "system" else HumanMessage(content=_text(m)))
    return out


def _tool_schemas(tools: Sequence[Any]) -> list[dict[str, Any]]:
    out = []
    for t in tools:
        if isinstance(t, dict):
            out.append(t)
        else:
            out.append({"name": getattr(t, "name", ""), "description": getattr(t, "description", ""),
                        "parameters": getattr(t, "args", {})})
    return out


class LosslessMiddleware(AgentMiddleware):
    """``ContextManager``'s arguments (or ``manager=``).  ``last`` is the view of the last
    model call; ``manager.run_tool`` answers ``recall`` (registered as ``tools``)."""

    def __init__(self, manager: ContextManager | None = None, **kwargs: Unpack[ManagerOptions]) -> None:
        super().__init__()
        self.manager = manager if manager is not None else openai_manager(kwargs)
        self._window = ModelWindow(manager, kwargs)
        self.last: Prepared | None = None
        self._seen: list[BaseMessage] = []
        self._neutral: list[Message] = []
        self._origin: dict[int, tuple[Any, BaseMessage]] = {}

        def recall(handle: str, offset: int | None = None, limit: int | None = None) -> str:
            return self.manager.run_tool("recall", {"handle": handle, "offset": offset, "limit": limit})

        self.tools = [StructuredTool.from_function(func=recall, name=RECALL_TOOL["name"],
                                                   description=RECALL_TOOL["description"],
                                                   args_schema=RECALL_TOOL["input_schema"])]

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return self._observed(handler(self._fit(request)))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return self._observed(await handler(self._fit(request)))

    def _observed(self, response: Any) -> Any:
        """The usage the provider reported calibrates the next estimate (see ``ContextManager.observe``)."""
        for message in getattr(response, "result", None) or [response]:
            usage = getattr(message, "usage_metadata", None)
            if usage:
                self.manager.observe({"input_tokens": usage.get("input_tokens", 0)})
        return response

    def _fit(self, request: Any) -> Any:
        model = getattr(request, "model", None)
        profile = getattr(model, "profile", None)
        self._window.fit(self.manager, profile.get("max_input_tokens") if isinstance(profile, dict) else None,
                         model_name(model))
        neutral = self._convert(list(request.messages))
        system = request.system_message.text if request.system_message is not None else None
        self.last = self.manager.prepare(neutral, system=system, tools=_tool_schemas(request.tools))
        messages = [lc for m in self.last.neutral for lc in _to_langchain(m, self._origin)]
        return request.override(messages=messages)

    def _convert(self, messages: list[BaseMessage]) -> list[Message]:
        """Neutral messages for ``messages``, reading only what was appended since last time
        (the state's messages are the same objects from call to call)."""
        k = len(self._seen)
        extends = 0 < k <= len(messages) and (messages[0] is self._seen[0] and messages[k - 1] is self._seen[k - 1]
                                               or messages[:k] == self._seen)
        if extends and k < len(messages) and isinstance(messages[k], ToolMessage) and isinstance(messages[k - 1], ToolMessage):
            extends = False  # the new results join the last results message: read it all again
        if not extends:
            k, self._neutral, self._origin = 0, [], {}
        new = from_langchain(messages[k:])
        # Remember which LangChain message each untouched neutral message (or result) came from.
        j = k
        for m in new:
            if m.meta.get("langchain") == "tool":
                for r in m.tool_results:
                    self._origin[id(r)] = (r, messages[j])
                    j += 1
            else:
                self._origin[id(m)] = (m, messages[j])
                j += 1
        self._seen, self._neutral = messages, self._neutral + new
        return self._neutral
