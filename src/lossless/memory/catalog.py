"""The memory directory's persistent index: ``.index/catalog.sqlite3`` (stdlib ``sqlite3``).

The store uses it; nothing else needs to::

    cat = Catalog(store.dir)
    cat.refresh()                      # notices what changed on disk since the last call
    cat.memories(); cat.issues()       # every memory / unreadable file, without reading a file
    cat.search("indent tabs", 5)       # lexical ranking over every live memory
    cat.top(201); cat.count()          # MEMORY.md's candidates, most recent first
    cat.sync(["a"])                    # the store wrote or removed a.md (under its lock)

One row per ``*.md`` file: its parsed fields (secrets redacted, like everything
lossless writes), ``mtime``/``size``/inode, and when it was read; or, for a file
that does not parse, the ``Issue``.  The files are the truth and the catalog a
cache: delete ``.index/`` and it is rebuilt from them (the cold open).

How it stays right without reading every file each time:

* A writer in any lossless process updates the rows of the files it wrote, under
  the store lock, and bumps a sequence number.
* The directory's own mtime (its generation) changes whenever a file in it is
  created, removed or renamed — by lossless, by another program, by an editor that
  saves by renaming, by a ``git pull``.  The catalog records the generation it is
  in step with; a different one means a sweep (one ``stat`` per file, reading only
  the files whose stat changed, each once).  A lossless writer records the
  generation its own write made, so another process does not sweep for it.
* A file read within its file system's timestamp granularity of its mtime
  (``racy_window``: 2 s where mtimes are whole seconds, 0.1 s where they keep
  fractions) may be written again with the same mtime: its row says when to read it
  again (``recheck_ns``, indexed), and the first refresh after that time reads it —
  after a bulk write only the files of its last instant, not all of them.  The
  same holds for the generation itself (a file created in the tick the directory
  was last seen): once its window passed, the names are listed once.
* A file rewritten in place (``>>``, an editor that saves in place) leaves the
  directory's mtime alone, so each refresh also stats a rolling slice: ``SLICE_MIN``
  files and ``SCAN_RATE`` more per second since the last refresh, up to ``SLICE``.
  Such an edit is seen within about ``n / SCAN_RATE`` seconds, at once in a store
  of at most ``SLICE_MIN`` memories.
* A sweep never overwrites a row a writer updated meanwhile: it re-stats the
  file inside the write transaction and keeps the row when the file changed.

Retrieval ranks with the ranking index (``engine``) in the same file, kept in step
by the same row writes: one engine at every size, nothing to build when a process
opens the store.  What the engine keeps between queries is keyed on the rows'
sequence number (``seq``), which every row write — this process's or another's —
changes: read after the data version changed, it costs nothing otherwise.

Scopes: the rows hold every memory of the directory; a catalog opened with
``scopes`` (a store's ``View``, see ``scope``) answers every query — ``memories``,
``by_id``, ``top``, ``count``, ``search`` — from the memories that view sees alone
(ranked with the statistics of those memories alone), so ranking never leaks another
agent's memory.  ``top``/``count`` with ``every=True`` are ``MEMORY.md``'s: the whole directory.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Sequence

from ..errors import MemoryError_
from ._fs import FILE_MODE, _open, ensure_dir, read_text, refuse_link
from ._rows import (
    COLS, COLS_F, RACY_NS, create_schema, memory_doc, memory_of, racy, racy_window, read_row, scope_clause, sig_of,
    write_rows,
)
from .engine import Engine, boost
from .lexical import query_words
from .model import Issue, Memory

__all__ = ["DB_NAME", "INDEX_DIR", "RACY_NS", "SCAN_RATE", "SLICE", "SLICE_MIN", "Catalog", "memory_doc", "racy"]

SLICE_MIN = 16
"""A store of at most this many files has every file stat'ed by every refresh (for a file rewritten
in place: its directory unchanged)."""
SCAN_RATE = 2_000
"""A larger store has this many files stat'ed per second since the last refresh, up to ``SLICE`` a
refresh: a store of ``n`` files is looked over within about ``n / SCAN_RATE`` seconds, however often
(or seldom) it is queried, and a query pays for the time since the last, not for the store."""
SLICE = 256
"""The most files one refresh stats when the directory did not change."""
INDEX_DIR = ".index"
DB_NAME = "catalog.sqlite3"
_SKIP = "MEMORY.md"


class Catalog:
    """The index of one memory directory, for one process (thread-safe)."""

    def __init__(self, directory: Path, *, scopes: Sequence[str] | None = None) -> None:
        self.dir = directory
        self.scopes = tuple(scopes) if scopes is not None else None
        """The scopes queries answer from besides unscoped memories (None: every memory)."""
        self.path = directory / INDEX_DIR / DB_NAME
        self._mutex = threading.RLock()
        self._con: sqlite3.Connection | None = None
        self._seq = 0
        self._count: dict[bool, tuple[int, int]] = {}
        self._engine = Engine()
        self._meta_cache: dict[str, Any] = {}
        self._unset: dict[str, str] | None = None
        """In a write transaction: the ``meta`` values set, written as it commits."""
        self._writes = 0
        """This connection's writes of rows (``_write_rows``; with the data version, when a recheck is due)."""
        self._stats: tuple[int, tuple[int, float, tuple[int, ...]]] | None = None
        self._meta_version = -1
        self._due: tuple[tuple[int, int], int | None] | None = None
        """(``_meta_version``, ``_writes``) and the earliest ``recheck_ns`` then (``_recheck``)."""
        self._pos = 0
        self._slice_at = time.monotonic()
        self._budget = 0.0
        self._small = True
        self.scan_rate = SCAN_RATE
        """Files stat'ed a second by the rolling check (``SCAN_RATE``)."""
        self._clean = False
        self.sweeps = 0
        """Full sweeps this process made (what a test or the bench can watch)."""

    # -- the database -----------------------------------------------------------
    def _db(self) -> sqlite3.Connection:
        if self._con is not None:
            return self._con
        on_disk = True
        try:
            ensure_dir(self.dir / INDEX_DIR)
            refuse_link(self.path)
            os.close(_open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE))
        except OSError as exc:  # a read-only memory directory: an index in memory, for this process
            if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            on_disk = False
        try:
            con = self._connect(self.path if on_disk else ":memory:")
        except sqlite3.DatabaseError:  # a torn or foreign file: it is only a cache
            if not on_disk:
                raise
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
            os.close(_open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE))
            con = self._connect(self.path)
        self._con = con
        return con

    def _connect(self, where: Path | str) -> sqlite3.Connection:
        con = sqlite3.connect(where, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")  # a cache: a lost commit is rebuilt from the files
            con.execute("PRAGMA cache_size=-32768")  # up to 32 MB of pages: a sweep's postings touch many
            create_schema(con)
        except BaseException:
            con.close()
            raise
        return con

    def close(self) -> None:
        with self._mutex:
            if self._con is not None:
                self._con.close()
                self._con = None
            self._meta_cache.clear()
            self._meta_version = -1
            self._stats = None
            self._engine = Engine()  # a new connection's data version starts again: nothing kept holds

    def _check_version(self) -> int:
        """``PRAGMA data_version`` (it changes when another connection commits); the cached ``meta``
        values are forgotten when it changed."""
        version = self._db().execute("PRAGMA data_version").fetchone()[0]
        if version != self._meta_version:
            self._meta_cache.clear()
            self._meta_version = version
        return int(version)

    def _meta(self, key: str, *, checked: bool = False) -> Any:
        """A value of the ``meta`` table; read again only after another connection committed
        (``_check_version``, unless the caller just did: ``checked``): a refresh that finds nothing
        changed reads no row."""
        con = self._db()
        if not checked and self._unset is None:  # in a write transaction nobody else commits
            self._check_version()
        if key not in self._meta_cache:
            row = con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            self._meta_cache[key] = json.loads(row[0]) if row else None
        return self._meta_cache[key]

    def _set_meta(self, key: str, value: Any) -> None:
        """Set a ``meta`` value (written when the transaction commits: ``_write``)."""
        text = json.dumps(value)
        if self._unset is not None:
            self._unset[key] = text
        else:
            self._db().execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, text))
        # As a read would give it back (lists, not tuples).
        self._meta_cache[key] = list(value) if isinstance(value, tuple) else json.loads(text) \
            if isinstance(value, (list, dict)) else value

    def _dir_sig(self) -> list[int] | None:
        try:
            st = os.stat(self.dir)
        except FileNotFoundError:
            return None
        return [st.st_mtime_ns, st.st_ino]

    def _usage_sig(self) -> list[int] | None:
        try:
            return list(sig_of(os.lstat(f"{self.dir}{os.sep}.usage.json")))
        except FileNotFoundError:
            return None

    def _read(self, name: str) -> dict[str, Any]:
        return read_row(self.dir, name)

    def _write_rows(self, rows: Iterable[dict[str, Any]], *, recheck: bool) -> int:
        """Upsert ``rows`` in the open transaction; with ``recheck``, a row whose file changed
        since it was read is left for the next refresh (a writer's own row wins)."""
        self._writes += 1  # this connection's own commits leave PRAGMA data_version as it was
        seq = self._meta("seq") or 0
        new = write_rows(self._db(), rows, seq=seq, index=self._engine, recheck=self.dir if recheck else None)
        if new != seq:
            self._set_meta("seq", new)
        return new - seq

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``: writers take turns); rolled back on error,
        and then the engine's cached numbers are forgotten (some may not exist)."""
        con = self._db()
        con.execute("BEGIN IMMEDIATE")
        try:
            self._check_version()  # once: until the commit no other connection writes
            self._unset = {}
            yield con
            if self._unset:
                con.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", self._unset.items())
            self._unset = None
            con.execute("COMMIT")
        except BaseException:
            self._unset = None
            con.execute("ROLLBACK")
            self._engine.forget()
            self._meta_cache.clear()
            raise

    # -- keeping in step ----------------------------------------------------------
    def refresh(self) -> bool:
        """Bring the catalog and this process's view in step with the directory (see the module doc).
        Whether it read the data version (``search_memories`` then need not)."""
        with self._mutex:
            if self._con is None:
                if not self.dir.is_dir():
                    return False
                self._db()  # created before the directory's mtime is read: making .index/ changes it
            if self._clean:  # inside this process's own lock the catalog is already in step
                return False
            dsig = self._dir_sig()
            if dsig is None:  # the directory is gone
                return False
            self._check_version()
            if dsig != self._meta("dir", checked=True):
                self._sweep(dsig)
                self._check_usage()
            else:
                self._list_if_racy(dsig)
                self._recheck()
                if self._slice():
                    self._check_usage()
            return True

    def _check_usage(self) -> None:
        """Load ``.usage.json`` when it is not the one recorded.  Checked with a sweep (a program that
        rewrote it by renaming changed the directory) and with each rolling slice (one edited in place),
        not on every refresh: use times are a hint, and a lossless writer records its own."""
        usig = self._usage_sig()
        if usig != self._meta("usage", checked=True):
            self._load_usage(usig)

    def _names(self) -> list[str]:
        with os.scandir(self.dir) as it:
            return [e.name for e in it if e.name.endswith(".md") and e.name != _SKIP and not e.name.startswith(".")]

    def _sweep(self, dsig: list[int] | None) -> None:
        self.sweeps += 1
        con = self._db()
        known = {r[0]: r[1:] for r in con.execute(
            "SELECT id, mtime_ns, size, ino, checked_ns FROM files WHERE state >= 0")}
        names = self._names()
        now = time.time_ns()
        todo = []
        base = f"{self.dir}{os.sep}"
        for name in names:
            stem = name[:-3]
            k = known.pop(stem, None)
            if k is None or k[0] is None:
                todo.append(name)
                continue
            try:
                st = os.stat(f"{base}{name}")
            except FileNotFoundError:
                todo.append(name)
                continue
            if list(sig_of(st)) != list(k[:3]) or racy(k[0], k[3], now):
                todo.append(name)
        rows = [self._read(name) for name in todo]
        rows += [{"id": stem, "state": -1, "checked_ns": now} for stem in known
                 if not os.path.lexists(self.dir / f"{stem}.md")]
        with self._write():
            self._write_rows(rows, recheck=True)
            if self._dir_sig() == dsig:  # nothing changed while we looked: in step with this generation
                self._in_step(dsig, now)

    def _in_step(self, dsig: list[int] | None, seen_ns: int) -> None:
        """Record (in the open transaction) that the rows match the directory at generation ``dsig``,
        as listed at ``seen_ns``."""
        self._set_meta("dir", dsig)
        self._set_meta("dir_seen", seen_ns)

    def _list_if_racy(self, dsig: list[int] | None) -> None:
        """When the generation was recorded within its granularity of the directory's mtime (a file
        created in that same tick leaves the mtime as it was), list the names once that time passed."""
        seen = self._meta("dir_seen", checked=True)
        if dsig is None or seen is None or seen >= dsig[0] + racy_window(dsig[0]):
            return
        now = time.time_ns()
        if now < dsig[0] + racy_window(dsig[0]):
            return
        ids = {r[0] for r in self._db().execute("SELECT id FROM files WHERE state >= 0")}
        if {n[:-3] for n in self._names()} != ids:
            self._sweep(dsig)
            return
        with self._write():
            if self._dir_sig() == dsig:
                self._in_step(dsig, now)

    def _recheck(self) -> None:
        """Read again the files whose racy time has passed (``_rows.recheck_at``).  The earliest such
        time is kept while no connection wrote (``PRAGMA data_version``, this one's writes), so a
        refresh before it runs no query."""
        now = time.time_ns()
        key = (self._meta_version, self._writes)
        if self._due is not None and self._due[0] == key and (self._due[1] is None or now < self._due[1]):
            return
        con = self._db()
        due = [r[0] for r in con.execute(
            "SELECT id FROM files WHERE recheck_ns IS NOT NULL AND recheck_ns <= ? AND state >= 0", (now,))]
        if not due:
            after = con.execute("SELECT min(recheck_ns) FROM files WHERE recheck_ns IS NOT NULL AND state >= 0")
            self._due = (key, after.fetchone()[0])
        else:
            rows = [self._read(f"{mid}.md") for mid in due]
            with self._write():
                self._write_rows(rows, recheck=True)

    def _slice(self) -> bool:
        """Stat the next files in turn (all of a store of at most ``SLICE_MIN``; else ``scan_rate`` a
        second since the last time, up to ``SLICE``, at least ``SLICE_MIN`` at a time: one query for a
        batch rather than for each file) and read those whose stat changed.  Whether it ran."""
        now_s = time.monotonic()
        self._budget = min(float(SLICE), self._budget + (now_s - self._slice_at) * self.scan_rate)
        self._slice_at = now_s
        n = SLICE_MIN if self._small else int(self._budget)
        if n < SLICE_MIN:
            return False
        self._budget = max(0.0, self._budget - n)
        start = self._pos
        con = self._db()
        rows = con.execute("SELECT rid, id, mtime_ns, size, ino FROM files WHERE state >= 0 AND rid > ?"
                           " ORDER BY rid LIMIT ?", (self._pos, n)).fetchall()
        todo = []
        base = f"{self.dir}{os.sep}"
        for _rid, mid, mtime, size, ino in rows:
            try:
                st = os.stat(f"{base}{mid}.md")
            except FileNotFoundError:
                todo.append(f"{mid}.md")
                continue
            if mtime is None or (st.st_mtime_ns, st.st_size, st.st_ino) != (mtime, size, ino):
                todo.append(f"{mid}.md")
        self._pos = rows[-1][0] if len(rows) == n else 0
        if start == 0 and len(rows) < n:  # the whole store in one turn
            self._small = len(rows) <= SLICE_MIN
        elif self._small and len(rows) == n:  # more than SLICE_MIN files
            self._small = False
        if todo:
            read = [self._read(name) for name in todo]
            with self._write():
                self._write_rows(read, recheck=True)
        return True

    def _load_usage(self, usig: list[int] | None) -> None:
        try:
            data = json.loads(read_text(self.dir / ".usage.json")) if usig else {}
        except (OSError, ValueError, MemoryError_):  # a link there is refused, never followed
            data = {}
        used = {k: float(v) for k, v in data.items() if isinstance(v, (int, float))} if isinstance(data, dict) else {}
        with self._write() as con:  # use times only grow: the file never takes back a later one recorded here
            con.executemany("UPDATE files SET used_ts = ? WHERE id = ? AND used_ts < ?",
                            [(t, k, t) for k, t in used.items()])
            self._set_meta("usage", usig)
            self._set_meta("used_seq", (self._meta("used_seq") or 0) + 1)

    # -- the store's hooks -----------------------------------------------------------
    def begin(self) -> None:
        """The store took its lock: get in step with the directory (a sweep if it changed), so
        that the store's own writes, each synced, need no sweep until the lock is released."""
        with self._mutex:
            self._clean = False
            self._db()
            dsig = self._dir_sig()
            if dsig != self._meta("dir"):
                self._sweep(dsig)
                dsig = self._dir_sig()
            self._clean = dsig == self._meta("dir", checked=True)  # as this connection last read or wrote it

    def end(self, ok: bool) -> None:
        """The store releases its lock: when every write it made was synced (``ok``) and the
        catalog was in step before, the directory's new mtime is one it is in step with."""
        with self._mutex:
            if self._clean and ok and self._con is not None:
                dsig, usig = self._dir_sig(), self._usage_sig()
                if dsig != self._meta("dir") or usig != self._meta("usage", checked=True):  # else recorded by ``sync``
                    with self._write():
                        self._in_step(dsig, time.time_ns())
                        self._set_meta("usage", usig)
            self._clean = False

    def sync(self, ids: Sequence[str], written: Memory | None = None, *, indexed: bool = False) -> tuple[int, int]:
        """Re-read the files of ``ids`` (written or removed by the caller, who holds the store lock).

        ``written`` is the memory the caller has just written as the one id, already redacted
        and read back: only its file's stat is taken.  ``indexed``: ``MEMORY.md`` was written with
        it already (``index_written`` in the same transaction).  When the catalog was in step as
        the lock was taken, the directory's generation is recorded too: ``end`` then has nothing
        to write unless the directory changed again (one transaction for an ``add``).  Returns
        (``seq()``, ``used_seq()``) as this transaction left them."""
        with self._mutex:
            self._db()
            if written is not None:
                st = os.stat(f"{self.dir}{os.sep}{written.id}.md")
                rows = [{"id": written.id, "checked_ns": time.time_ns(), "state": 1, "sig": sig_of(st),
                         "memory": written}]
            else:
                rows = [self._read(f"{i}.md") for i in ids]
            with self._write():
                self._write_rows(rows, recheck=False)
                if indexed:
                    self.index_written()
                if self._clean:
                    self._in_step(self._dir_sig(), time.time_ns())
                    self._set_meta("usage", self._usage_sig())
                return self._meta("seq") or 0, self._meta("used_seq") or 0

    def used(self, stamps: dict[str, float]) -> None:
        """Record use times (``.usage.json`` gets them at the store's next write)."""
        with self._mutex, self._write() as con:
            con.executemany("UPDATE files SET used_ts = ? WHERE id = ?", [(t, k) for k, t in stamps.items()])
            self._set_meta("usage_dirty", True)
            self._set_meta("used_seq", (self._meta("used_seq") or 0) + 1)

    def used_seq(self) -> int:
        """A number that grows whenever a use time is recorded (recency changed: ``MEMORY.md``'s choice may)."""
        with self._mutex:
            return self._meta("used_seq") or 0 if self.dir.is_dir() else 0

    def usage_dirty(self) -> bool:
        """Whether use times were recorded since ``.usage.json`` was last written."""
        with self._mutex:
            return bool(self._meta("usage_dirty"))

    def usage_flushed(self) -> None:
        with self._mutex:
            self._set_meta("usage_dirty", False)

    def numbers(self) -> tuple[int, int]:
        """(``seq()``, ``used_seq()``), read together."""
        with self._mutex:
            if not self.dir.is_dir():
                return 0, 0
            self._check_version()
            return self._meta("seq", checked=True) or 0, self._meta("used_seq", checked=True) or 0

    def seq(self) -> int:
        """The number of the latest change to any row (it grows with every write)."""
        with self._mutex:
            return self._meta("seq") or 0 if self.dir.is_dir() else 0

    def index_stale(self) -> bool:
        """Whether a memory changed since ``MEMORY.md`` was last written (``index_written``)."""
        with self._mutex:
            return (self._meta("seq") or 0) != self._meta("index_seq")

    def index_written(self) -> None:
        with self._mutex:
            self._set_meta("index_seq", self._meta("seq") or 0)

    def used_times(self) -> dict[str, float]:
        with self._mutex:
            return dict(self._db().execute("SELECT id, used_ts FROM files WHERE used_ts > 0 AND state >= 0"))

    # -- queries -------------------------------------------------------------------------
    def _rows(self, where: str, args: Sequence[Any] = (), tail: str = "") -> list[Memory]:
        with self._mutex:
            if not self.dir.is_dir():
                return []
            seen, seen_args = scope_clause(self.scopes)
            rows = self._db().execute(f"SELECT {COLS} FROM files WHERE {where}{seen} {tail}",
                                      (*args, *seen_args)).fetchall()
        return [memory_of(r) for r in rows]

    def memories(self) -> list[Memory]:
        """Every readable memory, in file-name order."""
        return sorted(self._rows("state = 1"), key=lambda m: m.id + ".md")

    def issues(self) -> list[Issue]:
        with self._mutex:
            if not self.dir.is_dir():
                return []
            rows = self._db().execute("SELECT id, line, message FROM files WHERE state = 0").fetchall()
        return [Issue(path=self.dir / f"{i}.md", line=line or 1, message=msg or "unreadable")
                for i, line, msg in sorted(rows, key=lambda r: r[0] + ".md")]

    def by_id(self, ids: Sequence[str]) -> dict[str, Memory]:
        if not ids:
            return {}
        marks = ", ".join("?" * len(ids))
        return {m.id: m for m in self._rows(f"state = 1 AND id IN ({marks})", ids)}

    def count(self, *, every: bool = False) -> int:
        """Live memories (readable, not superseded) this catalog's view sees (``every``: in the
        directory); counted again only after a change."""
        with self._mutex:
            if not self.dir.is_dir():
                return 0
            seq = self._meta("seq") or 0
            if self._count.get(every, (-1, 0))[0] != seq:
                seen, args = scope_clause(None if every else self.scopes)
                n = self._db().execute(f"SELECT count(*) FROM files WHERE state = 1 AND superseded = 0{seen}",
                                       args).fetchone()[0]
                self._count[every] = (seq, n)
            return self._count[every][1]

    def top(self, n: int, *, every: bool = False) -> tuple[list[Memory], dict[str, float]]:
        """The ``n`` most recent live memories (written or used) this catalog's view sees
        (``every``: in the directory) and their use times: what an index line needs (the body
        only where the description is empty, no ``extra``)."""
        with self._mutex:
            if not self.dir.is_dir():
                return [], {}
            seen, args = scope_clause(None if every else self.scopes)
            rows = self._db().execute(
                "SELECT id, name, description, type, CASE WHEN description = '' THEN body ELSE '' END,"
                f" created, updated, scope, used_ts FROM files WHERE state = 1 AND superseded = 0{seen}"
                " ORDER BY max(updated_ts, used_ts) DESC, created_ts DESC, id LIMIT ?", (*args, n)).fetchall()
        return ([Memory(id=i, name=nm, description=d, type=t, body=b, created=c, updated=u, scope=sc)
                 for i, nm, d, t, b, c, u, sc, _ in rows], {r[0]: r[-1] for r in rows if r[-1]})

    def search(self, query: str, limit: int) -> list[tuple[str, float]]:
        """(id, score) of the best live memories for ``query``, best first (``engine``; ties by id)."""
        return [(m.id, score) for m, score in self.search_memories(query, limit)]

    def search_memories(self, query: str, limit: int, *, checked: bool = False) -> list[tuple[Memory, float]]:
        """``search`` with each memory read in the same statement.  ``checked``: ``refresh`` has just
        read the data version (the ranking's statistics are read again when it changed)."""
        with self._mutex:
            if not (checked or os.path.isdir(self.dir)) or not query_words(query):  # (refresh saw the directory)
                return []
            con = self._db()
            if not checked:
                self._check_version()
            # The rows' sequence number: every write of a row (by any connection) changes it, and
            # nothing else changes what a ranking reads (a use time does not).
            key = self._meta("seq", checked=True) or 0
            if self._stats is None or self._stats[0] != key:
                self._stats = (key, self._engine.stats(con, self.scopes))
            ranked = self._engine.search(con, query, limit, self.scopes, self._stats[1], cols=COLS_F, key=key)
        rows = {row[2]: row for row in ranked}
        hits = boost([(row[2], row[0]) for row in ranked], {row[2]: row[1] for row in ranked}, query, limit)
        return [(memory_of(rows[mid][2:]), score) for mid, score in hits]

    def texts(self, ids: Sequence[str]) -> list[tuple[str, tuple[str, str, str]]]:
        """(id, (name, description, body)) of the live memories among ``ids`` (what a vector is made of)."""
        if not ids or not self.dir.is_dir():
            return []
        with self._mutex:
            rows = self._db().execute("SELECT id, name, description, body FROM files WHERE state = 1 AND superseded = 0"
                                      f" AND id IN ({', '.join('?' * len(ids))})", list(ids)).fetchall()
        return [(mid, (n, d, b)) for mid, n, d, b in rows]

    def changes(self, since: int) -> tuple[int, list[tuple[str, tuple[str, str, str] | None, bool]]]:
        """(sequence number now, rows changed after ``since``): (id, (name, description, body), True)
        for a live memory this catalog's view sees; (id, None, True) for a live one outside the
        view; (id, None, False) for one removed, superseded or unreadable.  ``since=0``: every live
        memory.  What a derived index (``embed.VectorIndex``) keeps in step with."""
        with self._mutex:
            if not self.dir.is_dir():
                return 0, []
            con = self._db()
            con.execute("BEGIN")
            try:
                seq = self._meta("seq") or 0
                rows = con.execute("SELECT id, state, superseded, scope, name, description, body FROM files"
                                   " WHERE seq > ?" + (" AND state = 1 AND superseded = 0" if since <= 0 else ""),
                                   (since,)).fetchall()
            finally:
                con.execute("COMMIT")
        seen = self.scopes
        out: list[tuple[str, tuple[str, str, str] | None, bool]] = []
        for mid, state, sup, sc, n, d, b in rows:
            live = state == 1 and not sup
            out.append((mid, (n, d, b) if live and (sc is None or seen is None or sc in seen) else None, live))
        return seq, out
