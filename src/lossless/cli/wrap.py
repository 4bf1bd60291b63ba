"""``lossless wrap [PROXY OPTIONS] COMMAND [ARGS…]``: run an agent through the proxy.

    lossless wrap claude                              # Claude Code, managed
    lossless wrap --model claude-sonnet-4-6 claude    # the agent's model (ANTHROPIC_MODEL)
    lossless wrap --window 64000 -- my-agent --flag   # any agent; `--` ends lossless's options
    lossless wrap codex                               # Codex CLI (an OpenAI key in OPENAI_API_KEY)

Starts ``lossless proxy`` on a free 127.0.0.1 port, runs the command with
``ANTHROPIC_BASE_URL`` (and ``OPENAI_BASE_URL=<base>/v1``) pointing at it and the
terminal handed over (stdin, stdout and stderr inherited), then stops the proxy
once the agent has exited, and exits with the agent's code (128 + N when a signal N
ended it).  Options before the command are the proxy's; everything from the
command on is the agent's, untouched — but for Codex CLI, which reads its endpoint from its
configuration rather than ``OPENAI_BASE_URL``: ``codex`` gets two ``-c`` settings after its name
that make the proxy its model provider (``agent_command``).  The proxy budgets each request by its
model's window (``lossless.modelinfo``) unless ``--window`` says otherwise.

Signals: Ctrl-C at a terminal reaches the agent directly (it shares the terminal's
foreground group), so lossless itself only waits — it never dies under the agent
and takes the proxy with it.  A SIGINT, SIGTERM or SIGHUP sent to lossless alone
is passed on to the agent; the proxy stops after the agent has exited.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import ConfigError, InputError
from ._common import count, positive, provider_from

__all__ = ["INSTALL_HINTS", "agent_command", "command_of", "register", "resolve", "run", "supervise", "wrapped_env"]

INSTALL_HINTS = {"claude": "install it with npm install -g @anthropic-ai/claude-code",
                 "codex": "install it with npm install -g @openai/codex"}
"""What to tell a user whose command is not on PATH, for the agents we know."""

FORWARDED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def register(sub: Any) -> None:
    """Add ``wrap`` to the ``lossless`` subcommands."""
    p = sub.add_parser("wrap", help="run an agent (claude, codex, or any command after --) through the proxy",
                       description="Start the proxy on a free port, run COMMAND with ANTHROPIC_BASE_URL and "
                                   "OPENAI_BASE_URL pointing at it, stop the proxy when it exits, and exit with its "
                                   "code. Options before COMMAND are the proxy's; the rest is COMMAND's (codex also "
                                   "gets the proxy as its model provider, in two -c settings).",
                       epilog="examples: lossless wrap claude | lossless wrap codex | "
                              "lossless wrap --window 64000 -- my-agent --flag",
                       usage="lossless wrap [PROXY OPTIONS] COMMAND [ARGS...]")
    p.add_argument("--upstream", metavar="URL", help="where the proxy forwards (default: api.anthropic.com for "
                                                     "Messages, api.openai.com for Chat Completions and Responses)")
    p.add_argument("--model", metavar="MODEL", help="the agent's model: set as ANTHROPIC_MODEL, which Claude Code "
                                                    "reads (other agents take it in their own options)")
    p.add_argument("--window", type=positive, metavar="TOKENS",
                   help="the context window every request fits (default: each request's model's own, from the "
                        "models' data; an unknown model gets 128000 and one warning)")
    p.add_argument("--max-output", type=positive, metavar="TOKENS", help="tokens reserved for the answer (a request "
                                                                         "asking more gets what it asks)")
    p.add_argument("--store", type=Path, metavar="DIR", help="transcripts and artifacts (default: $LOSSLESS_HOME "
                                                             "or the nearest .lossless)")
    p.add_argument("--port", type=count, default=0, help="port for the proxy (default 0: a free one)")
    p.add_argument("--verbose", action="store_true", help="the proxy logs one line per request on stderr")
    p.add_argument("--summarizer", choices=("fallback", "llm"), default="fallback",
                   help="fallback: the deterministic summary (no model); llm: summaries by --provider")
    p.add_argument("--provider", choices=("anthropic", "openai", "fake"),
                   help="who summarises with --summarizer llm (keys from ANTHROPIC_API_KEY / OPENAI_API_KEY; "
                        "'fake' is lossless's offline summarizer)")
    p.add_argument("--summary-model", metavar="MODEL", help="the model the summariser uses (not the agent's: --model)")
    p.add_argument("--base-url", metavar="URL", help="the summariser's API base URL (a local OpenAI-compatible server)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the agent and its arguments")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Start the proxy, run the agent through it, stop the proxy; the agent's exit code."""
    command = command_of(args)
    env = dict(os.environ)
    executable = resolve(command[0], env)
    if os.path.basename(command[0]) == "codex" and not env.get("OPENAI_API_KEY"):
        raise InputError("codex through lossless needs an OpenAI API key in OPENAI_API_KEY: the proxy serves the "
                         "OpenAI API, and a ChatGPT sign-in goes to chatgpt.com instead")
    try:
        import httpx2  # noqa: F401 - checked here so a missing extra is one line, not a traceback
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"lossless wrap needs the proxy extra: pip install 'lossless[proxy]' ({exc.name} "
                          "missing)") from None
    from ..proxy import ProxyServer, ProxySettings

    if args.summarizer == "llm" and args.provider in ("anthropic", "openai") and not args.summary_model:
        raise ConfigError(f"--provider {args.provider} needs --summary-model (the model to summarise with; "
                          "--model is the agent's)")

    settings = ProxySettings(upstream=args.upstream, window=args.window, max_output=args.max_output,
                             store=args.store, host="127.0.0.1", port=args.port, verbose=args.verbose,
                             provider=provider_from(argparse.Namespace(**{**vars(args), "model": args.summary_model})))
    with ProxyServer(settings) as proxy:
        if args.verbose:
            print(f"lossless: proxy on {proxy.base_url}, running {command[0]}", file=sys.stderr, flush=True)
        return supervise(agent_command(command, proxy.base_url), wrapped_env(proxy.base_url, env, model=args.model),
                         executable=executable)


