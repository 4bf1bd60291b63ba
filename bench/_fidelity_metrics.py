"""What a context holds: the fidelity benchmark's measures, independent of lossless.

Nothing here imports lossless.  Messages are read by duck typing (``role``,
``content`` blocks with a ``type`` tag and the block fields of the neutral model),
so the same functions judge the landed code, the rewritten code and the baselines,
and cannot share a blind spot with the code they measure: what counts as a fact,
a target or an outcome is decided here, from the original messages.

    text = context_text(view_messages)
    facts_in(facts, text)                                   # share of facts verbatim in context
    recall_depths(missing, text, get)                       # BFS over handles → depth per item
    account_coverage(removed_calls, text)                   # share of removed calls accounted for

Whitespace is normalised (runs of spaces, tabs and newlines → one space) before any
comparison: a fact is "verbatim" when its words appear in order with the same
characters, however a renderer re-flowed them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

HANDLE = re.compile(r"sha256:[0-9a-f]{8,24}")
"""A handle ``recall`` resolves (the recall-depth search follows these)."""
HANDLE_FORMS = re.compile(r"sha256:[0-9a-f]{6,}|(?<![\w#])#[0-9a-f]{6,}(?![\w])")
"""Every handle form whose tokens count as handle overhead: full ``sha256:`` hex handles and
short ``#1a2b3c``-style ones.  The one place to change when a new form appears."""
ACCOUNT_PREFIXES = ("[lossless: snipped", "<lossless-summary", "[recollect: snipped", "<recollect-summary")
"""Openings of the text blocks lossless writes in place of what it removed (its snip
account and its summary); their tokens are the account size."""
_WS = re.compile(r"\s+")
_LINE_NO = re.compile(r"^\s*\d+(?:→|\t)")
_TAG_ONLY = re.compile(r"^</?[A-Za-z_][\w-]*>$")
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_ERROR = re.compile(r"\b(error|exception|traceback|failed|failure|fatal|panic)\b", re.IGNORECASE)
_EXIT = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>|^\W*exit(?: code| status)?:?\s+(-?\d+)", re.I | re.M)
SHELL = frozenset({"bash", "shell", "run_command", "execute_bash", "terminal", "bashoutput", "exec"})
TARGET_KEYS = ("file_path", "notebook_path", "command", "pattern", "query", "url", "path", "prompt")
ACCOUNT_LINE = 500
OK_WORDS = ("ok", "success", "succeeded", "done", "passed")
ERROR_WORDS = ("error", "failed", "fail", "failure", "exception")


def norm(text: str) -> str:
    return _WS.sub(" ", text).strip()


# -- reading messages --------------------------------------------------------------
def result_text(block: Any) -> str:
    content = block.content
    if isinstance(content, str):
        return content
    return "\n".join(getattr(b, "text", "") for b in content)


def result_parts(block: Any) -> list[str]:
    """The texts of a tool result, one per text block (a store may keep blocks apart)."""
    content = block.content
    return [content] if isinstance(content, str) else [getattr(b, "text", "") for b in content]


def block_lines(block: Any) -> str:
    """Every character of a block the model reads (tool inputs as their raw values)."""
    kind = block.type
    if kind == "text":
        return block.text
    if kind == "thinking":
        return block.thinking
    if kind == "tool_use":
        values = [str(v) for v in block.input.values()] if isinstance(block.input, dict) else []
        return " ".join([block.name, *values, json.dumps(block.input, ensure_ascii=False)])
    if kind == "tool_result":
        return result_text(block)
    return ""


class TextCache:
    """Text of each message, memoised by identity: a live loop hands back the same
    message objects call after call, so each is rendered once.  ``tool_use=False``
    leaves tool calls out (an account must be written as text, not be a call that
    is still in context)."""

    def __init__(self, *, tool_use: bool = True) -> None:
        self._memo: dict[int, tuple[Any, str]] = {}
        self.tool_use = tool_use

    def message(self, message: Any) -> str:
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        text = "\n".join(block_lines(b) for b in message.content if self.tool_use or b.type != "tool_use")
        self._memo[id(message)] = (message, text)
        return text

    def context(self, messages: Sequence[Any]) -> str:
        """The whole context as one string."""
        return "\n".join(self.message(m) for m in messages)


def context_text(messages: Sequence[Any]) -> str:
    return TextCache().context(messages)


def tool_ids(messages: Iterable[Any]) -> set[str]:
    return {b.id for m in messages for b in m.content if b.type == "tool_use"}


def meaningful_lines(text: str) -> list[str]:
    """Lines a reader would quote: reminders, line-number prefixes and bare tags removed."""
    out = []
    for line in _REMINDER.sub("", text).splitlines():
        line = _LINE_NO.sub("", line).strip()
        if len(line) >= 3 and any(c.isalnum() for c in line) and not _TAG_ONLY.match(line):
            out.append(line)
    return out


