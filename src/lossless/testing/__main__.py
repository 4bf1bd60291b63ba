"""``python -m lossless.testing serve [--port P] [faults…]``: run the fake server.

Prints its base URL on the first line (``--port 0``, the default, picks a free
port), then serves on 127.0.0.1 until interrupted (Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from dataclasses import fields
from typing import Sequence

from .server import FakeServer, Faults


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lossless.testing", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the fake Anthropic/OpenAI server on 127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="port to bind (0: a free one)")
    serve.add_argument("--fail-429", type=int, default=0, metavar="N", help="first N requests get a 429")
    serve.add_argument("--fail-529", type=int, default=0, metavar="N", help="next N get an overload (529/503)")
    serve.add_argument("--fail-500", type=int, default=0, metavar="N", help="next N get a 500")
    serve.add_argument("--retry-after", type=float, default=1.0, metavar="SECONDS",
                       help="retry-after sent with 429/529")
    serve.add_argument("--retry-after-date", action="store_true", help="send retry-after as an HTTP date")
    serve.add_argument("--max-prompt-tokens", type=int, default=None, metavar="T",
                       help="prompts estimated above T get the provider's 'prompt too long' 400")
    serve.add_argument("--too-long-style", choices=["native", "llamacpp", "vllm", "ollama"], default="native",
                       help="wording of 'too long' on the OpenAI path")
    serve.add_argument("--broken-stream", action="store_true", help="cut streams mid-way")
    serve.add_argument("--slow", type=float, default=0.0, metavar="SECONDS", help="delay before each answer")
    serve.add_argument("--stream-delay", type=float, default=0.0, metavar="SECONDS",
                       help="delay before each event of a stream, as a model writing a token at a time")
    serve.add_argument("--summary", choices=["good", "empty", "malformed"], default="good",
                       help="what summary requests get")
    serve.add_argument("--reply", default=None, help="fixed text for non-summary requests")
    serve.add_argument("--notes", action="store_true", help="session-notes requests get the deterministic notes")
    serve.add_argument("--verbose", action="store_true", help="log each request to stderr")
    return parser


def faults_from(args: argparse.Namespace) -> Faults:
    """The ``Faults`` the flags ask for: one flag per field (a test keeps it so)."""
    return Faults(**{f.name: getattr(args, f.name) for f in fields(Faults)})


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    faults = faults_from(args)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with FakeServer(faults, port=args.port, verbose=args.verbose) as server:
        print(server.base_url, flush=True)
        try:
            while not done.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
