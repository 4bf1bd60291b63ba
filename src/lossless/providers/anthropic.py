"""``AnthropicProvider``: the Messages API through the official SDK.

    provider = AnthropicProvider("claude-sonnet-4-5", api_key=..., max_retries=2)
    response = provider.complete(Request(messages=history, system="...", tools=tools))
    response.usage.cache_read_tokens
    provider.count_tokens(request)                 # POST /v1/messages/count_tokens
    for text in provider.stream(request): ...      # the generator returns the final Response

The SDK's own retries are off (``max_retries=0``): ``RetryPolicy`` is the only
retry loop.  Every SDK exception becomes lossless's error tree in ``_translate``,
the one place this adapter knows the SDK's exception classes.  ``Request.extra``
is merged into the request body verbatim (``temperature``, ``thinking``, ...).
The SDK is imported when the provider is constructed, not when this module is.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Generator, Mapping

from ..dialects.anthropic import message_from_dict, to_anthropic
from ..errors import ProviderConnectionError, ProviderError, ProviderHTTPError
from ..messages import Message
from .base import CONNECT_TIMEOUT, OwnsClient, Request, Response, Usage
from .errors import error_fields, error_from_status, mapped_errors
from .retry import RetryPolicy

if TYPE_CHECKING:
    import anthropic

__all__ = ["AnthropicProvider"]

# Keys the count endpoint accepts besides model/messages/system/tools.
_COUNT_KEYS = ("thinking", "tool_choice", "output_config")


class AnthropicProvider(OwnsClient):
    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        retry: RetryPolicy | None = None,
        client: anthropic.Anthropic | None = None,
    ) -> None:
        """``retry`` overrides ``max_retries``; ``client`` replaces the SDK client
        (it should be built with ``max_retries=0``)."""
        if client is None:
            import anthropic

            # A server that takes the connection but never answers waits ``timeout``; one that
            # does not take it fails in 10 s, not after the whole read timeout.
            client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0,
                                         timeout=anthropic.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT)))
        self.model = model
        self.retry = retry or RetryPolicy(max_attempts=max_retries + 1)
        self._client = client

    # -- the Provider protocol -------------------------------------------
    def complete(self, request: Request) -> Response:
        body = self._body(request)

        def once() -> Response:
            with mapped_errors(self._translate):
                message = self._client.messages.create(**body)
            data = message.model_dump(mode="json", exclude_none=True)
            return Response(
                content=_content(data.get("content") or []),
                stop_reason=data.get("stop_reason") or "end_turn",
                usage=_usage(data.get("usage") or {}),
                model=data.get("model") or body["model"],
            )

        return self.retry.call(once, attempts=request.max_attempts)

    def count_tokens(self, request: Request) -> int:
        body = self._body(request)
        extra = body.pop("extra_body", {})
        count = {k: v for k, v in body.items() if k in ("model", "messages", "system", "tools")}
        count["extra_body"] = {k: v for k, v in extra.items() if k in _COUNT_KEYS}

        def once() -> int:
            with mapped_errors(self._translate):
                return self._client.messages.count_tokens(**count).input_tokens

        return self.retry.call(once, attempts=request.max_attempts)

    def stream(self, request: Request) -> Generator[str, None, Response]:
        """Yield text deltas; return the complete ``Response`` (usage included).

        Opening the stream is retried; a failure after text has arrived is not
        (the caller already has part of the answer): it raises
        ``ProviderConnectionError``, as does a stream that ends before ``message_stop``.
        """
        body = self._body(request)

        def open_stream() -> Any:
            with mapped_errors(self._translate):
                return self._client.messages.create(**body, stream=True)

        events = self.retry.call(open_stream, attempts=request.max_attempts)
        blocks: dict[int, dict[str, Any]] = {}
        partial_json: dict[int, str] = {}
        usage: dict[str, Any] = {}
        stop_reason, model, finished = "end_turn", body["model"], False
        with events, mapped_errors(self._translate):
            for event in events:
                match event.type:
                    case "message_start":
                        model = event.message.model or model
                        usage.update(event.message.usage.model_dump(exclude_none=True))
                    case "content_block_start":
                        blocks[event.index] = event.content_block.model_dump(mode="json", exclude_none=True)
                    case "content_block_delta":
                        delta = event.delta
                        block = blocks.setdefault(event.index, {"type": "text", "text": ""})
                        if delta.type == "text_delta":
                            block["text"] = block.get("text", "") + delta.text
                            yield delta.text
                        elif delta.type == "input_json_delta":
                            partial_json[event.index] = partial_json.get(event.index, "") + delta.partial_json
                        elif delta.type == "thinking_delta":
                            block["thinking"] = block.get("thinking", "") + delta.thinking
                        elif delta.type == "signature_delta":
                            block["signature"] = delta.signature
                    case "message_delta":
                        stop_reason = event.delta.stop_reason or stop_reason
                        usage.update(event.usage.model_dump(exclude_none=True))
                    case "message_stop":
                        finished = True
        if not finished:
            raise ProviderConnectionError("the Anthropic stream ended before message_stop; the answer is incomplete")
        for index, raw in partial_json.items():
            try:
                blocks[index]["input"] = json.loads(raw) if raw else {}
            except ValueError:  # cut off at max_tokens mid-call: no input, the raw text kept off the wire
                blocks[index]["input"], blocks[index]["lossless_partial_json"] = {}, raw
        content = _content([blocks[i] for i in sorted(blocks)])
        return Response(content=content, stop_reason=stop_reason, usage=_usage(usage), model=model)

    # -- wire ------------------------------------------------------------
    def _body(self, request: Request) -> dict[str, Any]:
        system, messages = _split_system(request)
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "max_tokens": request.max_tokens,
            "messages": _sendable(to_anthropic(messages)),
        }
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [dict(t) for t in request.tools]
        if request.extra:
            body["extra_body"] = dict(request.extra)
        return body

    def _translate(self, exc: Exception) -> ProviderError | None:
        """The one place SDK exceptions become lossless's errors."""
        import anthropic
        import httpx2

        if isinstance(exc, anthropic.APIStatusError):
            message, code = error_fields(exc.body)
            return error_from_status(exc.status_code, message or exc.message, code=code,
                                     headers=exc.response.headers, body=exc.body)
        if isinstance(exc, anthropic.APIResponseValidationError):
            return ProviderHTTPError(f"Anthropic answered {exc.status_code} with an unexpected body: {exc.message}",
                                     status=exc.status_code)
        if isinstance(exc, anthropic.APIConnectionError):  # timeouts included
            return ProviderConnectionError(f"no answer from {self._client.base_url}: {exc.message}")
        if isinstance(exc, httpx2.TransportError):  # raised while reading a stream's body
            return ProviderConnectionError(f"the connection to {self._client.base_url} broke mid-answer: {exc}")
        return None


