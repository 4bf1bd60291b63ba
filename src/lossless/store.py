"""The ``.lossless/`` store: where moved content lives, addressed by its hash.

Layout (relocatable with ``LOSSLESS_HOME``)::

    .lossless/
      artifacts/<24 hex>        exact bytes of everything moved out of a context
      sessions/<id>/transcript.jsonl
      memory/                   long-term memory (Markdown + MEMORY.md)

A handle is ``sha256:<first 24 hex of the SHA-256 of the content>``.  Writing
the same content twice gives the same handle and one file.  Writes are atomic
(a temporary file in the same directory, then ``os.replace``), so a reader never
sees a torn artifact and a crash leaves either nothing or the whole file.

Durability, as a group commit: a file reaches its name only after its bytes were
fsynced, and a ``put`` (or, inside ``ArtifactStore.batch()``, the end of the batch)
returns only after the directory holding the new names was fsynced too.  In a batch
each file is written and fsynced in the background as soon as it is put (a small pool of
threads: the writes and syncs overlap the work that follows and each other, so the file
system commits its journal a few times instead of once per file, and the caller's thread
only hashes); the batch's end waits for them, renames the files into place and fsyncs the
directory once.
``ContextManager.prepare`` makes each call one batch, so no handle reaches the caller
before it is on disk, and a first look at a long session costs a few journal commits,
not one per artifact.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import re
import stat
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from ._legacy import OLD_STORE_DIR, STORE_DIR, getenv, store_folder
from .errors import AmbiguousHandle, HandleNotFound, StoreError
from .markers import HANDLE_RE, as_handle, is_full

ENV_HOME = "LOSSLESS_HOME"
DIR_MODE = 0o700
"""Directories lossless creates in the store: only their owner may list or enter them."""
STALE_AFTER = 3600.0
"""Seconds after which a temporary file is stale even if a process with its writer's pid is alive (pid reuse)."""
SYNC_THREADS = 16
"""Files fsynced at once in the background (one pool per process).  Concurrent fsyncs of one file
system share its journal commits: on the CI machine's ext4, 50 files took 12–18 ms synced this
way against 165–200 ms one after the other, and more threads than this gained nothing."""

_TEMP = re.compile(r"\.(?P<name>.+?)(?:\.(?P<pid>\d+))?\.[A-Za-z0-9_]+\.tmp")


def home(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The store directory: the argument, else ``$LOSSLESS_HOME``, else the nearest ``.lossless``
    (``nearest_store_folder`` of the working directory)."""
    if explicit is not None:
        return Path(explicit)
    env = getenv(ENV_HOME)
    return Path(env) if env else nearest_store_folder(Path.cwd())


def nearest_store_folder(start: Path) -> Path:
    """``start/.lossless`` if it exists, else the nearest existing one in a folder above, else
    ``start/.lossless`` (created on first write).

    As git finds its repository, so a command run in a project's subfolder uses the project's
    store rather than starting a second one.  The walk stops at a project's root (a folder holding
    ``.git``), and never reaches the home directory or the file system's root from below: a store
    left in ``~`` does not capture every project under it."""
    start = Path(os.path.abspath(start))
    user_home = Path(os.path.expanduser("~"))
    for folder in (start, *start.parents):
        if folder != start and (folder == user_home or folder == folder.parent):
            break
        if (folder / STORE_DIR).is_dir() or (folder / OLD_STORE_DIR).is_dir():
            return store_folder(folder)
        if (folder / ".git").exists():
            break
    return store_folder(start)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half.

    The file is created 0600 (``mkstemp``).  Its temporary name, ``.<name>.<pid>.<random>.tmp``,
    carries the writer's pid so that ``sweep_temps`` can tell a crashed writer's leftover
    from a write in progress."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_temp(path: Path, data: bytes, *, sync: bool = False) -> Path:
    """``data`` in a new temporary file beside ``path`` (named as ``atomic_write`` names it),
    written (and fsynced with ``sync``) but not in place: ``sync_into_place`` finishes the job.

    Created as ``mkstemp`` creates (exclusive, 0600, no link followed, closed on exec), with a
    counter where it puts random letters: the pid already tells writers apart, and a name taken
    (a crashed writer's, its pid reused) is skipped."""
    head = f"{path.parent}{os.sep}.{path.name}.{os.getpid()}."
    while True:
        tmp = f"{head}{next(_TEMP_NUMBERS):x}.tmp"
        try:
            fd = os.open(tmp, _TEMP_FLAGS, 0o600)
        except FileExistsError:
            continue
        break
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink(Path(tmp))
        raise
    os.close(fd)
    return Path(tmp)


_TEMP_NUMBERS = itertools.count()
_TEMP_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
               | getattr(os, "O_BINARY", 0))


