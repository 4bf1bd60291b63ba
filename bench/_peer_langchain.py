"""LangChain's ``SummarizationMiddleware`` driven as its agent drives it, for the fidelity bench.

Runs in the peer's own virtual environment (``langchain==1.5.2``; made by
``fidelity.ensure_peer``), one process per (session, window), speaking the JSON lines of
``_peer_openhands``:

    {"op": "init", "trigger_tokens": N, "summary": "..."}
    {"op": "step", "add": [message, ...]}          # the messages that entered since the last step
    {"op": "oneshot", "messages": [message, ...]}  # the whole history, from a fresh state

and answering each step with ``{"view": [[message_index, [block_index, ...]] | ["summary", text]],
"condensations": n, "model_calls": n, "summary_input": tokens}``.

How the agent uses the middleware (``langchain.agents.create_agent``): the state's
``messages`` channel is reduced with ``add_messages``; before each model call the
middleware's ``before_model`` sees the state and may return ``RemoveMessage(REMOVE_ALL)``,
a summary ``HumanMessage`` and the kept recent messages, which the reducer makes the new
state.  It runs once per model call, so a step here is one ``before_model`` and one
reduction.  The system prompt is not in the state (``create_agent`` passes it beside the
messages), so the trigger is the bench's threshold less the system prompt.

Configuration: ``trigger=("tokens", trigger_tokens)``; ``keep`` and
``trim_tokens_to_summarize`` at their defaults (the last 20 messages; 4000 tokens sent to
the summariser).  The model is ``FakeListChatModel`` answering the fixed summary text, so
only what the middleware keeps verbatim can hold a fact.  The token counter is lossless's
own estimator (its ``src`` on ``PYTHONPATH``), counted as the OpenHands peer counts: a
message's text, tool names and JSON arguments, plus 4 per message.  A recorded assistant
message carries no provider usage, so the counter alone decides when to summarise.

One original message becomes an ``AIMessage`` (its text and every tool call), or its
``ToolMessage``s (results of known calls, first) and a ``HumanMessage`` of the rest; each
carries an id that maps it back to its blocks.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable

from _peer_serve import serve

from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime

try:
    from lossless.tokens import default_counter

    _count = default_counter().count_text
except Exception:  # lossless not importable here: chars/4, said in the init reply
    def _count(text: str) -> int:
        return (len(text) + 3) // 4


def _text(m: BaseMessage) -> str:
    content = m.content
    if isinstance(content, str):
        parts = [content]
    else:
        parts = [c if isinstance(c, str) else str(c.get("text", "")) for c in content]
    for call in getattr(m, "tool_calls", None) or ():
        parts += [call["name"], json.dumps(call["args"])]
    return "\n".join(parts)


class Tokens:
    """The middleware's token counter; a message is counted once per content it holds
    (``trim_messages`` shortens a copy's content in place between calls)."""

    def __init__(self) -> None:
        self.memo: dict[int, tuple[BaseMessage, Any, int]] = {}

    def __call__(self, messages: Iterable[Any]) -> int:
        total = 0
        for m in messages:
            hit = self.memo.get(id(m))
            if hit is None or hit[0] is not m or hit[1] is not m.content:
                hit = (m, m.content, _count(_text(m)) + 4)
                self.memo[id(m)] = hit
            total += hit[2]
        return total


class SummaryInput(BaseCallbackHandler):
    """Counts the summary model's calls and the tokens of what each one is sent."""

    def __init__(self) -> None:
        self.calls = 0
        self.tokens = 0

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], **kw: Any) -> None:
        self.calls += 1
        self.tokens += sum(_count(_text(m)) for batch in messages for m in batch)


class Peer:
    """The agent's state (its ``messages``) and the middleware that manages it; ``where``
    maps each message id back to the original message and blocks it stands for."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.meter = SummaryInput()
        model = FakeListChatModel(responses=[cfg["summary"]], callbacks=[self.meter])
        self.middleware = SummarizationMiddleware(model, trigger=("tokens", cfg["trigger_tokens"]),
                                                  token_counter=Tokens())
        self.runtime: Runtime[Any] = Runtime()
        self.reset()

    def reset(self) -> None:
        self.messages: list[BaseMessage] = []
        self.where: dict[str, tuple[int, list[int]]] = {}
        self.calls: set[str] = set()
        self.n = 0
        self.meter.calls = self.meter.tokens = 0
        self.reported_input = 0

    # -- original messages → LangChain messages ---------------------------------------------
    def _put(self, out: list[BaseMessage], message: BaseMessage, index: int, blocks: list[int]) -> None:
        message.id = f"m{index}.{len(out)}"
        self.where[message.id] = (index, blocks)
        out.append(message)

    def convert(self, message: dict[str, Any]) -> list[BaseMessage]:
        """The LangChain messages an agent would hold for one original message."""
        index, self.n = self.n, self.n + 1
        blocks = message["blocks"]
        out: list[BaseMessage] = []
        if message["role"] == "assistant":
            uses = [b for b in blocks if b["type"] == "tool_use"]
            text = "\n".join(b.get("text", "") for b in blocks if b["type"] != "tool_use")
            calls = [{"id": b["id"], "name": b["name"], "args": b["input"], "type": "tool_call"} for b in uses]
            self.calls |= {b["id"] for b in uses}
            self._put(out, AIMessage(content=text, tool_calls=calls), index, list(range(len(blocks))))
            return out
        results = [k for k, b in enumerate(blocks) if b["type"] == "tool_result" and b["tool_use_id"] in self.calls]
        rest = [k for k in range(len(blocks)) if k not in results]
        for k in results:
            b = blocks[k]
            self._put(out, ToolMessage(content=b["text"], tool_call_id=b["tool_use_id"],
                                       status="error" if b.get("is_error") else "success"), index, [k])
        text = "\n".join(blocks[k].get("text", "") for k in rest)
        if rest and (text.strip() or not results):
            self._put(out, HumanMessage(content=text), index, rest)
        return out

    # -- the agent's step ------------------------------------------------------------------
    def step(self, new: list[dict[str, Any]]) -> dict[str, Any]:
        """Append ``new`` to the state, run ``before_model`` once, reduce its update into the state."""
        added = [m for message in new for m in self.convert(message)]
        self.messages = add_messages(self.messages, added)
        update = self.middleware.before_model({"messages": self.messages}, self.runtime)
        if update:
            self.messages = add_messages(self.messages, update["messages"])
        view: list[Any] = []
        for m in self.messages:
            if m.id in self.where:
                view.append(list(self.where[m.id]))
            else:  # the middleware's summary message
                view.append(["summary", _text(m)])
        input_now, self.reported_input = self.meter.tokens - self.reported_input, self.meter.tokens
        return {"view": view, "condensations": int(bool(update)), "model_calls": self.meter.calls,
                "summary_input": input_now}


if __name__ == "__main__":
    sys.exit(serve(Peer, getattr(_count, "__qualname__", "")))