def command_of(args: argparse.Namespace) -> list[str]:
    """The agent's command line exactly as the user gave it (a leading ``--``, which ends
    lossless's options, dropped); a one-line error when there is none."""
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise InputError("wrap: no command to run; e.g. lossless wrap claude, or lossless wrap -- my-agent --flag")
    return command


def resolve(name: str, env: Mapping[str, str]) -> str:
    """The executable ``name`` runs, looked up on the agent's PATH; a one-line error
    (with how to install it, for agents we know) when there is none."""
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found is not None:
        return found
    if os.sep in name and os.path.exists(name):
        raise InputError(f"{name}: not executable (chmod +x it, or run it through its interpreter)")
    hint = INSTALL_HINTS.get(os.path.basename(name), "check the name, or add its directory to PATH")
    raise InputError(f"{name}: not found; {hint}")


def agent_command(command: Sequence[str], base_url: str) -> list[str]:
    """``command``, pointed at the proxy where the agent ignores the SDKs' variables: Codex CLI
    takes its provider from ``-c`` settings (the OpenAI API through the proxy, keyed by
    ``OPENAI_API_KEY``), given right after its name so they hold for any subcommand."""
    if os.path.basename(command[0]) != "codex":
        return list(command)
    provider = (f'{{name="lossless", base_url="{base_url.rstrip("/")}/v1", env_key="OPENAI_API_KEY", '
                'wire_api="responses"}')
    return [command[0], "-c", 'model_provider="lossless"', "-c", f"model_providers.lossless={provider}",
            *command[1:]]


def wrapped_env(base_url: str, env: Mapping[str, str], *, model: str | None = None) -> dict[str, str]:
    """``env`` with both SDK families pointed at the proxy (keys and everything else kept), and
    ``model``, when given, as ``ANTHROPIC_MODEL`` (Claude Code's choice of model)."""
    out = {**env, "ANTHROPIC_BASE_URL": base_url, "OPENAI_BASE_URL": base_url.rstrip("/") + "/v1"}
    if model:
        out["ANTHROPIC_MODEL"] = model
    return out


def supervise(command: Sequence[str], env: Mapping[str, str], *, executable: str | None = None) -> int:
    """Run ``command`` (``executable`` if given, with ``command[0]`` kept as the agent's
    argv[0]) with the terminal handed over and return its exit code, passing on the
    signals sent to lossless alone (see the module docstring)."""
    child: subprocess.Popen[bytes] | None = None
    early: list[int] = []  # arrived before the agent existed: delivered once it does

    def forward(signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and _terminal_delivers_to_us():
            return  # the terminal's Ctrl-C reached the agent already; a second one would mean "exit now"
        if child is None:
            early.append(signum)
            return
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    previous = {}
    try:  # before the agent starts, so no signal in between kills lossless and orphans the proxy
        for signum in FORWARDED:
            previous[signum] = signal.signal(signum, forward)
    except ValueError:  # not the main thread: signals cannot be caught here, the agent still runs
        pass
    try:
        try:
            child = subprocess.Popen(list(command), executable=executable, env=dict(env))
        except OSError as exc:  # raced away since resolve(), or not a valid executable format
            raise InputError(f"{command[0]}: cannot run: {exc.strerror or exc}") from None
        for signum in early:
            child.send_signal(signum)
        code = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code


def _terminal_delivers_to_us() -> bool:
    """True when our process group is a terminal's foreground group: a Ctrl-C there
    signals every process in the group, the agent included.  (Without process groups,
    as on Windows, a console's Ctrl-C reaches every process attached to it.)"""
    if not hasattr(os, "tcgetpgrp"):
        return True
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
                return True
        except OSError:
            continue
    return False
