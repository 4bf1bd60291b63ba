"""The small LLM side-calls memory makes, and reading JSON out of their replies.

Every caller treats any exception from here as "the model did not help" and
falls back to a deterministic path; nothing here retries or logs.
"""

from __future__ import annotations

import json
from typing import Any

from ..messages import user
from ..providers.base import Provider, Request


def ask(provider: Provider, *, system: str, prompt: str, purpose: str, max_tokens: int = 1024,
        model: str | None = None) -> str:
    """One completion; the reply's text."""
    response = provider.complete(
        Request(messages=(user(prompt),), system=system, max_tokens=max_tokens, model=model, purpose=purpose)
    )
    return response.text


def parse_json(text: str) -> Any:
    """The first JSON object or array in ``text`` (code fences and prose around it allowed).

    Raises ``ValueError`` when there is none.
    """
    text = (text or "").strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(text, i)
            except ValueError:
                continue
            return value
    raise ValueError("no JSON object or array in the reply")
