"""The memory store: a directory of Markdown memories and its ``MEMORY.md`` index.

Use::

    store = MemoryStore()                       # $LOSSLESS_HOME/memory, or memory/ in the nearest .lossless
    m = store.add(name="Use tabs", description="User indents with tabs", type="user",
                  body="Always indent with tabs.")
    store.get(m.id); store.update(m.id, body="..."); store.delete(m.id)

Invariants:

* Every write is atomic (temporary file + ``os.replace``): a reader or a crash sees
  the old file or the new one, never half of one.
* Every read-modify-write (a memory file, the index, the usage and change logs)
  happens under one store-wide ``filelock``, so concurrent processes lose nothing.
* Ids are slugs, so no name can reach outside the directory.
* Everything written passes through ``redact``: memory bodies, frontmatter keys
  and values (a value is matched together with its key, so ``password: hunter2``
  in the frontmatter is caught), ids, ``MEMORY.md``, ``.changes.jsonl`` and the
  trash.  No secret lands on disk, even from a file someone edited by hand.
* Files are created 0600 and directories 0700; ``MEMORY.md``, ``.changes.jsonl``,
  ``.usage.json``, ``.trash/`` and the lock are never read or written through a
  symbolic link (a planted one is a one-line error naming it; see ``_fs``).
* Creating is exclusive: ``add`` and ``create`` check and write under the lock, so
  of two racing creators of one id exactly one succeeds.
* Nothing is erased: ``delete`` moves the file to ``.trash/`` and every change is
  appended to ``.changes.jsonl`` with the text before and after.  ``undo`` uses it,
  refuses to overwrite a memory changed since, and logs (and trashes) what it reverts.
* Reads go through ``catalog`` (``.index/catalog.sqlite3``), a cache of the files
  kept in step with them — by every writer for its own files, and by stat checks
  for a file changed by hand or by another program — so a read costs what changed,
  not the size of the store.  Deleting ``.index/`` loses nothing.
* Scopes (see ``scope``): a store opened with a project or an agent sees only the
  memories of its ``view`` — in every read, search and index — and treats every other
  memory as absent: it never shows, rewrites, renames or removes one.  What it writes
  gets a scope it sees (by default ``View.default_scope``).  ``MEMORY.md`` on disk
  lists the whole directory; a restricted store's ``index_text`` is its view's index.
* A file with bad frontmatter (including anchors, aliases, custom tags: see
  ``frontmatter``) or over ``MAX_FILE`` bytes is an ``Issue`` (path and line) and
  never hides the others; so is a symbolic link that points outside the directory
  (it is never read).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from filelock import Timeout

from ..errors import ConfigError, MemoryError_
from ..store import home, sweep_temps
from ._fs import (
    MAX_FILE, StoreLock, append_line, create_lock_file, ensure_dir, ensure_root, link_error, place, read_memory,
    read_bytes, read_text, refuse_link, stage, unstage, write_atomic,
)
from .catalog import INDEX_DIR, Catalog
from .index import MAX_LINES, Row, index_rows, render_index, render_rows, with_row
from .model import (
    KNOWN_KEYS, RESERVED_IDS, TYPES, Issue, Memory, MemoryExists, MemoryType, check_id, now_iso, one_line,
    parse_memory, parse_time, render_read_back, safe_id, slugify,
)
from .redact import contains_secret, redact, redact_mapping
from .scope import View, check_scope

INDEX_NAME = "MEMORY.md"
CHANGES_NAME = ".changes.jsonl"
SPECIAL_NAMES = (".changes.jsonl", INDEX_NAME, ".usage.json", ".trash", ".consolidate-lock", ".suggestions.jsonl",
                 INDEX_DIR)
"""The store's own files: never a symbolic link."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScanResult:
    memories: tuple[Memory, ...]
    issues: tuple[Issue, ...]


