"""``lossless proxy``: serve the Anthropic and OpenAI APIs with lossless in front.

    lossless proxy --port 8787 [--upstream URL] [--window N] [--max-output N] [--store DIR] [--verbose]
    lossless proxy --host 0.0.0.0 --auth-token TOKEN [--tenant-header X-Team]   # for a team

Prints the address it listens on and the lines to export, then serves until Ctrl-C or
SIGTERM and exits 0.  Bad options, or a port in use, are one line and exit 2.  Beyond this
machine (``--host`` not loopback) it warns, and refuses to start without ``--auth-token``
(or ``$LOSSLESS_PROXY_TOKEN``) unless told ``--insecure``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

from ..proxy.settings import MAX_BODY, MAX_HELD_BYTES
from ._common import positive, provider_from, summarizer_options

DEFAULT_PORT = 8787
TOKEN_ENV = "LOSSLESS_PROXY_TOKEN"


def register(sub: Any) -> None:
    s = sub.add_parser("proxy", help="an HTTP proxy for any agent on the Anthropic or OpenAI API (no code changes)",
                       description="Serve POST /v1/messages and /v1/chat/completions with lossless in front: "
                                   "each request is made to fit and forwarded; GET /stats says what it did.")
    s.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT}; "
                                                                    "0: any free port)")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only; "
                                                      "any other needs --auth-token or --insecure)")
    s.add_argument("--auth-token", default=os.environ.get(TOKEN_ENV) or None, metavar="TOKEN",
                   help="clients must send it in the x-lossless-token header (others get a 401; it is never "
                        f"forwarded); default ${TOKEN_ENV}, which keeps it out of the process list")
    s.add_argument("--tenant-header", metavar="NAME",
                   help="a header naming the tenant, set by a gateway in front (trusted only with --auth-token); "
                        "default: the tenant is a keyed hash of the request's API key")
    s.add_argument("--insecure", action="store_true",
                   help="serve beyond this machine without --auth-token: anyone who reaches the port uses it")
    s.add_argument("--max-body", type=positive, default=MAX_BODY, metavar="BYTES",
                   help=f"largest request body (default {MAX_BODY:,}, the Messages API's own limit; larger: 413)")
    s.add_argument("--max-held-bytes", type=positive, default=MAX_HELD_BYTES, metavar="BYTES",
                   help=f"request bytes the conversations kept in memory may stand for (default {MAX_HELD_BYTES:,}); "
                        "beyond it the least recently used is parked in the store and restored when it goes on")
    s.add_argument("--upstream", help="where to forward (default: api.anthropic.com for Messages, api.openai.com "
                                      "for Chat Completions; any OpenAI-compatible server)")
    s.add_argument("--window", type=positive, metavar="TOKENS",
                   help="the context window every request fits (default: each request's model's own, from the "
                        "models' data; an unknown model gets 128000 and one warning)")
    s.add_argument("--max-output", type=positive, help="tokens reserved for the answer (a request asking more "
                                                       "gets what it asks)")
    s.add_argument("--store", help="transcripts and artifacts: a directory or postgresql://… (default: "
                                   "$LOSSLESS_STORE, else $LOSSLESS_HOME or the nearest .lossless)")
    s.add_argument("--verbose", action="store_true", help="one line per request on stderr (no headers, no content)")
    summarizer_options(s)
    s.set_defaults(func=run)


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number") from None
    if not 0 <= port <= 65_535:
        raise argparse.ArgumentTypeError(f"{port} is not between 0 and 65535")
    return port


def run(args: argparse.Namespace) -> int:
    try:
        import httpx2  # noqa: F401 - checked here so a missing extra is one line, not a traceback
        import uvicorn  # noqa: F401
    except ImportError as exc:
        from ..errors import ConfigError

        raise ConfigError(f"lossless proxy needs its extra: pip install 'lossless[proxy]' ({exc.name} missing)") \
            from None
    from ..proxy import ProxyServer, ProxySettings

    settings = ProxySettings(upstream=args.upstream, window=args.window, max_output=args.max_output,
                             store=args.store, host=args.host, port=args.port, verbose=args.verbose,
                             provider=provider_from(args), auth_token=args.auth_token,
                             tenant_header=args.tenant_header, insecure=args.insecure, max_body=args.max_body,
                             max_held_bytes=args.max_held_bytes)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with ProxyServer(settings) as proxy:
            url = proxy.base_url
            host = settings.host if ":" not in settings.host else f"[{settings.host}]"
            where = " (every interface)" if settings.host in ("0.0.0.0", "::", "") else ""
            print(f"lossless proxy listening on http://{host}:{proxy.port}{where} "
                  f"(upstream: {settings.upstream_shown()})", flush=True)
            if settings.public:
                guard = ("clients must send its token in the x-lossless-token header" if settings.auth_token
                         else "WITHOUT a token (--insecure): anyone who reaches it uses your upstream")
                print(f"lossless proxy: warning: {settings.host} serves beyond this machine, on port {proxy.port}; "
                      f"{guard}", file=sys.stderr, flush=True)
            print(f"lossless proxy: transcripts and the originals behind handles go to {proxy.store_label}",
                  file=sys.stderr, flush=True)
            print(f"export ANTHROPIC_BASE_URL={url}", flush=True)
            print(f"export OPENAI_BASE_URL={url}/v1", flush=True)
            while not stop.wait(0.5):
                pass
            print("lossless proxy: stopping", file=sys.stderr, flush=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
