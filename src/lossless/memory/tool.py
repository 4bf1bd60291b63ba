"""A memory tool an agent can expose, with the command set of Anthropic's memory tool.

Use::

    tool = MemoryTool(store)
    request_tools = [TOOL_DEFINITION]            # or NATIVE_TOOL for Claude's built-in tool
    text = tool.run({"command": "view", "path": "/memories"})

Commands take paths under ``/memories`` (the store directory): ``view`` (a
directory listing, or a file with line numbers and an optional ``view_range``),
``create`` (``path``, ``file_text``), ``str_replace`` (``path``, ``old_str`` —
exactly one occurrence — ``new_str``), ``insert`` (``path``, ``insert_line``,
``insert_text``), ``delete`` (``path``) and ``rename`` (``old_path``, ``new_path``).

The same rules as the store hold: paths are confined (no ``..``, no absolute
escape, no subdirectories), secrets are redacted, writes are atomic and locked,
deletes go to the trash.  A file created without frontmatter gets one.  Every
problem comes back as a text result starting with ``Error:``; ``run`` never raises.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ..errors import LosslessError
from ..messages import ToolUse
from .model import Memory, MemoryExists, now_iso, one_line, parse_memory, slugify
from .store import INDEX_NAME, MemoryStore

ROOT = "/memories"
WRITE_COMMANDS = frozenset({"create", "str_replace", "insert", "delete", "rename"})
NATIVE_TOOL = {"type": "memory_20250818", "name": "memory"}
TOOL_DEFINITION: dict[str, Any] = {
    "name": "memory",
    "description": (
        "Long-term memory that outlives this conversation. Files live under /memories, one memory per "
        "Markdown file. Commands: view (list /memories or show a file with line numbers), create, "
        "str_replace (old_str must occur exactly once), insert (after line insert_line; 0 = top), "
        "delete, rename. Store durable facts: user preferences, feedback on how to work, project facts, "
        "where things are. Never store secrets."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "delete", "rename"]},
            "path": {"type": "string", "description": "A path under /memories, e.g. /memories/use-tabs.md"},
            "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
            "file_text": {"type": "string"},
            "old_str": {"type": "string"},
            "new_str": {"type": "string"},
            "insert_line": {"type": "integer", "minimum": 0},
            "insert_text": {"type": "string"},
            "old_path": {"type": "string"},
            "new_path": {"type": "string"},
        },
        "required": ["command"],
    },
}


class ToolError(Exception):
    """Internal: becomes an ``Error: ...`` text result."""


class MemoryTool:
    """Serves the memory-tool commands over a ``MemoryStore``."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self.store = store or MemoryStore()

    def run(self, params: Mapping[str, Any]) -> str:
        """Execute one tool call; the text result for the model (errors included)."""
        try:
            command = params.get("command")
            handler = getattr(self, f"_cmd_{command}", None) if isinstance(command, str) else None
            if handler is None:
                raise ToolError(f"unknown command {command!r}; use one of view, create, str_replace, "
                                "insert, delete, rename")
            return handler(params)
        except (ToolError, LosslessError) as exc:
            return f"Error: {exc}"
        except Exception as exc:  # the agent gets text, never a traceback
            return f"Error: {type(exc).__name__}: {exc}"

    __call__ = run

    # -- paths -------------------------------------------------------------------
    def _id(self, path: Any, *, must_exist: bool = True) -> str:
        if not isinstance(path, str) or not path:
            raise ToolError("missing 'path' (a path under /memories)")
        if "\\" in path or "\x00" in path:
            raise ToolError(f"invalid path {path!r}")
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise ToolError(f"path {path!r} leaves /memories: '..' is not allowed")
        if not parts or parts[0] != ROOT.strip("/"):
            raise ToolError(f"path {path!r} is outside /memories: every path starts with /memories/")
        if len(parts) != 2:
            raise ToolError(f"path {path!r}: the memory store is flat, use /memories/<name>.md")
        name = parts[1]
        stem = name[:-3] if name.endswith(".md") else name
        if "." in stem:
            raise ToolError(f"path {path!r}: memory files are Markdown, name it /memories/<name>.md")
        memory_id = slugify(stem)  # "My Notes" -> my-notes; the result names the real path
        if must_exist and not self.store.exists(memory_id):
            raise ToolError(f"{ROOT}/{memory_id}.md does not exist (view {ROOT} to list memories)")
        return memory_id

    @staticmethod
    def _is_root(path: Any) -> bool:
        return isinstance(path, str) and path.rstrip("/") in (ROOT, "")

    @staticmethod
    def _is_index(path: Any) -> bool:
        return isinstance(path, str) and path.rstrip("/") == f"{ROOT}/{INDEX_NAME}"

    def _text(self, memory_id: str) -> str:
        return self.store.text_of(memory_id)

    def _save(self, memory_id: str, text: str, *, new: bool = False) -> Memory:
        """Write ``text`` as a memory file. A new plain-text file gets frontmatter; an edit
        that breaks an existing file's frontmatter is refused (nothing is written).
        A new file is created exclusively (``MemoryExists`` if the id is taken)."""
        path = self.store.path_for(memory_id)
        if text.lstrip().startswith("---") or not new:
            try:
                memory = parse_memory(text.lstrip(), path)
            except LosslessError as exc:
                hint = "" if new else " (edit the lines after the closing '---')"
                raise ToolError(f"{exc}; nothing changed{hint}") from None
        else:
            first = next((ln.strip("# ").strip() for ln in text.splitlines() if ln.strip()), memory_id)
            stamp = now_iso()
            memory = Memory(id=memory_id, name=memory_id, description=one_line(first)[:150], type="project",
                            body=text, created=stamp, updated=stamp)
        return self.store.create(memory, op="tool") if new else self.store.put(memory, op="tool")

    # -- commands ------------------------------------------------------------------
    def _cmd_view(self, p: Mapping[str, Any]) -> str:
        path = p.get("path", ROOT)
        if self._is_root(path):
            scan = self.store.scan()
            ms = sorted(scan.memories, key=lambda m: m.id)
            lines = [f"{ROOT}/{INDEX_NAME} (index, maintained by lossless)"] if ms else []
            lines += [f"{ROOT}/{m.filename} — {m.description}" for m in ms]
            if scan.issues:
                lines.append(f"({len(scan.issues)} unreadable file(s) skipped; `lossless memory list` names them)")
            return f"Directory {ROOT}:\n" + ("\n".join(lines) if lines else "(empty)")
        if self._is_index(path):
            text = self.store.index_text()
        else:
            memory_id = self._id(path)
            text = self._text(memory_id)
            self.store.touch([memory_id])
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        start, end = 1, len(lines)
        rng = p.get("view_range")
        if rng is not None:
            if not (isinstance(rng, (list, tuple)) and len(rng) == 2 and all(isinstance(x, int) for x in rng)):
                raise ToolError("view_range must be two integers [start, end] (end -1 = to the end)")
            start, end = rng[0], (len(lines) if rng[1] == -1 else rng[1])
            if start < 1 or start > max(len(lines), 1) or end < start:
                raise ToolError(f"view_range {list(rng)} is outside the file's {len(lines)} lines")
        numbered = "\n".join(f"{i:6d}\t{lines[i - 1]}" for i in range(start, min(end, len(lines)) + 1))
        return f"{path} (lines {start}-{min(end, len(lines))} of {len(lines)}):\n{numbered}"

    def _cmd_create(self, p: Mapping[str, Any]) -> str:
        text = p.get("file_text")
        if not isinstance(text, str):
            raise ToolError("create needs 'file_text'")
        if self._is_index(p.get("path")):
            raise ToolError(f"{INDEX_NAME} is maintained by lossless; create one file per memory instead")
        memory_id = self._id(p.get("path"), must_exist=False)
        try:  # no check before: the store checks and writes under one lock (racing creates)
            m = self._save(memory_id, text, new=True)
        except MemoryExists as exc:
            raise ToolError(f"{ROOT}/{exc.memory_id}.md already exists: use str_replace or insert to change it") from None
        return f"Created {ROOT}/{m.filename}"

    def _cmd_str_replace(self, p: Mapping[str, Any]) -> str:
        memory_id = self._id(p.get("path"))
        old, new = p.get("old_str"), p.get("new_str", "")
        if not isinstance(old, str) or not old or not isinstance(new, str):
            raise ToolError("str_replace needs a non-empty 'old_str' and a 'new_str'")
        with self.store.lock():
            text = self._text(memory_id)
            count = text.count(old)
            if count != 1:
                where = "does not occur" if count == 0 else f"occurs {count} times (make it unique)"
                raise ToolError(f"old_str {where} in {ROOT}/{memory_id}.md; nothing changed")
            self._save(memory_id, text.replace(old, new, 1))
        return f"Edited {ROOT}/{memory_id}.md"

    def _cmd_insert(self, p: Mapping[str, Any]) -> str:
        memory_id = self._id(p.get("path"))
        line, new = p.get("insert_line"), p.get("insert_text")
        if not isinstance(line, int) or isinstance(line, bool) or not isinstance(new, str):
            raise ToolError("insert needs an integer 'insert_line' and an 'insert_text'")
        with self.store.lock():
            lines = self._text(memory_id).split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            if not 0 <= line <= len(lines):
                raise ToolError(f"insert_line {line} is outside 0..{len(lines)}")
            lines[line:line] = new.rstrip("\n").split("\n")
            self._save(memory_id, "\n".join(lines) + "\n")
        return f"Inserted {len(new.rstrip(chr(10)).split(chr(10)))} line(s) after line {line} of {ROOT}/{memory_id}.md"

    def _cmd_delete(self, p: Mapping[str, Any]) -> str:
        if self._is_root(p.get("path")) or self._is_index(p.get("path")):
            raise ToolError(f"refusing to delete {p.get('path')}: delete memories one file at a time")
        memory_id = self._id(p.get("path"))
        self.store.delete(memory_id, reason="memory tool")
        return f"Deleted {ROOT}/{memory_id}.md (kept in the trash)"

    def _cmd_rename(self, p: Mapping[str, Any]) -> str:
        old = self._id(p.get("old_path"))
        new = self._id(p.get("new_path"), must_exist=False)
        self.store.rename(old, new)
        return f"Renamed {ROOT}/{old}.md to {ROOT}/{new}.md"


def wrote_memories(tool_uses: Iterable[ToolUse]) -> bool:
    """Whether any of these ``ToolUse`` blocks is a memory-tool write (extraction then skips)."""
    return any(u.name == "memory" and isinstance(u.input, Mapping) and u.input.get("command") in WRITE_COMMANDS
               for u in tool_uses)