class MemoryStore:
    """A memory directory. Cheap to construct; nothing is created until the first write."""

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        project: str | None = None,
        agent: str | None = None,
        lock_timeout: float = 30.0,
        clock: Any = time.time,
    ) -> None:
        self.dir = Path(directory) if directory is not None else home() / "memory"
        self.lock_timeout = lock_timeout
        self.clock = clock
        self._lock: StoreLock | None = None
        self._held = threading.local()
        self.view = View(project=project, agent=agent)
        """Which scopes this store sees (``View()``, the default, sees every memory)."""
        self.catalog = Catalog(self.dir, scopes=self.view.scopes)
        """The persistent index (``.index/catalog.sqlite3``): what reads go through, within ``view``."""
        self._view_index: tuple[int, str] | None = None
        self._md: tuple[tuple[int, int], list[Row], int, str] | None = None
        """``MEMORY.md``'s rows, count and text as last written, and the (sequence, use) numbers they match."""
        self.swept: list[Path] = []
        """A crashed writer's temporary files (``.<id>.md.<pid>.<rand>.tmp``), removed when this store
        first takes its lock (a write in progress, its writer alive and its file young, is kept).
        Not at open: a reader never lists the directory for them (they never read as memories)."""
        self._sweep_temps = True
        self._written: list[str] = []
        """Ids written under the current lock: embedded in one batch when it is released (``embed``)."""

    # -- locking -------------------------------------------------------------
    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the store-wide lock (reentrant within a thread)."""
        depth = getattr(self._held, "depth", 0)
        if depth:  # this thread holds it already: checked and in step when it was taken
            self._held.depth = depth + 1
            try:
                yield
            finally:
                self._held.depth = depth
            return
        if self._lock is None:
            ensure_root(self.dir)
            path = self.dir / ".lock"
            create_lock_file(path)
            self._lock = StoreLock(path, self.lock_timeout)
        try:
            self._lock.acquire()
        except OSError as exc:
            refuse_link(self.dir / ".lock")
            raise MemoryError_(f"cannot lock the memory store {self.dir / '.lock'}: {exc.strerror or exc}") from None
        except Timeout:
            raise MemoryError_(
                f"memory store {self.dir} stayed locked for {self.lock_timeout:g}s; "
                "another lossless process is writing (retry, or remove .lock if none runs)"
            ) from None
        self._held.depth = 1
        if self._sweep_temps:
            self._sweep_temps = False
            self.swept = sweep_temps(self.dir)
        ok = False
        try:
            # Checked before any write, so a planted link stops an operation before it starts
            # rather than halfway (a memory written, its log entry refused).
            for name in SPECIAL_NAMES:
                if os.path.islink(f"{self.dir}{os.sep}{name}"):
                    raise link_error(self.dir / name)
            self._written = []
            self.catalog.begin()
            yield
            ok = True
            if self._written:
                self._embed_written()
        finally:
            self._held.depth = 0
            try:
                self.catalog.end(ok)
            finally:
                self._lock.release()

    # -- reading -------------------------------------------------------------
    def path_for(self, memory_id: str) -> Path:
        """The file of ``memory_id``, confined to the store directory."""
        path = self.dir / f"{check_id(memory_id)}.md"
        # An id is a slug (no separator, no dot): only a symbolic link could lead elsewhere.
        if os.path.islink(path) and path.resolve().parent != self.dir.resolve():
            raise MemoryError_(f"memory id {memory_id!r} resolves outside {self.dir}")
        return path

    def scan(self) -> ScanResult:
        """Every readable memory and every unreadable file (as an ``Issue``), in file-name order.

        Read from the catalog, brought in step with the directory first (see ``catalog``):
        a file changed by hand or by another process is seen, and only changed files are read."""
        if not self.dir.is_dir():
            return ScanResult(memories=(), issues=())
        self.catalog.refresh()
        return ScanResult(memories=tuple(self.catalog.memories()), issues=tuple(self.catalog.issues()))

    def memories(self) -> tuple[Memory, ...]:
        return self.scan().memories

    def recent(self, limit: int | None = None, *, include_superseded: bool = False) -> list[Memory]:
        """Memories, most recently updated first (every one, or at most ``limit``)."""
        ms = [m for m in self.memories() if include_superseded or not m.superseded]
        ms.sort(key=lambda m: (parse_time(m.updated), m.id), reverse=True)
        return ms if limit is None else ms[:limit]

    def search(self, query: str, limit: int) -> list[tuple[Memory, float]]:
        """The live memories that best match ``query`` (BM25F, see ``lexical``), best first,
        from every memory in the store.  Costs what changed since the last call, not the store."""
        checked = self.catalog.refresh()  # (nothing when the directory does not exist)
        return self.catalog.search_memories(query, limit, checked=checked)

    def exists(self, memory_id: str) -> bool:
        """Whether ``memory_id`` is a memory this store sees (a file too big or not UTF-8 exists:
        reading it names the problem)."""
        path = self.path_for(memory_id)
        if not path.exists() or self.view.unrestricted:
            return path.exists()
        try:
            return self.view.sees(_scope_of(self._raw_text(memory_id), path))
        except MemoryError_:
            return True

    def get(self, memory_id: str) -> Memory:
        path = self.path_for(memory_id)
        return parse_memory(self.text_of(memory_id), path)

    def text_of(self, memory_id: str) -> str:
        """The file text of ``memory_id`` as it is on disk (size-checked, confined); a memory
        outside the store's view is absent."""
        text = self._raw_text(memory_id)
        if self.view.scopes is not None and not self.view.sees(_scope_of(text, self.path_for(memory_id))):
            raise self._absent(memory_id)
        return text

    def _raw_text(self, memory_id: str) -> str:
        path = self.path_for(memory_id)
        try:
            return read_memory(path)
        except FileNotFoundError:
            raise self._absent(memory_id) from None

    def _absent(self, memory_id: str) -> MemoryError_:
        where = self.dir if self.view.unrestricted else f"{self.dir} (seen as {self.view.describe()})"
        return MemoryError_(f"no memory {memory_id!r} in {where} (see `lossless memory list`)")

    def usage(self) -> dict[str, float]:
        """When each memory was last used (injected, shown), seconds since the epoch."""
        used = self._file_usage()
        if self.dir.is_dir():
            for k, t in self.catalog.used_times().items():
                used[k] = max(t, used.get(k, 0.0))
        return used

    def _file_usage(self) -> dict[str, float]:
        try:
            data = json.loads(read_text(self.dir / ".usage.json"))
        except (FileNotFoundError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))}

    def index_text(self) -> str:
        """The current ``MEMORY.md`` text, rebuilt first when the memories changed since it was
        written (a file edited, added or removed by hand included)."""
        if not self.dir.is_dir():
            return ""
        self.catalog.refresh()
        if not self.view.unrestricted:
            return self._index_of_view()
        if self.catalog.index_stale():
            return self.rebuild_index()
        try:
            return read_text(self.dir / INDEX_NAME)
        except FileNotFoundError:
            return self.rebuild_index()

    # -- writing -------------------------------------------------------------
    def add(
        self,
        *,
        name: str,
        description: str,
        type: str,
        body: str,
        extra: Mapping[str, Any] | None = None,
        id: str | None = None,
        run: str | None = None,
        scope: str | None = None,
    ) -> Memory:
        """Create a new memory. Its id is ``slugify(name)`` unless given; an existing id is an error.
        Its ``scope`` is the view's default for its type unless given."""
        memory_id = safe_id(check_id(id)) if id is not None else slugify(name)
        stamp = now_iso(self.clock())
        memory = Memory(
            id=memory_id, name=name, description=description, type=_check_type(type), body=body,
            created=stamp, updated=stamp, extra=dict(extra or {}), scope=check_scope(scope),
        )
        return self.create(memory, run=run, op="add")

    def create(self, memory: Memory, *, run: str | None = None, op: str = "add") -> Memory:
        """Write ``memory`` as a new file: the existence check and the write happen under
        the store lock, so of several racing creators exactly one succeeds and the others
        get ``MemoryError_`` naming the existing file.  A memory without a scope gets the
        view's default for its type."""
        memory = memory.with_changes(id=safe_id(memory.id),
                                     scope=memory.scope or self.view.default_scope(memory.type))
        with self.lock():
            path = self.path_for(memory.id)
            if os.path.lexists(path):
                if not self.exists(memory.id):
                    raise _taken(memory.id, self.view)
                raise MemoryExists(memory.id, path)
            return self._put(memory, op=op, run=run)

    def update(self, memory_id: str, *, run: str | None = None, **changes: Any) -> Memory:
        """Change fields of an existing memory (``name``, ``description``, ``type``, ``body``, ``extra``,
        ``scope``)."""
        unknown = set(changes) - {"name", "description", "type", "body", "extra", "scope"}
        if unknown:
            raise MemoryError_(f"cannot change {sorted(unknown)} of a memory")
        if "type" in changes:
            _check_type(changes["type"])
        if "scope" in changes:
            check_scope(changes["scope"])
        with self.lock():
            current = self.get(memory_id)
            fields = {k: v for k, v in changes.items() if v is not None}
            return self._put(current.with_changes(**fields), op="update", run=run)

    def put(self, memory: Memory, *, run: str | None = None, op: str = "put") -> Memory:
        """Write ``memory`` as given (created or replaced), stamping ``updated`` — keeping the
        scope of the memory it replaces when it has none (see ``write_text``)."""
        with self.lock():
            return self._put(self._keeping_scope(memory), op=op, run=run)

    def _keeping_scope(self, memory: Memory) -> Memory:
        """A restricted view never widens a memory it rewrites: dropping the ``scope`` line
        (an agent editing the file through the memory tool) keeps the scope it had."""
        if memory.scope is not None or self.view.scopes is None or not self.exists(memory.id):
            return memory
        kept = self.get(memory.id).scope
        return memory if kept is None else memory.with_changes(scope=kept)

    def write_text(self, memory_id: str, text: str, *, run: str | None = None) -> Memory:
        """Replace a memory by raw file text; rejected (nothing written) if it does not parse.
        A store with a restricted view keeps the memory's scope when the new text has none:
        an edit through an agent's view never makes its memory visible to every view.  (An
        unrestricted store writes what it is given: the person administering the directory.)"""
        path = self.path_for(memory_id)
        memory = parse_memory(text, path)
        with self.lock():
            return self._put(self._keeping_scope(memory), op="edit", run=run)

    def restore(self, text: str, memory_id: str, *, run: str | None = None) -> Memory:
        """Write a memory's file text as given, its stamps kept (moving a store: ``lossless.storage.move``)."""
        path = self.path_for(memory_id)
        text = redact(text)
        memory = parse_memory(text, path)
        with self.lock():
            before = self.text_of(memory_id) if path.exists() else None
            self._writable()
            write_atomic(path, text.encode("utf-8"), allow_link=True)
            self.catalog.sync([memory_id], written=memory)
            self._written.append(memory_id)
            self._log(op="import", memory_id=memory_id, before=before, after=text, run=run)
            return memory

    def delete(self, memory_id: str, *, run: str | None = None, reason: str = "") -> Path:
        """Move a memory to ``.trash/`` (never erased). Returns where it went."""
        with self.lock():
            path = self.path_for(memory_id)
            before = self.text_of(memory_id)
            self._writable()
            dest = self._trash(path, before, run)
            path.unlink()
            self.catalog.sync([memory_id])
            self._log(op="delete", memory_id=memory_id, before=before, after=None, run=run, reason=reason)
            self.rebuild_index()
            return dest

    def rename(self, old_id: str, new_id: str, *, run: str | None = None) -> Memory:
        new_id = safe_id(check_id(new_id))
        with self.lock():
            memory = self.get(old_id)
            if os.path.lexists(self.path_for(new_id)):
                raise MemoryError_(f"cannot rename {old_id!r}: memory {new_id!r} already exists "
                                   f"({self.path_for(new_id)})")
            before = self.text_of(old_id)
            name = new_id if memory.name == old_id else memory.name
            new = self._put(memory.with_changes(id=new_id, name=name), op="rename-to", run=run, reindex=False)
            self.path_for(old_id).unlink()
            self.catalog.sync([old_id])
            self._log(op="rename-from", memory_id=old_id, before=before, after=None, run=run)
            self.rebuild_index()
            return new

    def touch(self, memory_ids: list[str] | tuple[str, ...]) -> None:
        """Record that memories were used now (their index recency).

        Recorded in the catalog (no file is rewritten on the path of a model call);
        ``.usage.json`` catches up at the next write to the store and when a session
        ends (``flush_usage``).  Recency is a hint: a crash loses at most that."""
        if not memory_ids:
            return
        with self.lock():
            now = self.clock()
            self.catalog.used({check_id(i): now for i in memory_ids})

    def flush_usage(self) -> None:
        """Write the use times the catalog holds to ``.usage.json`` (when they differ)."""
        if not self.dir.is_dir():
            return
        with self.lock():
            if not self.catalog.usage_dirty():
                return
            used = self.usage()
            if used != self._file_usage():
                write_atomic(self.dir / ".usage.json", json.dumps(used, sort_keys=True).encode("utf-8"))
            self.catalog.usage_flushed()

    def rebuild_index(self) -> str:
        """Write ``MEMORY.md`` from the catalog (the most recent ``MAX_LINES + 1`` memories
        and the count of the others: no scan of the store); returns its text."""
        with self.lock():
            self.catalog.refresh()
            top, used = self.catalog.top(MAX_LINES + 1, every=True)
            # Built from catalog rows, which are redacted when read (a hand-edited file included).
            return self._write_index(index_rows(top, used), self.catalog.count(every=True))

    def _write_index(self, rows: list[Row], count: int) -> str:
        text = self._write_md(rows, count)
        self.catalog.index_written()
        self._md_written(rows, count, text)
        return text if self.view.unrestricted else self._index_of_view()

    def _write_md(self, rows: list[Row], count: int) -> str:
        """Write ``MEMORY.md`` of ``rows`` (when it differs); its text."""
        text = render_rows(rows, count=count)
        if self._md_differs(text):  # derived from the files: rebuilt if a crash tore it, so no fsync
            write_atomic(self.dir / INDEX_NAME, text.encode("utf-8"), durable=False)
        return text

    def _md_differs(self, text: str) -> bool:
        """Whether ``MEMORY.md`` is not ``text`` (read only when this store did not write it last, or
        wrote ``text``)."""
        if self._md is not None and self._md[3] != text:
            return True
        try:
            return read_text(self.dir / INDEX_NAME) != text
        except (FileNotFoundError, UnicodeDecodeError):
            return True

    def _md_written(self, rows: list[Row], count: int, text: str, numbers: tuple[int, int] | None = None) -> None:
        """Remember what ``MEMORY.md`` was written with, at ``numbers`` (the catalog's now by default)."""
        self._md = (numbers or self.catalog.numbers(), rows, count, text)
        if self.catalog.usage_dirty():
            self.flush_usage()

    def _added_rows(self, memory: Memory, before: tuple[int, int]) -> tuple[list[Row], int] | None:
        """``MEMORY.md``'s rows and count once ``memory`` is added, from the rows it was last written
        with, when nothing else changed since (``before``: the numbers before the add): no catalog
        query, no re-render of the others.  None when it must be rebuilt."""
        if self._md is None or self._md[0] != before or memory.superseded:
            return None
        return with_row(self._md[1], memory, MAX_LINES + 1), self._md[2] + 1

    def _embed_written(self) -> None:
        """With the dense side on (``LOSSLESS_EMBED=1`` and the extra installed), embed what this lock
        wrote, in one batch, so that no query has to.  A failure leaves those memories without a
        vector (a query says how many; ``lossless memory embed`` makes them): the write stands."""
        from . import embed

        written, self._written = list(dict.fromkeys(self._written)), []
        if not embed.enabled():
            return
        try:
            embed.model_dir()
            embed.vector_index(self.catalog, embed.shared_embedder()).embed_ids(written)
        except (ConfigError, OSError, sqlite3.Error):
            return

    def _index_of_view(self) -> str:
        """The index of the memories this store's view sees (not written: ``MEMORY.md`` is the
        directory's).  Rendered again only when a memory changed, so a system prompt holding it
        keeps its cached prefix while memories are only used."""
        seq = self.catalog.seq()
        if self._view_index is None or self._view_index[0] != seq:
            top, used = self.catalog.top(MAX_LINES + 1)
            self._view_index = (seq, render_index(top, used, count=self.catalog.count()))
        return self._view_index[1]

    def changes(self) -> list[dict[str, Any]]:
        """The change log, oldest first.  A line torn by a crash, not UTF-8, or not a change (an id, and a
        ``before``/``after`` that are texts or null: a hand edit gone wrong) is skipped."""
        try:
            raw = read_bytes(self.dir / CHANGES_NAME)
        except FileNotFoundError:
            return []
        entries = []
        for line in raw.splitlines():
            try:
                entry = json.loads(line.decode("utf-8"))
            except ValueError:  # JSONDecodeError and UnicodeDecodeError
                continue
            if (isinstance(entry, dict) and isinstance(entry.get("id"), str)
                    and all(entry.get(k) is None or isinstance(entry.get(k), str) for k in ("before", "after", "run"))):
                entries.append(entry)
        return entries

    def undo(self, run: str) -> int:
        """Revert every change logged under ``run`` (newest first). Returns how many.

        Refused, with nothing changed, when a memory the run touched has changed
        since (a later edit is never silently overwritten).  The revert is itself
        logged under ``undo-<run>``, and a file it removes goes to the trash.
        """
        with self.lock():
            entries = self._undoable(run, lambda mid: self._raw_text(mid) if self.path_for(mid).exists() else None,
                                     where=CHANGES_NAME)
            self._writable()
            for e in entries:  # what would be written back must read as a memory, before anything is
                if e.get("before") is not None:
                    try:
                        parse_memory(e["before"], self.path_for(e["id"]))
                    except MemoryError_ as exc:
                        raise MemoryError_(f"cannot undo {run!r}: {self.dir / CHANGES_NAME} holds a 'before' for "
                                           f"{e['id']!r} that is not a memory ({exc}); nothing was changed") from None
            for e in reversed(entries):
                path = self.path_for(e["id"])
                current = self._raw_text(e["id"]) if path.exists() else None
                if e.get("before") is None:
                    if current is not None:
                        self._trash(path, current, f"undo-{run}")
                        path.unlink()
                else:
                    write_atomic(path, redact(e["before"]).encode("utf-8"), allow_link=True)
                    self._written.append(e["id"])
                self.catalog.sync([e["id"]])
                self._log(op="undo", memory_id=e["id"], before=current, after=e.get("before"), run=f"undo-{run}")
            if entries:
                self.rebuild_index()
            return len(entries)

    # -- internals -------------------------------------------------------------
    def _undoable(self, run: str, current: Callable[[str], str | None], *, where: str) -> list[dict[str, Any]]:
        """The change-log entries of ``run``; ``MemoryError_`` naming every memory that changed since
        it ran (``current`` reads a memory's text now), so an undo never overwrites a later edit."""
        log = self.changes()
        entries = [e for e in log if e.get("run") == run]
        last = {r: max((i for i, e in enumerate(log) if e.get("run") == r), default=-1)
                for r in (f"undo-{run}", f"undo-undo-{run}")}
        if entries and last[f"undo-{run}"] > last[f"undo-undo-{run}"]:  # undone, and not taken back since
            raise MemoryError_(f"run {run!r} is already undone (its revert is logged as 'undo-{run}', which "
                               "`lossless memory undo` takes back in turn)")
        state: dict[str, str | None] = {}
        conflicts = []
        for e in reversed(entries):
            mid = e["id"]
            if mid not in state:
                state[mid] = current(mid)
            if state[mid] != e.get("after"):
                conflicts.append(mid)
            state[mid] = e.get("before")
        if conflicts:
            raise MemoryError_(f"cannot undo run {run!r}: {', '.join(sorted(set(conflicts)))} changed since it ran; "
                               f"revert them by hand (their earlier text is in {where})")
        return entries

    def _prepared(self, memory: Memory) -> tuple[Memory, str]:
        """``memory`` as it will be stored — every field redacted, ``updated`` stamped, read back
        from its own text — and that text.  Refuses (``MemoryError_``, nothing written) a reserved
        or credential-like id, a file over ``MAX_FILE`` and a scope outside this store's view.
        Every store implementation writes through it."""
        if memory.id in RESERVED_IDS:
            raise MemoryError_(f"memory id {memory.id!r} is reserved (it is MEMORY.md on case-insensitive file "
                               f"systems): use {memory.id + '-note'!r}")
        if contains_secret(memory.id):
            raise MemoryError_("a memory id may not look like a credential: choose another name")
        clean = memory.with_changes(
            name=one_line(redact(memory.name)) or memory.id,
            description=one_line(redact(memory.description)),
            body=redact(memory.body),
            extra={k: v for k, v in redact_mapping(memory.extra).items() if k not in KNOWN_KEYS},
            created=redact(str(memory.created or now_iso(self.clock()))),
            updated=now_iso(self.clock()),
        )
        text, back = render_read_back(clean)
        after = redact(text)  # a secret only visible across fields is caught here
        size = len(after.encode("utf-8"))
        if size > MAX_FILE:
            raise MemoryError_(f"memory {clean.id!r} would be {size} bytes, over the "
                               f"{MAX_FILE}-byte limit of a memory file: keep memories short")
        # What is written must read back: parsed, unless it is known what a parse would give.
        clean = back if back is not None and after == text else parse_memory(after, self.path_for(clean.id))
        self.view.check_writable(clean.scope, clean.id)
        return clean, after

    def _writable(self) -> None:
        """Refuse a change before it is made when what must follow it could not be written: its line in
        the change log (by which ``undo`` reverts it) or ``MEMORY.md``, when either is not a file."""
        for name, what in ((CHANGES_NAME, "the store's change log"), (INDEX_NAME, "the store's index")):
            try:
                mode = os.lstat(self.dir / name).st_mode
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(mode):
                raise link_error(self.dir / name)
            if not stat.S_ISREG(mode):
                raise MemoryError_(f"{self.dir / name} is not a regular file: it is {what}; move it away")

    def _put(self, memory: Memory, *, op: str, run: str | None, reindex: bool = True) -> Memory:
        path = self.path_for(memory.id)
        self._writable()
        clean, after = self._prepared(memory)
        try:
            before = self.text_of(memory.id) if path.exists() else None
        except MemoryError_:
            raise _taken(memory.id, self.view) from None
        numbers = self.catalog.numbers()
        added = self._added_rows(clean, numbers) if reindex and before is None else None
        # Everything an add writes after its durable write is made before it (the log line, the new
        # MEMORY.md in a staged file): work done just after an fsync runs slower (RESULTS §8).
        entry = self._entry(op=op, memory_id=clean.id, before=before, after=after, run=run, redacted=True)
        text = render_rows(*added[:1], count=added[1]) if added is not None else None
        staged = stage(self.dir / INDEX_NAME, text.encode("utf-8")) if text is not None and self._md_differs(text) \
            else None
        try:
            write_atomic(path, after.encode("utf-8"), allow_link=True)  # the one durable write
            self._written.append(clean.id)
            append_line(self.dir / CHANGES_NAME, entry)
            if added is not None and text is not None:
                # MEMORY.md, then the memory's row, the index's number and the directory's generation
                # in one catalog transaction (``Catalog.sync``).
                if staged is not None:
                    refuse_link(self.dir / INDEX_NAME)
                    place(staged, self.dir / INDEX_NAME)
                    staged = None
                self._md_written(*added, text, self.catalog.sync([clean.id], written=clean, indexed=True))
                return clean
        finally:
            if staged is not None:
                unstage(staged)
        self.catalog.sync([clean.id], written=clean)
        if reindex:
            self.rebuild_index()
        return clean

    def _trash(self, path: Path, text: str, run: str | None) -> Path:
        """Keep ``text`` (the file at ``path``) under ``.trash/``; never overwrites an earlier copy."""
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(self.clock()))
        trash = self.dir / ".trash"
        folder = trash / f"{stamp}-{slugify(run or 'manual')}"
        ensure_dir(trash)
        ensure_dir(folder)
        dest, n = folder / path.name, 1
        while os.path.lexists(dest):
            n += 1
            dest = folder / f"{path.stem}.{n}{path.suffix}"
        write_atomic(dest, redact(text).encode("utf-8"))
        return dest

    def _log(self, *, op: str, memory_id: str, before: str | None, after: str | None,
             run: str | None, reason: str = "", redacted: bool = False) -> None:
        """Append a change; ``redacted``: ``after`` is ``redact``'s output already (it is idempotent)."""
        append_line(self.dir / CHANGES_NAME, self._entry(op=op, memory_id=memory_id, before=before, after=after,
                                                             run=run, reason=reason, redacted=redacted))

    def _entry(self, *, op: str, memory_id: str, before: str | None, after: str | None,
               run: str | None, reason: str = "", redacted: bool = False) -> bytes:
        """The change log's line for a change (what ``_log`` appends)."""
        entry = {"time": now_iso(self.clock()), "op": op, "id": memory_id, "run": run and redact(run),
                 "reason": redact(one_line(reason)) if reason else "", "before": before and redact(before),
                 "after": after if redacted else after and redact(after)}
        return (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")


def _taken(memory_id: str, view: View) -> MemoryError_:
    return MemoryError_(f"memory id {memory_id!r} is taken by a memory outside this store's view "
                        f"({view.describe()}): choose another name")


def _scope_of(text: str, path: Path) -> str | None:
    """The scope a memory file declares (None for a file that does not parse: it is an
    ``Issue`` every view is told about, so that it can be repaired)."""
    try:
        return parse_memory(text, path).scope
    except MemoryError_:
        return None


def _check_type(value: str) -> MemoryType:
    for kind in TYPES:  # the matching literal itself, so the type checker follows it too
        if value == kind:
            return kind
    raise MemoryError_(f"memory type must be one of {', '.join(TYPES)}, not {value!r}")
