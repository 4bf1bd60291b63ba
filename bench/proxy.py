"""What ``lossless proxy`` adds to a request, beside a pass-through and the floor.

    python bench/proxy.py [--sizes 10000,100000,200000] [--requests 20] [--window 200000] [--json]
    python bench/proxy.py --route responses               # the same history as Responses items

The conversation is real: Claude Code sessions of ``../shared/data`` joined end to
end (a short subagent transcript, then the three long sessions: Anthropic Messages
dicts, ~500k tokens); at each size, the requests are the run of rounds whose median
history is nearest that size.  At
each size, ``--requests`` requests are sent, each the previous one plus the next
round (assistant + user), as an agent sends its whole history every turn:

- **continuing**: the proxy saw the previous request (the normal case);
- **first-seen**: the same bodies with a unique first message, so every request
  is a conversation the proxy has never seen (a restart, a second client).

Three parts, measured in the same run:

1. **CPU, in process** (``time.process_time``, one thread): the proxy's rewrite
   step (``lossless.proxy.rewrite``: parse, hash chain, ``prepare``, render,
   serialise) against the floor every proxy that reads the request pays —
   ``json.loads`` of the body and ``json.dumps`` of what is forwarded.
   Target: continuing ≤ 2× the floor, flat in the size of the history beyond it.
2. **Time to first byte over HTTP**: an HTTP client streams each request through
   (a) ``lossless proxy`` and (b) a pass-through built on the same stack
   (uvicorn + httpx2, forwarding the bytes untouched), interleaved request by
   request, to an upstream that answers a canned stream at once without parsing
   (so the upstream adds nothing that depends on the body).  Added TTFB =
   proxy − pass-through, p50 and p99.
3. **CPU per request of the server processes** (``/proc/<pid>/stat``, 10 ms
   ticks: totals over all requests divided by their number).

``--route responses`` sends the same history as OpenAI Responses items (``instructions``,
function tools, ``input``) to ``POST /v1/responses``; the canned upstream then answers in the
Responses API's typed events, each answer the output items the next request echoes.

Every process runs on this machine's two cores; absolute times move with load,
the ratios measured side by side much less.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DATA = ROOT.parent / "shared" / "data" / "claude-code"
SESSIONS = ("subagent", "4d5611e5-241a-462a-8d15-5122611a9569", "8463c716-a2ea-4c14-9efa-87158ebd9f20",
            "ae4a77f8-aedd-4bc1-888f-c94edc91af04")
SYSTEM = [{"type": "text", "text": "You are a coding agent. " * 200, "cache_control": {"type": "ephemeral"}}]
TOOLS = [{"name": n, "description": f"The {n} tool. " * 40,
          "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}}}
         for n in ("Read", "Bash", "Edit", "Write", "Grep", "Glob")]

from lossless.dialects.anthropic import to_anthropic  # noqa: E402
from lossless.dialects.claude_code import read_session  # noqa: E402
from lossless.tokens import default_counter  # noqa: E402


# -- the conversation ---------------------------------------------------------------
def conversation() -> tuple[list[dict[str, Any]], list[int]]:
    """The joined sessions as Anthropic dicts, and the running token count after each message."""
    messages = []
    for name in SESSIONS:
        session = read_session(DATA / f"{name}.jsonl")
        messages.extend(session.messages)
    counter = default_counter()
    running, total = [], 0
    for m in messages:
        total += counter.count_message(m)
        running.append(total)
    return to_anthropic(messages), running


def ends(wire: list[dict[str, Any]], running: list[int], size: int, n: int) -> list[int]:
    """``n + 1`` request ends (exclusive), each a round (assistant + user) after the previous:
    the run whose median history is nearest ``size`` tokens."""
    users = [i for i in range(len(wire)) if wire[i]["role"] == "user"]
    first = min(range(len(users) - n),
                key=lambda j: abs(statistics.median(running[u] for u in users[j : j + n + 1]) - size))
    return [u + 1 for u in users[first : first + n + 1]]


def body(wire: list[dict[str, Any]], end: int, *, nonce: str | None = None, route: str = "anthropic") -> bytes:
    if route == "responses":
        return responses_body(wire, end, nonce=nonce)
    messages = wire[:end]
    if nonce is not None:  # a conversation nobody has seen: a different first message
        first = copy.deepcopy(messages[0])
        content = first["content"]
        first["content"] = ([{"type": "text", "text": nonce}, *content] if isinstance(content, list)
                            else f"{nonce}\n{content}")
        messages = [first, *messages[1:]]
    last = copy.deepcopy(messages[-1])  # the client's moving breakpoint, as Claude Code sets it
    if isinstance(last["content"], list) and last["content"]:
        last["content"][-1] = {**last["content"][-1], "cache_control": {"type": "ephemeral"}}
    messages = [*messages[:-1], last]
    return json.dumps({"model": "claude-bench", "max_tokens": 8_000, "stream": True, "system": SYSTEM,
                       "tools": TOOLS, "messages": messages}).encode()


_ITEMS: dict[int, list[list[dict[str, Any]]]] = {}


def responses_body(wire: list[dict[str, Any]], end: int, *, nonce: str | None = None) -> bytes:
    """The same history as a Responses request: each message's items, rendered once."""
    from lossless.dialects.anthropic import from_anthropic
    from lossless.dialects.responses import render_message

    per = _ITEMS.get(id(wire))
    if per is None:
        per = _ITEMS[id(wire)] = [render_message(m, i) for i, m in enumerate(from_anthropic(wire))]
    items = [item for m in per[:end] for item in m]
    if nonce is not None:
        items = [{"role": "user", "content": nonce}, *items]
    tools = [{"type": "function", "name": t["name"], "description": t["description"], "parameters": t["input_schema"]}
             for t in TOOLS]
    return json.dumps({"model": "gpt-bench", "max_output_tokens": 8_000, "stream": True,
                       "instructions": SYSTEM[0]["text"], "tools": tools, "input": items}).encode()


