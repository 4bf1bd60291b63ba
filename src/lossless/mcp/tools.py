"""The tools ``lossless mcp`` serves, as data and plain functions (no MCP SDK here).

Use::

    box = Toolbox.open(store=".lossless")            # or Toolbox(artifacts=…, memory=…, root=…)
    answer = box.call("recall", {"handle": "sha256:…", "offset": 0, "limit": 2000})
    answer.text                                       # what the model reads
    # a bad call raises ToolFailure with one actionable line

Every tool is a ``ToolSpec`` in ``SPECS`` (name, description, JSON schema) and a
method ``_tool_<name>``.  The invariant protected: whatever the arguments, ``call``
answers or raises ``ToolFailure`` with a one-line message — never another
exception, never a traceback — so the server turns every failure into an MCP tool
error the model can act on.  The memory tools go through ``MemoryStore``'s own
API, so they keep every rule the memory tool and the CLI keep: ids confined by
``check_id``, secrets redacted before anything is written, the file size limit,
frontmatter that must read back.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from .._legacy import getenv
from ..errors import LosslessError
from ..markers import counted
from ..memory import TYPES, MemoryStore, recall_memories
from ..memory.model import check_id
from ..memory.redact import contains_secret
from ..store import ArtifactStore, home
from ..tools import RECALL_TOOL, run_recall
from .stats import DEFAULT_WINDOW, context_stats

MAX_SEARCH = 50
MAX_LISTED = 200


class ToolFailure(LosslessError):
    """A tool call that cannot be answered; its message is one line the model can act on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    name: str
    description: str
    input_schema: Mapping[str, Any]
    read_only: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """A tool's result: ``text`` for the model, ``data`` (JSON-ready) for clients that read structure."""

    text: str
    data: Mapping[str, Any] | None = None


def _schema(properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": list(required),
            "additionalProperties": False}


