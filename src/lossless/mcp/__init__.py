"""``lossless mcp``: recall, long-term memory and context stats for any MCP client.

* ``Toolbox`` / ``SPECS`` — the tools as data and plain functions, no SDK needed (tools.py).
* ``context_stats`` — what a session's context holds, from its transcript (stats.py).
* ``serve`` / ``build_server`` — the stdio server on the official ``mcp`` SDK, imported
  only when a server is built (server.py; extra ``lossless[mcp]``).
"""

from .server import build_server, serve
from .stats import Report, context_stats, sessions
from .tools import SPECS, Answer, Toolbox, ToolFailure, ToolSpec

__all__ = [
    "SPECS",
    "Answer",
    "Report",
    "ToolFailure",
    "ToolSpec",
    "Toolbox",
    "build_server",
    "context_stats",
    "serve",
    "sessions",
]
