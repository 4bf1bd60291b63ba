"""Tools an agent can expose so the model itself can use lossless.

- ``recall``: every marker lossless puts in the context names a handle; this tool
  returns what the handle stands for, a page at a time (a persisted 2 MB log does
  not come back into the context whole).
- ``compact``: the model asks for a compaction, optionally saying what to keep
  (see ``ContextManager.compact``).

    tools = [*MY_TOOLS, *lossless.tools.DEFINITIONS]
    ...
    if block.name in lossless.tools.NAMES:
        text = cm.run_tool(block.name, block.input)
"""

from __future__ import annotations

from typing import Any, Mapping

from .compaction.manual import COMPACT_TOOL
from .errors import StoreError
from .store import ArtifactStore

PAGE_CHARS = 20_000

RECALL_TOOL: dict[str, Any] = {
    "name": "recall",
    "description": (
        "Read content that was moved out of the conversation to save room. Every placeholder, "
        "persisted-output marker and summary names a handle (sha256:…); pass it here to get the original "
        "text back, a page at a time. Use it instead of guessing what a cleared result said."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "handle": {"type": "string", "description": "the handle, e.g. sha256:0123456789abcdef01234567"},
            "offset": {"type": "integer", "minimum": 0, "description": "character to start from (default 0)"},
            "limit": {"type": "integer", "minimum": 1, "description": f"characters to return (default {PAGE_CHARS:,})"},
        },
        "required": ["handle"],
    },
}

DEFINITIONS: tuple[Mapping[str, Any], ...] = (RECALL_TOOL, COMPACT_TOOL)
NAMES = frozenset(d["name"] for d in DEFINITIONS)


def run_recall(tool_input: Mapping[str, Any], store: ArtifactStore) -> str:
    """The recall tool's answer: a page of the original, or a one-line error the model can act on."""
    handle = str(tool_input.get("handle", "")).strip()
    try:
        offset = max(0, int(tool_input.get("offset") or 0))
        limit = max(1, int(tool_input.get("limit") or PAGE_CHARS))
    except (TypeError, ValueError):
        return "error: offset and limit must be whole numbers"
    try:
        text = store.get(handle)
    except StoreError as exc:  # no such handle, or an artifact the store refuses (a planted link, changed bytes)
        return f"error: {exc}"
    page = text[offset : offset + limit]
    end = offset + len(page)
    if offset == 0 and end >= len(text):
        return page
    more = f"; call again with offset={end} for the rest" if end < len(text) else ""
    return f"[{handle}: characters {offset:,}–{end:,} of {len(text):,}{more}]\n{page}"
