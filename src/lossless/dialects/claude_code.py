"""Read a Claude Code session (``~/.claude/projects/<project>/<session>.jsonl``), and write one.

    s = read_session("abc.jsonl")
    s.messages, s.calls, s.boundaries, s.warnings
    lines = to_claude_code(messages, session_id=sid, cwd="/path/to/project")   # `claude --resume sid` loads it

What the reader does, and why:

- **Streams the file line by line** in binary and decodes each line as strict
  UTF-8: a 200 MB line costs one pass.  A line torn by a crash mid-write (a proper
  prefix of a JSON object: the last line, or one in the middle of a session resumed
  after the crash) is skipped with a warning naming the line; any other invalid
  UTF-8 or JSON is a ``FormatError`` ("path:LINE: not JSON (…)" / "not UTF-8 (…)").
- **Follows the live branch**: from the last non-sidechain user/assistant/system
  entry back along ``parentUuid`` (through progress and other entries, which it
  then skips), bridging each ``compact_boundary`` via ``logicalParentUuid`` — or,
  when that uuid is not in the file, via the last message entry before the
  boundary (with a warning).  A file of sidechain entries only (a subagent's
  transcript) is read the same way.
- **Rebuilds API messages**: Claude Code writes one API response over several
  ``assistant`` lines sharing ``message.id`` (one block each, usage repeated and
  growing).  They become one assistant ``Message`` and one ``Call`` whose usage is
  the last line's.  Claude Code also writes each parallel tool's result right after
  that tool's line, so some results hang off side branches; all results of one
  response are gathered into the single user message after it, in tool_use order.
- **Drops white-space-only text blocks from assistant messages** (Claude Code
  records streaming artefacts such as ``"\\n\\n"``; the API rejects them).
- Skips ``isMeta`` user entries, progress, file-history snapshots, and system
  entries other than ``compact_boundary`` (local command echoes, hook summaries):
  none of them is sent to the model.
- Each segment between boundaries is checked with ``rounds.validate``; when the
  file has a quirk (an interrupted call with no result, say) the segment is fixed
  with ``rounds.repair`` and every note goes to ``warnings``.

Meta on each message: ``uuid`` and ``timestamp`` (of its first entry), ``uuids``
when merged from several entries; assistant messages add ``message_id``, ``model``,
``usage``, ``request_id``; the summary after a boundary has ``is_compact_summary``.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..errors import FormatError
from ._json import iter_jsonl
from ..messages import Block, Message, Text, ToolResult, ToolUse
from ..rounds import problems, repair
from ..session import Boundary, Call, Session
from .anthropic import block_from_dict, blocks_from_content

__all__ = ["iter_entries", "project_folder", "read_session", "session_context", "to_claude_code"]

_MESSAGE_TYPES = ("user", "assistant", "system")
_Found = tuple[int, dict[str, Any], ToolResult]  # (line, entry, result block)


def iter_entries(path: str | Path, warnings: list[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, entry)`` for each JSON line, streaming (``_json.iter_jsonl``).

    A line torn by an interrupted write — at the end, or in the middle of a session
    resumed after a crash — is skipped and reported in ``warnings``; any other bad
    line is a ``FormatError`` naming the file and line.
    """
    return iter_jsonl(path, warnings)


@dataclass(slots=True)
class _Node:
    parent: str | None
    line: int
    entry: dict[str, Any] | None  # kept only for entries that can become messages


@dataclass(slots=True)
class _Response:
    """One API response, possibly spread over several assistant entries."""

    message_id: str | None
    entries: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)

    def tool_ids(self) -> set[str]:
        return {b.id for b in self.blocks if isinstance(b, ToolUse)}


