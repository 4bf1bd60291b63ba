"""The proxy as a raw ASGI application (served by uvicorn in ``server``).

Routes: ``POST /v1/messages``, ``POST /v1/chat/completions`` and ``POST /v1/responses``
go through the pipeline (``rewrite``), streamed or not; ``GET /stats``, ``GET /metrics`` (Prometheus,
``metrics``) and ``GET /health`` answer here (all but health behind ``--auth-token``); everything else — ``/v1/messages/count_tokens`` included — is forwarded
unchanged, so a client's other calls keep working.  The query string is kept.

Errors: an invalid client history is a 400 in that API's error shape and nothing
is forwarded; the upstream's "prompt too long" gets reactive compaction and one
retry; any other upstream error passes through unchanged (status, body, headers,
``retry-after`` included; a body that is not JSON is put in the API's error shape); an
unreachable upstream, or an answer that does not decode, is a 502 in the API's shape.
Headers and bodies are never logged.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import time
from typing import Any

from urllib.parse import urlsplit

from ..errors import InputError, LosslessError
from ..modelinfo import preload, window_for
from .conversations import Conversations, tenant_of
from .metrics import Metrics
from .relay import BadAnswer, Upstream, client_headers, encode, reply, response_headers
from .rewrite import Rewritten, Unmanaged, api, rewrite
from .settings import ProxySettings, Route, fitted
from .stats import totals
from .turn import Turn

__all__ = ["ProxyApp"]

MANAGED: dict[str, Route] = {"/v1/messages": "anthropic", "/v1/chat/completions": "openai", "/v1/responses": "responses"}
JSON = [(b"content-type", b"application/json")]
ORIGIN_FORM = re.compile(rb"/[!$&'()*+,;=:@%A-Za-z0-9._~/-]*")
"""A request target the proxy forwards: a path (RFC 9112 origin-form; the query comes apart)."""
_DOT_SEGMENT = re.compile(rb"(?:^|/)(?:\.|%2e){1,2}(?:/|$)", re.I)
"""A ``.`` or ``..`` segment (plain or percent-encoded): resolved, it could climb out of the
upstream's base path (``http://gw/anthropic`` + ``/../admin``), so such a target is refused."""
GONE = b"\0gone"
"""What ``_body`` returns when the client hung up before its body was whole."""
STALLED = b"\0stalled"
"""What ``_body`` returns when no byte of the body came for ``ProxySettings.body_idle_seconds``."""
DRAIN = 8
"""A body over the limit is read (and dropped) up to this many times the limit, for a clean 413."""


