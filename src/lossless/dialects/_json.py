"""Reading session files: one way to open them, one JSONL reader, errors that name the file and line.

    with open_regular(path) as f: ...            # never hangs on a FIFO, never reads a directory
    data = load_json(path)                        # a whole JSON file
    for line, entry in iter_jsonl(path, warnings): ...

``iter_jsonl`` is the only JSONL reader in lossless: the transcript reader
(``transcript.read_entries``) and the Claude Code reader (``claude_code.read_session``,
hence ``inspect``, ``replay`` and ``compact``) both use it, so a crash means the same
thing everywhere.  The invariant it protects: a line **torn** by a writer killed
mid-write — a proper prefix of a JSON object, at the end of the file or in the middle
of a resumed one — is skipped with a warning naming the file and line, and every
other line is read; damage that no crash can leave (a flipped byte, a non-object) is
reported, never guessed around.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import IO, Any, Iterator

from ..errors import FormatError

__all__ = ["iter_jsonl", "load_json", "open_regular", "torn"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


_BOM = b"\xef\xbb\xbf"


def open_regular(path: str | os.PathLike[str]) -> IO[bytes]:
    """``path`` opened for binary reading (past a UTF-8 byte-order mark), or a one-line
    ``FormatError`` naming it.

    Opened non-blocking and checked with ``fstat`` before any read, so a named pipe
    or a device is refused at once instead of hanging the reader."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FormatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise FormatError(f"{path}: is a directory, not a session file") from None
    except OSError as exc:
        raise FormatError(f"{path}: cannot open ({exc.strerror or exc})") from None
    except ValueError as exc:  # an embedded NUL byte in the path
        raise FormatError(f"{path!r}: cannot open ({exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            hint = ("pass one of the session files in it" if stat.S_ISDIR(mode)
                    else "save it to a regular file first")
            raise FormatError(f"{path}: is {kind}, not a session file ({hint})")
        os.set_blocking(fd, True)
        if os.pread(fd, 3, 0) == _BOM:  # what Windows editors and PowerShell put first: read past it
            os.lseek(fd, 3, os.SEEK_SET)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def load_json(path: Path) -> Any:
    """The parsed file; a ``FormatError`` naming the file (and line) for bad bytes or JSON."""
    try:
        with open_regular(path) as f:
            data = f.read()
        text = data.decode("utf-8")  # strict: json.loads(bytes) would let encoded surrogates through
        del data
        return json.loads(text)
    except UnicodeDecodeError as e:
        raise FormatError(f"{path}: not UTF-8 ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise FormatError(f"{path}:{e.lineno}: not JSON ({json_error(e)})") from None
    except RecursionError:
        raise FormatError(f"{path}: JSON nested too deeply to be a session") from None
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror or exc})") from None


def json_error(e: json.JSONDecodeError) -> str:
    """What ``json`` found and where on its line: "Expecting value at column 5" ("Unterminated string
    starting at column 5": that message already ends in "at")."""
    return f"{e.msg} column {e.colno}" if e.msg.endswith(" at") else f"{e.msg} at column {e.colno}"


# -- torn lines -------------------------------------------------------------------
_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")
_NUMBER_TAIL = re.compile(r"[-+.eE0-9]*")
_ESCAPE_TAIL = re.compile(r"u[0-9a-fA-F]{0,4}(?:\\(?:u[0-9a-fA-F]{0,3})?)?")


def torn(raw: bytes) -> bool:
    """True when ``raw`` (one line) is a proper prefix of a JSON object: what a writer
    killed in the middle of a line leaves.  A complete line, or one damaged in a way a
    cut cannot explain (a flipped byte mid-line, junk after the object), is not torn."""
    raw = raw.strip()
    if not raw.startswith(b"{"):
        return False
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.end != len(raw) or e.reason != "unexpected end of data":
            return False
        text = raw[: e.start].decode("utf-8", "strict")  # the cut fell inside a multi-byte character
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        rest = text[e.pos:]
        if e.msg.startswith("Unterminated string"):
            return True  # a string can hold no raw newline, so it ran to the end of the input
        if e.msg.startswith("Invalid \\uXXXX escape"):
            return _ESCAPE_TAIL.fullmatch(rest) is not None
        if e.msg.startswith("Extra data"):
            return False
        return _NUMBER_TAIL.fullmatch(rest) is not None or any(w.startswith(rest) for w in _LITERALS)
    except (ValueError, RecursionError):
        return False
    return False  # it parses: not a prefix but a whole value


# -- JSONL ------------------------------------------------------------------------
def iter_jsonl(
    path: str | os.PathLike[str],
    warnings: list[str] | None = None,
    *,
    damaged: list[tuple[int, str]] | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, entry)`` for each JSON-object line of ``path``, streaming.

    A torn line (see ``torn``) is skipped and reported in ``warnings`` wherever it
    is.  Any other bad line is a ``FormatError`` naming the file and line — unless
    ``damaged`` is given, which then collects ``(line, why)`` and reading goes on
    (the library reader lists damage; the CLI refuses it)."""
    with open_regular(path) as f:
        lineno = 0
        for raw in f:  # not enumerate(): its reused tuple would keep each line's bytes alive
            lineno += 1
            if not raw.strip():
                continue
            last = not raw.endswith(b"\n")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                bad, why = raw, f"not UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1})"
            else:
                del raw  # a 200 MB line: hold its text and what it parses to, not its bytes too
                entry, problem = _parse(text)
                if problem is None:
                    del text
                    yield lineno, entry
                    continue
                bad, why = text.encode("utf-8"), problem
            if torn(bad):
                if warnings is not None:
                    warnings.append(f"{path}:{lineno}: truncated {'last ' if last else ''}line skipped ({why})")
                if damaged is not None:
                    damaged.append((lineno, f"truncated {'last ' if last else ''}line ({len(bad.rstrip()):,} bytes): "
                                            "a write was interrupted"))
            elif damaged is not None:
                damaged.append((lineno, why))
            else:
                raise FormatError(f"{path}:{lineno}: {why}")


def _parse(text: str) -> tuple[Any, str | None]:
    """(entry, None) for a line holding a JSON object, else (None, why)."""
    try:
        entry = json.loads(text)
    except ValueError as e:
        return None, f"not JSON ({e})"
    except RecursionError:
        return None, "JSON nested too deeply to be a session entry"
    if not isinstance(entry, dict):
        return None, f"an entry must be a JSON object, not {_json_type(entry)}"
    return entry, None


def _json_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")
