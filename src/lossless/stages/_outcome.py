"""One line per removed tool call: what it was aimed at, and how it ended.

    target("Bash", {"command": "pytest -q"})           # 'pytest -q'
    target("Grep", {"pattern": "TODO", "path": "src"})  # "'TODO' in src"
    outcome(result_text(r), is_error=r.is_error)       # 'exit 1 — 2 failed, 40 passed in 1.2s'
    exit_status(text)                                  # 1, or None when the result carries none

An account line reads ``<tool> <target> → <outcome> (recall <handle>)``; these
functions give its two middle parts, for Claude Code's tools, generic agent tools and
shell results of every shape in the data (mini-swe-agent's ``<returncode>``, Claude
Code's ``Exit code N`` first line, ``<exit_code>``, "exit status N" lines).

``outcome`` is one of ``exit N — <detail>``, ``error — <detail>``, ``timed out —
<detail>``, ``ok — <detail>`` or ``interrupted``.  The detail is the line that says
what happened: a Python traceback's final ``XError: msg``, a test runner's summary
(``N failed, M passed``, ``FAILED (errors=1)``), else the first error-looking line,
else the last meaningful line (or, for a file's numbered content, the lines shown).
Meaningful lines skip blanks, harness tags, ``<system-reminder>`` blocks and
``N→`` line-number prefixes.

Invariants protected here: the status comes first and is never cut (a long detail is
cut instead), the result is one line of at most ``max(limit, len(status))``
characters, and the time spent is bounded whatever the size of the text: only a head
and a tail window are read.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Mapping

from ..rounds import INTERRUPTED
from ._shell import command_line

__all__ = ["exit_status", "outcome", "target"]

WINDOW = 16_000
"""Characters read at each end of a result; what lies between is never looked at."""

_STATUS_HEAD = re.compile(  # where harnesses put the status: first, or as a tag line near the top
    r"\A\s*<returncode>\s*(-?\d+)\s*</returncode>|^<exit_code>\s*(-?\d+)\s*</exit_code>$"
    r"|\A\s*Exit code:?\s+(-?\d+)\s*$",
    re.M,
)
_STATUS_LINE = re.compile(
    r"^\W*(?:process |command |the command )?(?:exited with|finished with|exit(?:ed)?)(?: exit)? (?:code|status)"
    r"[:= ]*(-?\d+)\W*$",
    re.I,
)
_TIMED_OUT = re.compile(r"\A\s*The last command <command>.*?</command> timed out", re.S)
_TAG_LINE = re.compile(r"^\s*(?:</?[A-Za-z_][\w-]*>\s*)+$|^\s*<returncode>-?\d+</returncode>\s*$")
_HARNESS_BLOCKS = re.compile(
    r"<(system-reminder|warning|usage)>.*?</\1>|<returncode>-?\d+</returncode>|<exit_code>-?\d+</exit_code>"
    r"|</?(?:output|output_head|output_tail|tool_use_error|retrieval_status|status|stdout|stderr)>"
    r"|<elided_chars>.*?</elided_chars>|^agentId: \w+ \(for resuming.*$",
    re.S | re.M,
)
_LINE_NO = re.compile(r"^\s*(\d+)→")
_TRACEBACK = "Traceback (most recent call last):"
_CONTINUED = ("During handling of the above exception", "The above exception was the direct cause", _TRACEBACK)
_TESTS = re.compile(
    r"^=*\s*((?:\d+ [a-z]+, )*\d+ [a-z]+ in [\d.]+\s*s\w*)(?: \(.*\))?\s*=*$"  # pytest: 1 failed, 2 passed in 0.1s
    r"|^((?:\d+ [a-z]+, )*\d+ (?:failed|passed)\b.*)$"
    r"|^((?:\d+ doctests?, )?\d+ (?:tests?|examples?), \d+ failures?.*)$"  # ExUnit, RSpec
)
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(?::\s.*)?$")
_EXCEPTION_NAME = re.compile(r"(?:Error|Exception|Exit|Interrupt|Warning|Failure|Fault|Configured|DoesNotExist)$|exceptions\.")
_RAN = re.compile(r"^(Ran \d+ tests? in [\d.]+s)$")
_ERROR = re.compile(
    r"^(?:fatal|error|ERROR|FATAL|Error|E)\b[:\s]|^FAILED |: (?:error|fatal error):|No such file or directory"
    r"|command not found|Permission denied|\bnot found\b|^\S+: cannot |\[ERROR\]|^✘|^\w*(?:Error|Exception):"
)
_SPACE = re.compile(r"\s+")

_PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "file", "dir", "directory")
_COMMAND_KEYS = ("command", "cmd", "script")
_OTHER_KEYS = ("url", "query", "pattern", "q", "description", "prompt", "task_id", "skill", "handle", "name")


def exit_status(text: str) -> int | None:
    """The exit status a shell result reports, or None when it reports none."""
    m = _STATUS_HEAD.search(text[:1_000])
    if m:
        return int(next(g for g in m.groups() if g is not None))
    tail_lines = [ln for ln in text[-2_000:].splitlines() if ln.strip()][-3:]
    for line in tail_lines:
        m = _STATUS_LINE.match(line.strip())
        if m:
            return int(m.group(1))
    return None


def outcome(text: str, *, is_error: bool, limit: int = 160) -> str:
    """How a tool call ended, in one line of at most ``max(limit, len(status))`` characters."""
    if text == INTERRUPTED:
        return "interrupted"
    code = exit_status(text)
    lines = _meaningful(text)
    if code is not None:
        found = _problem(lines) if code != 0 or is_error else _tests_summary(lines)
        status, detail = f"exit {code}", found or _last(lines) or "no output"
    elif _TIMED_OUT.match(text[:WINDOW]):
        body = text.split("<output>", 1)[-1].rsplit("</output>", 1)[0]
        status, detail = "timed out", _last(_meaningful(body)) or "no output"
    elif is_error:
        status, detail = "error", _problem(lines) or (lines[0] if lines else "no message")
    else:
        status, detail = "ok", _numbered(text) or _tests_summary(lines) or _last(lines) or "no output"
    return _fit(status, detail, limit)


def target(tool: str, input: Mapping[str, Any], *, limit: int = 240) -> str:
    """What a tool call was aimed at — a path, a command, a pattern and where, a query, a URL.

    Empty when the input names nothing (``EnterPlanMode``); never raises on odd inputs.
    """
    get = _getter(input)
    match tool:
        case "Read" | "read_file" | "view" | "View" | "open_file" | "cat" | "NotebookRead":
            text = _read_range(get(*_PATH_KEYS), input.get("offset"), input.get("limit"))
        case "Bash" | "bash" | "execute_bash" | "shell" | "run_shell_command" | "exec_command" | "terminal":
            text = command_line(get(*_COMMAND_KEYS))
        case "Grep" | "grep" | "search" | "search_files" | "find" | "Glob" | "glob" | "find_file":
            what = get("pattern", "query", "regex", "q", "search_term")
            where = get("path", "dir", "directory", "glob", "include")
            text = f"{what!r} in {where}" if what and where else repr(what) if what else where
        case "WebFetch" | "fetch" | "web_fetch" | "browse" | "open_url":
            text = get("url", "uri")
        case "WebSearch" | "web_search":
            text = get("query", "q")
        case "Task" | "Agent":
            kind, what = get("subagent_type"), get("description", "prompt")
            text = f"{kind}: {what}" if kind and what else what or kind
        case "TodoWrite":
            text = _todos(input.get("todos"))
        case "LS" | "ls" | "list_dir" | "list_directory":
            text = get("path", "dir", "directory")
        case "str_replace_editor" | "str_replace_based_edit_tool" | "text_editor":
            text = " ".join(x for x in (get("command"), get(*_PATH_KEYS)) if x)
        case "AskUserQuestion":
            questions = input.get("questions")
            first = questions[0] if isinstance(questions, list) and questions else None
            text = str(first.get("question", "")) if isinstance(first, Mapping) else ""
        case _:
            text = get(*_PATH_KEYS, *_COMMAND_KEYS, *_OTHER_KEYS)
            if text and get(*_COMMAND_KEYS) == text:
                text = command_line(text)
            elif not text and input:
                text = _json(input) if isinstance(input, Mapping) else ""
    return _cut(_one_line(text), limit)


# -- reading a result ----------------------------------------------------------


def _meaningful(text: str) -> list[str]:
    """The lines worth quoting, from the head window then the tail window (a cut line at a seam is dropped)."""
    if len(text) <= 2 * WINDOW:
        parts = [text]
    else:
        head, tail = text[:WINDOW], text[-WINDOW:]
        parts = [head[: head.rfind("\n") + 1], tail[tail.find("\n") + 1 :]]
    out: list[str] = []
    for part in parts:
        for line in _HARNESS_BLOCKS.sub("\n", part).splitlines():
            line = _LINE_NO.sub("", line, count=1)
            if not any(c.isalnum() for c in line) or _TAG_LINE.match(line):
                continue
            if _STATUS_HEAD.fullmatch(line.strip()) or _STATUS_LINE.match(line.strip()):
                continue
            out.append(line)
    return out


def _problem(lines: list[str]) -> str:
    """The line that says what went wrong: test summary, then traceback end, then an error line."""
    summary = _tests_summary(lines)
    if summary and ("fail" in summary.lower() or "error" in summary.lower()):
        return summary
    return _exception(lines) or next((ln for ln in lines if _ERROR.search(ln.strip())), "") or summary


def _exception(lines: list[str]) -> str:
    """The final ``XError: msg`` line of the last Python traceback (stdout may be interleaved with it)."""
    start = max((i for i, ln in enumerate(lines) if ln.startswith(_TRACEBACK)), default=-1)
    if start < 0:
        return ""
    found = [ln for ln in lines[start + 1 :] if _RAISED.match(ln) and not ln.startswith(_CONTINUED)]
    named = [ln for ln in found if _EXCEPTION_NAME.search(ln.split(":", 1)[0])]
    return named[0] if named else found[-1] if found else ""


def _tests_summary(lines: list[str]) -> str:
    """A test runner's closing count (``1 failed, 2 passed in 0.3s``; ``Ran 4 tests in 0.1s; OK``), else empty."""
    verdict = ""
    for line in reversed(lines[-40:]):
        s = line.strip()
        m = _TESTS.match(s)
        if m:
            return next(g for g in m.groups() if g).strip(" ,=")
        if s == "OK" or s.startswith("OK (") or s.startswith("FAILED ("):
            verdict = verdict or s
        m = _RAN.match(s)
        if m:
            return f"{m.group(1)}; {verdict}" if verdict else m.group(1)
    return ""


