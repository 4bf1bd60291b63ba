"""The proxy as a raw ASGI application (served by uvicorn in ``server``).

Routes: ``POST /v1/messages`` and ``POST /v1/chat/completions`` go through the
pipeline (``rewrite``), streamed or not; ``GET /stats`` and ``GET /health`` answer
here; everything else — ``/v1/messages/count_tokens`` included — is forwarded
unchanged, so a client's other calls keep working.  The query string is kept.

Errors: an invalid client history is a 400 in that API's error shape and nothing
is forwarded; the upstream's "prompt too long" gets reactive compaction and one
retry; any other upstream error passes through unchanged (status, body, headers,
``retry-after`` included); an unreachable upstream is a 502 in the API's shape.
Headers and bodies are never logged.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from ..errors import InputError, LosslessError
from .conversations import Conversations, tenant_of
from .relay import Upstream, client_headers, reply, response_headers
from .rewrite import Rewritten, Unmanaged, api, rewrite
from .settings import ProxySettings, Route
from .stats import totals
from .turn import Turn

__all__ = ["ProxyApp"]

MANAGED: dict[str, Route] = {"/v1/messages": "anthropic", "/v1/chat/completions": "openai"}
JSON = [(b"content-type", b"application/json")]


class ProxyApp:
    """``await app(scope, receive, send)``; one per server (it owns the conversations)."""

    def __init__(self, settings: ProxySettings, conversations: Conversations, log: Any = None) -> None:
        self.settings = settings
        self.conversations = conversations
        self.upstream: Upstream | None = None
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.requests = 0
        self.unmanaged = 0

    # -- ASGI ------------------------------------------------------------------
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if self.upstream is None:
            self.upstream = Upstream()
        path, method = scope["path"], scope["method"]
        if method == "GET" and path == "/health":
            await _json(send, 200, {"status": "ok"})
            return
        if self.settings.auth_token and not _has_token(scope, self.settings.auth_token):
            wire = api(MANAGED.get(path) or _owner(scope))
            await _json(send, 401, wire.error("authentication_error", "lossless proxy: this proxy needs its token: "
                                              "send it in the x-lossless-token header"))
            return
        tenant = self.tenant(scope)
        if method == "GET" and path == "/stats":
            await _json(send, 200, self.stats(tenant))
            return
        raw = await _body(receive)
        route = MANAGED.get(path) if method == "POST" else None
        started = False

        async def tracked(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            if route is None:
                await self._pass(scope, raw, tracked)
            else:
                await self._managed(route, scope, raw, tracked, tenant)
        except self.upstream.unreachable as exc:
            if started:  # the upstream cut its answer mid-way: the client's is cut the same way
                self._log(None, route or "anthropic", 0, time.monotonic(), f"upstream cut the answer ({type(exc).__name__})")
                return
            wire = api(route or "anthropic")
            await _json(send, 502, wire.error("api_error", f"lossless proxy: upstream "
                                              f"{self.settings.upstream_for(route)} unreachable ({type(exc).__name__})"))

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.upstream = Upstream()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.upstream is not None:
                    await self.upstream.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def tenant(self, scope: dict[str, Any]) -> str:
        """The request's tenant: the configured header's value (behind the proxy's token),
        else the API key it carries, as a keyed hash (``tenant_of``)."""
        headers = {k.lower(): v for k, v in scope["headers"]}
        if self.settings.tenant_header:
            value = headers.get(self.settings.tenant_header.lower().encode("latin-1"), b"")
        else:
            value = headers.get(b"x-api-key") or headers.get(b"authorization", b"").removeprefix(b"Bearer ")
        return tenant_of(self.settings.tenant_secret, value.decode("latin-1").strip())

    def stats(self, tenant: str | None = None) -> dict[str, Any]:
        """What GET /stats answers: the conversations of ``tenant`` (None: every tenant's,
        for the process that runs the proxy) and their totals."""
        conversations = []
        for conv in self.conversations:
            if tenant is not None and conv.tenant != tenant:
                continue
            conversations.append({"id": conv.id, "dialect": conv.route, "recall_tool": conv.recall,
                                  **conv.stats.to_json()})
        return {"conversations": conversations, "totals": {**totals(conversations), "requests": self.requests,
                                                           "unmanaged": self.unmanaged,
                                                           "evicted": self.conversations.evicted}}

    # -- routes ----------------------------------------------------------------
    def _url(self, route: Route | None, scope: dict[str, Any]) -> str:
        query = scope.get("query_string") or b""
        return self.settings.upstream_for(route) + scope["path"] + (f"?{query.decode('latin-1')}" if query else "")

    async def _pass(self, scope: dict[str, Any], raw: bytes, send: Any) -> None:
        assert self.upstream is not None
        headers = client_headers(scope["headers"])
        async with self.upstream.open(scope["method"], self._url(_owner(scope), scope), headers, raw) as response:
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": response_headers(response.headers, raw=True)})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _managed(self, route: Route, scope: dict[str, Any], raw: bytes, send: Any, tenant: str) -> None:
        started = time.monotonic()
        self.requests += 1
        wire = api(route)
        try:
            rw = await asyncio.to_thread(rewrite, self.conversations, route, raw, tenant=tenant, in_flight=True)
        except Unmanaged as exc:
            self.unmanaged += 1
            await self._pass(scope, raw, send)
            self._log(None, route, 0, started, f"forwarded unmanaged ({_line(exc)})")
            return
        except InputError as exc:
            await _json(send, 400, wire.error("invalid_request_error", f"lossless proxy: {_line(exc)}"))
            self._log(None, route, 400, started, "refused")
            return
        except LosslessError as exc:
            await _json(send, 500, wire.error("api_error", f"lossless proxy: {_line(exc)}"))
            self._log(None, route, 500, started, "failed")
            return
        assert self.upstream is not None
        turn = Turn(self.upstream, self.settings, rw, self._url(route, scope), client_headers(scope["headers"]), send)
        try:
            status = await (turn.stream() if rw.stream else turn.whole())
        finally:
            self.conversations.answered(rw.conversation, turn.answer)
        rw.conversation.stats.last_status = status
        if status >= 400:
            rw.conversation.stats.upstream_errors += 1
        self._log(turn.rw, route, status, started)

    def _log(self, rw: Rewritten | None, route: Route, status: int, started: float, what: str = "") -> None:
        if not self.settings.verbose:
            return
        ms = (time.monotonic() - started) * 1000
        if rw is None:
            shown = f" status {status}" if status else ""
            self.log(f"lossless proxy: - {route} {what}{shown} {ms:.0f} ms")
            return
        s = rw.conversation.stats
        stages = ",".join(e.stage for e in rw.view.fired) or "-"
        self.log(f"lossless proxy: {rw.conversation.id} {route} messages {s.messages_in}→{s.messages_out} "
                 f"tokens {s.tokens_before}→{s.tokens_after} stages {stages} status {status} {ms:.0f} ms")


def _owner(scope: dict[str, Any]) -> Route:
    """Whose API a passed-through call belongs to, for the default upstreams: Anthropic's
    clients send ``anthropic-version`` on every call, OpenAI's never do."""
    if scope["path"].startswith("/v1/messages") or any(k.lower() == b"anthropic-version" for k, _ in scope["headers"]):
        return "anthropic"
    return "openai"


def _has_token(scope: dict[str, Any], token: str) -> bool:
    import hmac

    given = next((v for k, v in scope["headers"] if k.lower() == b"x-lossless-token"), b"")
    return hmac.compare_digest(given, token.encode("utf-8"))


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).splitlines())


async def _body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _json(send: Any, status: int, body: Any) -> None:
    await reply(send, status, JSON, json.dumps(body).encode())
