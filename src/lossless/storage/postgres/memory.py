"""Memories in PostgreSQL: one row per memory, the same ``MemoryStore`` behaviour.

``PgMemoryStore`` is a ``MemoryStore`` (retrieval, injection, the memory tool, consolidation
and the CLI take it as they take the directory store) whose memories are rows of
``lossless.memories``: the frontmatter fields as columns (``scope`` among them), the rendered
file text as the truth (``text``), the unknown frontmatter keys in ``extra``, and a
``tsvector`` weighted name/id (A) > description (B) > body (C) for full-text search.

Invariants, as in the directory store:

* Every read-modify-write runs in one transaction holding the store-wide advisory lock
  (``lock()``), so writers on every machine take turns and lose nothing; a write returns
  only once committed.
* Everything written passes through ``redact`` (the same ``_clean`` path as the files).
* Nothing is erased: ``delete`` keeps the text in ``lossless.memory_trash``; every change is
  logged in ``lossless.memory_changes`` with the text before and after; ``undo`` uses it.
* ``MEMORY.md`` is rendered from the rows (the most recent ``MAX_LINES + 1`` and the count of
  the others) under the same 200-line / 25 KB cap: there is no file to go stale.
* Scopes (``lossless.memory.scope``): a store opened with a project or an agent sees only the
  rows of its ``view`` — every read, search and index filters on ``scope`` in SQL — treats every
  other memory as absent, and writes only scopes it sees (by default ``View.default_scope``).

``dir`` is a local directory for what stays on this machine: the consolidation suggestions
waiting for a person.  Memories never go there.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from ...errors import MemoryError_, LosslessError
from ...memory.index import MAX_LINES, render_index
from ...memory.lexical import query_words
from ...memory.model import (
    Memory, MemoryExists, check_id, now_iso, one_line, parse_memory, parse_time,
    safe_id,
)
from ...memory.redact import redact
from ...memory.scope import View
from ...memory.store import MemoryStore, ScanResult
from ...store import home
from .connect import Database

MEMORY_LOCK = 0x7265636F6C6C0003
"""The advisory lock every memory read-modify-write holds for its transaction."""

_COLS = "id, name, description, type, body, created, updated, extra, exact, text, scope"


def _extra_json(extra: Mapping[str, Any]) -> tuple[str, bool]:
    """``extra`` as JSON for the column, and whether it reads back equal (else rows are parsed from ``text``)."""
    text = json.dumps(dict(extra), ensure_ascii=False, default=str)
    try:
        exact = json.loads(text) == dict(extra) and "\\u0000" not in text
    except ValueError:
        exact = False
    return (text if "\\u0000" not in text else "{}"), exact


class _Catalog:
    """What readers take from the directory store's catalog: ``top`` and ``count``."""

    def __init__(self, store: PgMemoryStore) -> None:
        self.store = store

    def top(self, n: int, *, every: bool = False) -> tuple[list[Memory], dict[str, float]]:
        """The ``n`` most recent live memories (written or used) the view sees (``every``: all) and their use times."""
        where, args = self.store._seen("m.", every=every)
        with self.store.db.cursor("read memories") as cur:
            cur.execute(
                f"SELECT {', '.join('m.' + c for c in _COLS.split(', '))}, u.used FROM lossless.memories m "
                f"LEFT JOIN lossless.memory_usage u ON u.id = m.id WHERE m.live AND {where} "
                "ORDER BY greatest(m.stamp, coalesce(u.used, 0)) DESC, m.created_ts DESC, m.id LIMIT %s", (*args, n))
            rows = cur.fetchall()
        return [self.store._memory(r[:-1]) for r in rows], {r[0]: float(r[-1]) for r in rows if r[-1]}

    def count(self, *, every: bool = False) -> int:
        where, args = self.store._seen(every=every)
        with self.store.db.cursor("count memories") as cur:
            cur.execute(f"SELECT count(*) FROM lossless.memories WHERE live AND {where}", args)
            row = cur.fetchone()
            return int(row[0]) if row else 0


