"""Who writes a summary: the ``Summarizer`` protocol and ``LLMSummarizer``.

    summarizer = LLMSummarizer(provider)                  # the agent's own provider and model
    result = summarizer.summarize(history, system=SYSTEM, tools=TOOLS, mode="up_to", point=40)
    result.text                                           # the <summary> body, analysis dropped

Cache reuse: the request repeats the last request exactly — the same system prompt,
the same tools, the same messages in the same order — and appends ONE user message
with the instruction (``prompts.render``).  The provider's prompt cache therefore
serves the whole history and only the instruction and the answer are paid in full.
Tools are sent (not used) because removing them would change the cached prefix; the
prompt forbids calling them.  Pass ``extra`` equal to the main request's extra
(``thinking`` and the like) for the same reason.

Budgeted: the answer may take ``max_output`` tokens (20,000), less when the window
leaves less.  A request estimated above the window, or refused by the provider as
too long (``ContextTooLong``), loses messages and is tried again, at most
``max_retries`` (3) times: for ``up_to`` first the verbatim part after the point
(which keeps the cached prefix), then the oldest API rounds, whole, never the last
one; when the first message is no longer a user message a short user note
"[earlier messages omitted …]" goes first.  The user's own messages in what was
dropped are quoted in the instruction (``CARRY_TOKENS``), so a request cut to fit
still yields a summary that lists them and keeps their instructions.

Refused here (``CompactionError``): an answer that is only a tool call, and one cut
off at ``max_tokens`` before ``</summary>`` (its last sections — Current Work, Next
Step — would be missing).

Transient errors (429, 529, connection) are retried by the provider adapters' own
``RetryPolicy``; wrap a provider that has none with ``providers.with_retries``.
Every other failure propagates: the caller (``AutoCompactor``) keeps the history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from .. import markers
from ..errors import CompactionError, ContextTooLong
from ..messages import Message, Text, ToolUse, user
from ..providers.base import Provider, Request, Usage
from ..rounds import group_rounds
from ..tokens import TokenCounter, default_counter
from .prompts import Mode, parse_summary, render

__all__ = ["LLMSummarizer", "OMITTED_NOTE", "SummaryResult", "Summarizer", "drop_oldest"]

OMITTED_NOTE = "[earlier messages omitted to fit the context window; the summary covers what follows]"
DROP_FRACTION = 0.2
"""Share of rounds dropped per retry when the provider did not say by how much the prompt is too long."""
CARRY_TOKENS = 2_000
"""Budget for the user's own messages from dropped rounds, quoted in the instruction (each clipped to a
quarter of it): a request cut to fit must not make the summary forget what the user asked for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryResult:
    text: str
    """The summary itself (the ``<summary>`` body); may be empty or malformed — check it."""
    usage: Usage = field(default_factory=Usage)
    """Usage of the call that produced the summary."""
    calls: int = 1
    """Model calls made, failed ones included."""
    omitted: int = 0
    """Oldest messages left out of the request to make it fit (only the user's own messages among
    them are quoted in the request, so the summary lists them)."""
    raw: str = ""
    """The model's whole answer, analysis included (for logs)."""


@runtime_checkable
class Summarizer(Protocol):
    def summarize(
        self,
        messages: Sequence[Message],
        *,
        system: Any = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        instructions: str | None = None,
        mode: Mode = "full",
        point: int | None = None,
        window: int | None = None,
        brief: bool = False,
    ) -> SummaryResult:
        """Summarise ``messages`` (all of them, those from ``point`` on, or those before it, by ``mode``).
        ``window`` is the context window the request must fit, in the caller's token units."""
        ...


