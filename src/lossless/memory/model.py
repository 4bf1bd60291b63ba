"""One memory: a Markdown file with ordered YAML frontmatter.

::

    ---
    name: Use tabs
    description: The user indents with tabs, never spaces
    type: user
    scope: user
    created: '2026-05-09T07:35:25Z'
    updated: '2026-05-09T07:35:25Z'
    ---

    The user prefers tabs for indentation.

The memory's ``id`` is its file stem, always a slug (``[a-z0-9][a-z0-9-]*``), so
an id can never name a path outside the memory directory.  Frontmatter keys come
out in a fixed order (``name, description, type, scope, created, updated``, then
the unknown keys in the order they were read): unknown keys are kept, never dropped.
``scope`` is optional (see ``scope``): a memory without one is seen by every view.

``parse_memory`` raises ``MemoryError_`` naming the file and the line; the store
turns that into an ``Issue`` so one bad file never hides the others.
"""

from __future__ import annotations

import hashlib
import re
import time
import unicodedata
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Literal, Mapping, TypeAlias, get_args

from ..errors import MemoryError_
from .frontmatter import MAX_FRONTMATTER, FrontmatterError, dump_frontmatter, dump_simple, load_frontmatter
from .redact import redact
from .scope import parse_scope

MemoryType: TypeAlias = Literal["user", "feedback", "project", "reference"]
TYPES: tuple[MemoryType, ...] = get_args(MemoryType)
KNOWN_KEYS = ("name", "description", "type", "scope", "created", "updated")
SLUG_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,79}")
MAX_SLUG = 64
RESERVED_IDS = frozenset({"memory"})
"""``memory.md`` is ``MEMORY.md`` (the index) on case-insensitive file systems (macOS, Windows)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Memory:
    """A memory as stored. ``extra`` holds unknown frontmatter keys, in file order.

    ``superseded_by`` in ``extra`` marks a fact a newer memory replaced: it stays on
    disk (nothing is silently erased) but is left out of the index and retrieval.
    """

    id: str
    name: str
    description: str
    type: MemoryType
    body: str
    created: str
    updated: str
    extra: Mapping[str, Any] = field(default_factory=dict)
    scope: str | None = None
    """``user``, ``project:<name>``, ``agent:<name>``, or None (unscoped: every view sees it)."""

    @property
    def superseded(self) -> bool:
        return bool(self.extra.get("superseded_by"))

    @property
    def filename(self) -> str:
        return f"{self.id}.md"

    def with_changes(self, **changes: Any) -> Memory:
        return replace(self, **changes)


class MemoryFileError(MemoryError_):
    """A memory file that does not parse; ``path`` and ``line`` locate the problem."""

    def __init__(self, path: Path, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line
        self.message = message


class MemoryExists(MemoryError_):
    """A create that found the id taken (by a racing writer, or long ago); ``path`` is the file."""

    def __init__(self, memory_id: str, path: Path) -> None:
        super().__init__(f"memory {memory_id!r} already exists ({path}): edit it "
                         f"(`lossless memory edit {memory_id}`) or choose another name")
        self.memory_id = memory_id
        self.path = path


@dataclass(frozen=True, slots=True, kw_only=True)
class Issue:
    """A memory file that could not be read: reported, never fatal to the others."""

    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def now_iso(t: float | None = None) -> str:
    """UTC timestamp with seconds, the format of ``created``/``updated``."""
    t = time.time() if t is None else t
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str) -> float:
    """Seconds since the epoch for a ``created``/``updated`` value (0.0 when unreadable)."""
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def slugify(name: str) -> str:
    """A file-safe id for ``name``: lowercase ASCII letters, digits and hyphens (``note-`` and a
    digest of the name when it has letters but none with an ASCII form).

    Separators (``/``, ``\\``, ``.``, spaces) become hyphens, so the result can never
    climb out of the memory directory.  Secrets are redacted first, so a key pasted
    into a name never becomes a file name.  A reserved id gets ``-note`` appended.
    Raises ``MemoryError_`` when nothing is left.
    """
    clean = redact(name)
    text = unicodedata.normalize("NFKD", clean).encode("ascii", "ignore").decode("ascii").lower()
    slug = re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:MAX_SLUG].strip("-")
    if not slug and any(ch.isalnum() for ch in clean):
        # A name in a script with no ASCII form (Cyrillic, Greek, CJK…): the id is a stable digest of
        # it, the name itself stays as written in the memory.
        slug = "note-" + hashlib.blake2b(unicodedata.normalize("NFC", clean).encode(), digest_size=4).hexdigest()
    if not slug:
        raise MemoryError_(f"cannot make a file name from {name!r}: use letters or digits")
    return f"{slug}-note" if slug in RESERVED_IDS else slug


def check_id(memory_id: str) -> str:
    """``memory_id`` if it is a valid id, else ``MemoryError_`` (rejects traversal)."""
    if not isinstance(memory_id, str) or not SLUG_RE.fullmatch(memory_id):
        raise MemoryError_(
            f"invalid memory id {memory_id!r}: ids are lowercase letters, digits and hyphens "
            f"(no '/', '..' or dots); try {_suggest(memory_id)!r}"
        )
    return memory_id


def safe_id(memory_id: str) -> str:
    """``memory_id``, or its redacted slug when it looks like a credential (a file name
    is written to disk like any other text)."""
    return slugify(memory_id) if redact(memory_id) != memory_id else memory_id


def _suggest(memory_id: object) -> str:
    try:
        return slugify(str(memory_id).removesuffix(".md").rsplit("/", 1)[-1])
    except MemoryError_:
        return "my-memory"


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def parse_memory(text: str, path: Path, *, memory_id: str | None = None) -> Memory:
    """Read one memory file. Raises ``MemoryError_`` with ``path:line`` on bad input.

    The id is the file's stem unless ``memory_id`` is given (a file read from
    elsewhere, e.g. ``lossless memory add notes.md``, is still named in errors).
    Frontmatter is read by ``frontmatter.load_frontmatter``: data only, bounded.
    """
    memory_id = path.stem if memory_id is None else memory_id
    text = text.removeprefix("\ufeff")  # a byte-order mark from a Windows editor is not content
    if not SLUG_RE.fullmatch(memory_id):
        raise MemoryFileError(path, 1, "file name is not a memory id (lowercase letters, digits, hyphens)")
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise MemoryFileError(path, 1, "no frontmatter: the file must start with a '---' line")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise MemoryFileError(path, 1, "frontmatter is not closed by a '---' line") from None
    try:
        meta = load_frontmatter("\n".join(lines[1:end]))
    except FrontmatterError as exc:
        raise MemoryFileError(path, exc.line + 1, exc.message) from None

    def line_of(key: str) -> int:
        return next((i + 1 for i in range(1, end) if lines[i].startswith(f"{key}:")), 2)

    for key in ("name", "description", "created", "updated"):
        if isinstance(meta.get(key), (list, dict, set, tuple)):
            kind = "a list" if isinstance(meta[key], (list, set, tuple)) else "a mapping"
            raise MemoryFileError(path, line_of(key), f"{key} must be text, not {kind} (quote it if it is text)")
    mtype = meta.get("type")
    if mtype not in TYPES:
        raise MemoryFileError(path, line_of("type"), f"type must be one of {', '.join(TYPES)}, not {mtype!r}")
    try:
        scope = parse_scope(meta.get("scope"))
    except ValueError as exc:
        raise MemoryFileError(path, line_of("scope"), str(exc)) from None
    stamps = {}
    for key in ("created", "updated"):
        value = meta.get(key)
        if isinstance(value, (datetime, date)):
            value = value.isoformat()
        stamps[key] = str(value) if value else ""
    body = "\n".join(lines[end + 1 :]).strip("\n")
    return Memory(
        id=memory_id,
        name=one_line(meta.get("name") or memory_id),
        description=one_line(meta.get("description") or ""),
        type=mtype,
        body=body,
        created=stamps["created"] or stamps["updated"],
        updated=stamps["updated"] or stamps["created"],
        extra={k: v for k, v in meta.items() if k not in KNOWN_KEYS},
        scope=scope,
    )


def render_memory(memory: Memory) -> str:
    """The file text of ``memory``: ordered frontmatter, a blank line, the body."""
    return _text(dump_frontmatter(_meta(memory)), memory.body)


def _meta(memory: Memory) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": memory.name,
        "description": memory.description,
        "type": memory.type,
        **({"scope": memory.scope} if memory.scope else {}),
        "created": memory.created,
        "updated": memory.updated,
    }
    meta.update((k, v) for k, v in memory.extra.items() if k not in KNOWN_KEYS)
    return meta


def _text(head: str, body: str) -> str:
    body = body.strip("\n")
    return f"---\n{head}---\n\n{body}\n" if body else f"---\n{head}---\n"


_SPLITS = re.compile("[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
"""What ``str.splitlines`` splits at besides ``\\n``: a body holding one reads back changed."""


def render_read_back(memory: Memory) -> tuple[str, Memory | None]:
    """``render_memory(memory)``, and the memory ``parse_memory`` reads back from that text when it
    is known without parsing: a frontmatter of short one-line ASCII texts (``dump_simple``), a valid
    type and scope, one-line name and description, a body with no line break but ``\\n``.  None
    otherwise (the caller parses).  A store writes every memory through it: most are of that kind,
    and the YAML is neither emitted nor read (``tests/test_memory_store.py`` checks the two agree)."""
    meta = _meta(memory)
    head = dump_simple(meta)
    if head is None:
        return _text(dump_frontmatter(meta), memory.body), None
    text = _text(head, memory.body)
    if (memory.type not in TYPES or not memory.name or one_line(memory.name) != memory.name
            or one_line(memory.description) != memory.description or _SPLITS.search(memory.body)
            or len(head) > MAX_FRONTMATTER or not SLUG_RE.fullmatch(memory.id)):
        return text, None
    try:
        scope = parse_scope(memory.scope)
    except ValueError:
        return text, None
    extra = {k: v for k, v in meta.items() if k not in KNOWN_KEYS}
    return text, Memory(id=memory.id, name=memory.name, description=memory.description, type=memory.type,
                        body=memory.body.strip("\n"), created=memory.created or memory.updated,
                        updated=memory.updated or memory.created, extra=extra, scope=scope)