class ProxyApp:
    """``await app(scope, receive, send)``; one per server (it owns the conversations)."""

    def __init__(self, settings: ProxySettings, conversations: Conversations, log: Any = None) -> None:
        self.settings = settings
        self.conversations = conversations
        self.upstream: Upstream | None = None
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.requests: dict[str, int] = {}
        """Managed-route requests by tenant (``unmanaged``: those forwarded as they came)."""
        self.unmanaged: dict[str, int] = {}
        self.metrics = Metrics()

    # -- ASGI ------------------------------------------------------------------
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if self.upstream is None:
            self.upstream = Upstream()
        if "//" in scope["path"]:  # "//v1/messages" is the API's path: served (and managed) as such
            scope = {**scope, "path": re.sub("/{2,}", "/", scope["path"]),
                     "raw_path": re.sub(rb"/{2,}", b"/", scope.get("raw_path") or scope["path"].encode("utf-8"))}
        route = MANAGED.get(scope["path"]) if scope["method"] == "POST" else None
        out = Reply(send, api(route or _owner(scope)))
        tenant = self.tenant(scope)
        try:
            await self._serve(scope, receive, out, route, tenant)
        except Exception as exc:  # the last net: an answer in the API's shape, one line on stderr
            self.metrics.error(tenant, "internal")
            self.log(f"lossless proxy: internal error on {scope['method']} {scope['path'][:80]!r}: "
                     f"{type(exc).__name__}: {_line(exc)[:300]}")
            await out.fail(500, "api_error", f"lossless proxy: internal error ({type(exc).__name__}); "
                                             "the request was not completed")

    async def _serve(self, scope: dict[str, Any], receive: Any, out: Reply, route: Route | None, tenant: str) -> None:
        path, method = scope["path"], scope["method"]
        started = time.monotonic()
        if method == "GET" and path == "/health":
            await _json(out, 200, {"status": "ok"})
            return
        if self.settings.auth_token and not _has_token(scope, self.settings.auth_token):
            self.metrics.error("", "unauthorized")  # no tenant: its credential is not trusted
            await out.fail(401, "authentication_error", "lossless proxy: this proxy needs its token: "
                                                        "send it in the x-lossless-token header")
            return
        url = self._url(route or _owner(scope), scope)
        if url is None:
            self.metrics.error(tenant, "bad_target")
            await out.fail(400, "invalid_request_error", "lossless proxy: the request target must be a plain path "
                                                         "(origin-form, such as /v1/messages, with no . or .. "
                                                         "segment): the upstream is the proxy's configuration, "
                                                         "never the request's")
            return
        if method == "GET" and path == "/stats":
            await _json(out, 200, self.stats(tenant))
            return
        if method == "GET" and path == "/metrics":
            body, kind = self.metrics.render(conversations=len(self.conversations))
            await reply(out, 200, [(b"content-type", kind.encode())], body)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > DRAIN * self.settings.max_body:
            # more than would be drained for a clean 413 (below, the client reads it rather than a reset):
            # said up front, so neither read nor waited for
            self.metrics.error(tenant, "too_large")
            await out.fail(413, "request_too_large", f"lossless proxy: the request body is larger than "
                                                     f"{self.settings.max_body:,} bytes (--max-body)", close=True)
            return
        raw = await _body(scope, receive, self.settings.max_body, self.settings.body_idle_seconds)
        if raw is GONE:
            return  # the client left while sending: nobody to answer
        if raw is STALLED:
            self.metrics.error(tenant, "body_stalled")
            await out.fail(408, "timeout_error", f"lossless proxy: the request body came too slowly (nothing for "
                                                   f"{self.settings.body_idle_seconds:g} s, or under "
                                                   f"{MIN_BODY_RATE // 1024} KiB/s after "
                                                   f"{SLOW_PERIODS * self.settings.body_idle_seconds:g} s): "
                                                   "send the whole body", close=True)
            return
        if raw is None:
            self.metrics.error(tenant, "too_large")
            await out.fail(413, "request_too_large", f"lossless proxy: the request body is larger than "
                                                     f"{self.settings.max_body:,} bytes (--max-body)")
            return
        raw, problem = _decoded(scope, raw, self.settings.max_body)
        if problem:
            self.metrics.error(tenant, "too_large" if problem[0] == 413 else "refused")
            await out.fail(problem[0], "request_too_large" if problem[0] == 413 else "invalid_request_error",
                           f"lossless proxy: {problem[1]}")
            return
        work = asyncio.ensure_future(self._handle(scope, raw, out, route, tenant, url, started))
        gone = asyncio.ensure_future(_hung_up(receive, out))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the server is stopping: the request goes with it
            work.cancel()
            raise
        finally:
            if not work.done() and gone.done():
                work.cancel()  # the client left: the upstream request goes with it, now
                self.metrics.error(tenant, "hangup")
            gone.cancel()
        try:
            await work
        except asyncio.CancelledError:
            if not work.cancelled():
                raise
            self._log(None, route or "anthropic", 0, started, "client hung up: upstream request cancelled")

    async def _handle(self, scope: dict[str, Any], raw: bytes, out: Reply, route: Route | None, tenant: str,
                      url: str, started: float) -> None:
        try:
            if route is None:
                await self._pass(scope, raw, out, url)
            else:
                await self._managed(route, scope, raw, out, tenant, url)
        except self.upstream.unreachable as exc:  # type: ignore[union-attr]
            if out.started:  # the upstream cut its answer mid-way: the client's is cut the same way
                # (the transport's own failure, so the client's retry on a cut connection still applies)
                self._log(None, route or "anthropic", 0, started, f"upstream cut the answer ({type(exc).__name__})")
                return
            self.metrics.error(tenant, "upstream_unreachable")
            shown = self.settings.upstream_shown(route or _owner(scope))
            self._log(None, route or "anthropic", 502, started, f"upstream {shown} unreachable "
                                                                          f"({type(exc).__name__})")
            # A client of a proxy serving beyond this machine is not told the upstream's address.
            where = "" if self.settings.public else f" {shown}"
            await out.fail(502, "api_error", f"lossless proxy: upstream{where} unreachable ({type(exc).__name__})")
        except BadAnswer as exc:
            self.metrics.error(tenant, "upstream_bad_answer")
            await out.fail(502, "api_error", f"lossless proxy: the upstream's answer could not be read ({exc})")

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.upstream = Upstream()
                if self.settings.window is None:  # the models' data, loaded before the first request needs it
                    threading.Thread(target=preload, name="lossless-modelinfo", daemon=True).start()
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
        for the process that runs the proxy) and their totals — a tenant's own counts (the
        registry's evictions aside, which are no tenant's in particular)."""
        conversations = []
        for conv in self.conversations:
            if tenant is not None and conv.tenant != tenant:
                continue
            budget = getattr(conv.manager, "budget", None)  # None while a new conversation's is made
            conversations.append({"id": conv.id, "dialect": conv.route, "recall_tool": conv.recall,
                                  "window": budget.window if budget else None,
                                  "threshold": budget.threshold if budget else None, **conv.stats.to_json()})
        def count(by: dict[str, int]) -> int:
            return sum(by.values()) if tenant is None else by.get(tenant, 0)

        own = {"requests": count(self.requests), "unmanaged": count(self.unmanaged),
               "evicted": self.conversations.evicted}  # the registry's: no tenant's in particular
        return {"conversations": conversations, "totals": {**totals(conversations), **own}}

    # -- routes ----------------------------------------------------------------
    def _url(self, route: Route, scope: dict[str, Any]) -> str | None:
        """The upstream URL for the request's target, or None when the target is not a plain
        path (``@host/…``, an absolute URL, a bad one): the host is never the client's to choose."""
        target = scope.get("raw_path") or scope["path"].encode("utf-8")
        if not ORIGIN_FORM.fullmatch(target) or _DOT_SEGMENT.search(target):
            return None
        query = scope.get("query_string") or b""
        base = self.settings.upstream_for(route)
        url = base + target.decode("latin-1") + (f"?{query.decode('latin-1')}" if query else "")
        if _origin(url) != _origin(base):
            return None
        return url

    async def _pass(self, scope: dict[str, Any], raw: bytes, send: Any, url: str) -> None:
        assert self.upstream is not None
        headers = client_headers(scope["headers"])
        async with self.upstream.open(scope["method"], url, headers, raw) as response:
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": response_headers(response.headers, raw=True)})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _managed(self, route: Route, scope: dict[str, Any], raw: bytes, send: Any, tenant: str,
                       url: str) -> None:
        started = time.monotonic()
        self.requests[tenant] = self.requests.get(tenant, 0) + 1
        wire = api(route)
        job = asyncio.ensure_future(asyncio.to_thread(rewrite, self.conversations, route, raw, tenant=tenant,
                                                      in_flight=True, fit=self.fit))
        try:
            rw = await asyncio.shield(job)  # a hang-up must not strand the conversation in flight
        except asyncio.CancelledError:
            job.add_done_callback(self._abandoned)
            raise
        except Unmanaged as exc:
            self.unmanaged[tenant] = self.unmanaged.get(tenant, 0) + 1
            await self._pass(scope, raw, send, url)
            self._log(None, route, 0, started, f"forwarded unmanaged ({_line(exc)})")
            return
        except (InputError, RecursionError) as exc:
            why = _line(exc) if isinstance(exc, InputError) else "the request is nested too deeply"
            self.metrics.error(tenant, "refused")
            await _json(send, 400, wire.error("invalid_request_error", f"lossless proxy: {why}"))
            self._log(None, route, 400, started, "refused")
            return
        except LosslessError as exc:
            self.metrics.error(tenant, "internal")
            await _json(send, 500, wire.error("api_error", f"lossless proxy: {_line(exc)}"))
            self._log(None, route, 500, started, "failed")
            return
        assert self.upstream is not None
        async def answered(key: bytes) -> None:  # before the close: the next request may go to another replica
            self.conversations.answered(rw.conversation, key)
            if self.conversations.sharing:
                await asyncio.to_thread(self.conversations.publish, rw.conversation)

        turn = Turn(self.upstream, self.settings, rw, url, client_headers(scope["headers"], rewritten=True), send,
                    answered)
        distrusted = rw.conversation.stats.usage_distrusted
        try:
            status = await (turn.stream() if rw.stream else turn.whole())
        finally:
            self.conversations.answered(rw.conversation, turn.answer)
        s = rw.conversation.stats
        s.last_status = status
        if status >= 400:
            s.upstream_errors += 1
            self.metrics.error(tenant, "upstream_status")
        elif turn.stream_error is not None:  # a 200 whose stream ended in an error: not a success to count
            s.upstream_errors += 1
            self.metrics.error(tenant, "upstream_stream_error")
        self.metrics.error(tenant, "usage_distrusted", s.usage_distrusted - distrusted)
        self.metrics.request(tenant, route, status, before=s.tokens_before, after=turn.rw.view.state.tokens,
                             stages=[e.stage for e in turn.rw.view.fired], recall_rounds=len(turn.rounds))
        self._log(turn.rw, route, status, started,
                  f"(the stream ended in an error event: {turn.stream_error})" if turn.stream_error else "")

    def fit(self, cm: Any, model: Any) -> None:
        """Budget a conversation's manager by the window of the request's ``model``: ``--window``
        when given, else the models' data (``lossless.modelinfo``), else its default, said once
        per unknown model on stderr.  A conversation whose model changes follows it."""
        if self.settings.window is not None:
            return
        window = window_for(model if isinstance(model, str) and model else None,
                            warn=lambda line: self.log(f"lossless proxy: {line}"))
        if cm.config.window != window:
            cm.config = fitted(cm.config, window, self.settings.max_output)
            cm.budget = cm.config.budget

    def _abandoned(self, job: asyncio.Future[Rewritten]) -> None:
        """A rewrite whose client hung up meanwhile: its conversation is given no answer."""
        if not job.cancelled() and job.exception() is None:
            self.conversations.answered(job.result().conversation, None)

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
        self.log(f"lossless proxy: {rw.conversation.id} tenant {rw.conversation.tenant or '-'} {route} messages {s.messages_in}→{s.messages_out} "
                 f"tokens {s.tokens_before}→{s.tokens_after} stages {stages} status {status}{' ' + what if what else ''} {ms:.0f} ms")


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


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


