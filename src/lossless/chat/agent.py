"""The chat's agent loop: one user request → model calls and tool runs → the model's answer.

    chat = Chat(settings, provider, terminal)
    chat.turn("read every Python file and tell me what calls what")
    chat.close()

Each model call is ``ContextManager.call`` (prepare → the provider → observe, with one
reactive retry when the provider says the prompt is too long); the history the loop keeps
is the view the manager returned, plus the answer and the tool results, so what the model
saw last is what it sees next.  The invariants:

* **The history is always valid.**  Every tool call gets exactly one result, in the next
  message: a tool's error is an ``is_error`` result, a tool interrupted by Ctrl-C (its
  processes killed) gets "interrupted by the user", and the calls after it in the same
  answer get "not run".  A model call interrupted by Ctrl-C is abandoned whole: nothing
  of it enters the history.
* **Nothing is lost on a crash.**  The transcript holds everything up to the last request;
  the answer and the results that came after it are in ``chat-pending.json``
  (``resume``), rewritten atomically after each of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..caching import with_breakpoints
from ..errors import ContextTooLong, ProviderError, LosslessError
from ..manager import ContextManager
from ..messages import Message, Text, Thinking, RedactedThinking, ToolResult, ToolUse, user
from ..providers.base import Provider, Request, Response
from ..providers.metered import OUTPUT
from ..replay import CacheMeter
from ..tools import NAMES as LOSSLESS_TOOLS
from ..tools import DEFINITIONS as LOSSLESS_DEFINITIONS
from ..view import Prepared
from . import resume
from .status import notices, plural, state_name, status_line
from .streaming import Streaming
from .terminal import Confirmation, Terminal
from .tools import DEFINITIONS as OWN_DEFINITIONS
from .tools import Toolbox, Workspace

SYSTEM = (
    "You are lossless chat, a coding agent working in a directory named {name!r}. Use the tools to read, "
    "search, edit and run things there (paths are relative to it). Be brief.\n\n"
    "Your context is managed: old tool results and earlier parts of the conversation may be replaced by a "
    "placeholder or a summary naming a handle (sha256:…). When you need what one stood for, call recall with "
    "its handle instead of guessing or reading again. Call compact at a natural break, or when the user asks, "
    "saying what the summary must keep."
)
INTERRUPTED = "interrupted by the user (Ctrl-C); its processes were stopped"
NOT_RUN = "not run: the user interrupted an earlier tool call of the same answer"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    workdir: Path
    store: Path
    provider: str
    model: str | None
    window: int
    max_output: int
    memory: bool = True
    yes: bool = False
    interactive: bool = True
    allow: tuple[Path, ...] = ()


@dataclass
class Meter:
    """What the session's model calls cost, managed by lossless against unmanaged (``/cost``)."""

    managed: CacheMeter
    unmanaged: CacheMeter
    output: int = 0
    calls: int = 0
    reported: dict[str, int] = field(default_factory=lambda: {"input": 0, "cache_read": 0, "cache_write": 0})
    peak_unmanaged: int = 0


