"""The session transcript: an append-only JSONL log of everything that entered the context.

The transcript is the source of truth; the messages sent to the model are a view
of it.  Entries are Claude-Code-compatible, so Claude Code's own tooling and
lossless's ``inspect``/``replay`` read the same files::

    {"type": "user"|"assistant"|"system", "uuid", "parentUuid", "sessionId",
     "timestamp", "isSidechain": false, "message": <Anthropic message dict>}

A compaction is a ``system`` entry with ``subtype: "compact_boundary"``, a null
``parentUuid`` and the last entry before it in ``logicalParentUuid``.

Usage::

    with Transcript(root=".lossless") as log:
        log.append([first_user_message])
        ...
        log.boundary("auto", pre_tokens=170_000, post_tokens=21_000)

Crash safety (the invariant protected here): every ``append`` call is encoded
first and written with one ``os.write`` (repeated only for what the kernel did not
take) on a descriptor opened ``O_APPEND``, one line per entry.  A killed process leaves at most one partial line,
at the end; ``read_entries`` skips and reports it, and a later ``Transcript`` on
the same file starts a fresh line so the damage never spreads (every reader —
this one, ``inspect``, ``replay``, ``compact`` — then skips that torn line in the
middle with a warning and reads the rest).  There is no fsync per turn: a machine
crash may lose the last turns, a process crash loses at most the entry being written.

The file is created 0600 in directories 0700 (it holds exact originals), opened
without following a symlink, and ``sessions/<id>/`` is refused when a link leads
it out of the store.
"""

from __future__ import annotations

import json
import os
import uuid as uuidlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import FormatError, StoreError
from .messages import Message
from .store import home, open_inside, store_dir

from .dialects._json import iter_jsonl
from .dialects.anthropic import block_to_dict, message_to_dict

__all__ = ["ReadResult", "Transcript", "read_entries", "transcript_path"]

_TAIL_PROBE = 1 << 16


def transcript_path(session_id: str, root: str | os.PathLike[str] | None = None) -> Path:
    return home(root) / "sessions" / session_id / "transcript.jsonl"


class Transcript:
    """Append-only writer for one session's ``transcript.jsonl``.

    The file is opened on the first write, not at construction.  Re-opening an
    existing session continues its ``parentUuid`` chain from the last entry.
    Not safe for two writers on the same session at once (each session has its own file).
    """

    def __init__(self, session_id: str | None = None, root: str | os.PathLike[str] | None = None) -> None:
        self.session_id = session_id or str(uuidlib.uuid4())
        if not _usable_name(self.session_id):
            raise StoreError(f"session id {self.session_id!r} cannot be used as a directory name")
        self.root = home(root)
        self.path = transcript_path(self.session_id, self.root)
        self.last_uuid: str | None = None
        self._fd: int | None = None

    # -- writing ---------------------------------------------------------------
    def append(self, messages: Iterable[Message]) -> list[str]:
        """Log messages as they enter the context; returns the uuid given to each."""
        messages = list(messages)
        if not messages:
            return []
        entries: list[dict[str, Any]] = []
        parent = self._parent()
        uuids = _uuid4s(len(messages))
        now: str | None = None  # one clock reading for the messages of one call that carry no time
        for m, entry_uuid in zip(messages, uuids):
            stamp = m.meta.get("timestamp")
            if not (isinstance(stamp, str) and stamp) and not (isinstance(stamp, (int, float)) and not isinstance(stamp, bool)):
                stamp = now = now or _timestamp(None)
            entry: dict[str, Any] = {
                "parentUuid": parent,
                "isSidechain": False,
                "sessionId": self.session_id,
                "type": m.role,
                "message": _to_dict(m),
                "uuid": entry_uuid,
                "timestamp": _timestamp(stamp),
            }
            marker = m.marker
            if isinstance(marker, dict) and marker.get("kind") == "summary":
                entry["isCompactSummary"] = True
            entries.append(entry)
            parent = entry_uuid
        self._emit(entries)
        self.last_uuid = parent
        return uuids

    def boundary(
        self, trigger: str, pre_tokens: int, post_tokens: int, covered: Any = None, **extra: Any
    ) -> str:
        """Record a compaction; the next appended message chains to this boundary."""
        meta: dict[str, Any] = {"trigger": trigger, "preTokens": pre_tokens, "postTokens": post_tokens}
        if covered is not None:
            meta["covered"] = covered
        entry_uuid = str(uuidlib.uuid4())
        entry = {
            "parentUuid": None,
            "logicalParentUuid": self._parent(),
            "isSidechain": False,
            "sessionId": self.session_id,
            "type": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "isMeta": False,
            "level": "info",
            "timestamp": _timestamp(None),
            "uuid": entry_uuid,
            "compactMetadata": {**meta, **extra},
        }
        self._emit([entry])
        self.last_uuid = entry_uuid
        return entry_uuid

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Transcript:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------
    def _parent(self) -> str | None:
        if self._fd is None:
            self._open()
        return self.last_uuid

    def _emit(self, entries: list[dict[str, Any]]) -> None:
        """Where entries go: one write of their lines (a subclass may keep them elsewhere)."""
        self._write(b"".join(_encode(e) for e in entries))

    def _open(self) -> None:
        store_dir(self.root, "sessions", self.session_id)
        try:
            fd = open_inside(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, "transcript")
        except FileNotFoundError as exc:
            raise StoreError(f"cannot open transcript {self.path}: {exc.strerror or exc}") from None
        try:
            size = os.fstat(fd).st_size
            if size:
                self.last_uuid, complete = _read_tail(fd, size)
                if not complete:
                    # A killed writer left a partial line: end it so our entries start clean.
                    _write_all(fd, b"\n")
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"cannot open transcript {self.path}: {exc.strerror or exc}") from None
        self._fd = fd

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            self._open()
        assert self._fd is not None
        try:
            _write_all(self._fd, data)
        except OSError as exc:
            self.close()  # a part may be written: the next append reopens and ends that line first
            raise StoreError(f"cannot append to transcript {self.path}: {exc.strerror or exc}") from None


