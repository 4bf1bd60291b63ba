"""What the fake server says, per API: pure functions from a request body to JSON.

Kept apart from the HTTP plumbing in ``handler`` so each piece reads alone:
size estimates and the prompt-cache simulation, the text of the answer, success
bodies, stream events and error bodies for Anthropic Messages and OpenAI Chat
Completions (with llama.cpp, vLLM and Ollama flavours of "too long").  What the
APIs refuse is in ``rules`` (``invalid`` is re-exported here); JSON answers to
structured-output requests in ``structured``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterator, Literal, Mapping

from . import structured
from .rules import TOOL_USE_KEYS, anthropic_problem, betas_of, invalid, openai_problem  # noqa: F401 - public names
from .notes import build_notes, is_notes_instruction, notes_turns
from .summaries import Turn, build_summary, malformed_summary, wants_summary

Api = Literal["anthropic", "openai"]
SummaryMode = Literal["good", "empty", "malformed"]
TooLongStyle = Literal["native", "llamacpp", "vllm", "ollama"]


def estimate(value: Any) -> int:
    """Tokens ≈ characters of the JSON / 4 (what the fake reports as input size)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return (len(text) + 3) // 4


# -- the prompt, as a flat list of cacheable items ---------------------------
def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else [content]


def prompt_items(api: Api, body: Mapping[str, Any]) -> list[Any]:
    """Tools, system, then message blocks (Anthropic) or whole messages (OpenAI),
    in the order a prompt cache sees them."""
    if api == "openai":
        return list(body.get("tools") or []) + list(body.get("messages") or [])
    items: list[Any] = list(body.get("tools") or [])
    if body.get("system"):
        items += _blocks(body["system"])
    for message in body.get("messages") or []:
        role = message.get("role") if isinstance(message, Mapping) else None
        content = message.get("content") if isinstance(message, Mapping) else message
        items += [{"role": role, "block": block} for block in _blocks(content)]
    return items


def _has_breakpoint(item: Any) -> bool:
    if not isinstance(item, Mapping):
        return False
    block = item.get("block", item)
    return isinstance(block, Mapping) and "cache_control" in block


def _strip_cache_control(item: Any) -> Any:
    if isinstance(item, Mapping) and "block" in item and isinstance(item["block"], Mapping):
        return {**item, "block": {k: v for k, v in item["block"].items() if k != "cache_control"}}
    if isinstance(item, Mapping):
        return {k: v for k, v in item.items() if k != "cache_control"}
    return item


@dataclass(frozen=True, slots=True)
class PromptSize:
    total: int
    cache_read: int = 0
    cache_write: int = 0

    @property
    def uncached(self) -> int:
        return self.total - self.cache_read - self.cache_write


def measure(api: Api, body: Mapping[str, Any], cache: set[str]) -> tuple[PromptSize, set[str]]:
    """The prompt's size, what a prompt cache would read and write, and the prefix
    hashes to add to ``cache`` (the server's memory) once the request is answered.

    Anthropic: the longest already-cached prefix is read; the prefix up to the last
    ``cache_control`` breakpoint is written.  OpenAI: the longest prefix of whole
    messages seen before is read (automatic caching, no minimum size here).
    """
    items = prompt_items(api, body)
    sizes = [estimate(item) for item in items]
    hasher = hashlib.sha256()
    prefixes: list[str] = []  # prefixes[k] = hash of items[:k + 1]
    for item in items:
        hasher.update(json.dumps(_strip_cache_control(item), sort_keys=True).encode())
        prefixes.append(hasher.copy().hexdigest())
    read_upto = max((k + 1 for k, h in enumerate(prefixes) if h in cache), default=0)
    if api == "openai":
        return PromptSize(total=sum(sizes), cache_read=sum(sizes[:read_upto])), set(prefixes)
    breakpoints = [k for k, item in enumerate(items) if _has_breakpoint(item)]
    write_upto = breakpoints[-1] + 1 if breakpoints else 0
    size = PromptSize(total=sum(sizes), cache_read=sum(sizes[:read_upto]),
                      cache_write=sum(sizes[read_upto:write_upto]))
    return size, {prefixes[k] for k in breakpoints}