class Chat:
    """One chat session: its manager, history, tools and meters."""

    def __init__(self, settings: Settings, provider: Provider, terminal: Terminal, *,
                 session_id: str | None = None, history: list[Message] | None = None) -> None:
        self.settings, self.provider, self.term = settings, provider, terminal
        self.streaming = Streaming(provider)
        self.memory = None
        if settings.memory:
            from ..memory import MemoryStore

            self.memory = MemoryStore(settings.store / "memory")
        self.cm = ContextManager(settings.window, settings.max_output, store=str(settings.store),
                                 session_id=session_id, provider=self.streaming, memory=self.memory,
                                 project_dir=str(settings.workdir))
        if self.cm.extractor is not None:
            self.cm.extractor.debounce = 0.0  # propose memories as each turn ends, not after 30 s of quiet
        # The directory's name, not its path: the tools take relative paths, and the prompt (its
        # cache, the token counts shown) is then the same wherever the project is checked out.
        self.system = SYSTEM.format(name=settings.workdir.name)
        tools: list[Any] = [*OWN_DEFINITIONS, *LOSSLESS_DEFINITIONS]
        if self.memory is not None:
            from ..memory import TOOL_DEFINITION, MemoryTool, system_index

            index = system_index(self.memory)
            self.system += "\n\n" + index if index else ""
            tools.append(TOOL_DEFINITION)
            self.memory_tool = MemoryTool(self.memory)
        self.tools = tools
        self.system_blocks = ({"type": "text", "text": self.system, "cache_control": {"type": "ephemeral"}},)
        self.confirm = Confirmation(terminal, yes=settings.yes, interactive=settings.interactive)
        self.toolbox = Toolbox(Workspace(settings.workdir, settings.allow), self.confirm)
        self.history: list[Message] = list(history or [])
        self.unmanaged: list[Message] = list(self.history)
        counter = self.cm.counter
        self.meter = Meter(managed=CacheMeter(counter), unmanaged=CacheMeter(counter))
        self.overhead = counter.count_system(self.system_blocks) + counter.count_tools(self.tools)
        self.last_state: Any = None
        self.interrupted = False
        """Whether the user stopped the last turn with Ctrl-C."""
        resume.write_info(settings.store, self.session_id, {
            "workdir": str(settings.workdir), "provider": settings.provider, "model": settings.model})

    @property
    def session_id(self) -> str:
        return self.cm.session_id

    # -- one request ------------------------------------------------------------
    def turn(self, text: str) -> str | None:
        """Run the user's request to the model's final answer (returned); None when it was interrupted or failed."""
        self.interrupted = False
        self._append(user(text))
        while True:
            try:
                response, view, streamed = self._call()
            except KeyboardInterrupt:
                self.term.note("interrupted: the model call was abandoned; ask again or go on")
                self.interrupted = True
                return None
            except ProviderError as exc:
                self.term.error(f"error from the model: {exc}")
                return None
            except LosslessError as exc:  # the store refused a write, say: the session goes on
                self.term.error(f"error: {exc}")
                return None
            self.history = list(view.neutral)
            self._metered(view, response)
            answer = Message(role="assistant", content=_sendable(response.content))
            self._append(answer)
            self._pending([answer])
            if answer.text.strip() and self.settings.interactive:
                if not streamed.strip():  # a provider that cannot stream: the answer whole, now
                    self.term.answer(answer.text.strip())
            elif answer.text.strip() and answer.tool_uses:  # -p: stdout is the final answer alone (App.once)
                self.term.note(answer.text.strip())
            self._show_status(view)
            if not answer.tool_uses:
                self._memories()
                return answer.text
            if not self._run_tools(answer):
                return None

    def _call(self) -> tuple[Response, Prepared, str]:
        """``ContextManager.call``, with prompt-cache breakpoints: on the system prompt (it and the
        tools are cached once) and on the request's last message (each request extends the
        previous one's cached prefix).  Only the request carries them, never the history.

        The spinner runs from the start (a compaction may call the model first); what the
        stages did is shown before the request goes; the answer's text is shown as it streams
        and returned third ("" when nothing streamed)."""
        with self.term.working("thinking") as activity:
            self.streaming.listen(activity.feed if self.term.streams else None)
            try:
                response, view = self._send()
            finally:
                self.streaming.listen(None)
            return response, view, activity.text

    def _send(self) -> tuple[Response, Prepared]:
        cm, provider = self.cm, self.cm.provider
        assert provider is not None  # Chat always gives the manager its provider
        with provider.turn():
            view = cm.prepare(self.history, self.system_blocks, self.tools)
            self._show_notices(view)
            for attempt in (1, 2):
                messages, tools = tuple(view.neutral), tuple(self.tools)
                system: str | tuple[Mapping[str, Any], ...] | None = self.system_blocks
                if self.settings.provider == "anthropic":  # the library's marks: tools, system, newest message
                    messages, system, tools = with_breakpoints(messages, system, tools)
                request = Request(messages=messages, system=system, tools=tools, max_tokens=self.settings.max_output)
                try:
                    response = provider.send(request)
                except ContextTooLong as exc:
                    if attempt == 2:
                        raise
                    view = cm.recover(view.neutral, exc, self.system_blocks, self.tools)
                    self._show_notices(view)
                    continue
                cm.observe(response.usage)
                if not any(isinstance(b, ToolUse) for b in response.content):
                    cm.turn_ended([*view.neutral, Message(role="assistant", content=_sendable(response.content))])
                return response, view
        raise AssertionError("unreachable")  # pragma: no cover

    def _run_tools(self, answer: Message) -> bool:
        """Answer every call of ``answer``; False when the user interrupted one (the turn ends)."""
        results: list[ToolResult] = []
        interrupted = compacted = False
        for use in answer.tool_uses:
            if interrupted:
                results.append(ToolResult(tool_use_id=use.id, content=NOT_RUN, is_error=True))
                continue
            self.term.note(f"● {use.name}({_brief(use.input)})", "tool")
            try:
                with self.term.working(use.name):
                    text, is_error = self._tool(use)
            except KeyboardInterrupt:
                text, is_error, interrupted = INTERRUPTED, True, True
            except Exception as exc:  # a tool's failure is the model's to read, never the session's end
                text, is_error = f"error: {type(exc).__name__}: {exc}", True
            compacted = compacted or (use.name == "compact" and not is_error)
            self.term.note(f"  └ {_outcome(text, is_error)}", "error" if is_error else "outcome")
            results.append(ToolResult(tool_use_id=use.id, content=text, is_error=is_error))
            self._pending([answer, Message(role="user", content=tuple(results))])
        message = Message(role="user", content=tuple(results))
        if compacted:  # the compacted view ends with this answer (its compact call unanswered yet)
            self.history = list(self.cm.last.neutral)
            self._show_notices(self.cm.last)
            self._show_status(self.cm.last)
        self._append(message)
        if interrupted:
            self.interrupted = True
            self.term.note("interrupted: the tool was stopped and the model told so; the turn ends here")
        return not interrupted

    def _tool(self, use: ToolUse) -> tuple[str, bool]:
        if use.name == "compact":
            text = self.cm.run_tool("compact", use.input, messages=self.history)
            return text, text.startswith("error")
        if use.name in LOSSLESS_TOOLS:
            text = self.cm.run_tool(use.name, use.input)
            return text, text.startswith("error")
        if use.name == "memory" and self.memory is not None:
            text = self.memory_tool.run(use.input)
            return text, text.startswith("Error")
        return self.toolbox.run(use.name, use.input)

    # -- bookkeeping --------------------------------------------------------------
    def _append(self, message: Message) -> None:
        self.history = [*self.history, message]
        self.unmanaged.append(message)

    def _pending(self, messages: list[Message]) -> None:
        transcript = self.cm.transcript
        resume.write_pending(self.settings.store, self.session_id,
                             transcript.last_uuid if transcript is not None else None, messages)

    def _metered(self, view: Any, response: Any) -> None:
        m = self.meter
        m.calls += 1
        m.managed.add(view.neutral, self.overhead)
        m.unmanaged.add(self.unmanaged, self.overhead)
        m.peak_unmanaged = max(m.peak_unmanaged, self.overhead + sum(
            self.cm.counter.count_message(x) for x in self.unmanaged))
        u = response.usage
        m.output += u.output_tokens
        m.reported["input"] += u.input_tokens
        m.reported["cache_read"] += u.cache_read_tokens
        m.reported["cache_write"] += u.cache_write_tokens

    def _show_notices(self, view: Any) -> None:
        for line in notices(view.events):
            self.term.note(f"  ↳ {line}", "notice")

    def _show_status(self, view: Any) -> None:
        self.last_state = view.state
        self.term.note(f"[{status_line(view.state)}]", "status" if state_name(view.state) == "ok" else "warning")

    def _memories(self) -> None:
        extractor = self.cm.extractor
        if extractor is None:
            return
        try:
            done = extractor.poll()
        except KeyboardInterrupt:
            return
        except LosslessError as exc:
            self.term.note(f"memory: not updated ({exc})")
            return
        if done is None:
            return
        for what, ids in (("saved", done.added), ("updated", done.updated), ("forgot", done.deleted)):
            if ids:
                self.term.note(f"memory: {what} {', '.join(ids)} (/memory lists them; /memory forget ID)", "memory")

    def close(self) -> None:
        try:
            self.cm.close()
        except LosslessError as exc:
            self.term.note(f"memory: not updated at exit ({exc})")

    @property
    def cost_units(self) -> tuple[float, float, float]:
        """(managed, unmanaged, lossless's own calls) in base-input-token units, output included."""
        m = self.meter
        return (m.managed.cost + m.output * OUTPUT, m.unmanaged.cost + m.output * OUTPUT, self.cm.llm_cost)


def _sendable(content: tuple[Any, ...]) -> tuple[Any, ...]:
    """The answer as the next request may carry it: no empty text blocks, and never empty."""
    kept = tuple(b for b in content if not (isinstance(b, Text) and not b.text.strip()))
    if not any(isinstance(b, (Text, ToolUse, Thinking, RedactedThinking)) for b in kept):
        kept = (*kept, Text(text="(no answer)"))
    return kept


def _brief(params: Any, limit: int = 80) -> str:
    text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in dict(params).items())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _outcome(text: str, is_error: bool) -> str:
    first = next((line for line in text.splitlines() if line.strip()), "")
    if is_error:
        return first[:160]
    lines = text.count("\n") + (not text.endswith("\n"))
    return f"{plural(len(text), 'character')}, {plural(lines, 'line')}"
