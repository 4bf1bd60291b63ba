"""The proxy's pipeline step, without HTTP: a client's request in, the request to forward out.

    conversations = Conversations(manager_factory(settings))
    out = rewrite(conversations, "anthropic", body_bytes)
    out.forward_bytes            # what goes upstream
    out.conversation             # whose manager, transcript and stats it was

Per request: parse; strip ``cache_control`` from message blocks (copying only the
messages that carry it); find the conversation by the hash chain (``conversations``);
hand its manager the dicts it saw last time for the known prefix plus the new ones
(so ``prepare`` costs O(new)); put the client's message breakpoints back at the same
positions counted from the end (never more than 4 in all); add the recall tool once
the conversation has handles; serialise.  An invalid history raises
``InvalidRequest`` (the caller answers 400, nothing is forwarded).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..dialects.anthropic import from_anthropic, message_from_dict, message_to_dict
from ..dialects.openai import from_openai
from ..errors import FormatError, InvalidRequest, LosslessError
from ..messages import Message
from ..view import Prepared
from . import anthropic, openai, responses
from .conversations import Conversation, Conversations, chain
from .settings import Route

__all__ = ["MAX_BREAKPOINTS", "Rewritten", "Unmanaged", "api", "render", "rewrite"]

MAX_BREAKPOINTS = 4
"""The Messages API refuses a request with more cache_control breakpoints than this."""

_NO_BREAKPOINT = frozenset({"thinking", "redacted_thinking"})


class Unmanaged(Exception):
    """The request holds what lossless's message model cannot carry (a block type it
    does not know): it is forwarded unchanged rather than refused — passing it on loses
    nothing, and the upstream is the judge of its validity."""


def api(route: Route) -> Any:
    return anthropic if route == "anthropic" else responses if route == "responses" else openai


@dataclass(frozen=True, slots=True)
class Mark:
    """A client's breakpoint: message and block counted from the end, and its value."""

    message: int
    block: int
    value: Any


@dataclass(slots=True)
class Rewritten:
    route: Route
    conversation: Conversation
    body: dict[str, Any]
    """The client's request, parsed."""
    forward: dict[str, Any]
    forward_bytes: bytes
    view: Prepared
    marks: list[Mark] = field(default_factory=list)
    matched: int = 0
    """Messages recognised from the conversation's previous request (0: handled from scratch)."""
    spliced: int = 0
    """Messages the proxy added from earlier recall rounds."""

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    def again(self, view: Prepared) -> Rewritten:
        """The same request rendered from another view (after a reactive compaction)."""
        view = wire_view(view)
        forward = render(self.route, self.conversation, self.body, view, self.marks)
        return replace(self, view=view, forward=forward, forward_bytes=dump(forward))