async def _body(scope: dict[str, Any], receive: Any, limit: int, idle: float = 60.0) -> bytes | None:
    """The request body, or None when it is larger than ``limit``: what comes beyond it is read
    and dropped (so the client reads the 413 rather than a reset), never kept; ``STALLED`` when
    nothing came for ``idle`` seconds."""
    chunks: list[bytes] | None = []
    size = 0
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        async with asyncio.timeout(idle) as waiting:  # one timer for the body, pushed on by each chunk
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return GONE
                chunk = message.get("body", b"")
                size += len(chunk)
                # ... but not past what the body's size allows: a byte now and then holds no connection
                waiting.reschedule(min(loop.time() + idle, start + SLOW_PERIODS * idle + size / MIN_BODY_RATE))
                if chunks is not None:
                    chunks.append(chunk)
                    if size > limit:
                        chunks = None
                if not message.get("more_body"):
                    return None if chunks is None else b"".join(chunks)
                if size > DRAIN * limit:
                    return None  # not worth reading on: the client may see its connection reset
    except TimeoutError:
        return STALLED


MIN_BODY_RATE = 64 * 1024
"""Bytes a second a body must average once it has taken ``SLOW_PERIODS`` idle periods (a 10 MB body: 156 s more)."""
SLOW_PERIODS = 4