# -- 1. CPU in process --------------------------------------------------------------
def cpu_in_process(bodies: list[bytes], fresh: list[bytes], window: int, store: Path,
                   route: Any = "anthropic") -> dict[str, float]:
    from lossless.proxy.conversations import Conversations
    from lossless.proxy.rewrite import rewrite
    from lossless.proxy.server import manager_factory
    from lossless.proxy.settings import ProxySettings

    settings = ProxySettings(window=window, store=store, upstream="http://127.0.0.1:9")

    def floor(raw: bytes) -> None:
        json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":")).encode()

    registry = Conversations(manager_factory(settings))
    rewrite(registry, route, bodies[0])  # the conversation so far: seen
    out: dict[str, list[float]] = {"floor": [], "continuing": [], "first_seen": []}
    for raw, new in zip(bodies[1:], fresh[1:]):
        t = time.process_time()
        floor(raw)
        out["floor"].append(time.process_time() - t)
        t = time.process_time()
        rewrite(registry, route, raw)
        out["continuing"].append(time.process_time() - t)
        t = time.process_time()
        rewrite(Conversations(manager_factory(settings)), route, new)
        out["first_seen"].append(time.process_time() - t)
    return {k: statistics.median(v) * 1000 for k, v in out.items()}


# -- 2/3. over HTTP -----------------------------------------------------------------
def _spawn(argv: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         env={**os.environ, **(env or {})})
    assert p.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if "http://" in line:
            return p, "http://" + line.split("http://", 1)[1].split()[0].rstrip("/")
        if not line and p.poll() is not None:
            break
    p.kill()
    raise RuntimeError(f"{argv[:3]} did not print its URL")


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ttfb(client: Any, url: str, raw: bytes, turn: int, route: str = "anthropic") -> float:
    t = time.perf_counter()
    path = "/v1/responses" if route == "responses" else "/v1/messages"
    with client.stream("POST", url + path, content=raw,
                       headers={"content-type": "application/json", "x-api-key": "bench",
                                "anthropic-version": "2023-06-01", "x-bench-turn": str(turn)}) as response:
        first = None
        for _ in response.iter_raw():
            if first is None:
                first = time.perf_counter() - t
        if response.status_code != 200:
            raise RuntimeError(f"{url}: HTTP {response.status_code}")
    assert first is not None
    return first


