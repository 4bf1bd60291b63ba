"""The ``lossless`` command: a thin ``main(argv) -> int`` over library calls.

One module per command (``COMMANDS``); each has ``register(sub)``, which adds its
parser and sets ``func`` (or ``handler``) to the function that runs it.  Every
failure the user can cause ends in one line on stderr and exit code 2, never a
traceback.
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module
from typing import Sequence

from .. import __version__
from ..errors import LosslessError
from ._common import EXIT_USAGE, fail, printable, silence_stdout

__all__ = ["COMMANDS", "EXIT_USAGE", "build_parser", "main"]

COMMANDS = (
    "inspect",
    "replay",
    "compact",
    "recall",
    "demo",
    "memory",
    "proxy",
    "wrap",
    "mcp",
    "store",
    "chat",
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None) or getattr(args, "handler", None)
    if func is None:
        parser.print_help()
        return EXIT_USAGE
    args.warnings = []  # printed once the command has succeeded: a failure is exactly one line
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lossless", description="Keep LLM agents within their context window.")
    p.add_argument("--version", action="version", version=f"lossless {__version__}")
    sub = p.add_subparsers(title="commands", metavar="COMMAND")
    for name in COMMANDS:
        import_module(f".{name}", __name__).register(sub)
    return p