def _declared_length(scope: dict[str, Any]) -> int | None:
    """The request's ``content-length`` when it has one that is a number (h11 refuses any other)."""
    for key, value in scope.get("headers") or ():
        if key.lower() == b"content-length" and value.strip().isdigit():
            return int(value)
    return None


def _decoded(scope: dict[str, Any], raw: bytes, limit: int) -> tuple[bytes, tuple[int, str] | None]:
    """The body with its ``content-encoding`` undone (gzip or deflate; the upstream gets it plain, as
    the header is not forwarded), never past ``limit`` bytes decoded; or what is wrong with it."""
    import zlib

    codings = [v.decode("latin-1").strip().lower() for k, v in scope["headers"] if k.lower() == b"content-encoding"]
    codings = [c for value in codings for c in value.split(",") if c.strip() not in ("", "identity")]
    for coding in reversed(codings):  # the last applied is undone first
        coding = coding.strip()
        if coding not in ("gzip", "x-gzip", "deflate"):
            return raw, (415, f"the request body's content-encoding {coding!r} is not supported: send it plain, "
                              "gzip or deflate")
        wbits = 16 + zlib.MAX_WBITS if coding != "deflate" else zlib.MAX_WBITS
        try:
            d = zlib.decompressobj(wbits)
            plain = d.decompress(raw, limit + 1)
        except zlib.error as exc:
            if coding != "deflate":
                return raw, (400, f"the request body is not valid {coding} ({exc})")
            try:  # a raw deflate stream, as some clients send it
                d = zlib.decompressobj(-zlib.MAX_WBITS)
                plain = d.decompress(raw, limit + 1)
            except zlib.error as exc2:
                return raw, (400, f"the request body is not valid deflate ({exc2})")
        if len(plain) > limit:
            return raw, (413, f"the request body, decoded, is larger than {limit:,} bytes (--max-body)")
        raw = plain
    return raw, None


