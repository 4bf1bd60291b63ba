"""The fidelity worker's side of the peers, each in its own venv: OpenHands'
condenser (``_peer_openhands.py``) and LangChain's summarization middleware
(``_peer_langchain.py``).

    peer = OpenHandsPeer(python, max_tokens=..., src=<lossless src for its counter>)
    peer = LangChainPeer(python, trigger_tokens=..., src=...)
    sent = peer.step(new_messages, originals)    # the condensed view, as lossless messages
    peer.oneshot(messages)                        # the whole history condensed from scratch
    peer.close()

A peer answers with references to the original messages' blocks; they are rebuilt here
into the neutral messages the metrics read: an original message kept whole is the same
object (so the cache meter sees an unchanged prefix), a part of one is built once and
reused, and the peer's summary is a user text message.  Only this module knows the
wire between the processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Sequence

import _fidelity_metrics as fm

HERE = Path(__file__).resolve().parent
SUMMARY = ("[condensed] Summary of the forgotten events: the agent has been working on the user's task; "
           "details of the earlier steps are not kept here.")
"""What the peer's summarising LLM answers, every time: only verbatim keeps count."""
KEEP_FIRST = 4
"""``LLMSummarizingCondenser``'s own default (``_DEFAULT_KEEP_FIRST``)."""
MAX_SIZE = 100_000
"""Event count never triggers: the token budget alone decides, as for the other systems."""
LANGCHAIN_OPENING = "Here is a summary of the conversation to date:"
"""How ``SummarizationMiddleware`` opens its summary message (``_build_new_messages``)."""


def encode(message: Any) -> dict[str, Any]:
    blocks = []
    for b in message.content:
        if b.type == "text":
            blocks.append({"type": "text", "text": b.text})
        elif b.type == "tool_use":
            blocks.append({"type": "tool_use", "id": b.id, "name": b.name,
                           "input": b.input if isinstance(b.input, dict) else {"input": b.input}})
        elif b.type == "tool_result":
            blocks.append({"type": "tool_result", "tool_use_id": b.tool_use_id, "text": fm.result_text(b),
                           "is_error": bool(b.is_error)})
        else:
            blocks.append({"type": "other", "text": fm.block_lines(b)})
    return {"role": message.role, "blocks": blocks}


class PeerProcess:
    """One peer script in its own venv, asked one JSON line at a time (``_peer_openhands``'s wire)."""

    script = ""
    label = ""
    env: dict[str, str] = {}

    def __init__(self, python: str, init: dict[str, Any], src: str | None = None) -> None:
        env = {**os.environ, "PYTHONPATH": src or "", **self.env}
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([python, str(HERE / self.script)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        self.memo: dict[tuple[int, tuple[int, ...]], Any] = {}
        self.summaries: dict[str, Any] = {}
        self.model_calls = 0
        self.summary_input = 0
        self.seconds: tuple[float, float] | None = None
        """The last step's own (wall, CPU) seconds in the peer's process, the JSON wire left out."""
        self.ask({"op": "init", **init, "summary": SUMMARY})

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            tail = (self.log.read().decode(errors="replace").strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"the {self.label} peer exited: {tail}")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self.label} peer: {reply['error']}")
        return reply

    def _rebuild(self, view: list[Any], originals: Sequence[Any]) -> list[Any]:
        from lossless.messages import Message, Text

        groups: list[Any] = []
        for item in view:
            if item[0] == "summary":
                groups.append(item[1])
            elif groups and isinstance(groups[-1], list) and groups[-1][0] == item[0]:
                groups[-1][1].extend(item[1])  # events of one original message, side by side
            else:
                groups.append([item[0], list(item[1])])
        out = []
        for g in groups:
            if isinstance(g, str):
                if g not in self.summaries:
                    self.summaries[g] = Message(role="user", content=(Text(text=g),))
                out.append(self.summaries[g])
                continue
            index, blocks = g[0], tuple(sorted(set(g[1])))
            m = originals[index]
            if blocks == tuple(range(len(m.content))):
                out.append(m)
                continue
            key = (index, blocks)
            if key not in self.memo:
                self.memo[key] = m.with_content([m.content[k] for k in blocks])
            out.append(self.memo[key])
        return out

    def step(self, new: Sequence[Any], originals: Sequence[Any]) -> tuple[list[Any], int]:
        """The view after ``new`` entered, and how many condensations that step made."""
        reply = self.ask({"op": "step", "add": [encode(m) for m in new]})
        self.model_calls = reply.get("model_calls", self.model_calls)
        self.summary_input += reply.get("summary_input", 0)
        spent = reply.get("seconds")
        self.seconds = (float(spent[0]), float(spent[1])) if isinstance(spent, list) and len(spent) == 2 else None
        return self._rebuild(reply["view"], originals), reply["condensations"]

    def oneshot(self, messages: Sequence[Any]) -> list[Any]:
        reply = self.ask({"op": "oneshot", "messages": [encode(m) for m in messages]})
        return self._rebuild(reply["view"], messages)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.log.close()


class OpenHandsPeer(PeerProcess):
    """OpenHands' ``LLMSummarizingCondenser`` at ``max_tokens``, ``KEEP_FIRST``, ``MAX_SIZE``."""

    script = "_peer_openhands.py"
    label = "OpenHands"
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENHANDS_SUPPRESS_BANNER": "1", "LOG_LEVEL": "ERROR"}

    def __init__(self, python: str, *, max_tokens: int, src: str | None = None) -> None:
        super().__init__(python, {"max_tokens": max_tokens, "keep_first": KEEP_FIRST, "max_size": MAX_SIZE}, src)


class LangChainPeer(PeerProcess):
    """LangChain's ``SummarizationMiddleware`` triggered at ``trigger_tokens``, its default keep."""

    script = "_peer_langchain.py"
    label = "LangChain"

    def __init__(self, python: str, *, trigger_tokens: int, src: str | None = None) -> None:
        super().__init__(python, {"trigger_tokens": trigger_tokens}, src)
