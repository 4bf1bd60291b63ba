"""``FakeProvider``: a scripted, recording ``Provider`` for tests.

    fake = FakeProvider(script=["first answer", RateLimited("slow down", retry_after=1)])
    fake.complete(request)      # Response with text "first answer"
    fake.complete(request)      # raises RateLimited
    fake.complete(request)      # script exhausted: the default answer
    fake.requests               # every Request received, in order (failed ones too)

A script item is a ``Response``, a ``str`` (a text answer), an exception (raised),
or a callable ``Request -> Response | str``.  Once the script is exhausted, a
summary request (``purpose == "summary"`` or a last user message asking for a
``<summary>``) gets the deterministic nine-section summary of ``summaries``, a
session-notes request (the notes instruction in the system prompt or the last
user message) gets the deterministic notes of
``notes``, and any other request gets ``default`` ("OK." unless set).

``notes=`` scripts the notes apart from the rest: every notes request gets it (a
script item as above, used again for each one), whatever the script holds::

    FakeProvider(notes="# Task\nShip it.\n# Next steps\n- tag the release")
    FakeProvider(notes="OK.")                       # a junk answer, which must be refused
    FakeProvider(notes=lambda request: my_notes(request))

Usage is an estimate from ``lossless.tokens.default_counter`` so code that
calibrates on reported usage sees plausible numbers.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Generator, Iterable, Union

from ..messages import Text
from ..providers.base import Request, Response, Usage
from ..tokens import default_counter
from .notes import build_notes, is_notes_instruction, notes_turns
from .summaries import build_summary, turns_from_messages, wants_summary

__all__ = ["FakeProvider", "ScriptItem", "wants_notes"]

ScriptItem = Union[Response, str, BaseException, Callable[[Request], Union[Response, str]]]


class FakeProvider:
    def __init__(self, script: Iterable[ScriptItem] = (), *, default: str = "OK.", model: str = "fake-model",
                 notes: ScriptItem | None = None) -> None:
        self.script: deque[ScriptItem] = deque(script)
        self.default = default
        self.notes = notes
        self.model = model
        self.requests: list[Request] = []
        self._counter = default_counter()

    def push(self, *items: ScriptItem) -> None:
        """Append to the script (for tests that react to earlier calls)."""
        self.script.extend(items)

    def complete(self, request: Request) -> Response:
        self.requests.append(request)
        item: ScriptItem
        if self.notes is not None and wants_notes(request):
            item = self.notes
        else:
            item = self.script.popleft() if self.script else self._default_answer
        if isinstance(item, BaseException):
            raise item
        if callable(item) and not isinstance(item, Response):
            item = item(request)
        if isinstance(item, str):
            return self._response(request, item)
        if isinstance(item, Response):
            return item
        raise TypeError(f"script item must be a Response, str, exception or callable, not {type(item).__name__!r}")

    def stream(self, request: Request) -> Generator[str, None, Response]:
        """The same answer as ``complete``, yielded a word at a time."""
        response = self.complete(request)
        words = response.text.split(" ")
        for i, word in enumerate(words):
            yield word if i == len(words) - 1 else word + " "
        return response

    def count_tokens(self, request: Request) -> int:
        return self._input_tokens(request)

    # -- internals -------------------------------------------------------
    def _default_answer(self, request: Request) -> str:
        turns = turns_from_messages(request.messages)
        if wants_notes(request):
            return build_notes(*notes_turns(turns))
        if wants_summary(turns, request.purpose):
            return build_summary(turns)
        return self.default

    def _input_tokens(self, request: Request) -> int:
        c = self._counter
        return (sum(c.count_message(m) for m in request.messages) + c.count_system(request.system)
                + c.count_tools(request.tools))

    def _response(self, request: Request, text: str) -> Response:
        usage = Usage(input_tokens=self._input_tokens(request), output_tokens=self._counter.count_text(text))
        return Response(content=(Text(text=text),), usage=usage, model=request.model or self.model)


def wants_notes(request: Request) -> bool:
    """Whether ``request`` asks for the session notes: the notes instruction is its system
    prompt or in its last user message, as ``SessionNotes.update`` sends it either way.
    Read from the content, not the ``purpose`` label, as the fake server must (the wire
    has no purpose), so a test's bare side call labelled "session-notes" still gets
    ``default``."""
    system = request.system
    text = system if isinstance(system, str) else " ".join(str(b.get("text", "")) for b in system or ())
    if is_notes_instruction(text):
        return True
    last = next((m for m in reversed(request.messages) if m.role == "user"), None)
    return last is not None and is_notes_instruction(last.text)
