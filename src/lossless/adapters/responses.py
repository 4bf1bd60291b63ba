"""``ContextManager`` over OpenAI Responses input items.

    rc = ResponsesContext(max_output=32_000)      # ContextManager's arguments (window=: one for every model)
    tools = [*TOOLS, RECALL_FUNCTION]
    view = rc.prepare(items, instructions=INSTRUCTIONS, tools=tools, model=MODEL)   # MODEL's window
    response = client.responses.create(model=MODEL, input=view.messages, instructions=INSTRUCTIONS, tools=tools)
    rc.observe(response.usage)
    ...                  # a function_call named "recall": rc.run_tool(call.name, call.arguments)

``view.messages`` is the list of items to send: valid (every ``function_call`` answered,
reasoning next to its calls) and under the threshold whenever that is reachable.  The
leading ``system``/``developer`` items, with ``instructions``, are the system prompt: they
are counted, kept first and never compacted.

Send the whole input each time, not ``previous_response_id``: a history the server keeps is
one lossless cannot fit.  Like ``ContextManager.prepare``, a turn costs O(new items): the items converted last time
are recognised (the same objects, else equal values) and only what was appended is read;
each neutral message's items are rendered once.  Earlier items are treated as immutable.

Why a wrapper and not ``ContextManager(dialect="responses")``: one Responses turn is many
items (reasoning, message, calls, then outputs) that become one neutral message, which the
manager's prefix recognition would need to know about; here the manager is handed neutral
messages through its public API.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from dataclasses import replace
from typing import Any, Mapping, Sequence, Unpack

from ..dialects.responses import from_responses, item_kind, problems_responses, render_message
from ..errors import ConfigError, InvalidRequest
from ..manager import ContextManager, Prepared
from ._options import ManagerOptions, ModelWindow, openai_manager
from ..messages import Message
from ..tools import RECALL_TOOL

__all__ = ["RECALL_FUNCTION", "ResponsesContext"]

RECALL_FUNCTION: dict[str, Any] = {"type": "function", "name": RECALL_TOOL["name"],
                                   "description": RECALL_TOOL["description"], "parameters": RECALL_TOOL["input_schema"]}
"""lossless's ``recall`` as a Responses function tool (answer it with ``ResponsesContext.run_tool``)."""


