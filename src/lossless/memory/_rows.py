"""The catalog's rows: its schema, one memory file read into a row, rows written.

Pure functions over a ``sqlite3`` connection; ``catalog.Catalog`` decides when.
A row holds a file's stat (``sig``: mtime, size, inode), when it was read, and
either the memory (redacted: nothing that reaches the index is a secret, even
from a file edited by hand) or the ``Issue`` that kept it from being read.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat as stat_
import time
from datetime import date, datetime
from pathlib import Path
from typing import Any, Iterable, Sequence

from ._fs import read_memory
from . import engine
from .lexical import mentions_time
from .model import Memory, MemoryFileError, parse_memory, parse_time
from .redact import redact, redact_mapping

SCHEMA = 4
"""Version 2 added ``scope``, 3 the ranking index (``engine``) and ``recheck_ns``, 4 words of every
script in it (``lexical.words``: they were ASCII only); a catalog of
another version is dropped and rebuilt from the files."""
RACY_NS = 2_000_000_000
"""A file read within this time of its mtime is read again once it has passed (a second
write in the same clock tick can keep the mtime), on a file system that keeps whole seconds."""
FINE_RACY_NS = 100_000_000
"""The same on a file system that keeps fractions of a second."""
COLS = ("id, state, name, description, type, body, created, updated, extra, line, message, "
         "max(updated_ts, used_ts), scope")
COLS_F = "f.id, f.state, f.name, f.description, f.type, f.body, f.created, f.updated, f.extra, NULL, NULL, NULL, f.scope"
"""What ``memory_of`` reads of ``COLS``, from ``files f`` (in a join): a search's results."""


def memory_doc(m: Memory) -> tuple[str, str, str, str]:
    """The fields a memory is ranked by: name (with its id), description, body, context.

    ``context`` (an optional frontmatter key) is text around the memory that is not
    part of it — for a memory taken from a dialog turn, the neighbouring turns."""
    context = m.extra.get("context")
    return (m.name.replace("-", " ") + " " + m.id.replace("-", " "), m.description, m.body,
            context if isinstance(context, str) else "")


