"""Compact a recorded session to fit a window and write it in its API dialect.

Claude Code JSONL and Anthropic message lists come out as Anthropic messages
JSON; mini-swe-agent trajectories and OpenAI lists as OpenAI messages JSON.  The
context compacted is the live one: from the last compaction recorded in the file
(its summary included) to the end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .config import ContextConfig
from .dialects.anthropic import to_anthropic
from .dialects.detect import read_any
from .dialects.mini_swe import to_mini_swe
from .dialects.openai import to_openai
from .errors import InvalidRequest
from .manager import ContextManager
from .messages import Message, Text
from .rounds import problems
from .store import ArtifactStore, atomic_write


def compact_file(
    path: str | Path,
    output: str | Path,
    *,
    window: int,
    max_output: int | None = None,
    store: str | Path | None = None,
    provider: Any = None,
) -> dict[str, Any]:
    session = read_any(path)
    start = max((b.index for b in session.boundaries), default=0)
    live = list(session.messages[start:])
    artifacts = ArtifactStore(store)
    dialect = "openai" if session.dialect == "openai" else "anthropic"
    cm = ContextManager(
        config=ContextConfig(window=window, max_output=max_output),
        store=artifacts,
        transcript=False,
        dialect=dialect,
        provider=provider,
    )
    before = cm.counter.count_system(session.system) + sum(cm.counter.count_message(m) for m in live)
    view = cm.prepare(live, system=session.system)
    out = view.neutral
    found = problems(out, dialect)
    if found:  # prepare() guarantees this; checked again because a file is being written
        raise InvalidRequest(f"{path}: the compacted conversation is not valid: {found[0]}")
    if session.format == "mini-swe-agent":
        data: Any = to_mini_swe(out, session.system)
    elif dialect == "openai":
        system = [Message(role="system", content=(Text(text=session.system),))] if session.system else []
        data = to_openai(system + out)
    else:
        data = to_anthropic(out)
        if session.system:
            data = {"system": session.system, "messages": data}
    atomic_write(Path(output), (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))
    handles = [h for e in view.events for h in e.handles]
    return {
        "file": str(path),
        "output": str(output),
        "format": session.format,
        "dialect": dialect,
        "window": window,
        "messages_before": len(live),
        "messages_after": len(out),
        "tokens_before": before,
        "tokens_after": view.state.tokens,
        "threshold": view.state.threshold,
        "stages": [e.stage for e in view.events if e.fired],
        "handles": handles,
        "summary_calls": cm.llm_calls,
        "store": str(artifacts.root),
        "warnings": list(session.warnings),
    }