# -- the answer --------------------------------------------------------------
def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, Mapping) and block.get("type") == "tool_use":
            parts.append(f"[tool call {block.get('name')}] {json.dumps(block.get('input'), sort_keys=True)}")
    return "\n".join(parts)


def turns(api: Api, body: Mapping[str, Any]) -> list[Turn]:
    """The conversation as (role, text) turns; tool results become "tool" turns."""
    out: list[Turn] = []
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        role, content = message.get("role"), message.get("content")
        if api == "openai":
            if role == "tool":
                out.append(("tool", _text_of(content)))
            elif role in ("user", "assistant"):
                calls = [f"[tool call {c.get('function', {}).get('name')}] {c.get('function', {}).get('arguments')}"
                         for c in message.get("tool_calls") or [] if isinstance(c, Mapping)]
                out.append((role, "\n".join([_text_of(content or ""), *calls]).strip()))
            continue
        blocks = _blocks(content)
        for block in blocks:
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                out.append(("tool", _text_of(block.get("content") or "")))
        text = _text_of([b for b in blocks if not (isinstance(b, Mapping) and b.get("type") == "tool_result")])
        if text or role == "assistant":
            out.append((str(role), text))
    return out


Blocks = list[dict[str, Any]]
"""An answer: Anthropic-style content blocks (text, tool_use, thinking)."""


def system_text(api: Api, body: Mapping[str, Any]) -> str:
    """The system prompt's text: Anthropic's ``system`` (a string or text blocks), or the
    system and developer messages of an OpenAI request."""
    if api == "openai":
        return "\n".join(_text_of(m.get("content") or "") for m in body.get("messages") or []
                         if isinstance(m, Mapping) and m.get("role") in ("system", "developer"))
    system = body.get("system")
    return _text_of(system) if isinstance(system, (str, list)) else ""


def wants_notes(api: Api, body: Mapping[str, Any], conversation: list[Turn]) -> bool:
    """A session-notes request: the notes instruction is its system prompt or its last user turn."""
    last = next((text for role, text in reversed(conversation) if role == "user"), "")
    return is_notes_instruction(system_text(api, body)) or is_notes_instruction(last)


def answer(api: Api, body: Mapping[str, Any], summary: SummaryMode, reply: str | None, *,
           notes: bool = False) -> Blocks:
    """A summary request gets the deterministic summary (or the configured failure);
    with ``notes``, a session-notes request gets the deterministic notes; anything else
    a short reply naming what it answers — as JSON matching the schema, when the
    request asks for structured output."""
    conversation = turns(api, body)
    if notes and wants_notes(api, body, conversation):
        text = build_notes(*notes_turns(conversation))
    elif wants_summary(conversation):
        text = {"good": build_summary, "empty": lambda _: "", "malformed": malformed_summary}[summary](conversation)
    else:
        if reply is not None:
            text = reply
        else:
            last = next((text for role, text in reversed(conversation) if role == "user" and text), "")
            words = " ".join(last.split())
            text = f"Fake reply to: {words[:60]}" if words else "Fake reply."
        if (schema := structured.schema_of(api, body)) is not None:
            text = structured.json_answer(schema, text)
    return [{"type": "text", "text": text}]


def thought(api: Api, body: Mapping[str, Any], blocks: Blocks, number: int) -> Blocks:
    """``blocks`` as a model with thinking ``enabled`` gives them: a signed thinking
    block first (one is added when a scripted answer has none), so a client or proxy
    that drops it from a tool loop is refused, as the real API refuses it."""
    thinking = body.get("thinking")
    if api != "anthropic" or not (isinstance(thinking, Mapping) and thinking.get("type") == "enabled"):
        return blocks
    if blocks and blocks[0].get("type") in ("thinking", "redacted_thinking"):
        return blocks
    return [{"type": "thinking", "thinking": "Working out the answer.", "signature": f"fake-signature-{number}"},
            *blocks]


def pieces(text: str) -> list[str]:
    """``text`` cut into stream deltas of a word or so."""
    words = text.split(" ")
    return [p for p in (w if i == len(words) - 1 else w + " " for i, w in enumerate(words)) if p]


