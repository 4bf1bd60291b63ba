"""The ``lossless`` command: a thin ``main(argv) -> int`` over library calls.

One module per command (``COMMANDS``); each has ``register(sub)``, which adds its
parser and sets ``func`` (or ``handler``) to the function that runs it.  ``main``
imports only the module of the command it runs: the others are listed by their
``SUMMARIES`` line, so ``lossless --help`` imports none of them (and none of what
they import).  Every failure the user can cause ends in one line on stderr and exit
code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Collection, Sequence
from importlib import import_module
from typing import NoReturn

from .. import __version__
from ..errors import LosslessError
from ._common import EXIT_USAGE, fail, printable, silence_stdout

__all__ = ["COMMANDS", "EXIT_USAGE", "SUMMARIES", "build_parser", "main"]

COMMANDS = (
    "inspect",
    "replay",
    "compact",
    "recall",
    "demo",
    "memory",
    "proxy",
    "wrap",
    "top",
    "mcp",
    "store",
    "chat",
    "sessions",
    "report",
)
"""The commands, in the order ``lossless --help`` lists them: each a module of this package."""

SUMMARIES = {
    "inspect": "where the context of a session goes",
    "replay": "replay a recorded session through the pipeline, call by call",
    "compact": "write a session compacted to fit a window",
    "recall": "print the original content behind a handle",
    "demo": "run a realistic session through a small window, offline",
    "memory": "long-term memory: list, show, add, edit, rm, search, index, embed, consolidate, suggestions, undo, "
              "extract",
    "proxy": "an HTTP proxy for any agent on the Anthropic or OpenAI API (no code changes)",
    "wrap": "run an agent (claude, codex, or any command after --) through the proxy",
    "top": "a live view of a running proxy: each conversation's context, stages, recalls and savings",
    "mcp": "serve recall, memory and context stats to an MCP client over stdio",
    "store": "migrate the PostgreSQL store; export/import between a directory and it",
    "chat": "a coding agent in the terminal, its context managed by lossless",
    "sessions": "list the Claude Code and Codex CLI sessions on this machine",
    "report": "what your Claude Code and Codex sessions cost per day, session and model, and with lossless",
}
"""Each command's line in ``lossless --help``, the same as its ``register`` gives (a test holds
them equal).  A command without one is imported even to list it: correct, only slower."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command(argv)
    if command is not None and command not in COMMANDS:
        return fail(_unknown(command))
    parser = build_parser(() if command is None else (command,))
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's own parser, with its usage (argparse would show lossless's)
        _parser_of(parser, argv).error(f"unrecognized arguments: {' '.join(extra)}")
    func = getattr(args, "func", None) or getattr(args, "handler", None)
    if func is None:
        parser.print_help()
        return EXIT_USAGE
    args.warnings = []  # printed once the command has succeeded: a failure is exactly one line
    undefer = _defer_warnings(args.warnings) if command in _BATCH else None  # the library's too
    try:
        code = int(func(args) or 0)
        for w in args.warnings:
            print(f"lossless: warning: {printable(w)}", file=sys.stderr)
        return code
    except LosslessError as exc:
        return fail(str(exc))
    except BrokenPipeError:
        silence_stdout()  # the reader (`| head`) has all it wanted; the exit flush must not complain
        return 0
    except OSError as exc:
        name = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        return fail(f"{exc.strerror or exc}:{name}".rstrip(":"))
    except RecursionError:
        return fail(f"{getattr(args, 'file', 'the input')}: nested too deeply to process")
    except KeyboardInterrupt:
        return 130
    finally:
        if undefer is not None:
            undefer()


_BATCH = frozenset({"inspect", "replay", "compact", "recall", "demo", "memory", "store", "sessions", "report"})
"""Commands that run to an end: what the library warns of is said after their output, and not at all when
they fail.  A server's or the chat's warnings are said as they come."""


def _defer_warnings(into: list[str]) -> Callable[[], None]:
    """Keep the ``lossless`` logger's warnings in ``into``, for ``main`` to print once the command has
    succeeded (a system prompt over the threshold, said by the manager); returns what stops it."""
    import logging  # here: ``--help`` does not need it

    class Deferred(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage().removeprefix("lossless: ").removeprefix("warning: ")
            if message not in into:
                into.append(message)

    handler, logger = Deferred(logging.WARNING), logging.getLogger("lossless")
    logger.addHandler(handler)
    return lambda: logger.removeHandler(handler)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, its usage errors said in one line (the usage block is ``--help``'s); each
    command's parser is one too (``add_subparsers`` makes its parsers of the parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser(load: Collection[str] = COMMANDS) -> argparse.ArgumentParser:
    """The parser, with the commands in ``load`` registered in full (their modules imported)
    and every other one listed by its summary only; by default, all in full."""
    p = _Parser(prog="lossless", description="Keep LLM agents within their context window.")
    p.add_argument("--version", action="version", version=f"lossless {__version__}")
    sub = p.add_subparsers(title="commands", metavar="COMMAND")
    for name in COMMANDS:
        if name in load or name not in SUMMARIES:
            import_module(f".{name}", __name__).register(sub)
        else:
            sub.add_parser(name, help=SUMMARIES[name], add_help=False)
    return p


def _parser_of(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the innermost command ``argv`` names (``memory list``: list's)."""
    for word in argv:
        found = [a.choices[word] for a in parser._actions
                 if isinstance(a, argparse._SubParsersAction) and word in a.choices]
        if found:
            parser = found[0]
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (``lossless`` itself has
    only ``--help`` and ``--version``, which take no value); None when there is none."""
    words = iter(argv)
    for word in words:
        if word == "--":
            return next(words, None)
        if not word.startswith("-") or word == "-":
            return word
    return None


def _unknown(name: str) -> str:
    from difflib import get_close_matches

    near = get_close_matches(name, COMMANDS, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]!r}?" if near else "lossless --help lists them"
    return f"unknown command {name!r}; {hint}"
