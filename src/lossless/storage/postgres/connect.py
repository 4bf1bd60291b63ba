"""Connections to the PostgreSQL store, and the one-line errors they fail with.

``Database(url)`` holds one connection (autocommit; opened on first use, reopened after the
server dropped it) behind a reentrant lock, so the threads of one process (the proxy's
conversations) share it one statement or one transaction at a time.  A write happens in
``db.transaction()``: it is reported done only when that block returned, that is, when the
server committed it.

Every failure to reach or use the server is a ``StoreError`` of one line naming the server as
``host:port/db`` — never the password, never a traceback (``describe``).
"""

from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager
from typing import Any, Iterator

from ...errors import StoreError

CONNECT_TIMEOUT = 10
"""Seconds to wait for the server before a connection attempt fails."""


def server_label(url: str) -> str:
    """``host:port/db`` of a connection URL: what errors name (the password never appears)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
    except Exception:
        return "the PostgreSQL server (unparsable URL)"
    host = str(info.get("host") or "localhost")
    return f"{host}:{info.get('port') or 5432}/{info.get('dbname') or info.get('user') or 'postgres'}"


def describe(exc: BaseException, url: str, doing: str) -> StoreError:
    """A ``StoreError`` of one line for a psycopg failure while ``doing`` something."""
    from psycopg.conninfo import conninfo_to_dict

    text = " ".join(str(exc).split()) or type(exc).__name__
    try:
        password = conninfo_to_dict(url).get("password")
    except Exception:
        password = None
    if password:
        text = text.replace(str(password), "***")
    return StoreError(f"PostgreSQL store {server_label(url)}: cannot {doing}: {text}")


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreError("a postgresql:// store needs psycopg: pip install 'lossless[postgres]'") from None
    return psycopg


class Database:
    """One connection to the store's database, shared by the threads of a process."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.label = server_label(url)
        self._conn: Any = None
        self._lock = threading.RLock()
        self._depth = 0

    def connect(self, *, autocommit: bool = True) -> Any:
        """A new connection (the caller closes it); ``StoreError`` naming the server when refused."""
        psycopg = _import_psycopg()
        try:
            return psycopg.connect(self.url, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT)
        except psycopg.Error as exc:
            raise describe(exc, self.url, "connect") from None

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed or self._conn.broken:
            if self._conn is not None:
                self._conn.close()
            self._conn = self.connect()
            weakref.finalize(self, self._conn.close)  # closed when the store goes, not left to psycopg's warning
        return self._conn

    @contextmanager
    def cursor(self, doing: str = "read") -> Iterator[Any]:
        """A cursor on the shared connection: inside ``transaction()`` it is part of it,
        outside each statement commits by itself."""
        psycopg = _import_psycopg()
        with self._lock:
            try:
                conn = self._connection()
                with conn.cursor() as cur:
                    yield cur
            except psycopg.Error as exc:
                raise describe(exc, self.url, doing) from None

    @contextmanager
    def transaction(self, doing: str = "write", *, lock_key: int | None = None) -> Iterator[Any]:
        """A cursor in one transaction (reentrant: an inner block joins the outer one).

        With ``lock_key`` the transaction first takes that advisory lock, so every process
        on every machine doing the same read-modify-write waits its turn; the lock goes
        with the transaction.  Nothing in the block is durable until the outermost block
        returned: an error, or a server gone before the commit, raises and keeps nothing."""
        psycopg = _import_psycopg()
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    with self._conn.cursor() as cur:
                        if lock_key is not None:  # taken again (it stacks): an outer block may not hold it
                            cur.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
                        yield cur
                finally:
                    self._depth -= 1
                return
            try:
                conn = self._connection()
                with conn.transaction():
                    self._depth = 1
                    try:
                        with conn.cursor() as cur:
                            if lock_key is not None:
                                cur.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
                            yield cur
                    finally:
                        self._depth = 0
            except psycopg.Error as exc:
                raise describe(exc, self.url, doing) from None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