def _check_entry(entry: dict[str, Any], keep: bool, line: int, path: Path) -> None:
    """A ``FormatError`` naming the line and field when an entry the reader relies on has the wrong shape."""

    def bad(what: str, expected: str, value: Any) -> FormatError:
        return FormatError(f"{path}:{line}: {what} must be {expected}, not {type(value).__name__}")

    for key in ("parentUuid", "logicalParentUuid"):
        if not isinstance(entry.get(key), (str, type(None))):
            raise bad(key, "a string or null", entry[key])
    if not keep:
        return
    if entry.get("type") == "system":
        cm = entry.get("compactMetadata")
        if not isinstance(cm, (dict, type(None))):
            raise bad("compactMetadata", "an object", cm)
        for key in ("preTokens", "postTokens"):
            value = (cm or {}).get(key)
            if value is not None and not _count(value):
                raise bad(f"compactMetadata.{key}", "a count of tokens", value)
        return
    message = entry.get("message")
    if not isinstance(message, dict):
        raise bad(f"{'an' if str(entry['type'])[:1] in 'aeiou' else 'a'} {entry['type']} entry's 'message'", "an object",
                  message)
    if not isinstance(message.get("id"), (str, type(None))):
        raise bad("message.id", "a string", message["id"])
    usage = message.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            raise bad("message.usage", "an object", usage)
        for key, value in usage.items():
            if key.endswith("_tokens") and value is not None and not _count(value):
                raise bad(f"message.usage.{key}", "a count of tokens", value)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _blocks(entry: dict[str, Any], line: int, path: Path) -> tuple[tuple[Block, ...], bool]:
    message = entry.get("message")
    if not isinstance(message, dict) or "content" not in message:
        raise FormatError(f"{path}:{line}: a {entry.get('type')} entry without message.content")
    try:
        return blocks_from_content(message["content"])
    except FormatError as e:
        raise FormatError(f"{path}:{line}: {e}") from None