class ResponsesContext:
    """A ``ContextManager`` (``manager``, or one built from the keyword arguments) that
    takes and returns Responses items.  ``manager.run_tool`` answers ``recall``."""

    def __init__(self, manager: ContextManager | None = None, **kwargs: Unpack[ManagerOptions]) -> None:
        if manager is not None and kwargs:
            raise ConfigError("pass a ContextManager or its arguments, not both")
        self._window = ModelWindow(manager, kwargs)
        if manager is None:
            manager = openai_manager(kwargs)
        if manager.dialect != "openai":
            raise ConfigError("ResponsesContext needs ContextManager(dialect='openai'): Responses items follow "
                              f"OpenAI's rules (system messages in the list), not {manager.dialect!r}")
        self.manager = manager
        self._items: list[Any] = []  # the caller's items seen last time
        self._neutral: list[Message] = []  # their conversion (head included)
        self._starts: list[int] = []  # index in _items of each neutral message's first item
        self._out_messages: list[Message] = []  # what was rendered last time (head included)…
        self._out_items: list[dict[str, Any]] = []  # …and its items
        self.system: str | None = None
        """The system prompt the last call counted: ``instructions`` and the leading system or
        developer items' text (what ``ContextManager.sent_with`` must be told, for one)."""

    def reset(self) -> None:
        """Forget what was seen (after rewriting earlier items)."""
        self._items, self._neutral, self._starts = [], [], []
        self._out_messages, self._out_items = [], []
        self.manager.reset()

    def prepare(
        self,
        items: Sequence[Mapping[str, Any]] | str,
        instructions: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
    ) -> Prepared:
        """Make the items fit; ``view.messages`` are the items to send.  ``model``: the model they
        go to, whose window (``lossless.modelinfo``) budgets them unless the context was built
        with one.  Raises ``InvalidRequest`` naming the item (index, call id) the API would refuse."""
        if model is not None:
            self._window.fit(self.manager, None, model)
        items = [{"role": "user", "content": items}] if isinstance(items, str) else list(items)
        if not items:
            raise InvalidRequest("the input has no items: send at least one message")
        head, body, system = self._split(items, instructions)
        try:
            view = self.manager.prepare(body, system=system, tools=tools)
        except InvalidRequest:
            found = problems_responses(items)
            if found:
                raise found[0] from None
            raise
        return replace(view, messages=self._render([*head, *view.neutral]))

    def recover(self, items: Sequence[Mapping[str, Any]], error: Any, instructions: str | None = None,
                tools: Sequence[Mapping[str, Any]] | None = None) -> Prepared:
        """After the API said the input is too long (``error``, a ``ContextTooLong``): compact
        harder than the estimate said (``ContextManager.recover``); ``view.messages`` are items."""
        head, body, system = self._split(list(items), instructions)
        view = self.manager.recover(body, error, system=system, tools=tools)
        return replace(view, messages=self._render([*head, *view.neutral]))

    def resume(self, sent: Sequence[Mapping[str, Any]], instructions: str | None = None,
               tools: Sequence[Mapping[str, Any]] | None = None, *, reported: int | None = None,
               overhead: int | None = None) -> None:
        """Take up a conversation from the items another context last sent (``sent``) and the
        usage reported for them (``ContextManager.resume``): what extends ``sent`` is new."""
        head, body, system = self._split(list(sent), instructions)
        self.manager.resume(body, system, tools, reported=reported, overhead=overhead)
        self._render([*head, *body])

    def _split(self, items: list[Any], instructions: str | None) -> tuple[list[Message], list[Message], str | None]:
        """(leading system messages, the rest, the system prompt they make with ``instructions``)."""
        neutral = self._convert(items)
        lead = 0
        while lead < len(neutral) and neutral[lead].role == "system":
            lead += 1
        head, body = neutral[:lead], neutral[lead:]
        system = "\n\n".join([*([instructions] if instructions else []), *(m.text for m in head)]) or None
        self.system = system
        return head, body, system

    def observe(self, usage: Any) -> None:
        """The usage the API reported for the last request (``response.usage``)."""
        self.manager.observe(usage)

    def run_tool(self, name: str, arguments: str | Mapping[str, Any]) -> str:
        """Answer ``recall`` when the model calls it (``arguments`` as the function_call has them)."""
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except ValueError:
                return "error: the arguments must be a JSON object with a 'handle'"
        if not isinstance(arguments, Mapping):
            return "error: the arguments must be a JSON object with a 'handle'"
        return self.manager.run_tool(name, arguments)

    # -- internals --------------------------------------------------------------
    def _convert(self, items: list[Any]) -> list[Message]:
        k = self._extends(items)
        if k and k < len(items) and item_kind(items[k]) != "single" and item_kind(items[k]) == item_kind(items[k - 1]):
            k = self._starts[-1] if self._starts else 0  # the new items continue the last message: read it again
        keep = bisect_left(self._starts, k) if k else 0
        new = from_responses(items[k:], start=k)
        starts = self._starts[:keep] + [k + s for s in _starts(items[k:])]
        neutral = self._neutral[:keep] + new
        self._items, self._neutral, self._starts = items, neutral, starts
        return neutral

    def _extends(self, items: list[Any]) -> int:
        """How many leading items are the ones seen last time (0: none)."""
        k = len(self._items)
        if not k or len(items) < k:
            return 0
        if items[0] is self._items[0] and items[k - 1] is self._items[k - 1]:
            return k  # the same objects (items are values: one edited in place needs reset())
        return k if items[:k] == self._items else 0  # copies, as the Agents SDK passes them

    def _render(self, messages: list[Message]) -> list[dict[str, Any]]:
        """The items of ``messages``: the last call's items plus the new ones' when the view
        only grew (nothing fired), else every message's (each rendered once, then memoised)."""
        n = len(self._out_messages)
        if n and len(messages) >= n and messages[0] is self._out_messages[0] and messages[n - 1] is self._out_messages[n - 1]:
            out = self._out_items + [item for m in messages[n:] for item in _rendered(m)]
        else:
            out = [item for m in messages for item in _rendered(m)]
        self._out_messages, self._out_items = messages, out
        return list(out)


def _starts(items: Sequence[Any]) -> list[int]:
    """Where each neutral message begins in ``items`` (as ``from_responses`` groups them)."""
    return [i for i, item in enumerate(items)
            if i == 0 or item_kind(item) == "single" or item_kind(item) != item_kind(items[i - 1])]


def _rendered(m: Message) -> list[dict[str, Any]]:
    # Messages are immutable values: their items are rendered once, then reused.
    out = m._memo.get("responses")
    if out is None:
        out = m._memo["responses"] = render_message(m)
    return out
