"""A throwaway PostgreSQL server for the tests, from the Debian ``postgresql`` package's binaries.

``PgServer.start()`` runs ``initdb`` in a temporary directory owned by the ``postgres`` user (the
tests run as root, and the server refuses to), starts ``postgres`` on a free port of 127.0.0.1 with
its unix socket inside that directory and ``trust`` auth on loopback, and ``stop()`` shuts it down
and removes the directory.  ``conftest.pg_server`` holds one per test session.

Where the binaries, the ``postgres`` user or psycopg are missing, ``why_unavailable()`` says which,
and the tests skip with that reason (``.ci/run`` installs the package, so CI runs them).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path


def bindir() -> Path | None:
    """Where ``initdb``/``pg_ctl``/``postgres`` are: ``pg_config --bindir``, Debian's versioned dirs, then PATH."""
    candidates: list[Path] = []
    if shutil.which("pg_config"):
        try:
            out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10)
            candidates.append(Path(out.stdout.strip()))
        except (OSError, subprocess.SubprocessError):
            pass
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(os.path.realpath(initdb)).parent)
    for c in candidates:
        if all((c / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return c
    return None


def pgvector_bindir() -> Path | None:
    """PostgreSQL 16 binaries that come with the pgvector extension: those the PyPI wheel ``pgserver``
    carries (``pginstall/``; its own Python API is not used).  Debian 12 has no pgvector package."""
    import importlib.util

    spec = importlib.util.find_spec("pgserver")
    for root in (spec.submodule_search_locations or []) if spec else []:
        base = Path(root) / "pginstall"
        if (base / "lib" / "postgresql" / "vector.so").is_file() and (base / "bin" / "initdb").is_file():
            return base / "bin"
    return None


def why_unavailable() -> str | None:
    """None when a server can be started here; else the reason, for a skip."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'lossless[postgres]')"
    if bindir() is None:
        return "PostgreSQL server binaries not found (apt-get install postgresql; .ci/run does)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    root: Path
    port: int
    bin: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    @classmethod
    def start(cls, *, durable: bool = False, bin: Path | None = None) -> PgServer:
        """A new server.  ``durable=False`` (the tests) turns fsync off; the bench asks for a durable
        one, since the directory store it is compared with fsyncs what it writes.  ``bin``: another
        installation's binaries (``pgvector_bindir``)."""
        bin_ = bin or bindir()
        assert bin_ is not None
        root = Path(tempfile.mkdtemp(prefix="lossless-pg-"))
        os.chmod(root, 0o755)
        server = cls(root=root, port=_free_port(), bin=bin_)
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(root, pw.pw_uid, pw.pw_gid)
        server._run([str(bin_ / "initdb"), "-D", str(server.data), "-U", "postgres", "--auth=trust",
                     "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"])
        with open(server.data / "postgresql.conf", "a") as f:
            f.write(f"listen_addresses = '127.0.0.1'\nport = {server.port}\nunix_socket_directories = '{root}'\n"
                    "max_connections = 60\n")
            if not durable:
                f.write("fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
        server._run([str(bin_ / "pg_ctl"), "-D", str(server.data), "-l", str(root / "log"), "-w", "-t", "60", "start"])
        return server

    def _run(self, argv: list[str]) -> None:
        kwargs: dict = {}
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            kwargs = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=self.root, **kwargs)
        if out.returncode != 0:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            raise RuntimeError(f"{argv[0]} failed ({out.returncode}): {out.stderr.strip()} {log[-2000:]}")

    def create_db(self) -> str:
        """A fresh empty database on this server; its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def pg_ctl(self, action: str) -> None:
        mode = ["-m", "fast"] if action in ("stop", "restart") else []
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60",
                   *mode, action])

    def stop(self) -> None:
        try:
            self.pg_ctl("stop")
        except RuntimeError:
            pass
        # Give a fast shutdown a moment to release the directory before it goes.
        time.sleep(0.05)
        shutil.rmtree(self.root, ignore_errors=True)