_LIMIT = {"type": "integer", "minimum": 1}
SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="recall",
        description=RECALL_TOOL["description"] + (
            " Long content comes a page at a time: the answer's first line says which characters you got "
            "and the offset to ask for next."),
        input_schema=_schema(RECALL_TOOL["input_schema"]["properties"], ("handle",)),
    ),
    ToolSpec(
        name="memory_search",
        description=(
            "Search long-term memory (preferences, feedback on how to work, project facts, where things are) "
            "for what bears on the task at hand. Use it before starting a task, or when the user refers to "
            "something from an earlier session. Answers the best matching memory ids with their "
            "descriptions, best first; read one in full with memory_view."),
        input_schema=_schema({
            "query": {"type": "string", "description": "what you need to know, in plain words"},
            "limit": {**_LIMIT, "maximum": MAX_SEARCH, "description": "most results to return (default 5)"},
        }, ("query",)),
    ),
    ToolSpec(
        name="memory_view",
        description=(
            "Read one long-term memory in full (its frontmatter and body) by the id memory_search or "
            "memory_list gave you, e.g. 'use-tabs'."),
        input_schema=_schema({"id": {"type": "string", "description": "a memory id: lowercase letters, digits, "
                                                                       "hyphens"}}, ("id",)),
    ),
    ToolSpec(
        name="memory_add",
        description=(
            "Save a durable fact to long-term memory so that later sessions know it: a preference of the user "
            "(type user), feedback on how to work (feedback), a fact about the project (project), or where "
            "something is (reference). One fact per memory; check memory_search first so you do not add a "
            "duplicate. Never store secrets: anything that looks like a key or password is redacted."),
        input_schema=_schema({
            "name": {"type": "string", "description": "a short title; the memory's id is made from it"},
            "description": {"type": "string", "description": "one line saying what the memory is, used to "
                                                              "find it again"},
            "type": {"type": "string", "enum": list(TYPES)},
            "body": {"type": "string", "description": "the fact itself, in Markdown"},
        }, ("name", "description", "type", "body")),
        read_only=False,
    ),
    ToolSpec(
        name="memory_list",
        description=(
            "List the long-term memories (id, type, last update, description), most recently updated first. "
            "Use it to see what is remembered; memory_search is better when you know what you are looking for."),
        input_schema=_schema({"type": {"type": "string", "enum": list(TYPES),
                                       "description": "only memories of this type"}}),
    ),
    ToolSpec(
        name="context_stats",
        description=(
            "Report what a lossless session's context holds: tokens by role, block type and tool, the "
            "biggest items, the compactions so far (tokens before and after), and the handles in context "
            "that recall can bring back. Without a session id, the most recent session in the store."),
        input_schema=_schema({
            "session": {"type": "string", "description": "a session id (a directory under the store's sessions/)"},
            "window": {**_LIMIT, "description": f"the model's context window in tokens (default {DEFAULT_WINDOW:,})"},
        }),
    ),
)
NAMES = tuple(s.name for s in SPECS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Toolbox:
    """The stores the tools work on.  ``session`` is ``context_stats``' default session."""

    artifacts: ArtifactStore
    memory: MemoryStore
    root: Path
    session: str | None = None
    transcripts: Any = None
    """A database store's transcripts (``storage``); None: the directory's ``sessions/``."""

    @classmethod
    def open(cls, store: str | os.PathLike[str] | None = None, memory: str | os.PathLike[str] | None = None,
             session: str | None = None, *, project: str | None = None, agent: str | None = None) -> Toolbox:
        """The toolbox over a store (default ``lossless.store.home()``) and its memory directory
        (default ``<store>/memory``), as ``lossless mcp --store --memory --session`` opens them;
        ``project``/``agent`` restrict the memories served to that view (``memory.scope``)."""
        from ..storage.open import ENV_STORE, is_database, open_store

        spec = store if store is not None else getenv(ENV_STORE) or None
        if is_database(spec):  # the shared PostgreSQL store: artifacts, memories and transcripts are rows
            opened = open_store(spec)
            memories = (MemoryStore(memory, project=project, agent=agent) if memory is not None
                        else opened.memory_view(project=project, agent=agent))
            return cls(artifacts=opened.artifacts, memory=memories, root=opened.root, session=session,
                       transcripts=opened.transcripts)
        root = home(store)
        memories = MemoryStore(memory if memory is not None else root / "memory", project=project, agent=agent)
        return cls(artifacts=ArtifactStore(root), memory=memories, root=root, session=session)

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> Answer:
        """Run tool ``name``; ``ToolFailure`` (one line) for anything that cannot be answered."""
        spec = next((s for s in SPECS if s.name == name), None)
        if spec is None:
            raise ToolFailure(f"unknown tool {name!r}; the tools are {', '.join(NAMES)}")
        args = dict(arguments or {})
        unknown = sorted(set(args) - set(spec.input_schema["properties"]))
        if unknown:
            raise ToolFailure(f"{name} takes {', '.join(spec.input_schema['properties']) or 'no arguments'}, "
                              f"not {', '.join(map(repr, unknown))}")
        for key in spec.input_schema["required"]:
            if args.get(key) is None:
                raise ToolFailure(f"{name} needs {key!r}")
        handler: Callable[[dict[str, Any]], Answer] = getattr(self, f"_tool_{name}")
        try:
            return handler(args)
        except ToolFailure as exc:
            raise ToolFailure(_one_line(str(exc))) from None
        except (LosslessError, OSError, UnicodeError) as exc:
            raise ToolFailure(_one_line(str(exc) or type(exc).__name__)) from None
        except Exception as exc:  # the server must outlive any bug: the model gets a line, not a crash
            raise ToolFailure(_one_line(f"{name} failed: {type(exc).__name__}: {exc}")) from None

    # -- recall ------------------------------------------------------------------
    def _tool_recall(self, args: dict[str, Any]) -> Answer:
        handle = _text(args, "handle").strip()
        offset = _count(args, "offset", minimum=0)
        limit = _count(args, "limit", minimum=1)
        text = self.artifacts.get(handle)  # an unknown handle or a refused artifact is a tool error, not a page
        if offset and offset >= len(text):
            raise ToolFailure(f"offset {offset:,} is past the end of {handle} ({len(text):,} characters)")
        return Answer(text=run_recall({"handle": handle, "offset": offset, "limit": limit}, self.artifacts))

    # -- memory ------------------------------------------------------------------
    def _tool_memory_search(self, args: dict[str, Any]) -> Answer:
        query = _text(args, "query")
        limit = min(_count(args, "limit", minimum=1) or 5, MAX_SEARCH)
        hits = recall_memories(query, self.memory, limit=limit)  # lexical, as injection ranks without a model
        rows = [{"id": h.memory.id, "type": h.memory.type, "score": round(h.score, 4),
                 "description": h.memory.description} for h in hits]
        if not rows:
            return Answer(text=f"no memory matches {query!r} (memory_list shows every memory)", data={"hits": []})
        lines = [f"{r['id']}  [{r['type']}]  {r['description']}" for r in rows]
        head = f"{len(rows)} memor{'y' if len(rows) == 1 else 'ies'} for {query!r}, best first (memory_view an id):"
        return Answer(text="\n".join([head, *lines]), data={"hits": rows})

    def _tool_memory_view(self, args: dict[str, Any]) -> Answer:
        memory_id = check_id(_memory_id(_text(args, "id")))
        text = self.memory.text_of(memory_id)
        self.memory.touch([memory_id])
        return Answer(text=text.rstrip("\n"), data={"id": memory_id, "path": str(self.memory.path_for(memory_id))})

    def _tool_memory_add(self, args: dict[str, Any]) -> Answer:
        fields = {k: _text(args, k) for k in ("name", "description", "type", "body")}
        m = self.memory.add(name=fields["name"], description=fields["description"], type=fields["type"],
                            body=fields["body"])
        path = self.memory.path_for(m.id)
        redacted = any(contains_secret(v) for v in fields.values())
        note = "; what looked like a secret was redacted before writing" if redacted else ""
        return Answer(text=f"added memory {m.id!r} ({path}){note}",
                      data={"id": m.id, "path": str(path), "redacted": redacted})

    def _tool_memory_list(self, args: dict[str, Any]) -> Answer:
        kind = args.get("type")
        if kind is not None and kind not in TYPES:
            raise ToolFailure(f"type must be one of {', '.join(TYPES)}, not {kind!r}")
        scan = self.memory.scan()
        ms = [m for m in self.memory.recent(None) if kind is None or m.type == kind]
        shown = ms[:MAX_LISTED]
        rows = [{"id": m.id, "type": m.type, "updated": m.updated, "description": m.description} for m in shown]
        lines = [f"{r['id']}  [{r['type']}]  {r['updated']}  {r['description']}" for r in rows]
        if len(ms) > len(shown):
            lines.append(f"… and {len(ms) - len(shown)} older (memory_search finds them)")
        if scan.issues:
            lines.append(f"({counted(len(scan.issues), 'unreadable file')} skipped; `lossless memory list` names them)")
        what = f"{kind} memories" if kind else "memories"
        head = f"{len(ms)} {what} in {self.memory.dir}" + (", most recently updated first:" if ms else "")
        return Answer(text="\n".join([head, *lines]),
                      data={"memories": rows, "total": len(ms), "issues": [str(i) for i in scan.issues]})

    # -- context -----------------------------------------------------------------
    def _tool_context_stats(self, args: dict[str, Any]) -> Answer:
        session = args.get("session")
        if session is not None:
            session = _text(args, "session")
        window = _count(args, "window", minimum=1) or DEFAULT_WINDOW
        if self.transcripts is None:
            report = context_stats(self.root, session or self.session, window=window, artifacts=self.artifacts)
        else:
            report = _database_stats(self.transcripts, session or self.session, window, self.artifacts)
        return Answer(text=report.text, data=report.data)


def _database_stats(transcripts: Any, session: str | None, window: int, artifacts: ArtifactStore) -> Any:
    """``context_stats`` of a session whose transcript is rows in the database: its entries are
    written out as the JSONL the directory store keeps, in a temporary directory, and read the
    same way — one reader for both stores."""
    import json
    import tempfile

    known = transcripts.recent()
    name = session or (known[0] if known else None)
    if name is None or name not in known:
        listed = ", ".join(known[:5]) or "none yet"
        raise ToolFailure(f"no session {name!r} in the database (most recent: {listed})" if name
                          else "no session in the database yet")
    with tempfile.TemporaryDirectory(prefix="lossless-mcp-") as tmp:
        path = Path(tmp) / "sessions" / name / "transcript.jsonl"
        path.parent.mkdir(parents=True)
        path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in transcripts.entries(name)),
                        "utf-8")
        return context_stats(Path(tmp), name, window=window, artifacts=artifacts)


# -- arguments ---------------------------------------------------------------------
def _text(args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolFailure(f"{key!r} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise ToolFailure(f"{key!r} is empty")
    return value


def _count(args: Mapping[str, Any], key: str, *, minimum: int) -> int | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ToolFailure(f"{key!r} must be a whole number ≥ {minimum}, not {value!r}")
    return value


def _memory_id(value: str) -> str:
    """The id in ``value``: a bare id, or the ``/memories/<id>.md`` form the memory tool uses.
    Only the wrapper is removed; ``check_id`` then refuses anything that is not an id."""
    value = value.strip()
    return value.removeprefix("/memories/").removesuffix(".md")


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "failed"