def last_meaningful(text: str) -> str | None:
    lines = meaningful_lines(text)
    return lines[-1] if lines else None


def error_line(text: str) -> str | None:
    for line in meaningful_lines(text):
        if _ERROR.search(line):
            return line
    return None


# -- facts -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Fact:
    """A string that should stay findable: ``entered`` is the index of the message
    that brought it into the history (it counts only from then on)."""

    text: str
    kind: str
    entered: int


def derive_facts(messages: Sequence[Any], *, cap: int = 160, min_len: int = 16) -> list[Fact]:
    """Facts of a real session, found automatically:

    - ``user``: the first meaningful line of each user text message;
    - ``result``: per tool result, its first error line, else its last meaningful line;
    - ``path``: each path the agent touched (``file_path``/``path``/``notebook_path``).

    Each is cut to ``cap`` characters, kept when at least ``min_len`` long, once."""
    seen: set[str] = set()
    out: list[Fact] = []

    def add(text: str | None, kind: str, index: int) -> None:
        if not text:
            return
        text = norm(text)[:cap].strip()
        if len(text) >= min_len and text not in seen:
            seen.add(text)
            out.append(Fact(text, kind, index))

    for i, m in enumerate(messages):
        for b in m.content:
            if b.type == "text" and m.role == "user":
                lines = meaningful_lines(b.text)
                add(lines[0] if lines else None, "user", i)
            elif b.type == "tool_result":
                body = result_text(b)
                add(error_line(body) or last_meaningful(body), "result", i)
            elif b.type == "tool_use" and isinstance(b.input, dict):
                for key in ("file_path", "path", "notebook_path"):
                    if isinstance(b.input.get(key), str):
                        add(b.input[key], "path", i)
    return out


def user_messages(messages: Sequence[Any]) -> list[Fact]:
    """Each user message written as text (not tool results), whole."""
    out = []
    for i, m in enumerate(messages):
        if m.role != "user":
            continue
        text = norm("\n".join(b.text for b in m.content if b.type == "text"))
        if text:
            out.append(Fact(text, "user-message", i))
    return out


def present(items: Sequence[Fact], text: str) -> list[bool]:
    flat = norm(text)
    return [norm(f.text) in flat for f in items]


# -- what the context spends on maps and handles --------------------------------------
def handle_tokens(text: str, count_text: Callable[[str], int]) -> int:
    """Tokens spent on handle strings (``HANDLE_FORMS``) in ``text``."""
    return sum(count_text(h) for h in HANDLE_FORMS.findall(text))


def account_tokens(messages: Sequence[Any], count_text: Callable[[str], int],
                   prefixes: Sequence[str] = ACCOUNT_PREFIXES) -> int:
    """Tokens of the text blocks that open with one of ``prefixes`` (an account or a summary)."""
    total = 0
    for m in messages:
        for b in m.content:
            if b.type == "text" and b.text.lstrip().startswith(tuple(prefixes)):
                total += count_text(b.text)
    return total


# -- recall depth ------------------------------------------------------------------
def artifact_text(raw: str) -> str:
    """An artifact as a reader of its strings sees it: the raw text plus, when it is
    JSON or JSON lines, every string value decoded (escapes undone)."""
    strings: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            strings.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    stripped = raw.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            walk(json.loads(raw))
        except ValueError:
            for line in raw.splitlines():
                try:
                    walk(json.loads(line))
                except ValueError:
                    pass
    return norm(raw + "\n" + "\n".join(strings))


def recall_depths(items: Sequence[str], context: str, get: Callable[[str], str | None],
                  max_depth: int = 50) -> list[int | None]:
    """For each item (not in context), the fewest ``recall`` calls that reach an
    artifact containing it verbatim: breadth first from the handles in ``context``
    through the handles inside artifacts.  None when no chain of handles reaches it.
    ``get`` returns an artifact's text, or None when the handle resolves to nothing."""
    depth: list[int | None] = [None] * len(items)
    wanted = [norm(t) for t in items]
    seen: set[str] = set()
    frontier = list(dict.fromkeys(HANDLE.findall(context)))
    level = 0
    while frontier and level < max_depth and any(d is None for d in depth):
        level += 1
        texts = []
        nxt: list[str] = []
        for h in frontier:
            if h in seen:
                continue
            seen.add(h)
            raw = get(h)
            if raw is None:
                continue
            texts.append(artifact_text(raw))
            nxt.extend(HANDLE.findall(raw))
        joined = "\x00".join(texts)
        for i, w in enumerate(wanted):
            if depth[i] is None and w in joined:
                depth[i] = level
        frontier = [h for h in dict.fromkeys(nxt) if h not in seen]
    return depth


