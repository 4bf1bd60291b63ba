"""File access inside the memory directory: owner-only, atomic, never through a planted link.

Use::

    ensure_dir(store.dir / ".trash")                 # 0700; a symbolic link there is an error
    write_atomic(store.dir / "MEMORY.md", data)      # temp file (0600) + os.replace
    append_line(store.dir / ".changes.jsonl", line)  # 0600, O_APPEND, O_NOFOLLOW
    read_text(store.dir / "MEMORY.md")               # O_NOFOLLOW

Invariants: every file these functions create is 0600 and every directory 0700;
none of them reads or writes through a symbolic link (``O_NOFOLLOW`` on the last
component, ``lstat`` on directories), and a link where one of them is asked to
work is a one-line ``MemoryError_`` naming the path, with nothing written.
``os.replace`` renames over a link rather than through it, so an atomic write
could never land outside; it is refused anyway, so the planted link is noticed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

try:
    import fcntl
except ImportError:  # Windows: ``filelock`` locks there
    fcntl = None  # type: ignore[assignment]

from ..errors import MemoryError_
from ..store import outermost_missing, protect
from .model import MemoryFileError

MAX_FILE = 1 << 20
"""Bytes of one memory file: a larger one is an ``Issue``, and is never written."""
FILE_MODE = 0o600
DIR_MODE = 0o700
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def link_error(path: Path) -> MemoryError_:
    return MemoryError_(f"{path} is a symbolic link: lossless never follows links inside the memory directory "
                        "(remove the link; nothing was written)")


def refuse_link(path: Path) -> None:
    """Raise ``MemoryError_`` when ``path`` is a symbolic link (dangling or not)."""
    if path.is_symlink():
        raise link_error(path)


def ensure_root(path: Path) -> None:
    """Make the store directory itself (created 0700, with its parents).  It may be a
    link the user set up (a memory directory kept elsewhere); links *inside* it may not.
    Made inside a git working tree, the store's folder (or this one) gets a ``.gitignore`` (``store.protect``)."""
    top = outermost_missing(path)
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    inside_store = path.name == "memory" and path.parent.name == ".lossless"  # the default layout
    protect(path.parent if inside_store else path, top)


def ensure_dir(path: Path) -> None:
    """Make ``path`` a real directory (created 0700). A link or a file there is an error."""
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        pass
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        raise link_error(path)
    if not stat.S_ISDIR(mode):
        raise MemoryError_(f"{path} is not a directory: move that file away")


def _open(path: Path, flags: int, mode: int = FILE_MODE) -> int:
    try:
        return os.open(path, flags | _NOFOLLOW | _CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.EEXIST and path.is_symlink()):
            raise link_error(path) from None
        raise


def read_bytes(path: Path, limit: int | None = None) -> bytes:
    """The bytes of ``path`` (``FileNotFoundError`` when absent), at most ``limit`` of them."""
    fd = _open(path, os.O_RDONLY)
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        os.close(fd)
        raise
    if not regular:  # checked before ``fdopen``, which refuses a directory with an error naming the descriptor
        os.close(fd)
        raise MemoryError_(f"{path} is not a regular file: move it away")
    with os.fdopen(fd, "rb") as f:
        return f.read() if limit is None else f.read(limit)


def read_text(path: Path) -> str:
    """The UTF-8 text of ``path``, never through a link."""
    return read_bytes(path).decode("utf-8")


def write_atomic(path: Path, data: bytes, *, allow_link: bool = False, durable: bool = True) -> None:
    """Replace ``path`` by ``data``: a reader sees the old file or the new one.

    The temporary file is created 0600 beside ``path`` with a leading dot and a
    ``.tmp`` suffix, so a crash leaves nothing that reads as a memory.
    ``allow_link`` is for a memory file already checked to resolve inside the store.
    ``durable=False`` skips the ``fsync``, for a file derived from the others
    (``MEMORY.md``): after a power loss it may be empty, and is rebuilt.  It also swaps the
    files rather than renaming over the old one where it can (``_exchange``: no flush).
    """
    if not allow_link:
        refuse_link(path)
    if durable:
        _durable_write(path, data)
        return
    place(stage(path, data), path)


def _durable_write(path: Path, data: bytes) -> None:
    """``store.atomic_write`` for a file in an existing directory, in fewer steps (an ``add()`` is
    about this write: RESULTS §8): the temporary file (named as that one names it, so a crash's
    leftover is swept) written, synced, renamed into place."""
    where = os.fspath(path)
    folder, name = os.path.split(where)
    for _ in range(100):
        tmp = os.path.join(folder, f".{name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, FILE_MODE)
        except FileExistsError:
            continue
        break
    else:  # pragma: no cover - 48 random bits taken a hundred times
        raise FileExistsError(errno.EEXIST, "no free temporary name", where)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, where)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def stage(path: Path, data: bytes) -> str:
    """``data`` in a new temporary file beside ``path`` (named as ``write_atomic`` names it: swept
    after a crash), not synced, not yet in place: ``place`` puts it there.  A caller that writes a
    derived file after a durable one stages it first: creating a file just after an ``fsync`` costs
    several times what it costs before one (RESULTS §8)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def place(tmp: str, path: Path) -> None:
    """Put the file ``stage`` wrote in place of ``path`` (a reader sees the old file or the new one)."""
    try:
        if not _exchange(tmp, path):
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)  # after an exchange: the old file


def unstage(tmp: str) -> None:
    """Remove a staged file that will not be placed."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)