def start_sync(path: Path) -> Future[None]:
    """Begin fsyncing the file ``path`` in the background; the future says when it is done."""
    return _background(_fsync_path, path)


def start_write(path: Path, data: bytes) -> Future[Path | None]:
    """Begin writing ``data`` beside ``path`` and fsyncing it, in the background: the future gives the
    temporary file, synced (``sync_into_place`` puts it in place), or None when ``path`` already holds
    a file; it raises ``StoreError`` when that is a link or not a regular file, or the write fails."""
    return _background(_write_synced, path, data)


def _background(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():  # none yet, or inherited across a fork (its threads are not)
            _pool = (os.getpid(), ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix="lossless-sync"))
        return _pool[1].submit(fn, *args)


def _write_synced(path: Path, data: bytes) -> Path | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        try:
            return write_temp(path, data, sync=True)
        except OSError as exc:
            raise StoreError(f"cannot write artifact {path}: {exc.strerror or exc}") from None
    except OSError as exc:
        raise StoreError(f"cannot write artifact {path}: {exc.strerror or exc}") from None
    _check_artifact(path, st)
    return None


def _check_artifact(path: Path, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise StoreError(f"artifact {path} is a symlink; lossless does not follow links in its store, remove it")
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"artifact {path} is not a regular file; remove it")


_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()