def dump(body: dict[str, Any]) -> bytes:
    """``body`` as compact UTF-8 JSON.  A lone surrogate (which only an upstream's answer can
    still hold: requests with one are refused) is written as its ``\\uXXXX`` escape, the same
    character in valid JSON, never as bytes that are not UTF-8."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body, separators=(",", ":")).encode("ascii")


_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def parse(route: Route, raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw, parse_constant=_not_json)  # NaN and Infinity: Python reads them, no API does
    except (ValueError, RecursionError) as exc:
        raise InvalidRequest(f"the request body is not JSON ({exc})") from None
    if route == "responses":
        if not isinstance(body, dict) or not isinstance(body.get("input"), (str, list)):
            raise InvalidRequest("the request body must be a JSON object with an 'input' string or list of items")
        if not (body.get("instructions") is None or isinstance(body["instructions"], (str, list))):
            raise InvalidRequest(f"'instructions' must be a string, not {_kind(body['instructions'])}")
    elif not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise InvalidRequest("the request body must be a JSON object with a 'messages' list")
    if route == "anthropic" and not (body.get("system") is None or isinstance(body["system"], (str, list))):
        raise InvalidRequest(f"'system' must be a string or a list of text blocks, not {_kind(body['system'])}")
    if route == "anthropic":
        _text_blocks(body.get("system"), "'system'")
        for i, m in enumerate(body["messages"]):  # a system-role message is folded into a user turn's text
            if isinstance(m, dict) and m.get("role") == "system":
                _text_blocks(m.get("content"), f"message {i} (a system message): its content", need=True)
    if not (body.get("tools") is None or isinstance(body["tools"], list)):
        raise InvalidRequest(f"'tools' must be a list of tool definitions, not {_kind(body['tools'])}")
    if _ESCAPED_SURROGATE.search(raw):  # only then can a string hold half a character
        _no_lone_surrogate(body)
    return body


def _text_blocks(value: Any, what: str, *, need: bool = False) -> None:
    """``InvalidRequest`` unless ``value`` is a string or a list of blocks (objects) whose ``text`` is a
    string where they have one (None passes unless ``need``)."""
    if value is None and not need or isinstance(value, str):
        return
    if not isinstance(value, list):
        raise InvalidRequest(f"{what} must be a string or a list of text blocks, not {_kind(value)}")
    for j, block in enumerate(value):
        if not isinstance(block, dict):
            raise InvalidRequest(f"{what}: block {j} must be an object ({{\"type\": \"text\", \"text\": …}}), "
                                 f"not {_kind(block)}")
        if "text" in block and not isinstance(block["text"], str):
            raise InvalidRequest(f"{what}: block {j}'s 'text' must be a string, not {_kind(block['text'])}")


def _kind(value: Any) -> str:
    return type(value).__name__.replace("dict", "an object").replace("list", "a list")


def _no_lone_surrogate(body: dict[str, Any]) -> None:
    """``InvalidRequest`` naming where a string holds a lone surrogate (``"\\ud800"`` is valid
    JSON but no character: forwarded, it would be bytes that are not UTF-8)."""
    history = body.get("messages") if "messages" in body else body.get("input")
    what = "message" if "messages" in body else "item"
    places = [(f"{what} {i}", m) for i, m in enumerate(history if isinstance(history, list) else [history])]
    places += [(f"field {key!r}", value) for key, value in body.items() if key not in ("messages", "input")]
    for where, value in places:
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack.extend(item.keys())
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, str):
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    raise InvalidRequest(f"{where} holds a lone surrogate (half of a UTF-16 pair, such as "
                                         "\\ud800): send the whole character or remove it") from None


def strip(message: Any, index: int, total: int, marks: list[Mark]) -> Any:
    """``message`` without ``cache_control`` on its blocks (the same object when it has none)."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list) or not any(isinstance(b, dict) and "cache_control" in b for b in content):
        return message
    blocks = []
    for j, b in enumerate(content):
        if isinstance(b, dict) and "cache_control" in b:
            marks.append(Mark(total - index, len(content) - j, b["cache_control"]))
            b = {k: v for k, v in b.items() if k != "cache_control"}
        blocks.append(b)
    return {**message, "content": blocks}


def _count_marks(value: Any) -> int:
    if isinstance(value, list):
        return sum(1 for b in value if isinstance(b, dict) and "cache_control" in b)
    return 0


def restore(messages: list[Any], marks: list[Mark], room: int) -> list[Any]:
    """``messages`` with the client's breakpoints back (copies of the messages they
    touch; the manager's own dicts are never changed), the latest ``room`` of them."""
    if not marks or room <= 0:
        return messages
    kept = sorted(marks, key=lambda m: (m.message, m.block))[:room]
    out = list(messages)
    for mark in kept:
        i = len(out) - mark.message
        if i < 0:
            continue
        message = out[i]
        content = message.get("content")
        if isinstance(content, str):
            if not content:
                continue
            content = [{"type": "text", "text": content}]
        elif not isinstance(content, list) or not content:
            continue
        j = max(len(content) - mark.block, 0)
        block = content[j]
        if not isinstance(block, dict) or block.get("type") in _NO_BREAKPOINT or block.get("text") == "":
            continue  # the API takes no breakpoint on thinking or on an empty text block
        content = list(content)
        content[j] = {**block, "cache_control": mark.value}
        out[i] = {**message, "content": content}
    return out


