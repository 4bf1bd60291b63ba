"""The ``.recollect/`` store: where moved content lives, addressed by its hash.

Layout (relocatable with ``RECOLLECT_HOME``)::

    .recollect/
      artifacts/<24 hex>        exact bytes of everything moved out of a context
      sessions/<id>/transcript.jsonl
      memory/                   long-term memory (Markdown + MEMORY.md)

A handle is ``sha256:<first 24 hex of the SHA-256 of the content>``.  Writing
the same content twice gives the same handle and one file.  Writes are atomic
(a temporary file in the same directory, then ``os.replace``), so a reader never
sees a torn artifact and a crash leaves either nothing or the whole file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from .errors import HandleNotFound, StoreError
from .markers import HANDLE_RE

ENV_HOME = "RECOLLECT_HOME"


def home(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The store directory: the argument, else ``$RECOLLECT_HOME``, else ``./.recollect``."""
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get(ENV_HOME)
    return Path(env) if env else Path.cwd() / ".recollect"


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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


def handle_for(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()[:24]


class ArtifactStore:
    """Content-addressed artifacts. ``put`` returns a handle; ``get`` returns the exact text."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = home(root)
        self.dir = self.root / "artifacts"

    def put(self, content: str | bytes) -> str:
        data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
        handle = handle_for(data)
        path = self.dir / handle.split(":", 1)[1]
        if not path.exists():
            try:
                atomic_write(path, data)
            except OSError as exc:
                raise StoreError(f"cannot write artifact {path}: {exc.strerror or exc}") from None
        return handle

    def get_bytes(self, handle: str) -> bytes:
        handle = handle.strip()
        if not HANDLE_RE.fullmatch(handle):
            raise HandleNotFound(f"{handle!r} is not a recollect handle (expected sha256: and 24 hex digits)")
        path = self.dir / handle.split(":", 1)[1]
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise HandleNotFound(
                f"no artifact {handle} in {self.dir} (pass --store DIR or set {ENV_HOME} to the store that made it)"
            ) from None

    def get(self, handle: str) -> str:
        return self.get_bytes(handle).decode("utf-8", "surrogatepass")

    def size(self, handle: str) -> int:
        """Bytes of the artifact behind ``handle`` (without reading it)."""
        try:
            return (self.dir / handle.split(":", 1)[1]).stat().st_size
        except (OSError, IndexError):
            raise HandleNotFound(f"no artifact {handle} in {self.dir}") from None

    def __contains__(self, handle: str) -> bool:
        return HANDLE_RE.fullmatch(handle) is not None and (self.dir / handle.split(":", 1)[1]).exists()


def recall(handle: str, store: str | os.PathLike[str] | None = None) -> str:
    """The exact original content behind a handle from any recollect marker."""
    return ArtifactStore(store).get(handle)
