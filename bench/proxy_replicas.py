"""What a replica switch adds to a request's time to first byte (issue 20, point 11).

    python bench/proxy_replicas.py [--turns 40] [--window 200000]

One conversation of tool rounds (~3,000-character outputs, a 60,000-character one every tenth
turn) through three set-ups, in one run, against the same fake upstream:

- **one**: a single proxy on a directory store, and on a PostgreSQL store (every request continues
  in memory);
- **shared**: two proxies on one PostgreSQL store, the client alternating between them (every
  request lands on the replica that did not see the previous one and continues from the
  database);
- **apart**: two proxies on separate directory stores, alternating (every switch is a
  conversation the replica has never seen: rebuilt from scratch).

Time to first byte of each streamed request, measured by the client (httpx); the first four
requests of each set-up are left out (connection set-up, the first build).  The PostgreSQL server
is a throwaway cluster from Debian's binaries (``tests/pg_kit.py``) with its default durability.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

SKIP = 4


def _history_turn(turn: int) -> tuple[dict[str, Any], dict[str, Any]]:
    tool_id = f"toolu_{turn:04d}"
    size = 60_000 if turn % 10 == 9 else 3_000
    line = f"turn {turn}: -rw-r--r-- 1 dev dev 4096 src/module_{turn}.py ok\n"
    return ({"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": "Bash",
                                                "input": {"command": f"cat part{turn}"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id,
                                          "content": (line * (size // len(line) + 1))[:size]}]})


def run(stores: list[str], turns: int, window: int) -> list[float]:
    import httpx

    from lossless.proxy import ProxyServer, ProxySettings
    from lossless.testing import FakeServer

    tool = {"name": "Bash", "description": "Run a command.",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}
    ttfb: list[float] = []
    with FakeServer() as srv, contextlib.ExitStack() as stack:
        proxies = [stack.enter_context(ProxyServer(ProxySettings(upstream=srv.base_url, window=window, store=s),
                                                   log=lambda _: None)) for s in stores]
        # TCP_NODELAY on the client too: without it a body sent after its headers waits out the
        # server's delayed ACK (~40 ms), which would swamp what is measured.
        nodelay = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        client = stack.enter_context(httpx.Client(timeout=60, transport=nodelay))
        history: list[dict[str, Any]] = [{"role": "user", "content": "Survey the repository."}]
        for turn in range(turns):
            tool_id = f"toolu_{turn:04d}"
            srv.enqueue([{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": f"cat part{turn}"}}])
            body = {"model": "m", "max_tokens": 1_000, "stream": True, "system": "Be brief.", "tools": [tool],
                    "messages": history}
            proxy = proxies[turn % len(proxies)]
            started = time.perf_counter()
            with client.stream("POST", proxy.base_url + "/v1/messages", json=body,
                               headers={"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}) as r:
                stream = r.iter_raw()
                next(stream)
                ttfb.append(time.perf_counter() - started)
                for _ in stream:
                    pass
            history += list(_history_turn(turn))
    return ttfb[SKIP:]


def _row(name: str, xs: list[float], base: float) -> str:
    ms = sorted(x * 1000 for x in xs)
    p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
    median = statistics.median(ms)
    return (f"| {name} | {median:.1f} | {statistics.fmean(ms):.1f} | {p99:.1f} | {ms[-1]:.1f} | "
            f"{median / base:.2f}× |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--window", type=int, default=200_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from pg_kit import PgServer, why_unavailable

    reason = why_unavailable()
    if reason:
        print(f"proxy_replicas: {reason}", file=sys.stderr)
        return 2
    server = PgServer.start(durable=True)
    try:
        with tempfile.TemporaryDirectory(prefix="lossless-replicas-") as tmp:
            local = run([str(Path(tmp) / "one")], args.turns, args.window)
            one = run([server.create_db()], args.turns, args.window)
            url = server.create_db()
            shared = run([url, url], args.turns, args.window)
            apart = run([str(Path(tmp) / "a"), str(Path(tmp) / "b")], args.turns, args.window)
    finally:
        server.stop()
    results = {"local": local, "one": one, "shared": shared, "apart": apart}
    if args.json:
        print(json.dumps(results))
        return 0
    base = statistics.median(one) * 1000
    print(f"time to first byte, ms ({args.turns - SKIP} streamed requests each, window {args.window:,})\n")
    print("| set-up | p50 | mean | p99 | max | p50 vs one proxy |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, xs in (("one proxy, directory store", local), ("one proxy, PostgreSQL", one), ("two replicas, one PostgreSQL, alternating", shared),
                     ("two proxies, separate stores, alternating", apart)):
        print(_row(name, xs, base))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
