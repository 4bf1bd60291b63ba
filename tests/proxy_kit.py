"""Shared pieces of the proxy tests: a proxy in front of the fake server, the checks
every forwarded request must pass, and a scripted agent that keeps calling tools."""

from __future__ import annotations

import contextlib
import re
from typing import Any, Iterator

from lossless.dialects.anthropic import from_anthropic
from lossless.dialects.openai import from_openai
from lossless.markers import HANDLE_RE
from lossless.proxy import ProxyServer, ProxySettings
from lossless.rounds import validate
from lossless.testing import FakeServer, wire

KEY = "sk-test-KEY-never-on-disk-0123456789"
BASH = {"name": "Bash", "description": "Run a shell command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}
BASH_FN = {"type": "function", "function": {"name": "Bash", "description": BASH["description"],
                                            "parameters": BASH["input_schema"]}}


@contextlib.contextmanager
def proxied(tmp_path, faults=None, **settings: Any) -> Iterator[tuple[FakeServer, ProxyServer]]:
    lines: list[str] = []
    with FakeServer(faults) as srv:
        options = {"window": 20_000, "store": tmp_path / "store", **settings}
        with ProxyServer(ProxySettings(upstream=srv.base_url, **options), log=lines.append) as proxy:
            proxy.log_lines = lines
            proxy.clients = []
            try:
                yield srv, proxy
            finally:
                for client in proxy.clients:
                    client.close()


def sdk_client(proxy: Any, api: wire.Api, **kwargs: Any) -> Any:
    """The official SDK's client for ``api`` pointed at ``proxy`` (closed when ``proxied`` ends)."""
    if api == "anthropic":
        import anthropic

        client = anthropic.Anthropic(base_url=proxy.base_url, api_key=KEY, max_retries=0, **kwargs)
    else:
        import openai

        client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key=KEY, max_retries=0, **kwargs)
    getattr(proxy, "clients", []).append(client)
    return client


def output(turn: int, chars: int) -> str:
    """A tool output of about ``chars`` characters that says which turn it is."""
    line = f"turn {turn}: drwxr-xr-x  src/module_{turn}.py  ok\n"
    return (line * (chars // len(line) + 1))[:chars]


def handles_in(body: Any) -> list[str]:
    return sorted(set(HANDLE_RE.findall(str(body))))


def check_requests(srv: FakeServer, api: wire.Api, window: int) -> int:
    """Every request the fake received on the API's route is valid and leaves room for its
    max_tokens in the window, by the upstream's own count (the fake's, which its usage reports
    and lossless calibrates to: a provider refuses by its count, not by lossless's estimate);
    returns how many there were."""
    path = "/v1/messages" if api == "anthropic" else "/v1/chat/completions"
    requests = [r for r in srv.requests if r.path == path]
    for r in requests:
        body = r.body
        assert wire.invalid(api, body) is None
        if api == "anthropic":
            messages = from_anthropic(body["messages"])
        else:
            messages = [m for m in from_openai(body["messages"]) if m.role != "system"]
        validate(messages, api)
        size = wire.measure(api, body, set())[0].total
        asked = body.get("max_tokens") or body.get("max_completion_tokens") or 0
        assert size + asked <= window, (size, asked)
    return len(requests)


def key_nowhere(root, *texts: str) -> None:
    """The API key is in no file under ``root`` and in none of ``texts``."""
    for path in root.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    for text in texts:
        assert KEY not in text and re.search(r"x-api-key|authorization", text, re.I) is None


def slow_splice(monkeypatch: Any, seconds: float) -> None:
    """Make the proxy take ``seconds`` to answer the recall calls it splices, as on a loaded
    machine: a client that sends its next request the instant an answer ends gets there first
    unless the proxy holds the answer's close until the splice is recorded."""
    import asyncio

    from lossless.proxy.turn import Turn

    answered = Turn._spliced

    async def late(self: Any, calls: Any) -> Any:
        await asyncio.sleep(seconds)
        return await answered(self, calls)

    monkeypatch.setattr(Turn, "_spliced", late)
