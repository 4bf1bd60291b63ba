"""One managed client call: the forward, a reactive retry, and recall answered inside.

``Turn.whole`` and ``Turn.stream`` send the rewritten request upstream.  A "prompt
too long" gets reactive compaction (``ContextManager.recover``) and one retry; any
other upstream error reaches the client unchanged.

Recall: when the model's answer calls only ``recall``, the proxy runs the calls
against the store and continues the request with the answer and the results
appended, up to ``ProxySettings.recall_rounds`` times, so the client receives one
answer and never a tool it does not know (a stream flows as it arrives, the recall
blocks held back; the continuation's blocks follow on).  When recall comes with the
client's own tool calls, the client gets only its own calls; the proxy answers the
recall calls and ``Pending`` splices them, with their results, into that
conversation's next request (beside the client's results), so the model's next
turn sees exactly what it saw.  Each page is cut to the room the request has left,
so a continuation fits too.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import ContextTooLong
from ..markers import HANDLE_RE, as_handle
from ..store import the_one
from ..tools import PAGE_CHARS, run_recall
from ..view import context_tokens
from .conversations import answer_key
from .relay import BadAnswer, SSEParser, ToolCall, Upstream, answer_json, encode, reply, response_headers, too_long
from .rewrite import Rewritten, api, dump, remember_handles
from .settings import ProxySettings, Route

__all__ = ["Pending", "Turn", "answer", "page_limit"]

CHARS_PER_TOKEN = 3
"""A cautious characters-per-token ratio for cutting pages to the room left."""
MIN_PAGE = 1_000


def page_limit(room_tokens: int, calls: int) -> int:
    """Characters one of ``calls`` recall results may take out of ``room_tokens``."""
    return max(MIN_PAGE, min(PAGE_CHARS, room_tokens * CHARS_PER_TOKEN // max(calls, 1)))


class Scoped:
    """The store as one conversation's recall sees it: only the handles its views held
    (``Conversation.handles``), so a handle from another conversation — another tenant's —
    is not there, whatever the store holds."""

    def __init__(self, store: Any, handles: set[str]) -> None:
        self.store, self.handles = store, handles

    def get(self, handle: str) -> str:
        """The original behind ``handle``, full or short (resolved among this conversation's)."""
        handle = as_handle(handle)
        if handle not in self.handles:
            found = [h for h in self.handles if h.startswith(handle)] if HANDLE_RE.fullmatch(handle) else []
            handle = the_one(handle, found, "this conversation")
        return str(self.store.get(handle))


def answer(calls: list[ToolCall], store: Any, room_tokens: int) -> list[tuple[str, str]]:
    """(tool id, text) for each recall call, each page cut to the room left."""
    limit = page_limit(room_tokens, len(calls))
    out = []
    for cid, _, tool_input in calls:
        args = dict(tool_input) if isinstance(tool_input, dict) else {}
        try:
            asked = int(args.get("limit") or PAGE_CHARS)
        except (TypeError, ValueError):
            asked = PAGE_CHARS
        args["limit"] = max(1, min(asked, limit))
        out.append((cid, run_recall(args, store)))
    return out


@dataclass(slots=True)
class Pending:
    """What the model said in the last call that the client never saw."""

    rounds: list[tuple[dict[str, Any], list[tuple[str, str]]]] = field(default_factory=list)
    """Recall-only answers the proxy continued, each with its results."""
    last: Any = None
    """The model's final message as it said it (its recall calls included)."""
    last_answers: list[tuple[str, str]] = field(default_factory=list)
    """Results of the recall calls in ``last`` (mixed with the client's own calls)."""
    shown: bytes | None = None
    """``answer_key`` of the answer the client was given: only its echo takes the splice."""

    @property
    def calls(self) -> int:
        return sum(len(a) for _, a in self.rounds) + len(self.last_answers)

    def splice(self, route: Route, new: list[Any]) -> list[Any] | None:
        """The client's new messages with the rounds it never saw before its echo of
        the final message (replaced by the model's own), or None when ``new`` does not
        start with that echo (the client went another way: nothing is spliced)."""
        if route == "responses":
            return self._splice_items(new)
        wire = api(route)
        if self.last is None or not new or not isinstance(new[0], dict) or new[0].get("role") != "assistant":
            return None
        if self.shown is not None and answer_key(new[0]) != self.shown:
            return None  # another answer than the one this client was given: its own way, nothing spliced
        head = [m for message, answers in self.rounds for m in (message, *wire.results(answers))]
        if self.last_answers:
            tail = wire.splice_final(new, self.last, self.last_answers)
            if tail is None:
                return None
        else:
            tail = [self.last, *new[1:]]
        return [*head, *tail]

    def _splice_items(self, new: list[Any]) -> list[Any] | None:
        """``splice`` on the Responses API: an answer is several items, the client's echo of it
        the leading output items of ``new``."""
        from . import responses

        shown = responses.echo_length(new, self.shown)
        if self.last is None or not shown:
            return None
        head = [item for said, answers in self.rounds for item in (*said, *responses.results(answers))]
        tail = responses.splice_final(new, self.last, self.last_answers, shown)
        return None if tail is None else [*head, *tail]


class Turn:
    """One managed client call: the forward, a reactive retry, recall round-trips."""

    def __init__(self, upstream: Upstream, settings: ProxySettings, rw: Rewritten, url: str,
                 headers: list[tuple[bytes, bytes]], send: Any, on_answer: Any = None) -> None:
        self.upstream = upstream
        self.on_answer = on_answer
        """``await on_answer(answer_key)`` before the answer's last bytes: a client sends its next
        request as soon as it has them (perhaps to another replica), so what it needs is recorded first."""
        self.settings = settings
        self.rw = rw
        self.url = url
        self.headers = headers
        self.send = send
        self.wire = api(rw.route)
        self.conv = rw.conversation
        self.forward = rw.forward
        self.body = rw.forward_bytes
        self.rounds: list[tuple[dict[str, Any], list[tuple[str, str]]]] = []
        self.added_tokens = 0
        self.answer: bytes | None = None
        """``answer_key`` of what the client was given, once it has all of it."""
        self.stream_error: str | None = None
        """The kind of the first error the upstream sent inside a 200 stream (an ``error`` event,
        a failed response), which the client reads as it came: for the log and the metrics."""

    @property
    def own_recall(self) -> bool:
        return self.conv.recall == "on"

    async def _recover(self, exc: ContextTooLong) -> None:
        def run() -> Rewritten:
            with self.conv.lock:
                # On the Responses API the manager sees items through the conversation's adapter
                fitter = self.conv.adapter if self.rw.route == "responses" else self.conv.manager
                view = fitter.recover(self.conv.handed, exc, *self.wire.split(self.rw.body)[1:])
                remember_handles(self.conv, view)
                self.conv.stats.too_long_retries += 1
                for e in view.fired:
                    self.conv.stats.stages[e.stage] = self.conv.stats.stages.get(e.stage, 0) + 1
                out = self.rw.again(view)
                self.conv.view = out.view.messages
                return out

        self.rw = await asyncio.to_thread(run)
        self.forward, self.body = self.rw.forward, self.rw.forward_bytes

    def _observe(self, usage: Any) -> None:
        """Calibrate the conversation's estimates by the usage the upstream reported, unless the
        report is far below lossless's own count of what was sent (``ContextManager.observe``:
        tokenizers differ by tens of percent — Claude reports 1.14–1.58× lossless's count — not by
        half): an upstream that under-reports would otherwise switch compaction off and let a
        request overflow the window.  Such a report is counted (``/stats``: ``usage_distrusted``)."""
        if not usage or not isinstance(usage, dict):
            return
        try:
            context_tokens(usage)
        except (TypeError, ValueError):
            self.conv.stats.usage_distrusted += 1
            return
        with self.conv.lock:
            taken = self.conv.manager.observe(usage)
        if not taken:
            self.conv.stats.usage_distrusted += 1

    async def _answer(self, calls: list[ToolCall], message: dict[str, Any]) -> list[tuple[str, str]]:
        """Run recall calls and append the round to the request for the continuation."""
        state = self.rw.view.state
        budget = self.conv.manager.budget
        room = budget.effective - state.tokens - self.added_tokens
        answers = await asyncio.to_thread(answer, calls, self._store(), room)
        self.added_tokens += sum(len(text) for _, text in answers) // CHARS_PER_TOKEN + 50
        self.forward = self.wire.extended(self.forward, message, answers)
        self.body = dump(self.forward)
        return answers

    async def _spliced(self, calls: list[ToolCall]) -> list[tuple[str, str]]:
        """Answers to recall calls the client will not see, for the next request (which the
        pipeline manages, so a whole page may go in)."""
        if not calls:
            return []
        return await asyncio.to_thread(answer, calls, self._store(), self.conv.manager.budget.effective)

    def _store(self) -> Scoped:
        return Scoped(self.conv.manager.store, self.conv.handles)

    async def _answered(self) -> None:
        if self.on_answer is not None and self.answer is not None:
            await self.on_answer(self.answer)

    def _pending(self, message: dict[str, Any], answers: list[tuple[str, str]], shown: dict[str, Any]) -> None:
        self.answer = answer_key(self.wire.assistant(shown))
        self.conv.stats.recall_round_trips += len(self.rounds)
        if self.rounds or answers:
            self.conv.pending = Pending(self.rounds, message, answers, self.answer)

    # -- not streamed ------------------------------------------------------------
    async def whole(self) -> int:
        status, headers, raw = await self._post()
        if status != 200 and (exc := too_long(status, raw)) is not None:
            await self._recover(exc)
            status, headers, raw = await self._post()
        if status != 200:
            await reply(self.send, status, *_error_answer(self.rw.route, status, headers, raw))
            return status
        segment = answer_json(raw)
        key, kind = {"anthropic": ("content", "message"), "openai": ("choices", "chat.completion"),
                     "responses": ("output", "response")}[self.rw.route]
        if not isinstance(segment.get(key), list) and segment.get("type", segment.get("object")) != kind:
            # JSON of another shape: not relayed with a made-up empty answer
            raise BadAnswer(f"a 200 whose JSON has no {key!r} list (keys: {', '.join(sorted(segment)[:8]) or 'none'})")
        try:
            return await self._whole(segment, headers)
        except (TypeError, AttributeError, KeyError, IndexError, ValueError) as exc:
            raise BadAnswer(f"{type(exc).__name__}: {exc}"[:200]) from None

    async def _whole(self, segment: dict[str, Any], headers: Any) -> int:
        self._observe(self.wire.usage(segment))
        shown: dict[str, Any] | None = None
        while True:
            calls = self.wire.calls(segment) if self.own_recall else []
            mine = [c for c in calls if c[1] == "recall"]
            ids = {c[0] for c in mine}
            visible = self.wire.without(segment, ids)
            shown = visible if shown is None else self.wire.merge(shown, visible)
            only_recall = bool(mine) and len(mine) == len(calls) and self.wire.stopped_for_tools(segment)
            if not only_recall or len(self.rounds) >= self.settings.recall_rounds:
                break
            message = self.wire.assistant(segment)
            self.rounds.append((message, await self._answer(mine, message)))
            status, headers, raw = await self._post()
            if status != 200:
                await reply(self.send, status, *_error_answer(self.rw.route, status, headers, raw))
                return status
            segment = answer_json(raw)
        answers = await self._spliced(mine)
        if mine and only_recall:
            shown = _ended(self.rw.route, shown)  # the bound was reached: the client gets an ordinary end
        self._pending(self.wire.assistant(segment), answers, shown)
        await self._answered()
        await reply(self.send, 200, response_headers(headers), dump(shown))
        return 200

    async def _post(self) -> tuple[int, Any, bytes]:
        upstream = self.upstream
        async with upstream.open("POST", self.url, self.headers, self.body) as response:
            try:
                return response.status_code, response.headers, await response.aread()
            except upstream.decoding as exc:  # a gzip body that is not gzip: an answer the proxy cannot read
                raise BadAnswer(f"a {response.status_code} whose body does not decode as its content-encoding says "
                                f"({response.headers.get('content-encoding')}: {exc})"[:200]) from None

    # -- streamed ----------------------------------------------------------------
    async def stream(self) -> int:
        upstream = self.upstream
        started = False
        shift, first, chunk_id, seq = 0, True, None, None
        retried = False
        shown: dict[str, Any] | None = None
        while True:
            async with upstream.open("POST", self.url, self.headers, self.body) as response:
                if response.status_code != 200:
                    raw = await response.aread()
                    if not started and not retried and (exc := too_long(response.status_code, raw)) is not None:
                        retried = True
                        await self._recover(exc)
                        continue
                    if not started:
                        await reply(self.send, response.status_code,
                                    *_error_answer(self.rw.route, response.status_code, response.headers, raw))
                        return response.status_code
                    await self._chunk(_stream_error(self.rw.route, response.status_code, raw))
                    break
                kind = response.headers.get("content-type", "")
                if "text/event-stream" not in kind.lower():  # a gateway's page, a whole answer: not a stream
                    what = (f"a streamed request was answered 200 with {kind.split(';')[0].strip() or 'no content type'}"
                            ", not an event stream")
                    if not started:
                        raise BadAnswer(what)
                    await self._chunk(encode(None if self.rw.route == "openai" else "error",
                                             api(self.rw.route).error("api_error", f"lossless proxy: {what}")))
                    break
                if not started:
                    await self.send({"type": "http.response.start", "status": 200,
                                     "headers": response_headers(response.headers)})
                    started = True
                kwargs: dict[str, Any] = ({"chunk_id": chunk_id} if self.rw.route == "openai" else
                                          {"shift": shift, "seq": seq, "before": shown} if self.rw.route == "responses"
                                          else {"shift": shift})
                flt = self.wire.StreamFilter(own_recall=self.own_recall, first=first, **kwargs)
                parser = SSEParser()
                async for chunk in _body_of(response):
                    events = parser.feed(chunk)
                    if self.stream_error is None:
                        self.stream_error = next((kind for e in events if (kind := _error_kind(e)) is not None), None)
                    out = [piece for event in events for piece in _feed(flt, event)]
                    if out:
                        await self._chunk(b"".join(out))
                if parser.rest():
                    await self._chunk(parser.rest())  # a cut stream reaches the client as cut
            if first:
                self._observe(flt.usage)
            segment = flt.message()
            visible = self.wire.without(segment, {c[0] for c in flt.recall_calls()})
            shown = visible if shown is None else self.wire.merge(shown, visible)
            if not flt.continue_with_recall:
                break
            if len(self.rounds) >= self.settings.recall_rounds:
                await self._chunk(b"".join(_ended_events(self.rw.route, flt.end_events())))
                break
            message = self.wire.assistant(flt.message())
            self.rounds.append((message, await self._answer(flt.recall_calls(), message)))
            shift = getattr(flt, "shift", 0) + getattr(flt, "shown", 0)
            first, chunk_id, seq = False, getattr(flt, "chunk_id", None), getattr(flt, "seq", None)
        held = flt.recall_calls() if flt.held and not flt.continue_with_recall else []
        answers = await self._spliced(held)
        self._pending(self.wire.assistant(flt.message()), answers, shown or {})
        await self._answered()
        # Only now the close: a client sends its next request as soon as it reads it.
        await self.send({"type": "http.response.body", "body": b"".join(flt.final), "more_body": False})
        return 200

    async def _chunk(self, data: bytes) -> None:
        await self.send({"type": "http.response.body", "body": data, "more_body": True})


def _feed(flt: Any, event: Any) -> list[bytes]:
    """The filter's output for ``event``; an event it cannot read (``"delta": 5``) goes to
    the client as it came: the proxy does not cut a stream over what it does not understand."""
    try:
        return flt.feed(event)
    except (TypeError, AttributeError, KeyError, IndexError, ValueError):
        return [event.raw]


def _error_kind(event: Any) -> str | None:
    """The kind of error ``event`` reports, if it is one (Anthropic's and Responses' ``error`` event,
    a ``response.failed``, a Chat Completions chunk with an ``error``), else None."""
    data = event.data
    if not isinstance(data, dict):
        return None
    if event.name == "error" or data.get("type") == "error" or (event.name is None and "error" in data):
        error: dict[str, Any] = data["error"] if isinstance(data.get("error"), dict) else data
        kind = error.get("type") if error.get("type") not in (None, "error") else error.get("code")
        return str(kind or "error")
    if data.get("type") == "response.failed":
        error = (data.get("response") or {}).get("error") or {}
        return str(error.get("code") or "response.failed") if isinstance(error, dict) else "response.failed"
    return None


def _body_of(response: Any) -> Any:
    """The answer's bytes as they arrive: raw, unless the upstream compressed them despite
    ``accept-encoding: identity`` (then through httpx2's decoders)."""
    if response.headers.get("content-encoding", "identity").lower() in ("", "identity"):
        return response.aiter_raw()
    return response.aiter_bytes()


def _ended(route: Route, response: dict[str, Any]) -> dict[str, Any]:
    if route == "responses":
        return response  # its recall calls taken out, nothing is left for the client to run
    if route == "anthropic":
        return {**response, "stop_reason": "end_turn"}
    choices = response.get("choices") or [{}]
    return {**response, "choices": [{**choices[0], "finish_reason": "stop"}, *choices[1:]]}


def _ended_events(route: Route, events: list[bytes]) -> list[bytes]:
    """The withheld ending, its stop reason made an ordinary end (no tool for the client to run)."""
    out = []
    for event in SSEParser().feed(b"".join(events)):
        data = event.data
        if route == "anthropic" and isinstance(data, dict) and data.get("type") == "message_delta":
            out.append(encode(event.name, {**data, "delta": {**data.get("delta", {}), "stop_reason": "end_turn"}}))
        elif route == "openai" and isinstance(data, dict) and data.get("choices"):
            out.append(encode(None, _ended(route, data)))
        else:
            out.append(event.raw)
    return out


def _stream_error(route: Route, status: int, raw: bytes) -> bytes:
    try:
        body: Any = json.loads(raw)
    except ValueError:
        body = api(route).error("api_error", f"upstream status {status}")
    if route == "responses":
        error: dict[str, Any] = body["error"] if isinstance(body, dict) and isinstance(body.get("error"), dict) else {}
        return encode("error", {"type": "error", "code": error.get("code"), "message": error.get("message") or
                                f"upstream status {status}", "param": error.get("param")})
    return encode("error", body) if route == "anthropic" else encode(None, body)


def _error_answer(route: Route, status: int, headers: Any, raw: bytes) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """An upstream's error answer as the client gets it: unchanged when it is JSON (the provider's own
    error); a gateway's HTML page or an empty body is put in the API's error shape, its status and
    ``retry-after`` kept."""
    kept = response_headers(headers)
    try:
        if isinstance(json.loads(raw), dict):
            return kept, raw
    except (ValueError, RecursionError):
        pass
    shown = raw[:200].decode("utf-8", "replace")
    said = " ".join(shown.split()) or "an empty body"
    body = api(route).error("api_error", f"lossless proxy: the upstream answered {status} with {said!s}"[:400])
    kept = [(k, v) for k, v in kept if k.lower() != b"content-type"] + [(b"content-type", b"application/json")]
    return kept, json.dumps(body).encode()