def _enc(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return {"$yaml-timestamp": value.isoformat(), "$datetime": isinstance(value, datetime)}
    raise TypeError(f"not JSON: {type(value).__name__}")


def _dec(obj: dict[str, Any]) -> Any:
    if "$yaml-timestamp" in obj and len(obj) == 2:
        kind = datetime if obj["$datetime"] else date
        return kind.fromisoformat(obj["$yaml-timestamp"])
    return obj


def sig_of(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def create_schema(con: sqlite3.Connection) -> None:
    """Create the tables (dropping an older schema's: the catalog is a cache)."""
    if con.execute("PRAGMA user_version").fetchone()[0] != SCHEMA:
        con.execute("BEGIN IMMEDIATE")
        for table in ("files", "meta", "fts", *engine.TABLES):
            con.execute(f"DROP TABLE IF EXISTS {table}")
        con.execute(
            "CREATE TABLE files(rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, seq INTEGER NOT NULL,"
            " state INTEGER NOT NULL, mtime_ns INTEGER, size INTEGER, ino INTEGER, checked_ns INTEGER,"
            " recheck_ns INTEGER, name TEXT, description TEXT, type TEXT, body TEXT, created TEXT, updated TEXT,"
            " extra TEXT, updated_ts REAL, created_ts REAL, used_ts REAL NOT NULL DEFAULT 0, superseded INTEGER,"
            " timed INTEGER, line INTEGER, message TEXT, scope TEXT, sc INTEGER, dl REAL, fwd BLOB)")
        con.execute("CREATE INDEX files_seq ON files(seq)")
        con.execute("CREATE INDEX files_recheck ON files(recheck_ns) WHERE recheck_ns IS NOT NULL")
        con.execute("CREATE INDEX files_recency ON files(max(updated_ts, used_ts) DESC, created_ts DESC, id)"
                    " WHERE state = 1 AND superseded = 0")
        con.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value)")
        for statement in engine.SCHEMA:
            con.execute(statement)
        con.execute(f"PRAGMA user_version={SCHEMA}")
        con.execute("COMMIT")


def read_row(directory: Path, name: str) -> dict[str, Any]:
    """One file as a row (its stat taken before it is read)."""
    path = directory / name
    stem = name[:-3]
    row: dict[str, Any] = {"id": stem, "checked_ns": time.time_ns()}
    try:
        st = os.lstat(path)
        if stat_.S_ISLNK(st.st_mode):
            if path.resolve().parent != directory.resolve():
                return {**row, "state": 0, "sig": None, "line": 1, "message":
                        f"symbolic link to {path.resolve()}, outside the memory directory: not read "
                        "(move the file into the directory)"}
            st = os.stat(path)
        row["sig"] = sig_of(st)
        text = read_memory(path)
        m = parse_memory(text, path)
    except FileNotFoundError:
        return {**row, "state": -1, "sig": None}
    except MemoryFileError as exc:
        return {**row, "state": 0, "line": exc.line, "message": exc.message}
    except (OSError, UnicodeDecodeError) as exc:
        return {**row, "state": 0, "line": 1, "message": f"unreadable: {exc}"}
    # One pass over the file finds what a pass per field would (each value is there with
    # its key); escapes in the frontmatter could hide a key from it, so they get the slow path.
    if "\\" in text.split("\n---", 1)[0] or redact(text) != text:
        m = m.with_changes(name=redact(m.name), description=redact(m.description), body=redact(m.body),
                           extra=redact_mapping(m.extra))
    return {**row, "state": 1, "memory": m}


def write_rows(con: sqlite3.Connection, rows: Iterable[dict[str, Any]], *, seq: int, index: engine.Engine,
               recheck: Path | None) -> int:
    """Upsert ``rows`` (from ``read_row``) in the open transaction, numbering them from ``seq + 1``, and
    keep the ranking index (``engine``) in step: a live memory is indexed, any other row is not.
    Returns the last number.  With ``recheck`` (the directory), a row whose file changed since it
    was read is skipped: a writer's own row wins over a sweep's."""
    for r in rows:
        if recheck is not None and r["state"] >= 0 and r.get("sig") is not None:
            try:
                if list(sig_of(os.stat(recheck / f"{r['id']}.md"))) != list(r["sig"]):
                    continue
            except FileNotFoundError:
                continue
        seq += 1
        old = con.execute("SELECT rid, sc, dl, fwd FROM files WHERE id = ?", (r["id"],)).fetchone()
        if old is not None and old[2] is not None:
            index.drop(con, old[0], engine.Indexed(sc=old[1], dl=old[2], fwd=old[3]))
        if r["state"] < 0:
            con.execute("UPDATE files SET state = -1, seq = ?, body = NULL, extra = NULL, recheck_ns = NULL,"
                        " sc = NULL, dl = NULL, fwd = NULL WHERE id = ?", (seq, r["id"]))
            continue
        m: Memory | None = r.get("memory")
        sig = r.get("sig") or (None, None, None)
        doc = memory_doc(m) if m is not None else None
        terms = index.terms_of(con, m.scope, doc) if m is not None and doc is not None and not m.superseded else None
        values = (r["id"], seq, r["state"], *sig, r["checked_ns"], recheck_at(sig[0], r["checked_ns"]),
                  m and m.name, m and m.description, m and m.type, m and m.body, m and m.created,
                  m and m.updated, m and json.dumps(dict(m.extra), default=_enc, ensure_ascii=False),
                  m and parse_time(m.updated), m and parse_time(m.created), m and int(m.superseded),
                  doc and int(any(mentions_time(f) for f in doc[:3])), r.get("line"), r.get("message"),
                  m and m.scope, *(terms.entry if terms is not None else (None, None, None)))
        rid = con.execute(
            "INSERT INTO files(id, seq, state, mtime_ns, size, ino, checked_ns, recheck_ns, name, description, type,"
            " body, created, updated, extra, updated_ts, created_ts, superseded, timed, line, message, scope, sc, dl, fwd)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT(id) DO UPDATE SET seq=excluded.seq, state=excluded.state, mtime_ns=excluded.mtime_ns,"
            " size=excluded.size, ino=excluded.ino, checked_ns=excluded.checked_ns, recheck_ns=excluded.recheck_ns,"
            " name=excluded.name, description=excluded.description, type=excluded.type, body=excluded.body,"
            " created=excluded.created, updated=excluded.updated, extra=excluded.extra,"
            " updated_ts=excluded.updated_ts, created_ts=excluded.created_ts, superseded=excluded.superseded,"
            " timed=excluded.timed, line=excluded.line, message=excluded.message, scope=excluded.scope,"
            " sc=excluded.sc, dl=excluded.dl, fwd=excluded.fwd RETURNING rid",
            values).fetchone()[0]
        if terms is not None:
            index.put(con, rid, None, (), terms)
    index.flush(con)
    return seq


def racy_window(mtime_ns: int) -> int:
    """How long after ``mtime_ns`` another write could leave the same mtime: ``RACY_NS`` on a file
    system that keeps whole seconds (FAT, HFS+, ext4 with small inodes), ``FINE_RACY_NS`` on one
    that keeps fractions (its mtime comes from the kernel's coarse clock, a tick of 1-10 ms)."""
    return RACY_NS if mtime_ns % 1_000_000_000 == 0 else FINE_RACY_NS


def recheck_at(mtime_ns: int | None, checked_ns: int | None) -> int | None:
    """When a file read at ``checked_ns`` must be read again (None: never — it was read after any
    write that could keep its mtime)."""
    if mtime_ns is None or checked_ns is None:
        return None
    due = mtime_ns + racy_window(mtime_ns)
    return due if checked_ns < due else None


def racy(mtime_ns: int | None, checked_ns: int | None, now: int) -> bool:
    """Read too soon after its last write (same clock tick possible), and that time has passed."""
    due = recheck_at(mtime_ns, checked_ns)
    return due is not None and due <= now


def _extra(text: str | None) -> dict[str, Any]:
    return json.loads(text, object_hook=_dec) if text and text != "{}" else {}


def doc_of(mid: str, name: str, desc: str, body: str, extra: str | None) -> tuple[str, str, str, str]:
    context = _extra(extra).get("context") if extra and '"context"' in extra else None
    return (name.replace("-", " ") + " " + mid.replace("-", " "), desc, body,
            context if isinstance(context, str) else "")


def memory_of(r: Sequence[Any]) -> Memory:
    mid, _state, name, desc, mtype, body, created, updated, extra = r[:9]
    return Memory(id=mid, name=name, description=desc, type=mtype, body=body, created=created, updated=updated,
                  extra=_extra(extra), scope=r[12])


def scope_clause(scopes: Sequence[str] | None, column: str = "scope") -> tuple[str, tuple[str, ...]]:
    """SQL (`` AND …``) and its arguments keeping the rows a view with ``scopes`` sees
    (unscoped rows always; ``scopes`` None: every row)."""
    if scopes is None:
        return "", ()
    return f" AND ({column} IS NULL OR {column} IN ({', '.join('?' * len(scopes))}))", tuple(scopes)