def sync_into_place(moves: list[tuple[Path, Path]], directory: Path,
                    started: Mapping[Path, Future[Any]] | None = None) -> None:
    """Make each ``(temporary, final)`` pair durable under its final name: every temporary file
    fsynced (waiting for the syncs ``started`` earlier, doing the others now), each renamed into
    place, then ``directory`` fsynced once.  A crash at any point leaves each final name absent
    or holding its whole, synced content."""
    if not moves:
        return
    for tmp, _ in moves:
        future = started.get(tmp) if started else None
        if future is None:
            _fsync_path(tmp)
        else:
            future.result()
    for tmp, final in moves:
        os.replace(tmp, final)
    _fsync_path(directory)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def sweep_temps(directory: Path, *, stale_after: float = STALE_AFTER) -> list[Path]:
    """Remove the temporary files (``.<name>.*.tmp``) that crashed writers left in ``directory``.

    A temporary file is stale when the process named by the pid in its name is gone
    (the store is a local directory, so pids are this machine's), or when it is older
    than ``stale_after`` seconds whatever its pid says.  A write in progress — its
    writer alive, its file young — is never touched.  Returns what was removed."""
    removed: list[Path] = []
    now = time.time()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        m = _TEMP.fullmatch(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                continue
            pid = m["pid"]
            if now - st.st_mtime > stale_after or (pid is not None and not _alive(int(pid))):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue  # another opener swept it first
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    except (OverflowError, ValueError, OSError):
        return False
    return True


# -- staying inside the store ------------------------------------------------------
def _inside(root_real: str, path: Path) -> bool:
    real = os.path.realpath(path)
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def store_dir(root: Path, *parts: str, create: bool = True) -> Path:
    """``root/parts…``, each directory created 0700 where missing.

    The invariant protected: nothing under the store is reached through a symlink
    that leads out of it — each level is checked *before* it is created or entered,
    so a planted link is a ``StoreError`` naming it and nothing is written outside."""
    if root.exists() and not root.is_dir():
        raise StoreError(f"the store {root} is not a directory (pass --store DIR or set {ENV_HOME} to one)")
    try:
        if create:
            top = outermost_missing(root)
            root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            protect(root, top)
        root_real = os.path.realpath(root)
        path = root
        for part in parts:
            path = path / part
            if not _inside(root_real, path):
                raise StoreError(f"{path} is a symlink that leads out of the store {root}; remove it")
            if create:
                try:
                    path.mkdir(mode=DIR_MODE)
                except FileExistsError:
                    pass
            if path.exists() and not path.is_dir():
                raise StoreError(f"{path} is not a directory; move it out of the store {root}")
    except OSError as exc:
        raise StoreError(f"cannot use the store {root}: {exc.strerror or exc}"
                         + (f": {exc.filename}" if exc.filename else "")) from None
    return path


def outermost_missing(path: Path) -> Path | None:
    """The highest directory that creating ``path`` (with its parents) would make, if any."""
    return next((p for p in reversed((path, *path.parents)) if not p.exists()), None)


def protect(root: Path, made: Path | None) -> None:
    """Give a store folder ``root`` a ``.gitignore`` of ``*`` when lossless just made it (``made``:
    the outermost folder it made on the way) and it lies in a git working tree: transcripts hold
    tool outputs verbatim, secrets included, and a ``git add -A`` must not stage them."""
    if made is None or not any((p / ".git").exists() for p in made.absolute().parents):
        return
    try:
        fd = os.open(root / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        f.write("# made by lossless: its store holds transcripts and tool outputs verbatim\n*\n")


def open_inside(path: Path, flags: int, what: str, mode: int = 0o600) -> int:
    """A descriptor for the regular file ``path``, opened without following a symlink
    and without blocking on a FIFO; a one-line ``StoreError`` naming it otherwise."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags | nofollow | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.EMLINK and nofollow):
            raise StoreError(f"{what} {path} is a symlink; lossless does not follow links in its store, remove it") from None
        if isinstance(exc, FileNotFoundError):
            raise
        raise StoreError(f"cannot open {what} {path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StoreError(f"{what} {path} is not a regular file; remove it")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


_FILE_NAME = re.compile(r"[0-9a-f]{24}")
"""An artifact's file name: its handle's hex digits."""


def the_one(short: str, found: Iterable[str], where: str) -> str:
    """The one full handle in ``found`` (those that start with ``short``); ``HandleNotFound``
    when there is none, ``AmbiguousHandle`` naming each by its full handle when there are several."""
    found = sorted(found)
    if len(found) == 1:
        return found[0]
    if not found:
        raise HandleNotFound(f"no artifact {short} in {where}")
    raise AmbiguousHandle(f"{short} names {len(found)} artifacts in {where}: {', '.join(found[:8])}; "
                          f"recall the one you want by its full handle")


def handle_for(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class Staged:
    """An artifact written but not yet committed: its bytes (so the batch that wrote it can read
    it back) and, in the directory store, its temporary file, final path and background sync."""

    handle: str
    data: bytes
    tmp: Path | None = None
    path: Path | None = None
    synced: Future[Any] | None = None
    """The background sync of ``tmp``; or, with no ``tmp``, the background write and sync
    (``start_write``) whose result is the temporary file (None: the artifact was already stored)."""


class ArtifactStore:
    """Content-addressed artifacts. ``put`` returns a handle; ``get`` returns the exact text.

    Opening a store sweeps the temporary files a crashed writer left in ``artifacts/``
    (``sweep_temps``).  Artifacts are files 0600 in directories 0700: they hold exact
    originals, so only their owner reads them.  No symlink under the store is followed.

    ``put`` returns once the artifact is durable.  Inside ``with store.batch():`` it returns at
    once and the batch's end makes every artifact of the batch durable together (see the module
    docstring); a subclass stores elsewhere by overriding ``_stage`` and ``_commit``."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = home(root)
        self.dir = self.root / "artifacts"
        self.swept: list[Path] = []
        self._local = threading.local()
        if _inside(os.path.realpath(self.root), self.dir):
            self.swept = sweep_temps(self.dir)

    def _path(self, handle: str) -> Path:
        return self.dir / handle.split(":", 1)[1]

    # -- writing: stage, then commit ----------------------------------------------
    def put(self, content: str | bytes) -> str:
        data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
        handle = handle_for(data)
        pending = self._pending()
        if pending is not None and handle in pending:
            return handle
        staged = self._stage(handle, data)
        if staged is None:
            return handle  # already stored
        if pending is not None:
            pending[handle] = staged
        else:
            self._commit([staged])
        return handle

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group the ``put`` calls made inside (by this thread) into one commit at the end.

        The invariant: nothing a ``put`` in the batch returned is handed on before the batch
        ends, so every handle is durable by the time anyone outside can hold it.  Reads inside
        the batch see its artifacts.  A batch inside a batch joins the outer one; a batch left
        by an exception commits nothing and removes its temporary files."""
        if self._pending() is not None:
            yield
            return
        pending: dict[str, Staged] = {}
        self._local.pending = pending
        try:
            yield
        except BaseException:
            for staged in pending.values():
                tmp = staged.tmp
                if tmp is None and staged.synced is not None:  # its write may still be under way: wait for it
                    try:
                        tmp = staged.synced.result()
                    except Exception:
                        tmp = None
                if tmp is not None:
                    _unlink(tmp)
            raise
        finally:
            self._local.pending = None
        self._commit(list(pending.values()))

    def _pending(self) -> dict[str, Staged] | None:
        pending: dict[str, Staged] | None = getattr(self._local, "pending", None)
        return pending

    def _staged_data(self, handle: str) -> bytes | None:
        pending = self._pending()
        staged = pending.get(handle) if pending is not None else None
        return staged.data if staged is not None else None

    def _stage(self, handle: str, data: bytes) -> Staged | None:
        """Write ``data`` to a temporary file beside its final path; None if the artifact exists."""
        if not self._pending():  # checked once per batch: the rest of it writes where the first did
            store_dir(self.root, "artifacts")
        path = self._path(handle)
        if self._pending() is not None:
            # In a batch the file is looked for, written and synced in the background while the batch goes on.
            return Staged(handle, data, None, path, start_write(path, data))
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            try:
                tmp = write_temp(path, data)
            except OSError as exc:
                raise StoreError(f"cannot write artifact {path}: {exc.strerror or exc}") from None
            return Staged(handle, data, tmp, path)  # alone: the commit syncs it
        except OSError as exc:
            raise StoreError(f"cannot write artifact {path}: {exc.strerror or exc}") from None
        _check_artifact(path, st)
        return None

    def _commit(self, staged: list[Staged]) -> None:
        """Make the staged artifacts durable under their names (``sync_into_place``), once every
        background write is done (a failed one fails the commit, the others' files removed)."""
        moves: list[tuple[Path, Path]] = []
        started: dict[Path, Future[Any]] = {}
        failed: StoreError | None = None
        for s in staged:
            tmp, future = s.tmp, s.synced
            if tmp is None and future is not None:  # written and synced in the background
                try:
                    tmp = future.result()
                except StoreError as exc:
                    failed = failed or exc
                    continue
            if tmp is not None and s.path is not None:
                moves.append((tmp, s.path))
                if future is not None:
                    started[tmp] = future
        try:
            if failed is not None:
                raise failed
            sync_into_place(moves, self.dir, started)
        except (OSError, StoreError) as exc:
            for tmp, _ in moves:
                _unlink(tmp)
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"cannot write artifacts to {self.dir}: {exc.strerror or exc}") from None

    # -- reading ------------------------------------------------------------------
    def resolve(self, handle: str) -> str:
        """The full handle ``handle`` names: itself, or — for a short handle (a start of one, of
        at least 8 hex digits) — the one artifact of this store whose handle starts with it.

        Raises ``HandleNotFound`` when none does, ``AmbiguousHandle`` (naming each candidate by
        its full handle) when several do."""
        handle = as_handle(handle)
        if not HANDLE_RE.fullmatch(handle):
            raise HandleNotFound(f"{handle!r} is not a lossless handle (expected sha256: and 8 to 24 hex digits)")
        if is_full(handle):
            return handle
        pending = self._pending() or {}
        return the_one(handle, {h for h in pending if h.startswith(handle)} | set(self._starting_with(handle)),
                       self._label())

    def _label(self) -> str:
        return str(self.dir)

    def _starting_with(self, short: str) -> list[str]:
        """Full handles of the stored artifacts that start with ``short`` (one pass over the
        directory: a short handle is resolved on recall, not on any hot path)."""
        prefix = short.split(":", 1)[1]
        try:
            with os.scandir(self.dir) as entries:
                return ["sha256:" + e.name for e in entries
                        if e.name.startswith(prefix) and _FILE_NAME.fullmatch(e.name) and e.is_file(follow_symlinks=False)]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"cannot list {self.dir}: {exc.strerror or exc}") from None

    def get_bytes(self, handle: str) -> bytes:
        handle = self.resolve(handle)
        staged = self._staged_data(handle)
        if staged is not None:
            return staged
        store_dir(self.root, "artifacts", create=False)
        path = self._path(handle)
        try:
            fd = open_inside(path, os.O_RDONLY, "artifact")
        except (FileNotFoundError, NotADirectoryError):
            raise HandleNotFound(
                f"no artifact {handle} in {self.dir} (pass --store DIR or set {ENV_HOME} to the store that made it)"
            ) from None
        try:
            with os.fdopen(fd, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise StoreError(f"cannot read artifact {path}: {exc.strerror or exc}") from None
        if handle_for(data) != handle:
            raise StoreError(f"artifact {path} does not hold the content of {handle} (changed after it was written)")
        return data

    def get(self, handle: str) -> str:
        data = self.get_bytes(handle)
        try:
            return data.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as e:
            raise StoreError(f"artifact {handle} is bytes, not UTF-8 text (byte {e.start}); read it with get_bytes") from None

    def size(self, handle: str) -> int:
        """Bytes of the artifact behind ``handle`` (without reading it)."""
        handle = self.resolve(handle)
        staged = self._staged_data(handle)
        if staged is not None:
            return len(staged)
        try:
            return (self.dir / handle.split(":", 1)[1]).stat().st_size
        except (OSError, IndexError):
            raise HandleNotFound(f"no artifact {handle} in {self.dir}") from None

    def __contains__(self, handle: str) -> bool:
        if HANDLE_RE.fullmatch(handle) is None:
            return False
        if not is_full(handle):
            try:
                handle = self.resolve(handle)
            except HandleNotFound:
                return False
        return self._staged_data(handle) is not None or self._holds(handle)

    def _holds(self, handle: str) -> bool:
        """Whether the artifact behind full ``handle`` is stored (committed)."""
        try:
            return stat.S_ISREG(os.lstat(self._path(handle)).st_mode)
        except OSError:
            return False


def recall(handle: str, store: str | os.PathLike[str] | None = None) -> str:
    """The exact original content behind a handle from any lossless marker."""
    return ArtifactStore(store).get(handle)