_RENAME_EXCHANGE = 2
_renameat2: list[Any] = []
"""libc's ``renameat2`` once looked up (None where there is none)."""


def _exchange(tmp: str, path: Path) -> bool:
    """Swap the files ``tmp`` and ``path`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``): a reader
    sees the old file or the new one, as with ``os.replace``.  False where that is not possible (no
    such call, a file system without it, ``path`` missing): the caller replaces.

    Why not ``os.replace``: ext4 flushes a file's data when it is renamed over an existing one
    (``auto_da_alloc``, so that an application that skipped the ``fsync`` does not lose it); on a busy
    disk that costs what an ``fsync`` costs — as much as the memory file's own durable write.  A file
    derived from the others needs no such flush, and an exchange makes none (RESULTS §8)."""
    if sys.platform != "linux":
        return False
    if not _renameat2:
        import ctypes

        try:
            _renameat2.append(getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None))
        except OSError:
            _renameat2.append(None)
    call = _renameat2[0]
    try:
        if call is None or not stat.S_ISREG(os.lstat(path).st_mode):  # a directory there is never swapped away
            return False
    except FileNotFoundError:
        return False
    at_cwd = -100
    return bool(call(at_cwd, os.fsencode(tmp), at_cwd, os.fsencode(path), _RENAME_EXCHANGE) == 0)


def append_line(path: Path, line: bytes) -> None:
    """Append one line to ``path`` in one ``write()`` (created 0600).

    A line torn by an earlier crash is closed first, so that it cannot swallow this
    one.  Callers hold the store lock: two appends never interleave.
    """
    fd = _open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    with os.fdopen(fd, "rb+", buffering=0) as f:
        with contextlib.suppress(PermissionError):  # a log an older version left 0644 becomes owner-only
            os.fchmod(f.fileno(), FILE_MODE)
        end = f.seek(0, os.SEEK_END)
        if end:
            f.seek(end - 1)
            if f.read(1) != b"\n":
                line = b"\n" + line
        f.write(line)


class StoreLock:
    """The store-wide lock on ``path`` (non-reentrant; the store counts its own depth).

    On POSIX it is ``flock`` on the file, which is what ``filelock`` takes there too, so a process
    holding one excludes a process asking for the other.  Taken directly because ``filelock``'s
    bookkeeping cost about 0.1 ms an ``add()`` (a quarter of a durable write on a quiet disk: RESULTS
    §8); elsewhere ``filelock`` takes it.  ``acquire`` raises ``filelock.Timeout`` after ``timeout``
    seconds, ``OSError`` when the file cannot be opened (a link there: ``MemoryError_``)."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None
        self._other = FileLock(str(path), timeout=timeout, mode=FILE_MODE) if fcntl is None else None

    def acquire(self) -> None:
        if self._other is not None:
            self._other.acquire()
            return
        deadline = time.monotonic() + self.timeout
        pause = 0.001
        while True:
            fd = _open(self.path, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() >= deadline:
                    raise Timeout(str(self.path)) from None
                time.sleep(pause)
                pause = min(0.05, pause * 2)
                continue
            except BaseException:
                os.close(fd)
                raise
            if os.fstat(fd).st_nlink:  # else the file was removed while we waited: lock the one there now
                self._fd = fd
                return
            os.close(fd)

    def release(self) -> None:
        if self._other is not None:
            self._other.release()
            return
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor of the open file releases its flock


def create_lock_file(path: Path) -> None:
    """Create ``path`` (0600) for ``filelock`` if missing; a link there is an error."""
    os.close(_open(path, os.O_RDWR | os.O_CREAT))


def read_memory(path: Path) -> str:
    """The text of a memory file, refused (``MemoryFileError``) over ``MAX_FILE`` bytes or not UTF-8."""
    with open(path, "rb") as f:  # a memory file may be a link that resolves inside the store
        data = f.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise MemoryFileError(path, 1, f"file is over the {MAX_FILE}-byte limit of a memory file: "
                                       "split it or move it out of the memory directory")
    try:  # newlines as text mode reads them: a file saved with CRLF edits like any other
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise MemoryFileError(path, line, f"not UTF-8 text (byte {exc.start}, column {column}): "
                                          "re-save it as UTF-8") from None
