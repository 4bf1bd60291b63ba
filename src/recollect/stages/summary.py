"""The fallback summary: a deterministic, structured state summary with no model call.

    new, result = fallback_summary(messages, ctx, tokens)

Used when no summarizer is configured or the circuit breaker is open.  Above the
auto-compact threshold (or on a manual/reactive trigger) it keeps a verbatim tail of
whole rounds (up to ``tail_fraction`` of the threshold) and replaces everything before
it with ONE user message::

    <recollect-summary handle="sha256:…" messages="N" tokens="T">
    ## User messages …        the user's own words, verbatim, newest kept
    ## Files read / ## Files modified / ## Commands run / ## Recent errors / ## Open todos
    ## Latest assistant message
    </recollect-summary>

The handle recalls the exact replaced history (the same JSON as ``snip``).  A summary
found in the replaced part is carried forward, so the user's instructions survive
any number of summaries (within ``summary_user_chars``).

Invariants: only whole rounds are replaced, the summary is the first message (after
OpenAI system messages) and comes from the user, tail messages are the input's own
objects, and the same input gives the same bytes.  A summary that would not be
smaller than what it replaces is never used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from .. import markers
from ..messages import Message, Text, ToolResult, ToolUse, result_text
from ..rounds import INTERRUPTED, group_rounds
from ..store import handle_for
from ._shell import shell_files
from .base import StageContext, StageResult, skipped
from .snip import archive_json

__all__ = ["fallback_summary"]

NAME = "fallback_summary"
KIND = "summary"
SCALES = (1.0, 0.5, 0.25, 0.1)
"""Section caps are multiplied by these, in turn, until the request fits the threshold."""

# Caps at scale 1 (the user's own words are capped by ContextConfig.summary_user_chars).
MAX_FILES, MAX_COMMANDS, MAX_ERRORS, MAX_TODOS = 40, 30, 5, 30
PATH_CHARS, COMMAND_CHARS, ERROR_CHARS, TODO_CHARS, ASSISTANT_CHARS = 300, 240, 300, 200, 2_000

READ_TOOLS = frozenset({"Read", "read_file", "view", "View", "NotebookRead", "open_file", "cat"})
WRITE_TOOLS = frozenset(
    {"Edit", "Write", "MultiEdit", "NotebookEdit", "write_file", "edit_file", "create_file", "write", "edit"}
)
PATH_KEYS = ("file_path", "path", "notebook_path", "filename")

H_USERS, H_READ, H_MODIFIED, H_COMMANDS = "## User messages", "## Files read", "## Files modified", "## Commands run"
H_ERRORS, H_TODOS, H_ASSISTANT = "## Recent errors", "## Open todos", "## Latest assistant message"
H_EARLIER = "## Earlier summary (written by the model; carried forward)"
EARLIER_CHARS = 8_000
_LISTS = {H_READ: "read", H_MODIFIED: "modified", H_COMMANDS: "commands", H_ERRORS: "errors", H_TODOS: "todos"}


def fallback_summary(messages: Sequence[Message], ctx: StageContext, tokens: int) -> tuple[list[Message], StageResult]:
    """Replace all but a verbatim tail with one structured summary; the input itself when nothing fires."""
    threshold = ctx.budget.threshold
    same = messages if isinstance(messages, list) else list(messages)
    if ctx.trigger not in ("manual", "reactive") and tokens <= threshold:
        return same, skipped(NAME, tokens, f"{tokens:,} tokens, at or below the threshold {threshold:,}")

    rounds = group_rounds(messages)
    lead = 0  # leading system messages (OpenAI dialect) stay first
    while lead < len(rounds) and rounds[lead].kind == "system":
        lead += 1
    body = rounds[lead:]
    if not body:
        return same, skipped(NAME, tokens, "no conversation to summarize")
    count = ctx.counter.count_message
    sizes = [sum(count(messages[i]) for i in range(r.start, r.stop)) for r in body]
    start = body[0].start

    def tail_start(k: int) -> int:
        return body[len(body) - k].start if k else len(messages)

    fit, used = 0, 0
    for size in reversed(sizes):
        if used + size > ctx.config.tail_fraction * threshold:
            break
        used, fit = used + size, fit + 1
    # The largest tail that fits tail_fraction; then the last round alone; then no tail at all.
    # Each with the section caps shrinking, until the request is under the threshold.
    best: tuple[int, int, Message, str] | None = None  # tokens after, tail rounds, summary, archive
    for k in sorted({k for k in (fit, 1, 0) if k < len(body)}, reverse=True):
        stop, replaced = tail_start(k), sum(sizes[: len(body) - k])
        state = _extract(messages[start:stop], ctx)
        archive = archive_json(messages[start:stop])
        handle = handle_for(archive.encode("utf-8", "surrogatepass"))
        for scale in SCALES:
            text = markers.summary(handle=handle, messages=stop - start, tokens=replaced, body=state.render(scale, ctx))
            msg = Message(role="user", content=(Text(text=text),), meta={"recollect": {"kind": KIND, "handle": handle}})
            after = tokens - replaced + count(msg)
            if best is None or after < best[0]:
                best = (after, k, msg, archive)
            if after <= threshold:
                break
        if best is not None and best[0] <= threshold:
            break

    assert best is not None  # body is not empty, so k = 0 was tried
    after, k, msg, archive = best
    stop, replaced = tail_start(k), sum(sizes[: len(body) - k])
    if count(msg) >= replaced:
        return same, skipped(NAME, tokens, f"a summary would not be smaller than the {replaced:,} tokens it replaces")
    handle = ctx.store.put(archive)
    covered = stop - start
    detail = (
        f"summarized {covered} messages ({replaced:,} tokens) without a model, kept {k} round(s) verbatim: "
        f"{tokens:,} → {after:,} tokens (threshold {threshold:,})"
    )
    boundary = {"trigger": ctx.trigger, "preTokens": tokens, "postTokens": after, "covered": covered}
    result = StageResult(
        stage=NAME, fired=True, tokens_before=tokens, tokens_after=after, detail=detail, handles=(handle,),
        boundary=boundary,
    )
    return [*messages[:start], msg, *messages[stop:]], result


# -- the state ----------------------------------------------------------------------------

@dataclass(slots=True)
class _Command:
    command: str
    status: str = ""
    carried: bool = False
    """A bullet carried over from an earlier summary, already rendered."""

    def render(self, limit: int) -> str:
        if self.carried:
            return self.command
        return f"`{_one_line(self.command, limit)}` → {self.status}"


@dataclass(slots=True)
class _State:
    """What the replaced history established, oldest first."""

    users: list[str] = field(default_factory=list)
    users_omitted: int = 0
    read: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    commands: list[_Command] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    """(what failed, an excerpt of what it said); carried-over bullets have an empty excerpt."""
    todos: list[str] | None = None
    last_text: str | None = None
    earlier: list[str] = field(default_factory=list)
    """Bodies of earlier summaries written by a model or taken from session notes."""

    def render(self, scale: float, ctx: StageContext) -> str:
        def n(cap: int) -> int:
            return max(1, int(cap * scale))

        parts: list[str] = []
        if self.earlier:
            parts.append(H_EARLIER)
            parts.append(_clip("\n\n".join(self.earlier), n(EARLIER_CHARS)))
        users, omitted = _newest_within(self.users, int(ctx.config.summary_user_chars * scale))
        omitted += self.users_omitted
        if users or omitted:
            note = f"; {omitted} earlier ones not shown — recall the handle" if omitted else ""
            parts.append(f"{H_USERS} (verbatim, oldest first{note})")
            parts.extend(f"<user-message>\n{_escape(u)}\n</user-message>" for u in users)
        for header, items, cap, chars in (
            (H_READ, _dedup_last(self.read), MAX_FILES, PATH_CHARS),
            (H_MODIFIED, _dedup_last(self.modified), MAX_FILES, PATH_CHARS),
            (H_COMMANDS, [c.render(n(COMMAND_CHARS)) for c in self.commands], MAX_COMMANDS, 2 * COMMAND_CHARS),
            (H_ERRORS, [f"{w}: {_excerpt(e, n(ERROR_CHARS))}" if e else w for w, e in self.errors], MAX_ERRORS,
             2 * ERROR_CHARS),
            (H_TODOS, self.todos or [], MAX_TODOS, n(TODO_CHARS)),
        ):
            if not items:
                continue
            # The newest files, commands and errors; the first todos (the list is in plan order).
            shown = items[: n(cap)] if header == H_TODOS else items[-n(cap) :]
            more = f" ({len(items) - len(shown)} more in the handle)" if len(shown) < len(items) else ""
            parts.append(f"{header}{more}")
            parts.extend(f"- {_one_line(item, chars)}" for item in shown)
        if self.last_text:
            text = _clip(self.last_text, n(ASSISTANT_CHARS))
            parts.append(f"{H_ASSISTANT}\n<assistant-message>\n{_escape(text)}\n</assistant-message>")
        return "\n".join(parts) if parts else "(no user messages, tool calls or assistant text in this part)"

    def merge_summary(self, text: str) -> None:
        """Carry an earlier recollect summary forward (it is older than anything after it).

        A summary written by the model (or made of session notes) has no sections of
        ours to parse: its body is carried whole, within ``EARLIER_CHARS``."""
        opening = text.split("\n", 1)[0]
        if 'source="model"' in opening or 'kind="session-notes"' in opening:
            body = text.split("\n", 1)[1] if "\n" in text else ""
            body = body.rsplit(markers.SUMMARY_CLOSE, 1)[0].strip()
            self.earlier.append(body)
            return
        users = [_unescape(u) for u in re.findall(r"<user-message>\n(.*?)\n</user-message>", text, re.S)]
        self.users[:0] = users
        m = re.search(rf"^{re.escape(H_USERS)} \(verbatim, oldest first; (\d+) earlier", text, re.M)
        self.users_omitted += int(m.group(1)) if m else 0
        m = re.search(r"<assistant-message>\n(.*?)\n</assistant-message>", text, re.S)
        if m:
            self.last_text = _unescape(m.group(1))
        rest = re.sub(r"<(user|assistant)-message>\n.*?\n</\1-message>", "", text, flags=re.S)
        section = None
        for line in rest.splitlines():
            if line.startswith("## "):
                section = next((v for h, v in _LISTS.items() if line.startswith(h)), None)
                if section == "todos":
                    self.todos = []
            elif section and line.startswith("- "):
                item = line[2:]
                if section == "commands":
                    self.commands.append(_Command(item, carried=True))
                elif section == "errors":
                    self.errors.append((item, ""))
                else:
                    getattr(self, section).append(item)


def _extract(messages: Sequence[Message], ctx: StageContext) -> _State:
    state = _State()
    calls: dict[str, ToolUse] = {}
    command_of: dict[str, _Command] = {}
    shell = ctx.config.shell_tools
    for m in messages:
        texts = [b.text for b in m.content if isinstance(b, Text)]
        own = [t for t in texts if t.strip() and not markers.is_marker(t)]
        for t in texts:
            if t.startswith(markers.SUMMARY_OPEN):
                state.merge_summary(t)
        if m.role == "user" and own:
            state.users.append("\n".join(own))
        elif m.role == "assistant" and own:
            state.last_text = "\n".join(own)
        for use in m.tool_uses:
            calls[use.id] = use
            _files_of(use, state, ctx)
            if use.name in shell:
                command = _command_text(use.input)
                if command:
                    reads, writes = shell_files(command)
                    state.read.extend(reads)
                    state.modified.extend(writes)
                    cmd = command_of[use.id] = _Command(command, "no result")
                    state.commands.append(cmd)
            elif use.name == "TodoWrite":
                todos = use.input.get("todos")
                if isinstance(todos, list):
                    state.todos = [
                        f"[{t.get('status', '?')}] {t.get('content', '')}"
                        for t in todos
                        if isinstance(t, dict) and t.get("status") != "completed"
                    ]
        for r in m.tool_results:
            _result(r, calls.get(r.tool_use_id), command_of.get(r.tool_use_id), state)
    return state


def _result(r: ToolResult, use: ToolUse | None, cmd: _Command | None, state: _State) -> None:
    text = result_text(r)
    code = _exit_code(text)
    if text == INTERRUPTED:
        status = "interrupted"
    elif code is not None:
        status = f"exit {code}"
    else:
        status = "error" if r.is_error else "ok"
    if cmd is not None:
        cmd.status = status
    if r.is_error or (code is not None and code != 0):
        what = use.name if use else "tool"
        if use is not None:
            arg = _command_text(use.input) or _path_of(use.input)
            what += f" {_one_line(arg, 80)}" if arg else ""
        state.errors.append((what, "interrupted, no result" if text == INTERRUPTED else _excerpt(text, ERROR_CHARS)))


def _exit_code(text: str) -> int | None:
    m = re.search(r"<returncode>\s*(-?\d+)\s*</returncode>", text) or re.search(
        r"\bexit(?:ed with)? (?:code|status)[:=]?\s*(-?\d+)", text, re.I
    )
    return int(m.group(1)) if m else None


def _command_text(inp: Any) -> str:
    for key in ("command", "cmd"):
        value = inp.get(key) if hasattr(inp, "get") else None
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return " ".join(value)
    return ""


def _path_of(inp: Any) -> str:
    for key in PATH_KEYS:
        value = inp.get(key) if hasattr(inp, "get") else None
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _files_of(use: ToolUse, state: _State, ctx: StageContext) -> None:
    path = _path_of(use.input)
    if not path:
        return
    if use.name == "str_replace_editor":
        (state.read if use.input.get("command") == "view" else state.modified).append(path)
    elif use.name in WRITE_TOOLS:
        state.modified.append(path)
    elif use.name in READ_TOOLS or use.name in ctx.config.read_tools:
        state.read.append(path)


# -- text helpers ---------------------------------------------------------------------------

def _newest_within(texts: list[str], budget: int) -> tuple[list[str], int]:
    """The first text (the task as the user stated it) and the newest texts whose total
    length fits; the first is clipped to a third of the budget, the newest alone is
    clipped if it is over.  Returns the kept texts in order and how many were left out."""
    if budget <= 0:
        return [], len(texts)
    if len(texts) > 1:
        first = _clip(texts[0], budget // 3)
        rest, omitted = _newest_only(texts[1:], budget - len(first))
        return [first, *rest], omitted
    return _newest_only(texts, budget)


def _newest_only(texts: list[str], budget: int) -> tuple[list[str], int]:
    if budget <= 0:
        return [], len(texts)
    kept: list[str] = []
    used = 0
    for text in reversed(texts):
        if used + len(text) > budget:
            if not kept:
                kept.append(_clip(text, budget))
            break
        kept.append(text)
        used += len(text)
    return kept[::-1], len(texts) - len(kept)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… {len(text) - limit:,} more characters — recall the handle]"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _excerpt(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    head = limit // 3
    return f"{flat[:head]} … {flat[-(limit - head - 3):]}"


def _dedup_last(items: Iterable[str]) -> list[str]:
    """Each item once, at its most recent position (so the newest are last)."""
    seen: dict[str, None] = {}
    for item in items:
        seen.pop(item, None)
        seen[item] = None
    return list(seen)


_CLOSERS = ("</user-message", "</assistant-message", markers.SUMMARY_CLOSE[:-1])


def _escape(text: str) -> str:
    for closer in _CLOSERS:
        text = text.replace(closer, "<\\/" + closer[2:])
    return text


def _unescape(text: str) -> str:
    for closer in _CLOSERS:
        text = text.replace("<\\/" + closer[2:], closer)
    return text
