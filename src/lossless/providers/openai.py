"""``OpenAIProvider``: Chat Completions through the official SDK — OpenAI itself,
or any compatible server (Ollama, vLLM, llama.cpp, LM Studio) via ``base_url``.

    provider = OpenAIProvider("qwen3:8b", base_url="http://localhost:11434/v1")
    response = provider.complete(Request(messages=history, system="..."))
    for text in provider.stream(request): ...      # the generator returns the final Response

As with ``AnthropicProvider``: SDK retries off, ``RetryPolicy`` on top, every SDK
exception translated in ``_translate``, ``Request.extra`` merged into the body.
``Request.tools`` may be Anthropic-style (``name``/``description``/``input_schema``)
or already Chat-Completions-style (``{"type": "function", ...}``).

Usage: ``input_tokens`` is the uncached part of ``prompt_tokens`` and
``cache_read_tokens`` the cached part, so ``Usage.context_tokens`` is the prompt.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Generator, Literal, Mapping

from ..dialects.openai import from_openai, to_openai
from ..errors import ProviderConnectionError, ProviderError, ProviderHTTPError
from ..messages import Block
from .base import CONNECT_TIMEOUT, OwnsClient, Request, Response, Usage
from .errors import error_fields, error_from_status, mapped_errors
from .retry import RetryPolicy

if TYPE_CHECKING:
    import openai

__all__ = ["OpenAIProvider"]

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use",
                 "content_filter": "refusal"}
# Local servers ignore the key, but the SDK refuses to start without one.
_LOCAL_KEY = "not-needed"


class OpenAIProvider(OwnsClient):
    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        retry: RetryPolicy | None = None,
        max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        stream_usage: bool = True,
        client: openai.OpenAI | None = None,
    ) -> None:
        """``max_tokens_field``: OpenAI's reasoning models want ``max_completion_tokens``;
        local servers know ``max_tokens``.  ``stream_usage`` asks for usage at the end
        of a stream (``stream_options.include_usage``) — turn it off for a server that
        rejects the option."""
        if client is None:
            import openai

            if api_key is None and base_url is not None and not os.environ.get("OPENAI_API_KEY"):
                api_key = _LOCAL_KEY
            client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0,
                                   timeout=openai.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT)))
        self.model = model
        self.retry = retry or RetryPolicy(max_attempts=max_retries + 1)
        self.max_tokens_field = max_tokens_field
        self.stream_usage = stream_usage
        self._client = client

    # -- the Provider protocol -------------------------------------------
    def complete(self, request: Request) -> Response:
        body = self._body(request)

        def once() -> Response:
            with mapped_errors(self._translate):
                completion = self._client.chat.completions.create(**body)
            if not completion.choices:
                raise ProviderHTTPError(f"{self._client.base_url} answered with no choices", status=200)
            choice = completion.choices[0]
            message: dict[str, Any] = {"role": "assistant", "content": choice.message.content}
            if choice.message.tool_calls:
                message["tool_calls"] = [c.model_dump(mode="json", exclude_none=True)
                                         for c in choice.message.tool_calls]
            usage = completion.usage.model_dump(exclude_none=True) if completion.usage else {}
            return Response(content=_content(message), stop_reason=_stop(choice.finish_reason), usage=_usage(usage),
                            model=completion.model or body["model"])

        return self.retry.call(once, attempts=request.max_attempts)

    def stream(self, request: Request) -> Generator[str, None, Response]:
        """Yield text deltas; return the complete ``Response``.

        Opening the stream is retried, a failure after text has arrived is not.
        A stream that ends without a ``finish_reason`` raises ``ProviderConnectionError``.
        """
        body = self._body(request) | {"stream": True}
        if self.stream_usage:
            body["stream_options"] = {"include_usage": True}

        def open_stream() -> Any:
            with mapped_errors(self._translate):
                return self._client.chat.completions.create(**body)

        chunks = self.retry.call(open_stream, attempts=request.max_attempts)
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage: dict[str, Any] = {}
        finish: str | None = None
        model = body["model"]
        with chunks, mapped_errors(self._translate):
            for chunk in chunks:
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = chunk.usage.model_dump(exclude_none=True)
                for choice in chunk.choices[:1]:
                    delta = choice.delta
                    if delta.content:
                        text.append(delta.content)
                        yield delta.content
                    for call in delta.tool_calls or ():
                        slot = calls.setdefault(call.index, {"id": "", "type": "function",
                                                             "function": {"name": "", "arguments": ""}})
                        slot["id"] = call.id or slot["id"]
                        if call.function is not None:
                            slot["function"]["name"] += call.function.name or ""
                            slot["function"]["arguments"] += call.function.arguments or ""
                    finish = choice.finish_reason or finish
        if finish is None:
            raise ProviderConnectionError("the OpenAI stream ended without a finish_reason; the answer is incomplete")
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        return Response(content=_content(message), stop_reason=_stop(finish), usage=_usage(usage), model=model)

    def count_tokens(self, request: Request) -> int:
        raise NotImplementedError("Chat Completions has no token-count endpoint; use a local TokenCounter")

    # -- wire ------------------------------------------------------------
    def _body(self, request: Request) -> dict[str, Any]:
        messages = to_openai(request.messages)
        if request.system:
            system = request.system if isinstance(request.system, str) else "\n\n".join(
                str(b.get("text", "")) for b in request.system)
            messages = [{"role": "system", "content": system}, *messages]
        body: dict[str, Any] = {"model": request.model or self.model, "messages": messages,
                                self.max_tokens_field: request.max_tokens}
        if request.tools:
            body["tools"] = [_tool(t) for t in request.tools]
        if request.extra:
            body["extra_body"] = dict(request.extra)
        return body

    def _translate(self, exc: Exception) -> ProviderError | None:
        """The one place SDK exceptions become lossless's errors."""
        import openai

        if isinstance(exc, openai.APIStatusError):
            message, code = error_fields(exc.body)
            return error_from_status(exc.status_code, message or exc.message, code=code or exc.code,
                                     headers=exc.response.headers, body=exc.body)
        if isinstance(exc, openai.APIResponseValidationError):
            return ProviderHTTPError(f"{self._client.base_url} answered {exc.status_code} with an unexpected body: "
                                     f"{exc.message}", status=exc.status_code)
        if isinstance(exc, openai.APIConnectionError):  # timeouts and broken streams included
            return ProviderConnectionError(f"no (complete) answer from {self._client.base_url}: {exc.message}")
        if isinstance(exc, openai.APIError):  # an error event inside a stream
            message, code = error_fields(exc.body)
            return error_from_status(200, message or exc.message, code=code or exc.code)
        return None


def _tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    if tool.get("type") == "function":
        return dict(tool)
    function = {"name": tool["name"], "parameters": tool.get("input_schema") or {"type": "object", "properties": {}}}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _content(message: Mapping[str, Any]) -> tuple[Block, ...]:
    return tuple(b for m in from_openai([message]) for b in m.content)


def _stop(finish_reason: str | None) -> str:
    return _STOP_REASONS.get(finish_reason or "stop", finish_reason or "end_turn")


def _usage(data: Mapping[str, Any]) -> Usage:
    cached = (data.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return Usage(
        input_tokens=max((data.get("prompt_tokens") or 0) - cached, 0),
        output_tokens=data.get("completion_tokens") or 0,
        cache_read_tokens=cached,
    )