def render(route: Route, conv: Conversation, body: dict[str, Any], view: Prepared, marks: list[Mark]) -> dict[str, Any]:
    """The body to forward for ``view``: the client's body with the managed messages,
    its breakpoints and (once the conversation has handles) the recall tool."""
    wire = api(route)
    tools = body.get("tools")
    if conv.recall == "on":
        tools = [*(tools or []), wire.recall_tool()]
    if route == "responses":
        out = {**body, "input": view.messages}
    else:
        fixed = _count_marks(body.get("system")) + _count_marks(body.get("tools"))
        out = {**body, "messages": restore(view.messages, marks, MAX_BREAKPOINTS - fixed)}
    if tools is not None:
        out["tools"] = tools
    return out


def rewrite(conversations: Conversations, route: Route, raw: bytes, *, tenant: str = "",
            in_flight: bool = False, fit: Callable[[Any, Any], None] | None = None) -> Rewritten:
    """Parse, manage and re-serialise one request (see the module docstring).  ``tenant``
    namespaces the conversation (``conversations.tenant_of``); ``in_flight``: the caller
    makes the answer and reports it with ``Conversations.answered``; ``fit(manager, model)``
    budgets the conversation's manager by the request's ``model`` before it prepares."""
    wire = api(route)
    body = parse(route, raw)
    if route == "responses" and (why := responses.server_side(body)) is not None:
        raise Unmanaged(why)
    messages, system, tools = wire.split(body)
    marks: list[Mark] = []
    n = len(messages)
    stripped = [strip(m, i, n, marks) for i, m in enumerate(messages)]
    hashes = chain(route, stripped, tenant)
    conv, k = conversations.claim(route, hashes, stripped, tenant=tenant)
    try:
        with conv.lock:
            if fit is not None:
                fit(conv.manager, body.get("model"))
            out = _manage(conv, route, body, stripped, k, system, tools, marks)
    except FormatError as exc:
        _give_back(conversations, conv, k, hashes)
        raise Unmanaged(str(exc)) from None
    except BaseException:
        _give_back(conversations, conv, k, hashes)
        raise
    conv.size = len(raw)
    conversations.settle(conv, hashes[-1] if hashes else None, in_flight=in_flight)
    conversations.trim()
    return out


def _give_back(conversations: Conversations, conv: Conversation, k: int, hashes: list[bytes]) -> None:
    """A request that changed nothing: a new conversation is dropped, a known one ends where it did."""
    if k == 0:
        conversations.forget(conv)
    else:
        conversations.settle(conv, hashes[k - 1])