def _usable_name(name: str) -> bool:
    """A single path component the file system can hold: no separator, NUL, dot name, or unencodable character."""
    try:
        encoded = os.fsencode(name)
    except UnicodeEncodeError:
        return False
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0") and len(encoded) <= 200


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_tail(fd: int, size: int) -> tuple[str | None, bool]:
    """(uuid of the last complete entry, whether the file ends with a newline), reading only its end."""
    probe = _TAIL_PROBE
    while True:
        start = max(0, size - probe)
        chunk = os.pread(fd, size - start, start)
        lines = chunk.split(b"\n")
        if start > 0:
            lines = lines[1:]  # the first piece may be the middle of a line
        for raw in reversed(lines):
            entry = _parse(raw)
            if entry is not None and isinstance(entry.get("uuid"), str):
                return entry["uuid"], chunk.endswith(b"\n")
        if start == 0:
            return None, chunk.endswith(b"\n")
        probe *= 4


# -- reading --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ReadResult:
    """What ``read_entries`` found: the entries, and every line it had to skip."""

    entries: list[dict[str, Any]]
    skipped: list[tuple[int, str]] = field(default_factory=list)
    """(1-based line number, why) for each line skipped: torn by an interrupted write, or damaged."""
    truncated: bool = False
    """True when the last line was cut short (a writer killed mid-write)."""

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


def read_entries(path: str | os.PathLike[str]) -> ReadResult:
    """Every entry of a JSONL transcript, tolerating damage (``dialects._json.iter_jsonl``).

    A line torn by a killed writer — the last one, or one in the middle of a
    session resumed after the crash — is skipped and listed in ``skipped`` (and
    ``truncated`` says the last line was); any other unreadable line is skipped and
    listed with its line number and why, so a caller can refuse it.
    """
    entries: list[dict[str, Any]] = []
    skipped: list[tuple[int, str]] = []
    try:
        for _, entry in iter_jsonl(path, damaged=skipped):
            entries.append(entry)
    except FormatError as exc:
        raise StoreError(f"cannot read transcript {exc}") from None
    except OSError as exc:
        raise StoreError(f"cannot read transcript {path}: {exc.strerror or exc}") from None
    truncated = bool(skipped) and skipped[-1][1].startswith("truncated last line")
    return ReadResult(entries=entries, skipped=skipped, truncated=truncated)


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return None
    return value if isinstance(value, dict) else None


# -- encoding -------------------------------------------------------------------
def _encode(entry: dict[str, Any]) -> bytes:
    """One line: the entry's JSON with its characters as UTF-8 (``ensure_ascii=False``), or escaped where
    a lone surrogate (undecodable tool output) has no UTF-8 form, so the file stays UTF-8.

    An entry whose texts are ASCII (``_plain``) has its escaped JSON (the encoder's faster mode) made first,
    kept when it escapes nothing as ``\\uXXXX``: then it is the same text."""
    if _plain(entry.get("message")):
        escaped = _ESCAPED.encode(entry)
        if "\\u" not in escaped:
            return escaped.encode("ascii") + b"\n"
    text = _UTF8.encode(entry)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return _ESCAPED.encode(entry).encode("ascii") + b"\n"


def _plain(message: Any) -> bool:
    """Whether the texts of a message dict are ASCII (each ``isascii`` O(1)); a tool call's input is not read."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content.isascii()
    for block in content if isinstance(content, list) else ():
        text = block.get("text", block.get("content")) if isinstance(block, dict) else None
        if isinstance(text, str) and not text.isascii():
            return False
        if isinstance(text, list) and not all(not isinstance(t, dict) or str(t.get("text", "")).isascii() for t in text):
            return False
    return True


_ESCAPED = json.JSONEncoder(separators=(",", ":"))
_UTF8 = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""Made once: ``json.dumps`` with arguments makes an encoder per call."""


def _uuid4s(n: int) -> list[str]:
    """``n`` random (version 4) UUIDs, as ``str(uuid.uuid4())`` writes them, from one read of the OS's randomness."""
    raw = os.urandom(16 * n)
    out = []
    for k in range(0, 16 * n, 16):
        h = (int.from_bytes(raw[k : k + 16], "big") & _UUID_CLEAR | _UUID_SET).to_bytes(16, "big").hex()
        out.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return out


_UUID_CLEAR = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_UUID_SET = (4 << 76) | (0x8000 << 48)
"""The version (4) and variant (RFC 4122) bits ``uuid.UUID(version=4)`` sets."""


def _timestamp(value: Any) -> str:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        moment = datetime.fromtimestamp(value, timezone.utc)
    else:
        moment = datetime.now(timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _to_dict(message: Message) -> dict[str, Any]:
    if message.role == "system":
        # Not valid in an Anthropic request, but an OpenAI-style history carries it: log it as it was.
        return {"role": "system", "content": [block_to_dict(b) for b in message.content]}
    return message_to_dict(message)
