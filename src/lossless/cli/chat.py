"""``lossless chat [PATH]``: a coding agent in the terminal, its context kept under the window.

    lossless chat --provider demo                   # a scripted session, offline, no key: see it work
    lossless chat                                   # Anthropic (ANTHROPIC_API_KEY), this directory
    lossless chat --provider openai --model gpt-5-mini
    lossless chat --provider openai --base-url http://localhost:11434/v1 --model qwen3 --window 32768
    lossless chat -p "TASK" --yes                   # one request, the answer on stdout
    lossless chat --resume [SESSION]                # continue after a restart or a crash
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..store import nearest_store_folder
from ._common import positive, unwinding_on_termination

FAKE_WINDOW = 32_000
HISTORY = "chat-history"
"""The file in the store that keeps what was typed at the prompt (↑ recalls it in the next session)."""


def default_model(provider: str) -> str | None:
    """The model a provider gets without ``--model`` (``chat.models.DEFAULT_MODELS``)."""
    from ..chat.models import DEFAULT_MODELS

    return DEFAULT_MODELS.get(provider)


def _warn(message: str) -> None:
    import sys

    print(f"lossless: warning: {message}", file=sys.stderr)


def register(sub: Any) -> None:
    s = sub.add_parser("chat", help="a coding agent in the terminal, its context managed by lossless")
    s.add_argument("path", nargs="?", type=Path, default=Path("."), help="the working directory (default: .)")
    s.add_argument("-p", "--print", dest="task", metavar="TASK",
                   help="run one request without asking anything, print the answer and exit (0: answered)")
    s.add_argument("--provider", choices=("anthropic", "openai", "demo", "fake"), default="anthropic",
                   help="anthropic (ANTHROPIC_API_KEY), openai or any OpenAI-compatible server "
                        "(OPENAI_API_KEY, or --base-url), demo (a scripted session on a generated project, "
                        "offline), fake (offline, answers \"OK.\")")
    s.add_argument("--model", help=f"the model (default: {default_model('anthropic')} / {default_model('openai')})")
    s.add_argument("--base-url", help="API base URL: a local server (Ollama http://localhost:11434/v1), a proxy")
    s.add_argument("--window", type=positive, metavar="N", help="the model's context window (default: its known one)")
    s.add_argument("--max-output", type=positive, metavar="N", help="max tokens per answer (default: from the model)")
    s.add_argument("--store", type=Path, help="lossless's store (default: PATH/.lossless, or the nearest one above PATH in its project)")
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
    from ..chat.commands import DESCRIPTIONS
    from ..chat.models import model_limits
    from ..chat.terminal import Terminal
    from ._providers import make_provider

    if args.provider == "demo":
        return demo(args)
    if args.task is not None and not args.task.strip():
        raise ConfigError("-p needs a task: lossless chat -p \"what to do\"")
    workdir = args.path.expanduser().resolve()
    if not workdir.is_dir():
        raise ConfigError(f"{args.path} is not a directory")
    allow = []
    for d in args.allow_dir:
        real = d.expanduser().resolve()
        if not real.is_dir():
            raise ConfigError(f"--allow-dir {d}: not a directory")
        allow.append(real)
    model = args.model or default_model(args.provider)
    window = args.window or (FAKE_WINDOW if args.provider == "fake" else None)
    limits = model_limits(model, window=window, max_output=args.max_output, warn=_warn)
    provider = make_provider(args.provider, model, args.base_url)
    interactive = args.task is None
    store = (args.store or nearest_store_folder(workdir)).expanduser().resolve()
    settings = Settings(workdir=workdir, store=store,
                        provider=args.provider, model=model if args.provider != "fake" else None,
                        window=limits.window, max_output=limits.max_output, memory=not args.no_memory,
                        yes=args.yes, interactive=interactive, allow=tuple(allow))
    terminal = Terminal(interactive=interactive, history=store / HISTORY, commands=DESCRIPTIONS)
    app = App(settings, provider, terminal, resume_id=args.resume)
    if args.task is not None:
        return app.once(args.task)
    return app.run()


def demo(args: argparse.Namespace) -> int:
    """The scripted session of ``chat.demo`` on a project generated in a temporary directory
    (removed at the end): nothing is read from PATH, nothing is sent anywhere."""
    import sys

    from ..chat import demo as scripted
    from ..chat.agent import Settings
    from ..chat.app import App
    from ..chat.terminal import Terminal, can_draw

    if args.task is not None or args.resume is not None:
        raise ConfigError("the demo plays its own script: run `lossless chat --provider demo` alone")
    pace = 1.0 if can_draw(sys.stdout, None) else 0.0
    if os.environ.get("LOSSLESS_DEMO_PACE"):
        try:
            pace = max(0.0, float(os.environ["LOSSLESS_DEMO_PACE"]))
        except ValueError:
            raise ConfigError(f"LOSSLESS_DEMO_PACE={os.environ['LOSSLESS_DEMO_PACE']!r}: "
                              "expected a number (1 as a person reads, 0 at full speed)") from None
    with unwinding_on_termination(), tempfile.TemporaryDirectory(prefix="lossless-demo-") as tmp:
        work = scripted.make_project(Path(tmp))
        settings = Settings(workdir=work, store=work / ".lossless", provider="demo", model="demo",
                            window=scripted.WINDOW, max_output=scripted.MAX_OUTPUT, memory=False, yes=True,
                            interactive=True)
        terminal = Terminal(interactive=True, script=scripted.INPUTS, pace=pace)
        terminal.note("demo: a scripted model on a small generated project; nothing leaves this machine", "notice")
        status = App(settings, scripted.DemoModel(pace=pace), terminal).run()
        terminal.note("demo over: `lossless chat` in your project starts a real session (ANTHROPIC_API_KEY, or "
                      "--provider openai); `lossless chat --help` has the keys and commands", "notice")
    return status