def _numbered(text: str) -> str:
    """``lines a–b`` for a file shown with ``N→`` prefixes (a Read result), else empty."""
    head = _LINE_NO.match(text[:200])
    if not head:
        return ""
    last = ""
    for line in reversed(text[-2_000:].splitlines()):
        m = _LINE_NO.match(line)
        if m:
            last = m.group(1)
            break
    return f"lines {head.group(1)}–{last}" if last else ""


def _last(lines: list[str]) -> str:
    return lines[-1] if lines else ""


def _fit(status: str, detail: str, limit: int) -> str:
    detail = _one_line(detail).strip(" =-*")
    if not detail:
        return status
    return f"{status} — {_cut(detail, limit - len(status) - 3)}" if limit - len(status) - 3 >= 2 else status


def _one_line(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


# -- reading an input ----------------------------------------------------------


def _getter(input: Mapping[str, Any]) -> Callable[..., str]:
    """``get(*keys)``: the first key holding a non-empty scalar, as text ('' when none)."""

    def get(*keys: str) -> str:
        for key in keys:
            value = input.get(key) if isinstance(input, Mapping) else None
            if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip():
                return str(value)
        return ""

    return get


def _read_range(path: str, offset: Any, limit: Any) -> str:
    start = offset if isinstance(offset, int) and not isinstance(offset, bool) else None
    count = limit if isinstance(limit, int) and not isinstance(limit, bool) else None
    if start is not None and count is not None:
        return f"{path} lines {start}–{start + count - 1}"
    if start is not None:
        return f"{path} from line {start}"
    if count is not None:
        return f"{path} first {count} lines"
    return path


def _todos(todos: Any) -> str:
    if not isinstance(todos, list):
        return ""
    states = [t.get("status", "?") if isinstance(t, Mapping) else "?" for t in todos]
    counts = {s: states.count(s) for s in dict.fromkeys(states)}
    detail = ", ".join(f"{n} {s}".replace("_", " ") for s, n in counts.items())
    return f"{len(todos)} todos" + (f" ({detail})" if detail else "")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
