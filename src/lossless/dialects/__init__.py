"""Wire formats ⇄ the neutral message model. Nothing outside this package knows them.

    from lossless.dialects import read_any, from_anthropic, to_anthropic, from_openai, to_openai

    session = read_any("session.jsonl")        # Claude Code, mini-swe-agent, Anthropic or OpenAI
    msgs = from_anthropic(body["messages"])    # to_anthropic(msgs) == body["messages"]
    msgs = from_openai(body["messages"])       # to_openai(msgs) == body["messages"]

Per-format readers: ``claude_code.read_session``, ``mini_swe.read_trajectory``
(and ``mini_swe.to_mini_swe`` to write a trajectory's messages back).
"""

from __future__ import annotations

from .anthropic import from_anthropic, to_anthropic
from .detect import read_any
from .openai import from_openai, to_openai

__all__ = ["from_anthropic", "from_openai", "read_any", "to_anthropic", "to_openai"]
