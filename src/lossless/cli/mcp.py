"""``lossless mcp``: an MCP server over stdio exposing recall, long-term memory and context stats.

Point any MCP client at it (``claude mcp add lossless -- lossless mcp --store DIR``); it serves
until the client closes its stdin.  It needs the SDK extra (``pip install 'lossless[mcp]'``):
without it the command says so in one line, exit code 2, as it does for a store or memory path
that is not a directory.  A store that does not exist yet is served as empty.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError


def register(sub: Any) -> None:
    s = sub.add_parser("mcp", help="serve recall, memory and context stats to an MCP client over stdio")
    s.add_argument("--store", metavar="DIR|URL",
                   help="the store to serve: a directory or postgresql://… (default: $LOSSLESS_STORE, "
                        "else $LOSSLESS_HOME or the nearest .lossless)")
    s.add_argument("--memory", type=Path, metavar="DIR", help="memory directory (default: the store's memory/)")
    s.add_argument("--project", help="serve only user, project:PROJECT and unscoped memories (with --agent: its too)")
    s.add_argument("--agent", help="serve only user, agent:AGENT and unscoped memories (with --project: its too)")
    s.add_argument("--session", metavar="ID",
                   help="the session context_stats reports when none is named (default: the most recent)")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..mcp import Toolbox, serve
    from ..mcp.server import sdk

    sdk()  # a missing SDK is one line and exit 2, before anything is opened
    from ..storage.open import is_database

    for option, spec in (("--store", args.store), ("--memory", args.memory)):
        path = None if spec is None or is_database(str(spec)) else Path(spec)
        if path is not None and path.exists() and not path.is_dir():
            raise ConfigError(f"{option} {path} is not a directory")
    box = Toolbox.open(args.store, args.memory, args.session, project=args.project, agent=args.agent)
    if sys.stdin.isatty():  # a person ran it: say what it is waiting for (stdout is the protocol's)
        print(f"lossless mcp: serving {box.root} over stdio to an MCP client, which starts it "
              "(claude mcp add lossless -- lossless mcp --store DIR); Ctrl-D stops", file=sys.stderr)
    serve(box)
    return 0