class PgMemoryStore(MemoryStore):
    def __init__(self, db: Database, *, project: str | None = None, agent: str | None = None,
                 clock: Any = None) -> None:  # no super().__init__: no directory to sweep
        import time

        self.db = db
        self.view = View(project=project, agent=agent)
        self.clock = clock or time.time
        self.lock_timeout = 0.0
        self.dir = home() / "postgres" / re.sub(r"[^A-Za-z0-9.-]+", "_", db.label)
        self.catalog = _Catalog(self)  # type: ignore[assignment]
        self.missing_vectors = 0
        """Live memories the last dense query ranked without their vector (``lossless memory embed`` makes them)."""
        self.swept = []

    @property
    def consolidator_class(self) -> Any:
        from .consolidate import PgConsolidator

        return PgConsolidator

    # -- locking --------------------------------------------------------------
    @contextmanager
    def lock(self) -> Iterator[None]:
        """One transaction holding the store-wide advisory lock (reentrant: inner blocks join it)."""
        with self.db.transaction("write memories", lock_key=MEMORY_LOCK):
            yield

    # -- reading --------------------------------------------------------------
    def path_for(self, memory_id: str) -> Path:
        """Where the memory would be as a file (for messages): ``<db>/<id>.md``; nothing is there."""
        return Path(self.db.label) / f"{check_id(memory_id)}.md"

    def _seen(self, prefix: str = "", *, every: bool = False) -> tuple[str, tuple[Any, ...]]:
        """The SQL condition (and its arguments) of the rows this store's view sees."""
        scopes = None if every else self.view.scopes
        if scopes is None:
            return "TRUE", ()
        return f"({prefix}scope IS NULL OR {prefix}scope = ANY(%s))", (list(scopes),)

    def _memory(self, row: Sequence[Any]) -> Memory:
        mid, name, description, mtype, body, created, updated, extra, exact, text, scope = row
        if not exact:
            return parse_memory(text, self.path_for(mid))
        return Memory(id=mid, name=name, description=description, type=mtype, body=body, created=created,
                      updated=updated, extra=dict(extra), scope=scope)

    def _select(self, where: str = "TRUE", args: Sequence[Any] = (), tail: str = "ORDER BY id",
                tail_args: Sequence[Any] = ()) -> list[Memory]:
        seen, seen_args = self._seen()
        with self.db.cursor("read memories") as cur:
            cur.execute(f"SELECT {_COLS} FROM lossless.memories WHERE {where} AND {seen} {tail}",
                        (*args, *seen_args, *tail_args))
            return [self._memory(r) for r in cur.fetchall()]

    def scan(self) -> ScanResult:
        """Every memory, in id order (a row cannot be unreadable: no issues)."""
        return ScanResult(memories=tuple(self._select()), issues=())

    def recent(self, limit: int | None = None, *, include_superseded: bool = False) -> list[Memory]:
        where = "TRUE" if include_superseded else "live"
        tail = "ORDER BY stamp DESC, id DESC" + (" LIMIT %s" if limit is not None else "")
        return self._select(where, (), tail, (limit,) if limit is not None else ())

    def search(self, query: str, limit: int) -> list[tuple[Memory, float]]:
        """The live memories that best match ``query`` (PostgreSQL full-text, weighted name >
        description > body), best first, over every memory in the store."""
        terms = query_words(query)
        if not terms:
            return []
        tsquery = " | ".join("'" + w.replace("'", "") + "'" for w in dict.fromkeys(terms))
        seen, seen_args = self._seen()
        with self.db.cursor("search memories") as cur:
            cur.execute(
                f"SELECT {_COLS}, ts_rank(tsv, q) AS r FROM lossless.memories, to_tsquery('english', %s) q "
                f"WHERE live AND tsv @@ q AND {seen} ORDER BY r DESC, id LIMIT %s", (tsquery, *seen_args, limit))
            return [(self._memory(r[:-1]), float(r[-1])) for r in cur.fetchall()]

    def dense_search(self, embedder: Any, query: str, limit: int) -> list[tuple[Memory, float]] | None:
        """The live memories this view sees whose embedding is nearest ``query``'s (cosine, best
        first), ranked by the database through pgvector; None when the server has no pgvector (or
        this role may not create it): the caller then ranks in the process.

        Vectors are rows of ``lossless.memory_vectors`` (id, an MD5 of the embedded fields and the
        model, ``vector(384)``), made when a memory is written (``_embed_ids``) or by
        ``embed_all`` (``lossless memory embed``); a query embeds at most ``embed.QUERY_ENCODE``
        memories changed without either (more are ranked without their vector: ``missing_vectors``)."""
        from ...memory.embed import QUERY_ENCODE

        if not self._pgvector():
            return None
        self._embed_changed(embedder, limit=QUERY_ENCODE)
        vector = "[" + ",".join(f"{x:.7g}" for x in embedder.encode([query])[0]) + "]"
        seen, seen_args = self._seen("m.")
        with self.db.cursor("rank memories by embedding") as cur:
            cur.execute(
                f"SELECT {', '.join('m.' + c for c in _COLS.split(', '))}, 1 - (v.embedding <=> %s::vector) "
                "FROM lossless.memories m JOIN lossless.memory_vectors v ON v.id = m.id AND v.digest = md5(m.name || chr(31) || m.description || chr(31) || m.body) "
                f"AND v.model = %s WHERE m.live AND {seen} ORDER BY v.embedding <=> %s::vector, m.id LIMIT %s",
                (vector, embedder.model, *seen_args, vector, limit))
            return [(self._memory(r[:-1]), float(r[-1])) for r in cur.fetchall()]

    def _pgvector(self) -> bool:
        """Whether the database ranks embeddings (the extension and the vectors table made once)."""
        ready = getattr(self, "_pgvector_ready", None)
        if ready is None:
            from .schema import has_pgvector

            ready = False
            if has_pgvector(self.db):
                try:
                    with self.db.transaction("set up pgvector") as cur:
                        cur.execute("CREATE EXTENSION IF NOT EXISTS vector")
                        cur.execute("CREATE TABLE IF NOT EXISTS lossless.memory_vectors (id text PRIMARY KEY,"
                                    " digest text NOT NULL, model text NOT NULL,"
                                    " embedding vector(384) NOT NULL)")
                    ready = True
                except LosslessError:
                    ready = False  # a role that may not create extensions: rank in the process
            self._pgvector_ready = ready
        return bool(ready)

    def _embed_changed(self, embedder: Any, *, limit: int | None = None, ids: Sequence[str] | None = None,
                       progress: Callable[[int, int], None] | None = None) -> int:
        """Embed the live memories with no vector for their current text (new, edited, re-modelled) —
        only ``ids`` when given; none when more than ``limit`` need it (``missing_vectors`` says how
        many).  In batches of ``embed.BATCH``, each stored at once; returns how many were embedded."""
        from ...memory.embed import BATCH, memory_text

        only = " AND m.id = ANY(%s)" if ids is not None else ""
        with self.db.cursor("find memories to embed") as cur:
            cur.execute("SELECT m.id, m.name, m.description, m.body, md5(m.name || chr(31) || m.description || chr(31) || m.body) FROM lossless.memories m "
                        "LEFT JOIN lossless.memory_vectors v ON v.id = m.id AND v.digest = md5(m.name || chr(31) || m.description || chr(31) || m.body) AND v.model = %s "
                        f"WHERE m.live AND v.id IS NULL{only}", (embedder.model, *([list(ids)] if ids is not None else [])))
            todo = cur.fetchall()
        self.missing_vectors = len(todo) if limit is not None and len(todo) > limit else 0
        if not todo or self.missing_vectors:
            return 0
        for start in range(0, len(todo), BATCH):
            part = todo[start:start + BATCH]
            vectors = embedder.encode([memory_text(n, d, b) for _, n, d, b, _ in part])
            rows = [(i, digest, embedder.model, "[" + ",".join(f"{x:.7g}" for x in vec) + "]")
                    for (i, _, _, _, digest), vec in zip(part, vectors)]
            with self.db.transaction("store embeddings") as cur:
                cur.executemany("INSERT INTO lossless.memory_vectors (id, digest, model, embedding) "
                                "VALUES (%s, %s, %s, %s::vector) ON CONFLICT (id) DO UPDATE SET digest = excluded.digest,"
                                " model = excluded.model, embedding = excluded.embedding", rows)
            if progress is not None:
                progress(min(start + BATCH, len(todo)), len(todo))
        return len(todo)

    def embed_all(self, embedder: Any, progress: Callable[[int, int], None] | None = None) -> int:
        """Embed every live memory without a vector (``lossless memory embed``); returns how many."""
        if not self._pgvector():
            from ...errors import ConfigError

            raise ConfigError("this PostgreSQL server has no pgvector: the dense side ranks in the process there")
        return self._embed_changed(embedder, progress=progress)

    def _embed_ids(self, ids: Sequence[str]) -> None:
        """With the dense side on, embed the memories just written, so that no query has to."""
        from ...memory import embed

        if not embed.enabled():
            return
        try:
            embed.model_dir()
            if self._pgvector():
                self._embed_changed(embed.shared_embedder(), ids=ids)
        except (LosslessError, OSError):
            return  # the write stands; a query says the vector is missing

    def exists(self, memory_id: str) -> bool:
        """Whether ``memory_id`` is a memory this store sees."""
        return self._text(memory_id, seen=True) is not None

    def _text(self, memory_id: str, *, seen: bool = False) -> str | None:
        """The row's text (``seen``: only when the view sees it), None when there is none."""
        where, args = self._seen() if seen else ("TRUE", ())
        with self.db.cursor("read memories") as cur:
            cur.execute(f"SELECT text FROM lossless.memories WHERE id = %s AND {where}",
                        (check_id(memory_id), *args))
            row = cur.fetchone()
        return None if row is None else str(row[0])

    def _absent(self, memory_id: str) -> MemoryError_:
        where = self.db.label if self.view.unrestricted else f"{self.db.label} (seen as {self.view.describe()})"
        return MemoryError_(f"no memory {memory_id!r} in {where} (see `lossless memory list`)")

    def _taken(self, memory_id: str) -> MemoryError_:
        return MemoryError_(f"memory id {memory_id!r} is taken by a memory outside this store's view "
                            f"({self.view.describe()}): choose another name")

    def get(self, memory_id: str) -> Memory:
        found = self._select("id = %s", (check_id(memory_id),))
        if not found:
            raise self._absent(memory_id)
        return found[0]

    def text_of(self, memory_id: str) -> str:
        text = self._text(memory_id, seen=True)
        if text is None:
            raise self._absent(memory_id)
        return text

    def usage(self) -> dict[str, float]:
        with self.db.cursor("read memory usage") as cur:
            cur.execute("SELECT id, used FROM lossless.memory_usage")
            return {i: float(t) for i, t in cur.fetchall()}

    def index_text(self) -> str:
        return self.rebuild_index()

    def rebuild_index(self) -> str:
        """``MEMORY.md`` of this store's view, rendered from the rows: the most recent ``MAX_LINES + 1``
        and the count of the others."""
        top, used = self.catalog.top(MAX_LINES + 1)
        return render_index(top, used, count=self.catalog.count())

    def changes(self) -> list[dict[str, Any]]:
        with self.db.cursor("read the memory change log") as cur:
            cur.execute("SELECT entry FROM lossless.memory_changes ORDER BY seq")
            return [e for (e,) in cur.fetchall() if isinstance(e, dict) and isinstance(e.get("id"), str)]

    # -- writing --------------------------------------------------------------
    def create(self, memory: Memory, *, run: str | None = None, op: str = "add") -> Memory:
        memory = memory.with_changes(id=safe_id(memory.id),
                                     scope=memory.scope or self.view.default_scope(memory.type))
        with self.lock():
            if self._text(memory.id) is not None:
                if not self.exists(memory.id):
                    raise self._taken(memory.id)
                raise MemoryExists(memory.id, self.path_for(memory.id))
            return self._put(memory, op=op, run=run)

    def delete(self, memory_id: str, *, run: str | None = None, reason: str = "") -> Path:
        with self.lock():
            before = self.text_of(memory_id)
            dest = self._trash(memory_id, before, run)
            self._remove(memory_id)
            self._log(op="delete", memory_id=memory_id, before=before, after=None, run=run, reason=reason)
            return dest

    def rename(self, old_id: str, new_id: str, *, run: str | None = None) -> Memory:
        new_id = safe_id(check_id(new_id))
        with self.lock():
            memory = self.get(old_id)
            if self._text(new_id) is not None:
                raise MemoryError_(f"cannot rename {old_id!r}: memory {new_id!r} already exists")
            before = self.text_of(old_id)
            name = new_id if memory.name == old_id else memory.name
            new = self._put(memory.with_changes(id=new_id, name=name), op="rename-to", run=run)
            self._remove(old_id)
            self._log(op="rename-from", memory_id=old_id, before=before, after=None, run=run)
            return new

    def touch(self, memory_ids: list[str] | tuple[str, ...]) -> None:
        if not memory_ids:
            return
        now = self.clock()
        with self.db.transaction("record memory use") as cur:
            cur.executemany("INSERT INTO lossless.memory_usage (id, used) VALUES (%s, %s) "
                            "ON CONFLICT (id) DO UPDATE SET used = greatest(memory_usage.used, excluded.used)",
                            [(check_id(i), now) for i in memory_ids])

    def flush_usage(self) -> None:
        """Use times are rows already: nothing to flush."""

    def undo(self, run: str) -> int:
        """Revert every change logged under ``run`` (newest first); refused, with nothing changed,
        when a memory it touched has changed since.  Logged under ``undo-<run>``."""
        with self.lock():
            entries = self._undoable(run, self._text, where="the change log")
            for e in reversed(entries):
                current = self._text(e["id"])
                if e.get("before") is None:
                    if current is not None:
                        self._trash(e["id"], current, f"undo-{run}")
                        self._remove(e["id"])
                else:
                    text = redact(e["before"])
                    self._store(parse_memory(text, self.path_for(e["id"])), text)
                self._log(op="undo", memory_id=e["id"], before=current, after=e.get("before"), run=f"undo-{run}")
            return len(entries)

    def restore(self, text: str, memory_id: str, *, run: str | None = None) -> Memory:
        """Write a memory's file text as given, its stamps kept (moving a store)."""
        text = redact(text)
        memory = parse_memory(text, self.path_for(memory_id))
        with self.lock():
            before = self._text(memory_id)
            self._store(memory, text)
            self._log(op="import", memory_id=memory_id, before=before, after=text, run=run)
        return memory

    # -- internals --------------------------------------------------------------
    def _put(self, memory: Memory, *, op: str, run: str | None, reindex: bool = True) -> Memory:
        clean, after = self._prepared(memory)
        with self.lock():
            before = self._text(clean.id)
            if before is not None and self._text(clean.id, seen=True) is None:
                raise self._taken(clean.id)
            self._store(clean, after)
            self._log(op=op, memory_id=clean.id, before=before, after=after, run=run)
        self._embed_ids([clean.id])
        return clean

    def _store(self, m: Memory, text: str) -> None:
        extra, exact = _extra_json(m.extra)
        with self.db.transaction(f"write memory {m.id!r}") as cur:
            cur.execute(
                "INSERT INTO lossless.memories (id, name, description, type, body, created, updated, extra, exact,"
                " text, stamp, created_ts, live, scope)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (id) DO UPDATE SET name = excluded.name, description = excluded.description,"
                " type = excluded.type, body = excluded.body, created = excluded.created,"
                " updated = excluded.updated, extra = excluded.extra, exact = excluded.exact, text = excluded.text,"
                " stamp = excluded.stamp, created_ts = excluded.created_ts, live = excluded.live, scope = excluded.scope",
                (m.id, m.name, m.description, m.type, m.body, m.created, m.updated, extra, exact, text,
                 parse_time(m.updated), parse_time(m.created), not m.superseded, m.scope))

    def _remove(self, memory_id: str) -> None:
        with self.db.transaction(f"remove memory {memory_id!r}") as cur:
            cur.execute("DELETE FROM lossless.memories WHERE id = %s", (memory_id,))

    def _trash(self, memory_id: str, text: str, run: str | None) -> Path:  # type: ignore[override]
        with self.db.transaction(f"keep memory {memory_id!r} in the trash") as cur:
            cur.execute("INSERT INTO lossless.memory_trash (id, run, text) VALUES (%s, %s, %s) RETURNING seq",
                        (memory_id, run and redact(run), redact(text)))
            row = cur.fetchone()
        return Path(self.db.label) / ".trash" / f"{row[0] if row else 0}-{memory_id}.md"

    def _log(self, *, op: str, memory_id: str, before: str | None, after: str | None,
             run: str | None, reason: str = "", redacted: bool = False) -> None:
        entry = {"time": now_iso(self.clock()), "op": op, "id": memory_id, "run": run and redact(run),
                 "reason": redact(one_line(reason)), "before": before and redact(before),
                 "after": after if redacted else after and redact(after)}
        with self.db.transaction("log a memory change") as cur:
            cur.execute("INSERT INTO lossless.memory_changes (entry) VALUES (%s::jsonb)",
                        (json.dumps(entry, ensure_ascii=False),))

    def trash(self) -> list[tuple[str, str | None, str]]:
        """(id, run, text) of every memory deleted, oldest first (for export)."""
        with self.db.cursor("read the memory trash") as cur:
            cur.execute("SELECT id, run, text FROM lossless.memory_trash ORDER BY seq")
            return [(i, r, t) for i, r, t in cur.fetchall()]
