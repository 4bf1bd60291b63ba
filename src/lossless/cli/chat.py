"""``lossless chat [PATH]``: a coding agent in the terminal, its context kept under the window.

    lossless chat                                   # Anthropic (ANTHROPIC_API_KEY), this directory
    lossless chat --provider openai --model gpt-5-mini
    lossless chat --provider openai --base-url http://localhost:11434/v1 --model qwen3 --window 32768
    lossless chat -p "TASK" --yes                   # one request, the answer on stdout
    lossless chat --resume [SESSION]                # continue after a restart or a crash
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._legacy import store_folder
from ..errors import ConfigError
from ._common import positive

DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5-mini"}
FAKE_WINDOW = 32_000


def register(sub: Any) -> None:
    s = sub.add_parser("chat", help="a coding agent in the terminal, its context managed by lossless")
    s.add_argument("path", nargs="?", type=Path, default=Path("."), help="the working directory (default: .)")
    s.add_argument("-p", "--print", dest="task", metavar="TASK",
                   help="run one request without asking anything, print the answer and exit (0: answered)")
    s.add_argument("--provider", choices=("anthropic", "openai", "fake"), default="anthropic",
                   help="anthropic (ANTHROPIC_API_KEY), openai or any OpenAI-compatible server "
                        "(OPENAI_API_KEY, or --base-url), fake (offline, scripted answers)")
    s.add_argument("--model", help="the model (default: claude-sonnet-4-5 / gpt-5-mini)")
    s.add_argument("--base-url", help="API base URL: a local server (Ollama http://localhost:11434/v1), a proxy")
    s.add_argument("--window", type=positive, metavar="N", help="the model's context window (default: its known one)")
    s.add_argument("--max-output", type=positive, metavar="N", help="max tokens per answer (default: from the model)")
    s.add_argument("--store", type=Path, help="lossless's store (default: PATH/.lossless)")
    s.add_argument("--no-memory", action="store_true", help="no long-term memory for this session")
    s.add_argument("--yes", action="store_true", help="run shell commands and write files without asking")
    s.add_argument("--allow-dir", action="append", type=Path, default=[], metavar="DIR",
                   help="let the tools reach DIR too (repeatable)")
    s.add_argument("--resume", nargs="?", const="", metavar="SESSION",
                   help="continue a session (default: the latest of this directory)")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..chat.agent import Settings
    from ..chat.app import App
    from ..chat.models import model_limits
    from ..chat.terminal import Terminal
    from ._providers import make_provider

    workdir = args.path.expanduser().resolve()
    if not workdir.is_dir():
        raise ConfigError(f"{args.path} is not a directory")
    allow = []
    for d in args.allow_dir:
        real = d.expanduser().resolve()
        if not real.is_dir():
            raise ConfigError(f"--allow-dir {d}: not a directory")
        allow.append(real)
    model = args.model or DEFAULT_MODELS.get(args.provider)
    window = args.window or (FAKE_WINDOW if args.provider == "fake" else None)
    limits = model_limits(model, window=window, max_output=args.max_output)
    provider = make_provider(args.provider, model, args.base_url)
    interactive = args.task is None
    settings = Settings(workdir=workdir, store=(args.store or store_folder(workdir)).expanduser().resolve(),
                        provider=args.provider, model=model if args.provider != "fake" else None,
                        window=limits.window, max_output=limits.max_output, memory=not args.no_memory,
                        yes=args.yes, interactive=interactive, allow=tuple(allow))
    terminal = Terminal(interactive=interactive)
    app = App(settings, provider, terminal, resume_id=args.resume)
    if args.task is not None:
        if not args.task.strip():
            raise ConfigError("-p needs a task: lossless chat -p \"what to do\"")
        return app.once(args.task)
    return app.run()
