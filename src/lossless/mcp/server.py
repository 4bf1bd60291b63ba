"""The MCP server: ``Toolbox`` served over stdio with the official ``mcp`` SDK (extra ``mcp``).

Use::

    serve(Toolbox.open(store=".lossless"))        # blocks until the client closes stdin

or from a shell, ``lossless mcp --store .lossless``.  The SDK is imported here and
only here, when a server is built: ``import lossless`` and every other command work
without it, and without it ``sdk()`` raises one ``ConfigError`` line saying how to
install it.  (This package is ``lossless.mcp``; ``import mcp`` below is the SDK:
absolute imports keep the two apart.)

Invariant: a tool call never takes the server down.  Whatever a handler raises
becomes a result with ``is_error`` set and one line of text.  Calls run one at a
time (the stores are built for several processes, not for threads sharing one
``MemoryStore``), each in a worker thread, so a long read (a 100 MB transcript)
does not stall the protocol while it runs.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from .. import __version__
from ..errors import ConfigError
from .tools import SPECS, Toolbox, ToolFailure

INSTALL = "pip install 'lossless[mcp]'"
INSTRUCTIONS = (
    "lossless keeps an agent's context under its window and loses nothing: every placeholder, persisted-output "
    "marker and summary names a handle that the recall tool turns back into the original. The memory_* tools "
    "read and write long-term memory shared across sessions; context_stats shows where a session's context goes."
)


def sdk() -> Any:
    """The ``mcp`` SDK module (version 2 or later), or a one-line ``ConfigError`` saying how to install it."""
    try:
        import mcp  # the SDK, not this package
        import mcp.server.lowlevel  # noqa: F401
        import mcp.server.stdio  # noqa: F401
    except ImportError:
        raise ConfigError(f"lossless mcp needs the MCP SDK, which is not installed: {INSTALL}") from None
    try:
        version = metadata.version("mcp")
    except metadata.PackageNotFoundError:
        version = "2"
    if not version.split(".")[0].isdigit() or int(version.split(".")[0]) < 2:
        raise ConfigError(f"lossless mcp needs the MCP SDK 2 or later, found {version}: pip install -U 'mcp>=2.3'")
    return mcp


def build_server(toolbox: Toolbox) -> Any:
    """A low-level ``mcp.server.lowlevel.Server`` answering ``tools/list`` and ``tools/call`` from ``toolbox``."""
    sdk()
    import anyio
    import mcp.types as types
    from mcp.server.lowlevel import Server

    tools = [
        types.Tool(name=s.name, description=s.description, input_schema=dict(s.input_schema),
                   annotations=types.ToolAnnotations(read_only_hint=s.read_only, destructive_hint=False,
                                                     open_world_hint=False))
        for s in SPECS
    ]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    one_at_a_time = anyio.Lock()

    async def call_tool(ctx: Any, params: Any) -> Any:
        try:
            async with one_at_a_time:
                answer = await anyio.to_thread.run_sync(toolbox.call, params.name, params.arguments)
        except ToolFailure as exc:
            return types.CallToolResult(content=[types.TextContent(text=f"error: {exc}")], is_error=True)
        except Exception as exc:  # Toolbox.call already turns everything into ToolFailure; this is the floor
            text = " ".join(f"error: {params.name} failed: {type(exc).__name__}: {exc}".split())
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=answer.text)],
                                    structured_content=dict(answer.data) if answer.data is not None else None)

    return Server("lossless", version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def serve(toolbox: Toolbox) -> None:
    """Serve ``toolbox`` on this process's stdin and stdout until the client closes stdin."""
    server = build_server(toolbox)
    import sys

    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    async def run() -> None:
        async with stdio_server() as (read, write):
            # A line that is not a JSON-RPC message reaches the server as an exception, which it passes
            # over in silence: the client would wait for ever.  It gets its error here instead.
            relay, relayed = anyio.create_memory_object_stream[Any](0)

            async def answer_malformed() -> None:
                async with relay:
                    async for item in read:
                        if isinstance(item, Exception):
                            reply = malformed_reply(item)
                            print(f"lossless mcp: {reply.error.message}", file=sys.stderr, flush=True)
                            await write.send(SessionMessage(reply))
                        else:
                            await relay.send(item)

            async with anyio.create_task_group() as tg:
                tg.start_soon(answer_malformed)
                await server.run(relayed, write, server.create_initialization_options())
                tg.cancel_scope.cancel()

    anyio.run(run)


def malformed_reply(error: Exception) -> Any:
    """The JSON-RPC error for a line the transport could not read as a message: -32700 when it is not
    JSON, else -32600 with the request's id when it has one (so the client's call ends), else a null id."""
    from mcp import types

    details = error.errors() if hasattr(error, "errors") and callable(error.errors) else []
    if any(d.get("type") == "json_invalid" for d in details) or not details:
        return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(
            code=-32700, message="parse error: a line that is not JSON (one JSON-RPC message a line)"))
    request_id = next((d["input"]["id"] for d in details if isinstance(d.get("input"), dict)
                       and isinstance(d["input"].get("id"), (str, int)) and not isinstance(d["input"]["id"], bool)),
                      None)
    shown = next((d.get("input") for d in details if isinstance(d.get("input"), dict)), None)
    what = ("not a JSON-RPC 2.0 message ({\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"…\", \"params\": {…}})"
            if isinstance(shown, dict) else "a JSON-RPC message is an object (batches are not part of MCP)")
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(
        code=-32600, message=f"invalid request: {what}"))