def _halves(raw: str) -> list[str]:
    return [p for p in (raw[: len(raw) // 2], raw[len(raw) // 2:]) if p]


def cut_stream(items: list[Any], is_delta: Any) -> list[Any]:
    """The items up to half the deltas (at least one): what a broken stream delivers."""
    deltas = [i for i, item in enumerate(items) if is_delta(item)]
    if not deltas:
        return items[:1]
    return items[: deltas[max(1, len(deltas) // 2) - 1] + 1]


def _stop_reason(blocks: Blocks) -> str:
    return "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"


def fit(blocks: Blocks, max_tokens: int) -> tuple[Blocks, str | None]:
    """The answer as a model that stops at ``max_tokens`` gives it (text cut, later blocks
    dropped), and "max_tokens" when it was cut (None otherwise)."""
    if max_tokens <= 0 or estimate(blocks) <= max_tokens:
        return blocks, None
    out: Blocks = []
    left = max_tokens
    for block in blocks:
        size = estimate(block.get("text", "")) if block.get("type") == "text" else estimate(block)
        if size > left:
            if block.get("type") == "text" and left > 0:
                out.append({**block, "text": block["text"][: left * 4]})
            break
        out.append(block)
        left -= size
    return out, "max_tokens"


# -- Anthropic -----------------------------------------------------------------
def anthropic_message(model: str, blocks: Blocks, size: PromptSize, number: int,
                      stop: str | None = None) -> dict[str, Any]:
    return {
        "id": f"msg_fake_{number:06d}", "type": "message", "role": "assistant", "model": model,
        "content": blocks, "stop_reason": stop or _stop_reason(blocks), "stop_sequence": None,
        "usage": {"input_tokens": size.uncached, "output_tokens": estimate(blocks),
                  "cache_creation_input_tokens": size.cache_write, "cache_read_input_tokens": size.cache_read},
    }


def _block_events(index: int, block: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    kind = block.get("type")
    # The start event carries the block's other keys (a tool_use's ``caller``, say), as the API's does.
    if kind == "text":
        start = {**block, "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in pieces(block["text"])]
    elif kind == "tool_use":
        start = {**block, "input": {}}
        raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])  # str: cut JSON
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _halves(raw)]
    elif kind == "thinking":
        start = {**block, "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
    else:  # redacted_thinking and the like arrive whole in their start event
        start, deltas = dict(block), []
    yield {"type": "content_block_start", "index": index, "content_block": start}
    for delta in deltas:
        yield {"type": "content_block_delta", "index": index, "delta": delta}
    yield {"type": "content_block_stop", "index": index}


def anthropic_events(model: str, blocks: Blocks, size: PromptSize, number: int, *, cut: bool,
                     stop: str | None = None) -> list[dict]:
    """The data of each SSE event (its ``type`` is the event name); ``cut`` stops mid-way."""
    start = anthropic_message(model, [], size, number)
    start.update(stop_reason=None)
    start["usage"]["output_tokens"] = 1
    events = [{"type": "message_start", "message": start}]
    for index, block in enumerate(blocks):
        events.extend(_block_events(index, block))
    events.insert(2, {"type": "ping"})  # where the real API sends it: after the first block starts
    delta = {"stop_reason": stop or _stop_reason(blocks), "stop_sequence": None}
    events.append({"type": "message_delta", "delta": delta,
                   "usage": {"output_tokens": estimate(blocks)}})
    events.append({"type": "message_stop"})
    return cut_stream(events, lambda e: e["type"] == "content_block_delta") if cut else events


# -- OpenAI --------------------------------------------------------------------
def _openai_usage(blocks: Blocks, size: PromptSize) -> dict[str, Any]:
    completion = estimate(blocks)
    return {"prompt_tokens": size.total, "completion_tokens": completion, "total_tokens": size.total + completion,
            "prompt_tokens_details": {"cached_tokens": size.cache_read}}


def _openai_finish(blocks: Blocks, stop: str | None = None) -> str:
    if stop == "max_tokens":
        return "length"
    return "tool_calls" if _stop_reason(blocks) == "tool_use" else "stop"


def openai_completion(model: str, blocks: Blocks, size: PromptSize, number: int,
                      stop: str | None = None) -> dict[str, Any]:
    """Text blocks joined into ``content``, tool_use blocks as ``tool_calls``, thinking dropped."""
    texts = [b["text"] for b in blocks if b.get("type") == "text"]
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    calls = [{"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
             for b in blocks if b.get("type") == "tool_use"]
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-fake{number:06d}", "object": "chat.completion", "created": 1_700_000_000, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _openai_finish(blocks, stop)}],
        "usage": _openai_usage(blocks, size),
    }


def openai_chunks(model: str, blocks: Blocks, size: PromptSize, number: int, *, cut: bool,
                  include_usage: bool, stop: str | None = None) -> list[dict[str, Any] | str]:
    """The ``data:`` payloads of a stream, ending with the string "[DONE]"."""
    base = {"id": f"chatcmpl-fake{number:06d}", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks: list[dict[str, Any] | str] = [chunk({"role": "assistant", "content": ""})]
    for block in blocks:
        if block.get("type") == "text":
            chunks += [chunk({"content": p}) for p in pieces(block["text"])]
    calls = [b for b in blocks if b.get("type") == "tool_use"]
    for index, call in enumerate(calls):
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                             "function": {"name": call["name"], "arguments": ""}}]}))
        chunks += [chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
                   for p in _halves(json.dumps(call["input"]))]
    chunks.append(chunk({}, _openai_finish(blocks, stop)))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": _openai_usage(blocks, size)})
    chunks.append("[DONE]")
    if not cut:
        return chunks
    return cut_stream(chunks, lambda c: isinstance(c, dict) and any(ch["delta"].get("content") or
                                                                     ch["delta"].get("tool_calls")
                                                                     for ch in c["choices"]))


# -- error bodies ------------------------------------------------------------
def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


FAULT_BODIES: dict[tuple[Api, int], tuple[int, dict[str, Any]]] = {
    ("anthropic", 429): (429, anthropic_error("rate_limit_error", "Number of request tokens has exceeded your "
                                                                  "per-minute rate limit")),
    ("anthropic", 529): (529, anthropic_error("overloaded_error", "Overloaded")),
    ("anthropic", 500): (500, anthropic_error("api_error", "Internal server error")),
    ("openai", 429): (429, {"error": {"message": "Rate limit reached for requests", "type": "requests",
                                      "param": None, "code": "rate_limit_exceeded"}}),
    # OpenAI-compatible servers say "overloaded" with a 503, never a 529.
    ("openai", 529): (503, {"error": {"message": "The server is overloaded or not ready yet.",
                                      "type": "server_error", "param": None, "code": None}}),
    ("openai", 500): (500, {"error": {"message": "The server had an error while processing your request.",
                                      "type": "server_error", "param": None, "code": None}}),
}


def too_long(api: Api, style: TooLongStyle, tokens: int, limit: int, max_tokens: int) -> tuple[int, dict[str, Any]]:
    """The 400 each server sends when the prompt does not fit."""
    if api == "anthropic":
        return 400, anthropic_error("invalid_request_error", f"prompt is too long: {tokens} tokens > {limit} maximum")
    if style == "llamacpp":
        return 400, {"error": {"code": 400, "message": "the request exceeds the available context size, try "
                               "increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": tokens,
                               "n_ctx": limit}}
    if style == "vllm":
        return 400, {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
                     "message": f"This model's maximum context length is {limit} tokens. However, you requested "
                                f"{tokens + max_tokens} tokens ({tokens} in the messages, {max_tokens} in the "
                                f"completion). Please reduce the length of the messages or completion."}
    if style == "ollama":
        return 400, {"error": f"prompt too long; exceeded max context length by {tokens - limit} tokens"}
    return 400, {"error": {"message": f"This model's maximum context length is {limit} tokens. However, your "
                                      f"messages resulted in {tokens} tokens. Please reduce the length of the "
                                      f"messages.", "type": "invalid_request_error", "param": "messages",
                           "code": "context_length_exceeded"}}


def bad_request(api: Api, message: str) -> dict[str, Any]:
    if api == "anthropic":
        return anthropic_error("invalid_request_error", message)
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}

