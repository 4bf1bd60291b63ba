"""The chat's own tools: run a shell command, read, write and edit files, glob and grep.

    ws = Workspace(Path("."), allow=(Path("/tmp/data"),))
    box = Toolbox(ws, confirm=ask_the_user)
    text, is_error = box.run("read_file", {"path": "src/app.py", "offset": 10, "limit": 40})

Invariants this module protects:

* **Confined**: every path is resolved (symlinks followed) and refused unless it lies in the
  working directory or a directory the user allowed (``--allow-dir``); the file is then reached
  from that directory one component at a time through directory descriptors with ``O_NOFOLLOW``
  (``Workspace.parent``), so a directory swapped for a symlink between the check and the use is
  an error, never a read or a write outside.
* **Asked**: the shell and every write go through ``confirm(kind, what)`` first; a refusal is
  a result saying so, never a silent skip (``Confirm`` answers without asking under ``--yes``).
* **Bounded**: a shell command runs in its own process group with a timeout; on a timeout or a
  Ctrl-C the whole group is killed, so nothing it started outlives the call.
* **Never raises for the model's mistakes**: ``run`` returns ``(text, is_error)``; only
  ``KeyboardInterrupt`` comes through (after the tool's processes are gone).
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import signal
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

READ_LINES = 2_000
"""Lines a read returns when the model gives no ``limit``."""
LIST_MAX = 1_000
GREP_MAX = 500
SHELL_TIMEOUT = 120.0
SKIP_DIRS = frozenset({".git", ".lossless", "__pycache__", ".venv", "node_modules", ".mypy_cache",
                       ".pytest_cache", ".ruff_cache"})

_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

Confirm = Callable[[str, str], bool]
"""``confirm(kind, what)`` → allowed?  ``kind`` is "shell" or "write"."""


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


DEFINITIONS: tuple[dict[str, Any], ...] = (
    {"name": "bash", "description": (
        "Run a shell command in the working directory (bash -c) and return its output and exit status. "
        f"It is killed after `timeout` seconds (default {SHELL_TIMEOUT:.0f}). The user may be asked first."),
     "input_schema": _schema({"command": {"type": "string"},
                              "timeout": {"type": "number", "minimum": 1, "maximum": 600}}, ["command"])},
    {"name": "read_file", "description": (
        "Read a text file (path relative to the working directory). Without offset/limit the whole file "
        f"comes back exactly (up to {READ_LINES:,} lines); offset is the first line (1-based), limit a count."),
     "input_schema": _schema({"path": {"type": "string"}, "offset": {"type": "integer", "minimum": 1},
                              "limit": {"type": "integer", "minimum": 1}}, ["path"])},
    {"name": "write_file", "description": "Create or overwrite a file with `content` (the user may be asked first).",
     "input_schema": _schema({"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"])},
    {"name": "edit_file", "description": (
        "Replace the exact text `old_string` by `new_string` in a file. old_string must occur exactly once: "
        "include enough surrounding lines to make it unique. The user may be asked first."),
     "input_schema": _schema({"path": {"type": "string"}, "old_string": {"type": "string"},
                              "new_string": {"type": "string"}}, ["path", "old_string", "new_string"])},
    {"name": "glob", "description": "List files matching a glob pattern such as **/*.py, sorted.",
     "input_schema": _schema({"pattern": {"type": "string"}, "path": {"type": "string"}}, ["pattern"])},
    {"name": "grep", "description": (
        "Search files for a regular expression; returns path:line:text. `path` is a directory or file "
        "(default .), `glob` filters file names (e.g. *.py)."),
     "input_schema": _schema({"pattern": {"type": "string"}, "path": {"type": "string"},
                              "glob": {"type": "string"}}, ["pattern"])},
)
NAMES = frozenset(d["name"] for d in DEFINITIONS)


class ToolFailure(Exception):
    """A mistake the model can fix: becomes an ``is_error`` result."""


@dataclass(frozen=True, slots=True)
class Workspace:
    """The working directory and the other directories the user allowed; resolves paths into them."""

    root: Path
    allow: tuple[Path, ...] = ()

    def resolve(self, path: Any) -> Path:
        if not isinstance(path, str) or not path.strip():
            raise ToolFailure("a path is required")
        target = Path(os.path.expanduser(path))
        real = (target if target.is_absolute() else self.root / target).resolve()
        for base in (self.root, *self.allow):
            if real == base or real.is_relative_to(base):
                return real
        raise ToolFailure(f"{path!r} resolves to {real}, outside the working directory {self.root}; "
                          "the user can allow it with --allow-dir")

    def show(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)

    def parent(self, real: Path, *, create: bool = False) -> tuple[int, str]:
        """A descriptor of the directory holding ``real`` (a path ``resolve`` returned) and its
        name there, reached from its base directory through descriptors, never following a
        link: what ``resolve`` checked is what is used.  ``create`` makes missing directories.
        The caller closes the descriptor."""
        base = next(b for b in (self.root, *self.allow) if real == b or real.is_relative_to(b))
        parts = real.relative_to(base).parts
        if not parts:
            raise ToolFailure(f"{self.show(real)} is a directory")
        fd = os.open(base, _DIR)
        try:
            for part in parts[:-1]:
                try:
                    step = os.open(part, _DIR | _NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o777, dir_fd=fd)
                    step = os.open(part, _DIR | _NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = step
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise ToolFailure(f"{self.show(real)} changed while in use (a directory on its way became a "
                                  "link or a file): nothing was read or written; try again") from None
            raise
        return fd, parts[-1]

    def read_bytes(self, real: Path) -> bytes:
        """The bytes of the regular file ``real``, opened through ``parent`` (never a link, a FIFO)."""
        dir_fd, name = self.parent(real)
        try:
            try:
                fd = os.open(name, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise ToolFailure(f"{self.show(real)} changed while in use (it became a link); try again") from None
                raise
        finally:
            os.close(dir_fd)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ToolFailure(f"{self.show(real)} is not a regular file")
            return f.read()

    def write_text(self, real: Path, text: str) -> bool:
        """Replace ``real`` with ``text`` atomically (a temporary file beside it, then a rename, both
        through ``parent``'s descriptor); True when a file was there before."""
        dir_fd, name = self.parent(real, create=True)
        try:
            return _atomic_write_at(dir_fd, name, text, self.show(real))
        finally:
            os.close(dir_fd)


@dataclass
class Toolbox:
    """Runs the tools of ``DEFINITIONS`` against a ``Workspace``."""

    workspace: Workspace
    confirm: Confirm
    shell_timeout: float = SHELL_TIMEOUT
    ran: list[str] = field(default_factory=list)

    def run(self, name: str, params: Mapping[str, Any]) -> tuple[str, bool]:
        handler = getattr(self, f"_{name}", None) if name in NAMES else None
        if handler is None:
            return f"error: no tool named {name!r}", True
        try:
            return handler(params), False
        except ToolFailure as exc:
            return f"error: {exc}", True
        except UnicodeDecodeError:
            return "error: the file is not UTF-8 text", True
        except OSError as exc:
            return f"error: {exc.strerror or exc}{': ' + str(exc.filename) if exc.filename else ''}", True
        except (ValueError, TypeError) as exc:  # a NUL in a path, an argument of the wrong type
            return f"error: {type(exc).__name__}: {exc}", True

    # -- the tools -------------------------------------------------------------
    def _bash(self, p: Mapping[str, Any]) -> str:
        command = p.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolFailure("command is required")
        timeout = _number(p.get("timeout"), self.shell_timeout)
        if not self.confirm("shell", command):
            raise ToolFailure("refused by the user: the command was not run")
        self.ran.append(command)
        proc: subprocess.Popen[bytes] | None = None
        try:
            proc = subprocess.Popen(["bash", "-c", command], cwd=self.workspace.root, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
            out = _wait(proc, timeout)
        except subprocess.TimeoutExpired:
            assert proc is not None  # only communicate() times out
            out = _kill(proc)
            raise ToolFailure(f"timed out after {timeout:g} s (its process group was killed); output so far:\n"
                              + out.decode("utf-8", "replace")) from None
        except BaseException:  # Ctrl-C: nothing the command started may outlive it
            if proc is not None:
                _kill(proc)
            raise
        text = out.decode("utf-8", "replace")
        if proc.returncode:
            raise ToolFailure(f"exit status {proc.returncode}\n{text}")
        return text or "(no output)"

    def _read_file(self, p: Mapping[str, Any]) -> str:
        path = self._existing_file(p.get("path"))
        text = self._text(path)
        lines = text.splitlines(keepends=True)
        offset = int(_number(p.get("offset"), 1))
        limit = int(_number(p.get("limit"), READ_LINES))
        if offset < 1 or limit < 1:
            raise ToolFailure("offset and limit must be at least 1")
        if offset == 1 and limit >= len(lines):
            return text  # the file exactly, so a recall of this result is the file itself
        if offset > max(len(lines), 1):
            raise ToolFailure(f"offset {offset} is past the end of {self.workspace.show(path)} "
                              f"({len(lines)} lines)")
        part = lines[offset - 1: offset - 1 + limit]
        end = offset - 1 + len(part)
        return f"[{self.workspace.show(path)}: lines {offset}–{end} of {len(lines)}]\n" + "".join(part)

    def _write_file(self, p: Mapping[str, Any]) -> str:
        path = self.workspace.resolve(p.get("path"))
        content = p.get("content")
        if not isinstance(content, str):
            raise ToolFailure("content must be a string")
        if path.is_dir():
            raise ToolFailure(f"{self.workspace.show(path)} is a directory")
        shown = self.workspace.show(path)
        if not self.confirm("write", f"write {shown} ({len(content):,} characters)"):
            raise ToolFailure(f"refused by the user: {shown} was not written")
        existed = self.workspace.write_text(path, content)
        return f"{'overwrote' if existed else 'created'} {shown} ({len(content.splitlines())} lines)"

    def _edit_file(self, p: Mapping[str, Any]) -> str:
        path = self._existing_file(p.get("path"))
        old, new = p.get("old_string"), p.get("new_string")
        if not isinstance(old, str) or not old or not isinstance(new, str):
            raise ToolFailure("old_string (not empty) and new_string are required")
        text = self._text(path)
        shown = self.workspace.show(path)
        starts = [m.start() for m in re.finditer(re.escape(old), text)]
        if not starts:
            raise ToolFailure(f"old_string was not found in {shown}; read the file and copy the text exactly")
        if len(starts) > 1:
            where = ", ".join(str(text.count("\n", 0, s) + 1) for s in starts[:10])
            raise ToolFailure(f"old_string occurs {len(starts)} times in {shown} (lines {where}); "
                              "include more surrounding text so it occurs once")
        if not self.confirm("write", f"edit {shown} (line {text.count(chr(10), 0, starts[0]) + 1})"):
            raise ToolFailure(f"refused by the user: {shown} was not changed")
        self.workspace.write_text(path, text.replace(old, new, 1))
        return f"edited {shown} at line {text.count(chr(10), 0, starts[0]) + 1}"

    def _glob(self, p: Mapping[str, Any]) -> str:
        pattern = p.get("pattern")
        if not isinstance(pattern, str) or not pattern or Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise ToolFailure("pattern must be a relative glob such as **/*.py")
        base = self.workspace.resolve(p.get("path") or ".")
        found = []
        for path in sorted(base.glob(pattern)):
            if SKIP_DIRS.intersection(path.relative_to(base).parts):
                continue
            try:
                self.workspace.resolve(str(path))
            except ToolFailure:
                continue  # a link out of the workspace is not listed
            found.append(self.workspace.show(path))
        if not found:
            return f"no files match {pattern!r}"
        more = f"\n… and {len(found) - LIST_MAX} more" if len(found) > LIST_MAX else ""
        return "\n".join(found[:LIST_MAX]) + more

    def _grep(self, p: Mapping[str, Any]) -> str:
        try:
            regex = re.compile(str(p.get("pattern") or ""))
        except re.error as exc:
            raise ToolFailure(f"bad regular expression: {exc}") from None
        base = self.workspace.resolve(p.get("path") or ".")
        files = [base] if base.is_file() else sorted(base.rglob(str(p.get("glob") or "*")))
        hits: list[str] = []
        for path in files:
            if not path.is_file() or SKIP_DIRS.intersection(path.parts):
                continue
            try:
                text = self._text(self.workspace.resolve(str(path)))
            except (ToolFailure, OSError, UnicodeDecodeError):
                continue  # binary, unreadable, or a link outside: not searched
            for number, line in enumerate(text.splitlines(), 1):
                if regex.search(line):
                    hits.append(f"{self.workspace.show(path)}:{number}:{line[:300]}")
                    if len(hits) > GREP_MAX:
                        return "\n".join(hits[:GREP_MAX]) + f"\n… more than {GREP_MAX} matches; narrow the search"
        return "\n".join(hits) or "no matches"

    def _text(self, path: Path) -> str:
        return self.workspace.read_bytes(path).decode("utf-8")

    def _existing_file(self, value: Any) -> Path:
        path = self.workspace.resolve(value)
        if not path.is_file():
            raise ToolFailure(f"no file {value!r} in the working directory")
        return path


def _number(value: Any, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ToolFailure(f"expected a number, not {value!r}")
    return float(value)


TICK = 0.2
"""Seconds between the main thread's checks for a Ctrl-C while a command runs."""


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    """The command's output once it exits; ``TimeoutExpired`` after ``timeout`` seconds.

    Waits in ticks, not in one call: the kernel may hand the terminal's SIGINT to any of the
    process's threads, and then nothing interrupts a long wait in the main thread — Python runs
    the handler (raising ``KeyboardInterrupt``) only once that wait returns.  A tick returns to
    Python often enough for Ctrl-C to stop the command at once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            out, _ = proc.communicate(timeout=max(0.0, min(TICK, deadline - time.monotonic())))
            return out or b""
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise


def _kill(proc: subprocess.Popen[bytes]) -> bytes:
    """Kill the command's whole process group; return what it wrote so far."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    out, _ = proc.communicate()
    return out or b""


def _atomic_write_at(dir_fd: int, name: str, text: str, shown: str) -> bool:
    """Write ``name`` in the directory ``dir_fd`` atomically, keeping an existing file's mode
    (a new file is 0600, as ``mkstemp`` made them); True when one existed."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ToolFailure(f"{shown} is a directory")
    for _ in range(100):
        tmp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
    else:
        raise ToolFailure(f"could not make a temporary file beside {shown}")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            if st is not None and stat.S_ISREG(st.st_mode):
                os.fchmod(f.fileno(), st.st_mode & 0o7777)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise
    return st is not None