async def _hung_up(receive: Any, out: Reply) -> None:
    """Returns once the client has gone (not merely once its answer is complete)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect" and not out.finished:
            return
        if out.finished:
            await asyncio.Event().wait()  # the answer is complete: nothing more to watch


async def _json(send: Any, status: int, body: Any) -> None:
    await reply(send, status, JSON, json.dumps(body).encode())


class Reply:
    """The client's side of one exchange: ``send`` that remembers how far the answer got, and
    ``fail``, which says what went wrong in the API's own shape however far that was — a JSON
    error before the answer started, an ``error`` event on a stream already under way."""

    def __init__(self, send: Any, wire: Any) -> None:
        self._send = send
        self.wire = wire
        self.started = False
        self.finished = False
        self.stream = False

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            self.stream = any(k.lower() == b"content-type" and v.lower().startswith(b"text/event-stream")
                              for k, v in message.get("headers", []))
        elif not message.get("more_body"):
            self.finished = True
        await self._send(message)

    async def fail(self, status: int, kind: str, text: str, *, close: bool = False) -> None:
        """``close``: the connection ends with this answer (a body left unread cannot be skipped)."""
        if self.finished:
            return
        body = self.wire.error(kind, text)
        if not self.started:
            await reply(self, status, [*JSON, (b"connection", b"close")] if close else JSON, json.dumps(body).encode())
        elif self.stream:
            if self.wire.ROUTE == "responses":  # a stream's error event has its own shape there
                body = {"type": "error", "code": kind, "message": text, "param": None}
            event = encode(None, body) if self.wire.ROUTE == "openai" else encode("error", body)
            await self({"type": "http.response.body", "body": event, "more_body": False})
        else:
            await self({"type": "http.response.body", "body": b"", "more_body": False})