def _manage(conv: Conversation, route: Route, body: dict[str, Any], stripped: list[Any], k: int, system: Any,
            tools: Any, marks: list[Mark]) -> Rewritten:
    wire = api(route)
    cm = conv.manager
    if "recall" in wire.tool_names(tools):
        conv.recall = "client"  # the client's own tool of that name: never offered twice, never intercepted
    _reserve(cm, wire.max_tokens(body))
    if route == "responses":
        return _manage_items(conv, body, stripped, k, system, tools)
    new = stripped[k:] if k else stripped
    if not k:
        conv.stats.overhead = cm.counter.count_system(system) + cm.counter.count_tools(tools)
    # Continuing on the Messages API, the new messages are converted once, here, and handed to the
    # manager as neutral messages carrying their wire dict: it neither converts nor counts them again.
    fresh = _neutral(new, k) if k and route == "anthropic" else new
    conv.stats.client_tokens = (conv.stats.client_tokens if k else conv.stats.overhead) + _count(cm, route, fresh)
    if conv.restored is not None:
        _resume(conv, route, system, tools)
    base = conv.handed if k else []
    spliced = 0
    pending, conv.pending = conv.pending, None
    if pending is not None and k:
        with_rounds = pending.splice(route, new)
        if with_rounds is not None and base and isinstance(base[0], Message):
            with_rounds = _neutral(with_rounds, k)
        if with_rounds is not None:
            spliced = len(with_rounds) - len(new)
            try:
                view = cm.prepare([*base, *with_rounds], system, _tools_for(conv, route, tools))
            except InvalidRequest:
                view = None  # a client that changed what we spliced around: go on without the rounds
            if view is not None:
                conv.handed = [*base, *with_rounds]
                conv.stats.recall_spliced += pending.calls
                return _finish(conv, route, body, view, marks, k, spliced, len(stripped), system, tools)
    handed = [*base, *fresh]
    view = cm.prepare(handed, system, _tools_for(conv, route, tools))
    conv.handed = handed
    return _finish(conv, route, body, view, marks, k, 0, len(stripped), system, tools)


def _manage_items(conv: Conversation, body: dict[str, Any], items: list[Any], k: int, instructions: Any,
                  tools: Any) -> Rewritten:
    """``_manage`` on the Responses API: the conversation's manager sees its items through a
    ``ResponsesContext`` (one model turn is several items, one neutral message)."""
    from ..adapters.responses import ResponsesContext

    route: Route = "responses"
    cm = conv.manager
    if conv.adapter is None:
        conv.adapter = ResponsesContext(manager=cm)
    rc = conv.adapter
    new = items[k:] if k else items
    if not k:
        conv.stats.overhead = cm.counter.count_system(instructions) + cm.counter.count_tools(tools)
    conv.stats.client_tokens = (conv.stats.client_tokens if k else conv.stats.overhead) + _count(cm, route, new)
    if conv.restored is not None:
        _resume(conv, route, instructions, tools)
    base = conv.handed if k else []
    pending, conv.pending = conv.pending, None
    spliced = 0
    handed = [*base, *new]
    if pending is not None and k:
        with_rounds = pending.splice(route, new)
        if with_rounds is not None:
            try:
                view = rc.prepare([*base, *with_rounds], instructions, _tools_for(conv, route, tools))
                handed, spliced = [*base, *with_rounds], len(with_rounds) - len(new)
                conv.stats.recall_spliced += pending.calls
            except InvalidRequest:
                view = None  # a client that changed what we spliced around: go on without the rounds
                rc.reset()
                base = conv.handed = []
                handed = items
            if view is not None:
                conv.handed = handed
                return _finish(conv, route, body, view, [], k, spliced, len(items), instructions, tools)
    view = rc.prepare(handed, instructions, _tools_for(conv, route, tools))
    conv.handed = handed
    return _finish(conv, route, body, view, [], k, 0, len(items), instructions, tools)


def _tools_for(conv: Conversation, route: Route, tools: Any) -> Any:
    return [*(tools or []), api(route).recall_tool()] if conv.recall == "on" else tools


def _finish(conv: Conversation, route: Route, body: dict[str, Any], view: Prepared, marks: list[Mark], k: int,
            spliced: int, client_messages: int, system: Any, tools: Any) -> Rewritten:
    view = wire_view(view)
    fired = view.fired
    conv.view = view.messages
    remember_handles(conv, view)
    if conv.recall == "off" and any(e.handles or e.items for e in fired):
        conv.recall = "on"  # sticky: the tools prefix changes once, not every turn
        # This request already carries the tool: the usage reported for it counts it, so the next
        # estimate must not add it again (it did, and a 2k window compacted twice running).
        if route == "responses":  # the system prompt the manager counted: instructions and the head items
            system = conv.adapter.system
        conv.manager.sent_with(system, _tools_for(conv, route, tools))
    conv.stats.record(messages_in=client_messages, messages_out=len(view.messages), before=conv.stats.client_tokens,
                      after=view.state.tokens, fired=fired, rewritten=not k or bool(fired))
    forward = render(route, conv, body, view, marks)
    return Rewritten(route, conv, body, forward, dump(forward), view, marks, k, spliced)


