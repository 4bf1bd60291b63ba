"""OpenHands' ``LLMSummarizingCondenser`` driven as its agent drives it, for the fidelity bench.

Runs in the peer's own virtual environment (Python ≥ 3.12, ``openhands-sdk``; made by
``fidelity.ensure_peer``), one process per (session, window), speaking JSON lines:

    {"op": "init", "max_tokens": N, "keep_first": 4, "max_size": 100000, "summary": "..."}
    {"op": "step", "add": [message, ...]}        # the messages that entered since the last step
    {"op": "oneshot", "messages": [message, ...]}  # the whole history, from a fresh state

and answering each step with ``{"view": [[message_index, [block_index, ...]] | ["summary", text]],
"condensations": n}``: which blocks of which original messages the condensed view keeps, in
order, and where the condenser's summary sits.  A message is ``{"role", "blocks": [...]}`` with
text / tool_use / tool_result / other blocks (``_fidelity_worker.encode``).

How the agent uses the condenser (``openhands.sdk.agent.utils.prepare_llm_messages``): before
each model call it condenses the view; a ``Condensation`` is appended to the event log and the
step ends, the next step condenses again.  Here a step repeats that until a ``View`` comes
back (at most ``MAX_ROUNDS`` times).  The condenser's LLM answers with the fixed summary text,
so only what the condenser keeps verbatim can hold a fact.  Tokens are counted with
lossless's own estimator (its ``src`` on ``PYTHONPATH``) so both sides measure one budget.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from types import SimpleNamespace
from typing import Any

from _peer_serve import serve

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

from openhands.sdk.context.condenser import LLMSummarizingCondenser
from openhands.sdk.context.view import View
from openhands.sdk.event import ActionEvent, Condensation, MessageEvent, ObservationEvent
from openhands.sdk.llm import LLM, Message, MessageToolCall, TextContent
from openhands.sdk.tool.schema import Observation

MAX_ROUNDS = 10

try:
    from lossless.tokens import default_counter

    _count = default_counter().count_text
except Exception:  # lossless not importable here: chars/4, said in the output
    def _count(text: str) -> int:
        return (len(text) + 3) // 4


class BenchObservation(Observation):
    """A tool result as text (the SDK's ``Observation`` is abstract)."""


def _message_text(m: Message) -> str:
    parts = [getattr(c, "text", "") for c in m.content]
    for call in m.tool_calls or ():
        parts += [call.name, call.arguments]
    return "\n".join(parts)


def _get_token_count(self: LLM, messages: list[Message], tools: Any = None,
                     add_security_risk_prediction: bool = False) -> int:
    return sum(_count(_message_text(m)) + 4 for m in messages)


LLM.get_token_count = _get_token_count  # type: ignore[method-assign]


class Peer:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.summary = cfg["summary"]

        def generate(llm: LLM, messages: list[Message], **kw: Any) -> Any:
            self.model_calls += 1
            self.summary_input += sum(_count(_message_text(m)) for m in messages)
            return SimpleNamespace(id=f"summary-{uuid.uuid4().hex[:12]}",
                                   message=Message(role="assistant", content=[TextContent(text=self.summary)]))

        LLM.generate = generate  # type: ignore[method-assign, assignment]
        # The agent LLM only counts tokens; the condenser's own max_tokens carries the budget
        # (the SDK refuses a max_input_tokens under 16k, and takes the smaller of the two).
        self.agent_llm = LLM(model="gpt-4o", api_key="unused", usage_id="agent")
        self.condenser = LLMSummarizingCondenser(
            llm=LLM(model="gpt-4o", api_key="unused", usage_id="condenser"),
            max_tokens=cfg["max_tokens"], keep_first=cfg.get("keep_first", 4), max_size=cfg.get("max_size", 100_000))
        self.reset()

    def reset(self) -> None:
        self.events: list[Any] = []
        self.where: dict[str, tuple[int, list[int]]] = {}
        self.actions: dict[str, str] = {}
        self.n = 0
        self.model_calls = 0
        self.summary_input = 0

    # -- messages → events ---------------------------------------------------------------
    def _put(self, event: Any, index: int, blocks: list[int]) -> None:
        self.events.append(event)
        self.where[event.id] = (index, blocks)

    def add(self, message: dict[str, Any]) -> None:
        index, self.n = self.n, self.n + 1
        blocks = message["blocks"]
        uses = [k for k, b in enumerate(blocks) if b["type"] == "tool_use"]
        results = [k for k, b in enumerate(blocks) if b["type"] == "tool_result" and b["tool_use_id"] in self.actions]
        rest = [k for k in range(len(blocks)) if k not in uses and k not in results]
        text = "\n".join(blocks[k].get("text", "") for k in rest)
        if message["role"] == "assistant" and uses:
            response = f"resp-{index}"
            for j, k in enumerate(uses):
                b = blocks[k]
                call = MessageToolCall(id=b["id"], name=b["name"], arguments=json.dumps(b["input"]), origin="completion")
                event = ActionEvent(thought=[TextContent(text=text)] if j == 0 and text else [], tool_name=b["name"],
                                    tool_call_id=b["id"], tool_call=call, llm_response_id=response, action=None)
                self.actions[b["id"]] = event.id
                self._put(event, index, ([*rest, k] if j == 0 else [k]))
            return
        for k in results:
            b = blocks[k]
            obs = BenchObservation.from_text(b["text"], is_error=bool(b.get("is_error")))
            self._put(ObservationEvent(observation=obs, action_id=self.actions[b["tool_use_id"]], tool_name="tool",
                                       tool_call_id=b["tool_use_id"]), index, [k])
        if rest and (text.strip() or not results):
            source = "agent" if message["role"] == "assistant" else "user"
            role = "assistant" if source == "agent" else "user"
            self._put(MessageEvent(source=source, llm_message=Message(role=role, content=[TextContent(text=text)])),
                      index, rest)

    # -- the agent's step ------------------------------------------------------------------
    def step(self, new: list[dict[str, Any]]) -> dict[str, Any]:
        """Add ``new`` to the event log, then condense as the agent does before a model call."""
        for m in new:
            self.add(m)
        condensed = 0
        for _ in range(MAX_ROUNDS):
            view = View.from_events(self.events)
            result = self.condenser.condense(view, agent_llm=self.agent_llm)
            if isinstance(result, Condensation):
                self.events.append(result)
                condensed += 1
                continue
            break
        out: list[Any] = []
        for event in result.events:
            if event.id in self.where:
                out.append(list(self.where[event.id]))
            else:  # the condenser's summary event
                out.append(["summary", "".join(getattr(c, "text", "") for c in event.to_llm_message().content)])
        input_now, self.summary_input = self.summary_input, 0
        return {"view": out, "condensations": condensed, "model_calls": self.model_calls, "summary_input": input_now}


if __name__ == "__main__":
    sys.exit(serve(Peer, getattr(_count, "__qualname__", "")))