def _entry_meta(entries: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    first = entries[0][1]
    meta: dict[str, Any] = {"uuid": first.get("uuid"), "timestamp": first.get("timestamp")}
    if len(entries) > 1:
        meta["uuids"] = tuple(e.get("uuid") for _, e in entries)
    return meta


def read_session(path: str | Path) -> Session:
    """Read a Claude Code session JSONL into a ``Session`` (see the module docstring)."""
    path = Path(path)
    warnings: list[str] = []
    nodes: dict[str, _Node] = {}
    leaf: str | None = None
    side_leaf: str | None = None
    session_id: str | None = None
    last_message_uuid: str | None = None
    boundary_fallback: dict[str, str] = {}  # boundary uuid -> last message entry before it
    results: dict[str, list[_Found]] = {}  # tool_use id -> every result entry for it, in file order

    for line, entry in iter_entries(path, warnings):
        uuid = entry.get("uuid")
        if session_id is None and isinstance(entry.get("sessionId"), str):
            session_id = entry["sessionId"]
        if not isinstance(uuid, str):
            continue
        etype = entry.get("type")
        keep = etype in ("user", "assistant") or (etype == "system" and entry.get("subtype") == "compact_boundary")
        _check_entry(entry, keep, line, path)
        nodes[uuid] = _Node(entry.get("parentUuid"), line, entry if keep else None)
        if etype in _MESSAGE_TYPES:
            if entry.get("isSidechain"):
                side_leaf = uuid
            else:
                leaf = uuid
        if etype == "system" and entry.get("subtype") == "compact_boundary" and last_message_uuid:
            boundary_fallback[uuid] = last_message_uuid
        if etype in ("user", "assistant") and not entry.get("isMeta"):
            last_message_uuid = uuid
        if etype == "user" and isinstance(entry["message"].get("content"), list):
            for raw in entry["message"]["content"]:
                if isinstance(raw, dict) and raw.get("type") == "tool_result":
                    try:
                        block = block_from_dict(raw)
                    except FormatError as e:
                        raise FormatError(f"{path}:{line}: {e}") from None
                    if isinstance(block, ToolResult):  # always, for a "tool_result" dict
                        results.setdefault(block.tool_use_id, []).append((line, entry, block))

    start = leaf or side_leaf
    chain: list[_Node] = []
    seen: set[str] = set()
    while start is not None:
        if start in seen:
            raise FormatError(f"{path}:{nodes[start].line}: parentUuid chain loops back to this entry")
        seen.add(start)
        node = nodes.get(start)
        if node is None:
            warnings.append(f"{path}: parent entry {start!r} is not in the file; the history starts after it")
            break
        chain.append(node)
        nxt = node.parent
        if nxt is None and node.entry is not None and node.entry.get("subtype") == "compact_boundary":
            nxt = node.entry.get("logicalParentUuid")
            if nxt not in nodes and start in boundary_fallback:
                warnings.append(
                    f"{path}:{node.line}: compact_boundary's logicalParentUuid {nxt!r} is not in the file; "
                    f"bridged to line {nodes[boundary_fallback[start]].line}, the last message before it"
                )
                nxt = boundary_fallback[start]
        start = nxt
    chain.reverse()
    on_chain = {id(n.entry) for n in chain if n.entry is not None}

    # Walk the live branch, building items: a _Response, a Message, or a Boundary marker.
    items: list[_Response | Message | dict[str, Any]] = []
    current: _Response | None = None
    last: _Response | None = None
    for node in chain:
        if node.entry is None or node.entry.get("isMeta"):
            continue
        entry = node.entry
        etype = entry.get("type")
        if etype == "system":
            items.append(entry)
            current = last = None
            continue
        blocks, was_string = _blocks(entry, node.line, path)
        if etype == "assistant":
            mid = entry["message"].get("id")
            if current is None or mid is None or current.message_id != mid:
                current = last = _Response(message_id=mid)
                items.append(current)
            current.entries.append((node.line, entry))
            current.blocks.extend(blocks)
            continue
        owned = last.tool_ids() if last is not None else set()
        rest = [b for b in blocks if not (isinstance(b, ToolResult) and b.tool_use_id in owned)]
        if len(rest) == len(blocks) or any(not isinstance(b, ToolResult) for b in rest):
            current = None  # a real user turn ends the response
        if rest:
            meta = _entry_meta([(node.line, entry)])
            if was_string:
                meta["string_content"] = True
            if entry.get("isCompactSummary"):
                meta["is_compact_summary"] = True
            items.append(Message(role="user", content=tuple(rest), meta=meta))

    # Render items into messages; gather each response's results after it.
    messages: list[Message] = []
    boundaries: list[Boundary] = []
    for item in items:
        if isinstance(item, Message):
            messages.append(item)
        elif isinstance(item, dict):
            cm = item.get("compactMetadata") or {}
            boundaries.append(Boundary(
                index=len(messages), trigger=str(cm.get("trigger", "unknown")),
                pre_tokens=cm.get("preTokens"), post_tokens=cm.get("postTokens"),
            ))
        else:
            messages.extend(_render_response(item, results, on_chain, path, warnings))

    messages, boundaries = _check_segments(messages, boundaries, path, warnings)
    calls = tuple(
        Call(index=i, usage=m.meta.get("usage"), message_id=m.meta.get("message_id"), model=m.meta.get("model"))
        for i, m in enumerate(messages)
        if m.role == "assistant" and "message_id" in m.meta
    )
    return Session(
        path=path, format="claude-code", messages=tuple(messages), system=None, calls=calls,
        boundaries=tuple(boundaries), warnings=tuple(warnings), session_id=session_id,
    )


def _render_response(
    r: _Response,
    results: dict[str, list[_Found]],
    on_chain: set[int],
    path: Path,
    warnings: list[str],
) -> list[Message]:
    blocks = [b for b in r.blocks if not (isinstance(b, Text) and not b.text.strip())]
    last_line, last_entry = r.entries[-1]
    first_line = r.entries[0][0]
    if not blocks:
        warnings.append(f"{path}:{first_line}: dropped an assistant response with only white space text ({r.message_id})")
        return []
    message = last_entry["message"]
    meta = _entry_meta(r.entries)
    meta.update(message_id=r.message_id, model=message.get("model"), usage=message.get("usage"),
                request_id=last_entry.get("requestId"), stop_reason=message.get("stop_reason"))
    out = [Message(role="assistant", content=tuple(blocks), meta=meta)]
    found: list[_Found] = []
    for use in (b for b in blocks if isinstance(b, ToolUse)):
        candidates = results.get(use.id)
        if candidates:  # the one on the live branch, else the latest written
            found.append(next((c for c in candidates if id(c[1]) in on_chain), candidates[-1]))
    if found:
        entries = sorted({id(e): (ln, e) for ln, e, _ in found}.values(), key=lambda t: t[0])
        rmeta = _entry_meta(entries)
        off = [ln for ln, e in entries if id(e) not in on_chain]
        if off:
            rmeta["side_branch_lines"] = tuple(off)
        out.append(Message(role="user", content=tuple(res for _, _, res in found), meta=rmeta))
    return out


_NOTE_INDEX = re.compile(r"^message (\d+)")


def _check_segments(
    messages: list[Message], boundaries: list[Boundary], path: Path, warnings: list[str]
) -> tuple[list[Message], list[Boundary]]:
    """Validate each context between boundaries; repair (with notes) the ones that fail."""
    starts = [0] + [b.index for b in boundaries]
    stops = [b.index for b in boundaries] + [len(messages)]
    out: list[Message] = []
    new_bounds: list[Boundary] = []
    for k, (a, z) in enumerate(zip(starts, stops)):
        if k > 0:
            b = boundaries[k - 1]
            new_bounds.append(Boundary(index=len(out), trigger=b.trigger, pre_tokens=b.pre_tokens, post_tokens=b.post_tokens))
        segment = messages[a:z]
        if segment and problems(segment):
            fixed, notes = repair(segment)
            for note in notes:
                note = _NOTE_INDEX.sub(lambda mt: f"message {int(mt[1]) + a}", note)
                warnings.append(f"{path}: repaired: {note}")
            segment = fixed
        out.extend(segment)
    return out, new_bounds


# -- writing -------------------------------------------------------------------------------
def project_folder(cwd: str) -> str:
    """The folder name Claude Code keeps a project's sessions under: its path with every
    character other than a letter or digit as ``-`` (``/home/me/app`` → ``-home-me-app``)."""
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def session_context(path: str | Path) -> dict[str, str]:
    """The ``cwd``, ``version`` and ``gitBranch`` a Claude Code session file records (its
    first entries that have them), for a session written to continue it."""
    found: dict[str, str] = {}
    for _, entry in iter_entries(path):
        for key in ("cwd", "version", "gitBranch"):
            if key not in found and isinstance(entry.get(key), str):
                found[key] = entry[key]
        if len(found) == 3:
            break
    return found


def copy_uuid(session_id: str, position: int) -> str:
    """The uuid ``to_claude_code`` gives the entry at ``position`` of a session it writes: derived, so
    a copy lossless wrote is known by its first line (``is_copy``)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"lossless:{session_id}:{position}"))


def is_copy(first: Mapping[str, Any]) -> bool:
    """Whether ``first``, a session file's first entry, starts a compacted copy ``to_claude_code`` wrote."""
    sid = first.get("sessionId")
    return isinstance(sid, str) and first.get("uuid") == copy_uuid(sid, 0)


def to_claude_code(
    messages: Sequence[Message],
    *,
    session_id: str,
    cwd: str,
    version: str | None = None,
    git_branch: str | None = None,
    model: str | None = None,
    now: str | None = None,
) -> list[dict[str, Any]]:
    """``messages`` (a valid Anthropic history) as the entries of a Claude Code session file:
    one line per message, each the child of the one before (``parentUuid``), so Claude Code's
    ``--resume`` walks them back from the last as the live conversation.

    An assistant message keeps its recorded ``message_id``, model and usage when it has them
    (else an id derived from the session and its position, ``model``, and zero usage); uuids
    are derived from ``session_id`` and the position, so the same input writes the same file.
    ``version`` and ``git_branch`` are the source session's (``session_context``)."""
    from .anthropic import to_anthropic

    stamp = now or datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    wire = to_anthropic(messages)
    entries: list[dict[str, Any]] = []
    parent: str | None = None
    for i, (m, d) in enumerate(zip(messages, wire)):
        uid = copy_uuid(session_id, i)
        entry: dict[str, Any] = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": cwd,
                                 "sessionId": session_id}
        if version:
            entry["version"] = version
        if git_branch:
            entry["gitBranch"] = git_branch
        ts = m.meta.get("timestamp")
        if m.role == "assistant":
            recorded = m.meta.get("usage")
            usage: Mapping[str, Any] = recorded if isinstance(recorded, Mapping) else {
                "input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
            entry["message"] = {"model": m.meta.get("model") or model or "claude-sonnet-4-5",
                                "id": m.meta.get("message_id") or f"msg_lossless_{uid.replace('-', '')[:24]}",
                                "type": "message", "role": "assistant", "content": d["content"],
                                "stop_reason": m.meta.get("stop_reason") or (
                                    "tool_use" if any(isinstance(b, ToolUse) for b in m.content) else "end_turn"),
                                "stop_sequence": None, "usage": dict(usage)}
            entry["type"] = "assistant"
        else:
            entry["message"] = {"role": "user", "content": d["content"]}
            entry["type"] = "user"
        entry["uuid"] = uid
        entry["timestamp"] = ts if isinstance(ts, str) else stamp
        entries.append(entry)
        parent = uid
    return entries