def _split_system(request: Request) -> tuple[str | list[dict[str, Any]] | None, list[Message]]:
    """The system parameter and the messages without system-role ones.

    Anthropic takes the system prompt apart; system messages in the history (from
    an OpenAI-format session) are appended to it in order, as text.
    """
    extra = [m.text for m in request.messages if m.role == "system"]
    messages = [m for m in request.messages if m.role != "system"]
    system: str | list[dict[str, Any]] | None
    if isinstance(request.system, str) or request.system is None:
        system = "\n\n".join(s for s in (request.system, *extra) if s) or None
    else:
        system = [dict(b) for b in request.system] + [{"type": "text", "text": t} for t in extra if t]
    return system, messages


def _tool_use_keys() -> frozenset[str]:
    """The keys the Messages API takes on a tool_use block, as the installed SDK declares them
    (``caller`` and ``toolset_name`` included since SDK 2)."""
    try:
        from anthropic.types import ToolUseBlockParam
    except ImportError:  # a client passed in without the SDK installed
        return frozenset({"type", "id", "name", "input", "cache_control", "caller"})
    return frozenset(ToolUseBlockParam.__annotations__)


def _sendable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` without tool_use keys the API would refuse ("Extra inputs are not permitted").

    The neutral blocks keep every key a transcript had (in ``extra``, for a lossless
    round trip); only this request leaves them out, the same way every time, so the
    cached prefix is stable.  Messages with nothing to remove are the same objects."""
    allowed = _tool_use_keys()
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(b.get("type") == "tool_use" and not b.keys() <= allowed for b in content):
            content = [{k: v for k, v in b.items() if k in allowed} if b.get("type") == "tool_use" else b
                       for b in content]
            message = {**message, "content": content}
        out.append(message)
    return out


def _content(blocks: list[Mapping[str, Any]]) -> tuple:
    return message_from_dict({"role": "assistant", "content": list(blocks)}).content


def _usage(data: Mapping[str, Any]) -> Usage:
    return Usage(
        input_tokens=data.get("input_tokens") or 0,
        output_tokens=data.get("output_tokens") or 0,
        cache_read_tokens=data.get("cache_read_input_tokens") or 0,
        cache_write_tokens=data.get("cache_creation_input_tokens") or 0,
    )
