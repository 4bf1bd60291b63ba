"""``lossless store``: the shared PostgreSQL store's schema, and moving a store between engines.

    lossless store migrate --store postgresql://agent@db:5432/team     # create / upgrade the schema
    lossless store import  --store postgresql://agent@db:5432/team .lossless   # a directory into it
    lossless store export  --store postgresql://agent@db:5432/team backup/      # it into a directory

``--store`` defaults to ``$LOSSLESS_STORE``.  A server that is down or refuses the credentials
is one line naming ``host:port/db`` and exit 2; so is a move that cannot be lossless.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from .._legacy import getenv
from ..errors import ConfigError
from ._common import counted


def register(sub: Any) -> None:
    s = sub.add_parser("store", help="migrate the PostgreSQL store; export/import between a directory and it",
                       description="Manage where lossless keeps artifacts, transcripts and memories.")
    verbs = s.add_subparsers(title="actions", metavar="ACTION", dest="store_command")
    for name, help_text in (
        ("migrate", "create or upgrade the database schema (idempotent)"),
        ("import", "copy a directory store into the database (artifacts, transcripts, memories)"),
        ("export", "copy the database into a directory store"),
    ):
        v = verbs.add_parser(name, help=help_text, description=help_text)
        v.add_argument("--store", help="the database: postgresql://user@host:port/db (default: $LOSSLESS_STORE)")
        if name != "migrate":
            v.add_argument("directory", metavar="DIR", help="the directory store (e.g. .lossless)")
        v.add_argument("--json", action="store_true", help="machine-readable output")
        v.set_defaults(func=run)
    s.set_defaults(func=lambda args: (s.print_help(), 2)[1])


def run(args: argparse.Namespace) -> int:
    from ..storage import is_database, open_store
    from ..storage.move import copy_store

    url = args.store or getenv("LOSSLESS_STORE")
    if not is_database(url):
        raise ConfigError("lossless store needs a database: pass --store postgresql://user@host:port/db "
                          "or set LOSSLESS_STORE")
    if args.store_command == "migrate":
        from ..storage.postgres.connect import Database
        from ..storage.postgres.schema import LATEST, migrate

        db = Database(str(url))
        try:
            applied = migrate(db)
        finally:
            db.close()
        text = (f"applied {', '.join(applied)}" if applied else "already current") + \
            f"; {db.label} is at schema version {LATEST}"
        print(json.dumps({"server": db.label, "applied": applied, "version": LATEST}) if args.json else text)
        return 0
    db_store = open_store(str(url))
    dir_store = open_store(os.path.abspath(args.directory))
    try:
        src, dst = (dir_store, db_store) if args.store_command == "import" else (db_store, dir_store)
        report = copy_store(src, dst, run=args.store_command)
    finally:
        db_store.close()
    if args.json:
        print(json.dumps({"from": src.spec, "to": dst.spec, "artifacts": report.artifacts,
                          "sessions": report.sessions, "entries": report.entries, "memories": report.memories,
                          "skipped_sessions": list(report.skipped_sessions)}))
    else:
        there = report.skipped_sessions
        skipped = f" ({counted(len(there), 'session')} already there)" if there else ""
        print(f"{args.store_command}ed {counted(report.artifacts, 'artifact')}, {counted(report.sessions, 'session')} "
              f"with {counted(report.entries, 'entry')}, {counted(report.memories, 'memory')}{skipped} "
              f"from {src.spec} to {dst.spec}")
    return 0