# -- account coverage --------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CallFacts:
    """What an account of one tool call must say: tool, target, outcome."""

    id: str
    tool: str
    target: str
    outcomes: tuple[str, ...]
    """Acceptable outcome strings; one on the line suffices."""
    numeric: bool = False
    """Outcomes are exit statuses, matched as whole numbers."""


def call_facts(use: Any, result: Any | None) -> CallFacts:
    """Tool, target and outcome of a call, from the original tool_use and result."""
    args = use.input if isinstance(use.input, dict) else {}
    target = ""
    for key in TARGET_KEYS:
        if isinstance(args.get(key), str) and args[key].strip():
            target = norm(args[key])[:40] if key in ("command", "prompt") else norm(args[key])
            break
    else:
        first = next((v for v in args.values() if isinstance(v, str) and v.strip()), "")
        target = norm(first)[:40]
    body = result_text(result) if result is not None else ""
    is_error = bool(getattr(result, "is_error", False))
    if use.name.lower() in SHELL:
        m = _EXIT.search(body)
        if m:
            return CallFacts(use.id, use.name, target, (m.group(1) or m.group(2),), numeric=True)
        # No status in the output (Claude Code's Bash reports only success or error): an
        # explicit ok/error word is the outcome, as for any other tool.
        return CallFacts(use.id, use.name, target, ERROR_WORDS if is_error else OK_WORDS)
    last = last_meaningful(body)
    words = ERROR_WORDS if is_error or (last and _ERROR.search(last)) else OK_WORDS
    snippet = (norm(last)[:30].strip(),) if last else ()
    return CallFacts(use.id, use.name, target, snippet + words)


def _has_outcome(line: str, call: CallFacts) -> bool:
    if call.numeric:
        return any(re.search(rf"(?<![\d.]){re.escape(o)}(?![\d.])", line) for o in call.outcomes)
    low = line.lower()
    for o in call.outcomes:
        if o in OK_WORDS or o in ERROR_WORDS:
            if re.search(rf"\b{o}\b", low):
                return True
        elif o and o in line:
            return True
    return False


def covered(call: CallFacts, lines: Sequence[str]) -> bool:
    """True when one line (of at most ``ACCOUNT_LINE`` characters: an account line is
    read at a glance, a dump that happens to hold the words is not one) names the
    tool, the target and the outcome together."""
    tool = re.compile(rf"(?<![\w]){re.escape(call.tool)}(?![\w])", re.I)
    for line in lines:
        if len(line) <= ACCOUNT_LINE and call.target in line and tool.search(line) and _has_outcome(line, call):
            return True
    return False


def account_coverage(calls: Sequence[CallFacts], context: str) -> list[bool]:
    lines = [norm(line) for line in context.splitlines()]
    return [covered(c, lines) for c in calls]


def removed_calls(seen: dict[str, tuple[Any, Any]], context_messages: Sequence[Any]) -> list[CallFacts]:
    """Calls that were in some request but whose tool_use is no longer in context.
    ``seen`` maps tool_use id → (original tool_use, original result or None)."""
    live = tool_ids(context_messages)
    return [call_facts(use, res) for tid, (use, res) in seen.items() if tid not in live]


# -- cost --------------------------------------------------------------------------
CACHE_READ, CACHE_WRITE, OUTPUT = 0.1, 1.25, 5.0


def shared_prefix(prev: Sequence[Any], cur: Sequence[Any]) -> int:
    n = 0
    for a, b in zip(prev, cur):
        if a is not b and a != b:
            break
        n += 1
    return n


class Meter:
    """Input cost with prompt caching: the prefix shared with the previous request is
    read at 0.1×, the rest written at 1.25× (the system prompt is part of the prefix)."""

    def __init__(self, count: Callable[[Any], int], overhead: int) -> None:
        self.count, self.overhead = count, overhead
        self.prev: Sequence[Any] = ()
        self.read = self.write = 0
        self.calls = self.prefix_changes = 0

    def add(self, request: Sequence[Any]) -> None:
        common = shared_prefix(self.prev, request)
        if self.calls and common < len(self.prev):
            self.prefix_changes += 1
        cached = sum(self.count(m) for m in request[:common])
        total = sum(self.count(m) for m in request)
        first = self.calls == 0
        self.read += (0 if first else self.overhead) + cached
        self.write += (self.overhead if first else 0) + total - cached
        self.prev = list(request)
        self.calls += 1

    @property
    def cost(self) -> float:
        return self.read * CACHE_READ + self.write * CACHE_WRITE
