"""The sessions people already have: Claude Code's and Codex CLI's, found where each keeps them.

    for s in find_sessions():          # newest first: agent, id, project, last, messages, usage, model
        print(s.id, s.project, s.usage.tokens)
    path = locate("latest")            # or a session id, a unique prefix of one, or a path
    session = open_session(path)       # → lossless.session.Session, for inspect / replay / compact

Where each agent keeps them:

- **Claude Code**: ``$CLAUDE_CONFIG_DIR/projects`` (default ``~/.claude/projects``), one
  ``<project>/<session id>.jsonl`` per session; the subagents a session started write
  ``<project>/<session id>/subagents/*.jsonl``, and what they spent is the session's.
- **Codex CLI**: ``$CODEX_HOME/sessions`` (default ``~/.codex/sessions``), one
  ``YYYY/MM/DD/rollout-<time>-<session id>.jsonl`` per session.

What a call spent, counted once:

- Claude Code writes one API response over several lines sharing ``message.id``, the
  usage repeated: the last line's usage counts, once per ``message.id`` over every
  file (a resumed session copies earlier lines into its new file).
  ``usage.input_tokens`` is the uncached input; cache reads and writes are apart.
- Codex writes a ``token_count`` event after each response with the running total:
  a call is the growth of that total (a repeated event adds nothing).  Its
  ``input_tokens`` include ``cached_input_tokens``; the difference is uncached input.

Listing reads every line once and keeps only counts; a damaged line is skipped with
a warning naming the file and line.  ``locate`` reads no file at all: ids come from
file names, ``latest`` from modification times.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping

from .dialects._json import iter_jsonl, open_regular
from .dialects.codex import COPY_MARK
from .errors import InputError, LosslessError

__all__ = ["AGENTS", "CLAUDE_CODE_WINDOW", "Agent", "SessionInfo", "Spend", "Tally", "Usage", "claude_projects",
           "codex_sessions", "dollars", "find_sessions", "is_codex_rollout", "locate", "open_session", "parse_time",
           "priced", "replay_session", "session_files", "session_model", "session_window", "tally"]

Agent = Literal["claude-code", "codex", "lossless"]
AGENTS: tuple[Agent, ...] = ("claude-code", "codex")
"""The agents whose own session folders are read (``lossless``: the transcripts in lossless's store —
proxy conversations, chat sessions — is asked for by name)."""

CLAUDE_CODE_WINDOW = 200_000
"""The window Claude Code budgets every model by unless its 1M-token beta is on (``opus[1m]``)."""

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens one or more calls spent, split the way they are priced."""

    input: int = 0
    """Uncached input tokens."""
    output: int = 0
    """Output tokens (reasoning included)."""
    cache_read: int = 0
    cache_write: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(input=self.input + other.input, output=self.output + other.output,
                     cache_read=self.cache_read + other.cache_read, cache_write=self.cache_write + other.cache_write)

    @property
    def tokens(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write


@dataclass(frozen=True, slots=True, kw_only=True)
class Spend:
    """One API call: when, which model, what it spent, and how big its prompt was."""

    when: datetime | None
    model: str | None
    usage: Usage
    context: int = 0
    """The prompt's size in tokens (all input, cached or not)."""
    side: bool = False
    """A subagent's call, not the conversation's own."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    agent: Agent
    id: str
    path: Path
    project: str
    """The folder the agent ran in (``~`` for the home directory), else the agent's name for it."""
    started: datetime | None
    last: datetime | None
    messages: int
    """Messages of the conversation: the user's turns, tool results and responses (subagents' not counted)."""
    calls: tuple[Spend, ...] = ()
    """Every API call, subagents' included."""
    compactions: int = 0
    """Compactions the agent itself recorded in the session."""
    warnings: tuple[str, ...] = field(default=())
    copy: bool = False
    """A compacted copy lossless wrote (``lossless compact --claude-code``): the calls it recorded are
    the original session's, counted there, and its history is the original's, replayed there."""

    @property
    def usage(self) -> Usage:
        return sum((c.usage for c in self.calls), Usage())

    @property
    def model(self) -> str | None:
        """The model that answered most of the conversation's own calls (a subagent's
        model counts only when the conversation recorded none)."""
        counts = Counter(c.model for c in self.calls if c.model and not c.side) or \
            Counter(c.model for c in self.calls if c.model)
        return counts.most_common(1)[0][0] if counts else None

    @property
    def peak(self) -> int:
        return max((c.context for c in self.calls), default=0)


# -- where -----------------------------------------------------------------------------
def claude_projects() -> Path:
    root = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    return Path(root) / "projects"


def codex_sessions() -> Path:
    root = os.environ.get("CODEX_HOME") or os.path.join(os.path.expanduser("~"), ".codex")
    return Path(root) / "sessions"


def session_files(agents: Iterable[Agent] = AGENTS) -> Iterator[tuple[Agent, str, Path]]:
    """``(agent, session id, path)`` of every session file, read from names alone (and the file type: a
    directory or a pipe named like a session is passed over, as any other file that is not one)."""
    for agent in agents:
        if agent == "lossless":
            yield from (("lossless", sid, path) for _, sid, path in own_transcripts() if path.is_file())
        elif agent == "claude-code":
            for path in sorted(claude_projects().glob("*/*.jsonl")):
                if path.is_file():
                    yield agent, path.stem, path
        else:
            for path in sorted(codex_sessions().rglob("rollout-*.jsonl")):
                if path.is_file():
                    found = _UUID.findall(path.stem)
                    yield agent, found[-1] if found else path.stem, path


def own_transcripts() -> list[tuple[str, str, Path]]:
    """``("lossless", session id, path)`` of each transcript in the default directory store (the
    nearest ``.lossless``, or ``$LOSSLESS_HOME``): the proxy's conversations, the chat's sessions."""
    from ._legacy import getenv
    from .storage.open import ENV_STORE, is_database
    from .store import home

    if is_database(getenv(ENV_STORE)):
        return []
    return [("lossless", p.parent.name, p) for p in sorted((home() / "sessions").glob("*/transcript.jsonl"))]


def locate(ref: str | os.PathLike[str]) -> Path:
    """The session file ``ref`` names: a path to one, ``latest`` (the most recently
    written session of either agent; with none, of lossless's own store), a session id or a
    unique prefix of one (Claude Code's and Codex's first, then the ids of lossless's own
    transcripts: a proxy conversation, a chat session).  An unknown id or an ambiguous prefix
    is an ``InputError`` saying what to pass instead."""
    text = os.fspath(ref)
    if os.path.exists(text) or os.sep in text or text.endswith((".jsonl", ".json")):
        return Path(text)  # a path (a missing one is reported by the reader, naming it)
    files: list[tuple[str, str, Path]] = list(session_files())
    where = f"{_home(claude_projects())}, {_home(codex_sessions())} or lossless's store"
    if text == "latest":
        files = files or own_transcripts()
        if not files:
            raise InputError(f"no sessions under {where}: pass a session file's path")
        return max(files, key=lambda f: _mtime(f[2]))[2]
    exact = [f for f in files if f[1] == text]
    found = exact or [f for f in files if f[1].startswith(text)]
    if not found:
        own = own_transcripts()
        found = [f for f in own if f[1] == text] or [f for f in own if f[1].startswith(text)]
    if not found:
        raise InputError(f"{text!r}: no session with this id under {where}; `lossless sessions` lists them")
    if len({f[2] for f in found}) > 1:
        shown = ", ".join(f"{f[1]} ({f[0]})" for f in found[:4]) + (", …" if len(found) > 4 else "")
        raise InputError(f"{text!r}: {len(found)} sessions start with it ({shown}); give more of the id")
    return found[0][2]


def is_codex_rollout(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` opens like a Codex CLI rollout (its first line a ``session_meta``)."""
    try:
        with open_regular(path) as f:  # a named pipe is refused, never waited on
            first = f.readline(65536)
    except (OSError, InputError):
        return False
    return first.lstrip().startswith(b"{") and b'"session_meta"' in first


def open_session(path: str | os.PathLike[str]) -> Any:
    """Read the session file at ``path`` (a Codex rollout, or any format ``read_any`` knows)."""
    if is_codex_rollout(path):
        from .dialects.codex import read_rollout

        return read_rollout(Path(path))
    from .dialects.detect import read_any

    return read_any(Path(path))


def session_model(session: Any) -> str | None:
    """The model that answered most of a ``Session``'s recorded calls."""
    counts = Counter(c.model for c in session.calls if c.model and c.model != "<synthetic>")
    return counts.most_common(1)[0][0] if counts else None


def session_window(session: Any, *, override: int | None = None,
                   warn: Callable[[str], None] | None = None) -> tuple[int, str]:
    """The window to budget a ``Session`` by, and where it comes from: ``override``
    (``--window``); the window Codex recorded; for Claude Code, ``CLAUDE_CODE_WINDOW``
    unless a recorded prompt was larger (the 1M beta was on: then the model's own);
    else the model's window from ``lossless.modelinfo`` (``warn`` once when unknown)."""
    if override is not None:
        return override, "--window"
    recorded = [w for c in session.calls if isinstance(c.usage, Mapping)
                for w in [c.usage.get("model_context_window")] if isinstance(w, int) and w > 0]
    if recorded:
        return recorded[-1], "as the session recorded it"
    from .modelinfo import context_window, window_for
    from .view import context_tokens

    model = session_model(session)
    if recorded_by_lossless(session) and model is None:
        return CLAUDE_CODE_WINDOW, ("lossless's transcripts record no model; --window N sets the one it ran with")
    if session.format == "claude-code":
        peak = max((context_tokens(c.usage) for c in session.calls), default=0)
        known = context_window(model) if model else None
        if peak <= CLAUDE_CODE_WINDOW:
            return min(known or CLAUDE_CODE_WINDOW, CLAUDE_CODE_WINDOW), f"{model or 'its model'} as Claude Code runs it"
        if known is not None:
            return known, f"{model}: a recorded prompt of {peak:,} tokens shows the 1M beta was on"
    return window_for(model, warn=warn), f"{model}'s window" if model else "no model recorded"


def recorded_by_lossless(session: Any) -> bool:
    """Whether ``session`` is a transcript lossless wrote (``sessions/<id>/transcript.jsonl`` in a
    store): every message that entered a context, of which the model was sent views."""
    path = getattr(session, "path", None)
    return path is not None and Path(path).name == "transcript.jsonl" and Path(path).parent.parent.name == "sessions"


def priced(calls: Iterable[Spend]) -> tuple[float, set[str]]:
    """What ``calls`` cost in dollars, each at its model's price today (tiers apply per call),
    and the models no price is known for (their calls count nothing)."""
    total, unknown = 0.0, set()
    for c in calls:
        each = dollars(c.model, c.usage)
        if each is None:
            unknown.add(c.model or "(no model recorded)")
        else:
            total += each
    return total, unknown


def dollars(model: str | None, usage: Usage) -> float | None:
    """What ``usage`` cost at ``model``'s price today (``lossless.modelinfo``); None when unpriced."""
    if not model:
        return None
    from .modelinfo import cost

    try:
        return cost(model, input=usage.input, output=usage.output, cache_read=usage.cache_read,
                    cache_write=usage.cache_write)
    except ImportError:  # the models extra is not installed
        return None


# -- listing ---------------------------------------------------------------------------
def find_sessions(agents: Iterable[Agent] = AGENTS, *, since: datetime | None = None) -> list[SessionInfo]:
    """Every session of ``agents``, the most recently active first; ``since`` skips those
    not written to after it (by file time: nothing of theirs is read)."""
    seen: set[str] = set()  # Claude Code responses already counted (message ids), across files
    out: list[SessionInfo] = []
    files = [(agent, sid, path) for agent, sid, path in session_files(agents)
             if since is None or _mtime(path) >= since.timestamp()]
    copies = {path for agent, _, path in files if agent == "claude-code" and _is_copy(path)}
    # A copy's responses are the original's: the originals are read first, so they count there.
    for agent, sid, path in sorted(files, key=lambda f: f[2] in copies):
        info = _codex_info(path, sid) if agent == "codex" else _claude_info(path, sid, seen)
        if info is not None and path in copies:
            info = replace(info, copy=True)
        if info is not None and agent == "lossless":  # written in Claude Code's layout, by lossless
            info = replace(info, agent="lossless", project=_home(path.parents[2].parent))
        if info is not None:
            out.append(info)
    out.sort(key=lambda s: s.last or datetime.fromtimestamp(_mtime(s.path), timezone.utc), reverse=True)
    return out


def _is_copy(path: Path) -> bool:
    """Whether the Claude Code session file at ``path`` is a compacted copy lossless wrote (its first line)."""
    from .dialects.claude_code import is_copy

    try:
        with open_regular(path) as f:
            first = json.loads(f.readline(1 << 20) or b"null")
    except (LosslessError, OSError, ValueError):
        return False
    return isinstance(first, dict) and is_copy(first)


def _claude_info(path: Path, sid: str, seen: set[str]) -> SessionInfo | None:
    warnings: list[str] = []
    first: datetime | None = None
    last: datetime | None = None
    cwd: str | None = None
    messages = compactions = 0
    calls: list[Spend] = []
    answered: set[str] = set()
    files = [path, *sorted(p for p in (path.parent / path.stem / "subagents").glob("*.jsonl") if p.is_file())]
    for n, file in enumerate(files):
        responses: dict[str, tuple[datetime | None, Mapping[str, Any], str | None, bool]] = {}
        damaged: list[tuple[int, str]] = []
        for _, entry in iter_jsonl(file, damaged=damaged):
            etype = entry.get("type")
            if etype not in ("user", "assistant", "system"):
                continue
            when = parse_time(entry.get("timestamp"))
            if n == 0:
                if when is not None:
                    first = when if first is None or when < first else first
                    last = when if last is None or when > last else last
                if cwd is None and isinstance(entry.get("cwd"), str):
                    cwd = entry["cwd"]
                if etype == "system":
                    compactions += entry.get("subtype") == "compact_boundary"
                elif etype == "user" and not entry.get("isMeta") and not entry.get("isSidechain"):
                    messages += 1
            message = entry.get("message")
            if etype != "assistant" or not isinstance(message, dict) or not isinstance(message.get("id"), str):
                continue
            if n == 0 and not entry.get("isSidechain") and message["id"] not in answered:
                answered.add(message["id"])
                messages += 1
            if message["id"] in seen or message.get("model") == "<synthetic>" or \
                    not isinstance(message.get("usage"), dict):
                continue
            known = responses.get(message["id"])
            side = n > 0 or bool(entry.get("isSidechain"))
            responses[message["id"]] = (known[0] if known else when, message["usage"], message.get("model"), side)
        warnings += [f"{file}:{line}: {why}; skipped" for line, why in damaged]
        seen.update(responses)
        calls.extend(_claude_spend(*response) for response in responses.values())
    if first is None and not calls:
        return None
    return SessionInfo(agent="claude-code", id=sid, path=path, project=_project(cwd, path.parent.name), started=first,
                       last=last, messages=messages, calls=tuple(calls), compactions=compactions,
                       warnings=tuple(warnings))


def _claude_spend(when: datetime | None, usage: Mapping[str, Any], model: str | None, side: bool) -> Spend:
    def n(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    u = Usage(input=n("input_tokens"), output=n("output_tokens"), cache_read=n("cache_read_input_tokens"),
              cache_write=n("cache_creation_input_tokens"))
    return Spend(when=when, model=model if isinstance(model, str) else None, usage=u,
                 context=u.input + u.cache_read + u.cache_write, side=side)


def _codex_info(path: Path, sid: str) -> SessionInfo | None:
    damaged: list[tuple[int, str]] = []
    first: datetime | None = None
    last: datetime | None = None
    cwd: str | None = None
    model: str | None = None
    messages = compactions = 0
    total: Mapping[str, Any] = {}
    calls: list[Spend] = []
    previous: str | None = None
    for _, line in iter_jsonl(path, damaged=damaged):
        payload = line.get("payload")
        if not isinstance(payload, dict):
            continue
        when = parse_time(line.get("timestamp"))
        if when is not None:
            first = when if first is None or when < first else first
            last = when if last is None or when > last else last
        kind = line.get("type")
        if kind == "session_meta":
            sid = payload["id"] if isinstance(payload.get("id"), str) else sid
            cwd = payload["cwd"] if isinstance(payload.get("cwd"), str) else cwd
            model = payload["model"] if isinstance(payload.get("model"), str) else model
        elif kind == "turn_context" and isinstance(payload.get("model"), str):
            model = payload["model"]
        elif kind == "compacted":
            # A copy `lossless compact --codex` wrote starts from a compacted history: lossless's
            # compaction, not the agent's, and the conversation the copy carries on.
            compactions += not str(payload.get("message") or "").startswith(COPY_MARK)
            if messages == 0 and isinstance(payload.get("replacement_history"), list):
                for item in payload["replacement_history"]:
                    if isinstance(item, dict):
                        messages, previous = _codex_count(item, messages, previous)
        elif kind == "response_item":  # counted as the reader groups them (dialects.codex)
            messages, previous = _codex_count(payload, messages, previous)
        elif kind == "event_msg" and payload.get("type") == "token_count" and isinstance(payload.get("info"), dict):
            info = payload["info"]
            now = info.get("total_token_usage")
            if not isinstance(now, dict):
                continue
            delta = {k: _int(now.get(k)) - _int(total.get(k)) for k in ("input_tokens", "cached_input_tokens",
                                                                        "output_tokens")}
            total = now
            if not any(delta.values()) or min(delta.values()) < 0:
                continue  # a repeated event; or a total that went back (a new count): nothing spent
            lastu = info.get("last_token_usage") if isinstance(info.get("last_token_usage"), dict) else {}
            cached = delta["cached_input_tokens"]
            u = Usage(input=max(0, delta["input_tokens"] - cached), cache_read=cached, output=delta["output_tokens"])
            calls.append(Spend(when=when, model=model, usage=u, context=_int(lastu.get("input_tokens"))))
    if first is None:
        return None
    return SessionInfo(agent="codex", id=sid, path=path, project=_project(cwd, "?"), started=first, last=last,
                       messages=messages, calls=tuple(calls), compactions=compactions,
                       warnings=tuple(f"{path}:{line}: {why}; skipped" for line, why in damaged))


def _codex_count(item: Mapping[str, Any], messages: int, previous: str | None) -> tuple[int, str | None]:
    """The message count and the last group after ``item``, counted as the reader groups items."""
    group = _codex_group(item)
    return messages + (group == "user" or (group is not None and group != previous)), group or previous


def _codex_group(item: Mapping[str, Any]) -> str | None:
    kind = item.get("type", "message")
    if kind == "message":
        return {"user": "user", "assistant": "assistant"}.get(str(item.get("role")))
    if kind in ("function_call", "custom_tool_call", "local_shell_call"):
        return "assistant"
    return "tool" if kind in ("function_call_output", "custom_tool_call_output") else None


# -- small helpers ---------------------------------------------------------------------
def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 timestamp (``Z`` or an offset) as an aware datetime; None if it is not one."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _home(path: Path | str) -> str:
    text, home = str(path), os.path.expanduser("~")
    return "~" + text[len(home):] if home not in ("", "/") and (text == home or text.startswith(home + os.sep)) \
        else text


def _project(cwd: str | None, fallback: str) -> str:
    return _home(cwd) if cwd else fallback


# -- totals ---------------------------------------------------------------------------------
@dataclass(slots=True)
class Tally:
    """What a group of calls (a day's, a model's) spent."""

    key: str
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    dollars: float = 0.0
    models: set[str] = field(default_factory=set)
    unpriced: set[str] = field(default_factory=set)
    sessions: set[str] = field(default_factory=set)


def tally(sessions: Iterable[SessionInfo], by: Literal["day", "model"]) -> list[Tally]:
    """The calls of ``sessions`` grouped by local day (oldest first) or by model (dearest
    first), each call priced at its model's price today."""
    groups: dict[str, Tally] = {}
    for s in sessions:
        for c in s.calls:
            when = c.when or s.last
            key = (when.astimezone().date().isoformat() if when else "?") if by == "day" else c.model or "?"
            t = groups.setdefault(key, Tally(key=key))
            t.calls += 1
            t.usage = t.usage + c.usage
            t.sessions.add(s.id)
            t.models.add(c.model or "?")
            each = dollars(c.model, c.usage)
            if each is None:
                t.unpriced.add(c.model or "(no model recorded)")
            else:
                t.dollars += each
    if by == "day":
        return sorted(groups.values(), key=lambda t: t.key)
    return sorted(groups.values(), key=lambda t: (-t.dollars, t.key))


def replay_session(info: SessionInfo, *, window: int | None = None, warn: Callable[[str], None] | None = None) -> Any:
    """``replay`` of one listed session under its window (``session_window``): a
    ``ReplayReport`` whose ``dollars`` say what it cost as recorded, replayed without
    lossless and with it.  Only the conversation itself is replayed (a subagent runs in a
    context of its own).  Errors in the file are ``InputError``s naming file and line."""
    from .replay import replay

    session = open_session(info.path)
    size, _ = session_window(session, override=window, warn=warn)
    return replay(session, size, unseen_tokens=None)