class LLMSummarizer:
    """A ``Summarizer`` that asks a model, reusing the prompt cache of the conversation."""

    def __init__(
        self,
        provider: Provider,
        model: str | None = None,
        max_output: int = 20_000,
        *,
        counter: TokenCounter | None = None,
        max_retries: int = 3,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.max_output = max_output
        self.counter = counter or default_counter()
        self.max_retries = max_retries
        self.extra = dict(extra or {})

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        system: Any = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        instructions: str | None = None,
        mode: Mode = "full",
        point: int | None = None,
        window: int | None = None,
        brief: bool = False,
    ) -> SummaryResult:
        msgs = list(messages)
        if not msgs:
            raise CompactionError("nothing to summarise: the message list is empty")
        if mode != "full" and point is None:
            raise ValueError(f"mode {mode!r} needs a point")
        system = tuple(dict(b) for b in system) if system is not None and not isinstance(system, str) else system
        tools_t = tuple(dict(t) for t in tools or ())
        fixed = self.counter.count_system(system) + self.counter.count_tools(list(tools_t) or None)
        omitted, calls = 0, 0
        carried: list[Message] = []
        max_tokens = self.max_output
        if window is not None:
            # Keep room for an answer of at least min(max_output, window / 4); then the answer gets what is left.
            room = window - min(self.max_output, window // 4)
            while True:
                size = fixed + self._size(msgs, instructions, carried)
                if size <= room:
                    break
                cut = self._shrink(msgs, mode, point, size - room)
                if cut is None:
                    break  # cannot shrink further: let the provider decide
                carried += _dropped_requests(msgs, cut[0], point if mode == "since" else 0)
                msgs, mode, point, dropped = cut
                omitted += dropped
            max_tokens = min(self.max_output, max(window - size, min(self.max_output, 1_024)))
        while True:
            instruction = self._instruction(msgs, mode, point, instructions, omitted, brief,
                                            self._quotes(carried))
            request = Request(
                messages=(*msgs, user(instruction)), system=system, tools=tools_t, max_tokens=max_tokens,
                model=self.model, purpose="summary", extra=self.extra,
            )
            calls += 1
            try:
                response = self.provider.complete(request)
            except ContextTooLong as error:
                if calls > self.max_retries:
                    raise
                gap = self._gap(error, request)
                cut = self._shrink(msgs, mode, point, gap)
                if cut is None:
                    raise
                carried += _dropped_requests(msgs, cut[0], point if mode == "since" else 0)
                msgs, mode, point, dropped = cut
                omitted += dropped
                continue
            break
        if not response.text.strip() and any(isinstance(b, ToolUse) for b in response.content):
            raise CompactionError("the model called a tool instead of writing a summary")
        if response.stop_reason == "max_tokens" and "</summary>" not in response.text.lower():
            # Cut off mid-summary: the sections that go missing are the last ones (Current
            # Work, Next Step), exactly what the work continues from.
            raise CompactionError(f"the summary was cut off at max_tokens ({max_tokens:,}) before </summary>")
        return SummaryResult(text=parse_summary(response.text), usage=response.usage, calls=calls, omitted=omitted,
                             raw=response.text)

    # -- internals ---------------------------------------------------------
    def _instruction(self, msgs: list[Message], mode: Mode, point: int | None, instructions: str | None,
                     omitted: int, brief: bool, carried: tuple[str, ...] = ()) -> str:
        # Incremental: a conversation that opens with an earlier summary or account is summarised
        # as that summary plus what came after it (the seeds' partial compaction), nothing dropped.
        earlier = bool(msgs) and msgs[0].role == "user" and msgs[0].text.startswith(
            (markers.SUMMARY_OPEN, markers.SNIPPED_PREFIX))
        if mode == "full" or point is None:
            return render("full", instructions=instructions, omitted=omitted, brief=brief, carried=carried,
                          earlier=earlier)
        quote = msgs[point].text if point < len(msgs) else ""
        if not quote.strip() and point < len(msgs):
            quote = f"[{msgs[point].role} message with {markers.counted(len(msgs[point].content), 'block')}]"
        return render(mode, point=point, total=len(msgs), quote=quote, instructions=instructions,
                      omitted=omitted, brief=brief, carried=carried, earlier=earlier and mode == "up_to")

    def _quotes(self, carried: list[Message]) -> tuple[str, ...]:
        """The dropped user messages' texts, oldest first, within ``CARRY_TOKENS``."""
        out, left = [], CARRY_TOKENS
        for m in carried:
            text = m.text.strip()
            size = self.counter.count_text(text)
            if size > CARRY_TOKENS // 4:  # a pasted log, not an instruction: keep its start
                text = text[: max(1, len(text) * (CARRY_TOKENS // 4) // size)].rstrip() + " […]"
                size = self.counter.count_text(text)
            if size > left:
                break
            out.append(text)
            left -= size
        return tuple(out)

    def _size(self, msgs: list[Message], instructions: str | None, carried: Sequence[Message] = ()) -> int:
        """Messages plus the instruction (the scoped wordings differ from ``full`` by a few dozen tokens)."""
        count = self.counter.count_message
        text = render("full", instructions=instructions, carried=self._quotes(list(carried)))
        return sum(count(m) for m in msgs) + self.counter.count_text(text) + 50

    def _gap(self, error: ContextTooLong, request: Request) -> int | None:
        """How many of our tokens must go, from the provider's numbers (None when it gave none)."""
        if error.tokens is None or error.limit is None or error.tokens <= error.limit:
            return None
        ours = (sum(self.counter.count_message(m) for m in request.messages) + self.counter.count_system(request.system)
                + self.counter.count_tools(list(request.tools) or None))
        ratio = ours / error.tokens if error.tokens else 1.0
        return int((error.tokens - error.limit) * ratio * 1.1) + 1

    def _shrink(self, msgs: list[Message], mode: Mode, point: int | None,
                gap: int | None) -> tuple[list[Message], Mode, int | None, int] | None:
        """A smaller request: the verbatim part after an up_to point first, then the oldest rounds."""
        if mode == "up_to" and point is not None and point < len(msgs):
            return msgs[:point], "full", None, 0
        out, dropped = drop_oldest(msgs, gap, self.counter)
        if not dropped:
            return None
        if point is not None:
            shift = len(msgs) - len(out)
            point = point - shift
            if point <= 0 or point >= len(out):
                mode, point = "full", None
        return out, mode, point, dropped


def drop_oldest(messages: Sequence[Message], gap: int | None, counter: TokenCounter) -> tuple[list[Message], int]:
    """Drop whole API rounds from the head until at least ``gap`` tokens are gone
    (``DROP_FRACTION`` of the rounds when ``gap`` is None).

    Leading system messages stay, and so does the first user request when it is small
    (under a quarter of the whole): it is what the work is for.  The last round always
    stays.  Where the kept part would go on with an assistant message, ``OMITTED_NOTE``
    (a user message) marks the gap, so the request still starts with the user.
    Returns the new list and how many messages were dropped."""
    msgs = list(messages)
    rounds = group_rounds(msgs)
    count = counter.count_message
    lead = 0
    while lead < len(rounds) and rounds[lead].kind == "system":
        lead += 1
    first = rounds[lead] if lead < len(rounds) else None
    if (first is not None and first.kind == "user" and msgs[first.start].text != OMITTED_NOTE
            and count(msgs[first.start]) * 4 <= sum(count(m) for m in msgs)):
        lead += 1  # pin the first request
    body = rounds[lead:]
    if len(body) <= 1:
        return msgs, 0
    if gap is None:
        n = max(1, int(len(body) * DROP_FRACTION))
    else:
        n, freed = 0, 0
        while n < len(body) - 1 and freed < gap:
            freed += sum(count(msgs[i]) for i in range(body[n].start, body[n].stop))
            n += 1
    n = min(max(n, 1), len(body) - 1)
    start, stop = body[0].start, body[n].start
    dropped = sum(1 for m in msgs[start:stop] if m.text != OMITTED_NOTE)  # a note from an earlier retry goes too
    rest = msgs[stop:]
    if rest and rest[0].role != "user":
        rest = [Message(role="user", content=(Text(text=OMITTED_NOTE),)), *rest]
    return [*msgs[:start], *rest], dropped


def _dropped_requests(before: Sequence[Message], after: Sequence[Message], start: int | None = 0) -> list[Message]:
    """The user's own requests (not tool results, notes or lossless markers) in ``before[start:]``
    but not in ``after`` — ``start`` is a ``since`` point: what precedes it is context, not summarised."""
    kept = {id(m) for m in after}
    return [m for m in before[start or 0:] if id(m) not in kept and m.role == "user" and not m.tool_results
            and m.text.strip() and m.text != OMITTED_NOTE and not markers.is_marker(m.text.lstrip())]