def _resume(conv: Conversation, route: Route, system: Any, tools: Any) -> None:
    """A conversation restored from the store goes on from its parked view: its new manager
    takes it up with the calibration the old one had (``ContextManager.resume``), so it
    estimates — and compacts — as the old one would have, and the same bytes go upstream.  On
    the Messages API the view is handed over as neutral messages that remember their dicts;
    the manager then works on neutral messages (``wire_view``)."""
    calibration, conv.restored = conv.restored or {}, None
    if not conv.handed:
        return
    if route == "responses":
        conv.adapter.resume(conv.handed, system, _tools_for(conv, route, tools),
                            reported=calibration.get("reported"), overhead=calibration.get("overhead"))
        return
    if route == "anthropic":
        neutral = _neutral(conv.handed, 0)
        if not all(isinstance(m, Message) for m in neutral):
            return
        conv.handed = neutral
    conv.manager.resume(conv.handed, system, _tools_for(conv, route, tools),
                        reported=calibration.get("reported"), overhead=calibration.get("overhead"))


def wire_view(view: Prepared) -> Prepared:
    """``view`` with its messages as wire dicts (a restored conversation's manager returns
    neutral messages: each gives back the dict it came from, else its rendering)."""
    if not view.messages or not isinstance(view.messages[0], Message):
        return view
    out = []
    for m in view.messages:
        d = m._memo.get("wire")
        if d is None:
            d = m._memo["wire"] = message_to_dict(m)
        out.append(d)
    return replace(view, messages=out)


def remember_handles(conv: Conversation, view: Prepared) -> None:
    """Add the handles ``view``'s stages made to those the conversation may recall."""
    for e in view.fired:
        conv.handles.update(e.handles)
        conv.handles.update(e.items)


def _neutral(messages: list[Any], start: int) -> list[Any]:
    """``messages`` (Messages API dicts, the first at index ``start``) as neutral messages that
    remember their dict, so the manager hands the same dict back when it forwards them
    unchanged; the dicts themselves when one is not valid (the manager names the fault)."""
    out = []
    for i, d in enumerate(messages):
        try:
            m = message_from_dict(d, start + i)
        except LosslessError:
            return messages
        m._memo["wire"] = d
        out.append(m)
    return out


def _count(cm: Any, route: Route, messages: list[Any]) -> int:
    """Tokens of the client's new messages as it sent them (for /stats; O(new)).  Counts are
    kept on each neutral message, so the manager's own count of them is free."""
    if all(isinstance(m, Message) for m in messages):
        return sum(cm.counter.count_message(m) for m in messages)
    try:
        if route == "responses":
            from ..dialects.responses import from_responses

            neutral = from_responses(messages)
        else:
            neutral = from_anthropic(messages) if route == "anthropic" else from_openai(messages)
    except LosslessError:
        return 0  # the manager names what is wrong with them
    return sum(cm.counter.count_message(m) for m in neutral)


def _reserve(cm: Any, asked: int | None) -> None:
    """Make the manager's budget reserve ``asked`` output tokens when that is more than
    it reserves now: a request asking for more than ``--max-output`` must still fit."""
    config = cm.config
    if asked is None or asked <= min(config.output_tokens, config.output_reserve):
        return
    cap = config.window - config.window // 8  # beyond it the budget collapses; the upstream says no anyway
    asked = min(asked, cap)
    cm.config = replace(config, max_output=asked, output_reserve=max(config.output_reserve, asked))
    cm.budget = cm.config.budget