def over_http(bodies: list[bytes], fresh: list[bytes], window: int, store: Path,
              route: str = "anthropic") -> dict[str, Any]:
    import httpx2 as httpx

    here = Path(__file__).resolve().parent
    # The upstream answers request K with the assistant message request K + 1 carries: the client
    # echoes the answer it was given, so the proxy continues the conversation (issue 20's rule).
    if route == "responses":
        from lossless.dialects.responses import item_kind

        said = [json.loads(b)["input"] for b in bodies]
        answers = {}
        for k in range(len(said) - 1):
            after = said[k + 1][len(said[k]):]
            n = next((i for i, item in enumerate(after) if item_kind(item) != "assistant"), len(after))
            if n:
                answers[str(k)] = after[:n]
    else:
        said = [json.loads(b)["messages"] for b in bodies]
        answers = {str(k): said[k + 1][len(said[k])]["content"] for k in range(len(said) - 1)
                   if len(said[k + 1]) > len(said[k]) and said[k + 1][len(said[k])]["role"] == "assistant"}
    answers_file = store / "answers.json"
    store.mkdir(parents=True, exist_ok=True)
    answers_file.write_text(json.dumps(answers), encoding="utf-8")
    upstream, up_url = _spawn([sys.executable, str(here / "_proxy_upstream.py"), str(answers_file),
                               *(["--responses"] if route == "responses" else [])])
    passthrough, pt_url = _spawn([sys.executable, str(here / "_proxy_passthrough.py"), up_url])
    env = {"PYTHONPATH": str(ROOT / "src")}
    out: dict[str, Any] = {}
    try:
        for kind, sent in (("continuing", bodies), ("first_seen", fresh)):
            proxy, px_url = _spawn([sys.executable, "-m", "lossless.cli", "proxy", "--port", "0", "--upstream",
                                    up_url, "--window", str(window), "--store", str(store / kind)], env)
            try:
                with httpx.Client(timeout=120) as client:
                    _ttfb(client, px_url, sent[0], 0, route)  # warm: the conversation so far (continuing), imports
                    _ttfb(client, pt_url, sent[0], 0, route)
                    added, px, pt = [], [], []
                    cpu_px = cpu_pt = 0.0
                    for turn, raw in enumerate(sent[1:], 1):
                        c0 = _cpu(proxy.pid)
                        a = _ttfb(client, px_url, raw, turn, route)
                        c1 = _cpu(proxy.pid)
                        c2 = _cpu(passthrough.pid)
                        b = _ttfb(client, pt_url, raw, turn, route)
                        c3 = _cpu(passthrough.pid)
                        cpu_px += c1 - c0
                        cpu_pt += c3 - c2
                        px.append(a)
                        pt.append(b)
                        added.append(a - b)
            finally:
                proxy.terminate()
                proxy.wait(10)
            n = len(added)
            out[kind] = {
                "ttfb_proxy_p50_ms": _ms(statistics.median(px)), "ttfb_passthrough_p50_ms": _ms(statistics.median(pt)),
                "added_ttfb_p50_ms": _ms(statistics.median(added)), "added_ttfb_p99_ms": _ms(_p99(added)),
                "cpu_proxy_ms": _ms(cpu_px / n), "cpu_passthrough_ms": _ms(cpu_pt / n),
            }
    finally:
        for p in (passthrough, upstream):
            p.terminate()
            p.wait(10)
    return out


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


# -- main ---------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,200000")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--window", type=int, default=200_000)
    parser.add_argument("--no-http", action="store_true", help="only the in-process CPU part")
    parser.add_argument("--route", choices=("anthropic", "responses"), default="anthropic",
                        help="the API the requests speak")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    if not DATA.is_dir():
        print(f"bench/proxy.py: {DATA} is missing (the shared data sits beside the checkout)", file=sys.stderr)
        return 2
    wire, running = conversation()
    results: dict[str, Any] = {"window": args.window, "requests": args.requests, "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="lossless-bench-proxy-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            stops = ends(wire, running, size, args.requests)
            bodies = [body(wire, e, route=args.route) for e in stops]
            fresh = [body(wire, e, nonce=f"conversation {uuid.uuid4()}", route=args.route) for e in stops]
            row: dict[str, Any] = {"tokens": round(statistics.median(running[e - 1] for e in stops)),
                                   "body_kb": round(statistics.median(len(b) for b in bodies) / 1024)}
            cpu = cpu_in_process(bodies, fresh, args.window, Path(tmp) / f"cpu-{size}", args.route)
            row["cpu_ms"] = {k: round(v, 2) for k, v in cpu.items()}
            row["continuing_over_floor"] = round(cpu["continuing"] / cpu["floor"], 2)
            row["first_seen_over_floor"] = round(cpu["first_seen"] / cpu["floor"], 2)
            if not args.no_http:
                row["http"] = over_http(bodies, fresh, args.window, Path(tmp) / f"http-{size}", args.route)
            results["sizes"][size] = row
            if not args.json:
                _print_row(size, row)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


def _print_row(size: int, row: dict[str, Any]) -> None:
    c = row["cpu_ms"]
    print(f"{size:>7,} tokens (median {row['tokens']:,}, {row['body_kb']:,} KB body): floor {c['floor']:.2f} ms · continuing "
          f"{c['continuing']:.2f} ms ({row['continuing_over_floor']}×) · first-seen {c['first_seen']:.2f} ms "
          f"({row['first_seen_over_floor']}×)", flush=True)
    for kind, h in row.get("http", {}).items():
        print(f"          {kind:<10} TTFB p50 proxy {h['ttfb_proxy_p50_ms']} ms / pass-through "
              f"{h['ttfb_passthrough_p50_ms']} ms; added p50 {h['added_ttfb_p50_ms']} ms, p99 "
              f"{h['added_ttfb_p99_ms']} ms; CPU/request proxy {h['cpu_proxy_ms']} ms, pass-through "
              f"{h['cpu_passthrough_ms']} ms", flush=True)


if __name__ == "__main__":
    sys.exit(main())
