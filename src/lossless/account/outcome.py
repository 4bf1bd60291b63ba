"""One line per removed tool call: what it was aimed at, and how it ended.

    target("Bash", {"command": "pytest -q"})           # 'pytest -q'
    target("Grep", {"pattern": "TODO", "path": "src"})  # "'TODO' in src"
    outcome(result_text(r), is_error=r.is_error)       # 'exit 1 — 2 failed, 40 passed; FAILED t.py::test_x - …'
    exit_status(text)                                  # 1, or None when the result carries none

An account line reads ``<tool> <target> → <outcome> · <handle>``; these functions give
its two middle parts, for Claude Code's tools, generic agent tools and shell results of
every shape in the data (mini-swe-agent's ``<returncode>``, Claude Code's ``Exit code N``
first line, ``<exit_code>``, "exit status N" lines).

``outcome`` is ``<status> — <detail>``: the status is ``exit N``, ``error``, ``timed
out``, ``ok`` or ``interrupted``; the detail is a few fragments joined by ``; ``, the
lines that matter first, chosen by rules over the output's shape:

- a **test run**: its closing count (``6 failed, 63 passed``, ``Ran 42 tests`` ·
  ``FAILED (errors=1)``), then the first failing test's name and its error, then more
  failing names (pytest, unittest, ExUnit, RSpec, Jest, Go, cargo: the error found where each
  runner prints it, for the last four away from the name); a passing run keeps its rarest
  warning or logged error instead;
- a **failure**: a traceback's final ``XError: msg`` and the frame it was raised in,
  then error-looking lines, rarest first; else the last and first lines;
- **git**: commit hashes and subjects (``git log``, ``git show``, ``git commit``), the
  branch and changed files of ``git status``, the files of a diff or ``--stat``;
- a **search**: its number of matches and the first matches (``file:line:text``);
- a **file shown** (``N→`` or ``nl`` numbers, Edit/Write snippets, source): the lines
  shown and the names it defines (def, class, function, const, defmodule, fn, …);
- a **listing** of paths: how many, and the first ones under their common folder;
- anything else: error and warning lines (rarest first), the last line, the first.

Rarity: a line's *shape* is the line with its numbers and hex runs masked; among
candidates of one kind, the shape seen least often in the output wins (a warning
printed once beats one printed per test), ties going to the earliest.

Invariants protected here: the result is one line of at most ``limit`` characters
(the status first and never cut while it fits; fragments are dropped or cut, never the
budget exceeded); the same text gives the same line; every fragment quotes the output
verbatim (whitespace runs made one space; ``…`` marks where text was cut out), or is a
marked summary — a count (``12 matches``, ``lines 1–80``) or a labelled list of verbatim
items (``defines: a, b (+3 more)``); only a head and a tail window of the text are read,
so the time spent is bounded whatever its size.

The module is longer than most: the rules share the fragment type and the fitting, and
read best side by side.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ..rounds import INTERRUPTED
from .shell import argv_command, command_line, patch_targets

__all__ = ["exit_status", "outcome", "target"]

WINDOW = 16_000
"""Characters read at each end of a result; what lies between is never looked at."""
SEP = "; "
"""Between the fragments of a detail (not `` · ``, which an account line puts before its handle)."""
MIN_PART = 16
"""A fragment after the first is shown whole, or cut to at least this many characters, or left out."""
NAME_CHARS = 48
"""A failing test's name takes at most this much of a line when more fragments follow."""
SUBJECT_CHARS = 72
"""So does a commit's line, leaving room for the other hashes and the files changed."""

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
    r"|<elided_chars>.*?</elided_chars>|^agentId: \w+ \(for resuming.*$"
    r"|^\[Showing results with pagination = [^\]\n]*\]$|^REMINDER: You MUST include the sources above.*$"
    r"|^Here's the result of running `cat -n` on a snippet of the edited file:$",
    re.S | re.M,
)
_HARNESS_TAGS = re.compile(_HARNESS_BLOCKS.pattern.split("|^", 1)[0], re.S | re.M)
"""``_HARNESS_BLOCKS`` without its whole-line notes: the same blocks in a text that holds none of them
(``_HARNESS_NOTES``), found by skipping from one "<" to the next."""
_HARNESS_NOTES = ("agentId: ", "[Showing results with pagination = ", "REMINDER: You MUST include the sources above",
                  "Here's the result of running `cat -n` on a snippet of the edited file:")
_LINE_NO = re.compile(r"^\s*(\d+)→")
_LINE_NO_M = re.compile(r"^\s*(\d+)→", re.M)
_NL_NO = re.compile(r"^\s*(\d+)\t")  # nl -ba, cat -n
_SPACE = re.compile(r"\s+")
_INLINE_SPACE = re.compile(r"[^\S\n]+")
_ALNUM = re.compile(r"[^\W_]")  # one character for which str.isalnum() is true
_STATUS_WORD = re.compile(r"exit|finished with", re.I)
"""In every line ``_STATUS_LINE`` or ``_STATUS_HEAD`` matches (with ``<returncode>``): a text without it has none."""
_SHAPE = re.compile(r"\b(?=[0-9a-f-]*\d)[0-9a-f][0-9a-f-]{3,}\b|\d+")
_SHAPE_FAST = re.compile(r"[0-9a-f](?<!\w[0-9a-f])(?:(?<=\d)|(?=[0-9a-f-]*\d))[0-9a-f-]{3,}\b|\d+")
"""``_SHAPE`` starting with a character class, so a search skips what cannot start a match (same matches:
the word boundary before the first character is checked once it is consumed)."""

# -- failures
_TRACEBACK = "Traceback (most recent call last):"
_CONTINUED = ("During handling of the above exception", "The above exception was the direct cause", _TRACEBACK)
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(?::\s.*)?$")
_EXCEPTION_NAME = re.compile(r"(?:Error|Exception|Exit|Interrupt|Warning|Failure|Fault|Configured|DoesNotExist)$|exceptions\.")
_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+')
_ERROR = re.compile(
    r"^(?:fatal|error|ERROR|FATAL|Error|E)\b[:\s]|^FAILED |: (?:error|fatal error):|No such file or directory"
    r"|command not found|Permission denied|\bnot found\b|^\S+: cannot |\[ERROR\]|^✘|^\w*(?:Error|Exception):"
    r"|^npm (?:ERR!|error) \S|^\d+:\d+\s+error\s"  # npm; ESLint's "line:col  error  message  rule"
)
_NOTICE = re.compile(r"\[(?:warn(?:ing)?|error|fatal|critical)\]|\bwarning:|\b[A-Z]\w*Warning:", re.I)
_NOTICE_NOISE = re.compile(r"^=+ warnings summary|^-- Docs: |^\d+ warnings?\b|^hint: ", re.I)
_JUNK_PREFIX = re.compile(r"^[\s.\d:]*$")  # progress dots, timestamps
# A cheap necessary condition: every line ``_NOTICE`` matches holds one.
_NOTICE_HINT = re.compile(r"\[(?:warn|error|fatal|critical)|warning:", re.I)
# The hints as literals (found by ``str.find``, many times faster than a search of alternatives that tries
# each at every position) and patterns led by a literal; ``_lines_any`` finds the lines holding any of them.
# Each finds at least the lines its hint does.  Under ``re.I`` only "i" (as "İ", "ı") and "s" (as "ſ") match a
# character outside their ASCII pair, so "g:"/"G:" hold every case of "warning:".
_ERROR_FINDERS = ("fatal", "error", "ERROR", "FATAL", "Error", "FAILED ", "npm ERR! ", "No such file or directory", "not found",
                  "Permission denied", ": cannot ", "✘", "Exception:", re.compile(r"E[:\s]"))
_NOTICE_FINDERS = (re.compile(r"\[(?:warn|error|fatal|critical)", re.I), "g:", "G:")

# -- test runs
_SUMMARY = re.compile(
    r"^=*\s*((?:\d+ [a-z]+, )*\d+ (?:passed|failed|errors?|skipped|deselected|warnings?|xfailed|xpassed)"
    r"(?:, \d+ [a-z]+)*|no tests ran)(?: in [\d.]+\s*s\w*)?(?: \([^)]*\))?\s*=*$"  # pytest
    r"|^((?:\d+ doctests?, )?(?:\d+ propert(?:y|ies), )?\d+ (?:tests?|examples?), \d+ failures?(?:, [\w ]+)*)"
    r"(?: \(.*\))?$"  # ExUnit, RSpec
    r"|^(Tests?:?\s+(?:\d+ \w+[,|] ?)*\d+ (?:passed|failed)\b.*)$"  # Jest, vitest
    r"|^(test result: (?:ok|FAILED)\. \d+ passed; \d+ failed)\b.*$"  # cargo
)
_RAN = re.compile(r"^(Ran \d+ tests?)(?: in [\d.]+s)?$")
_VERDICT = re.compile(r"^(?:OK|FAILED)(?: \(.*\))?$")
_FAILS = re.compile(r"\b[1-9]\d* (?:failed|failures?|errors?)\b|\bFAILED\b")
_PYTEST_FAILED = re.compile(r"^(FAILED|ERROR) ((\S+?)(::\S+)?)(?: - .*)?$")
_UNITTEST_FAILED = re.compile(r"^((?:FAIL|ERROR): \w+) \([\w.]+\)")
_EXUNIT_FAILED = re.compile(r"^\s*\d+\) (test .+?)(?: \([\w.]+\))?$")
_GO_FAILED = re.compile(r"^\s*--- FAIL: \S+")
_GO_LOG = re.compile(r"^\s+[\w./-]+\.go:\d+: \S")  # a failing Go test's t.Error line
_CARGO_FAILED = re.compile(r"^test (\S+) \.\.\. FAILED$")
_CARGO_PANIC = re.compile(r"\bpanicked at\b")
_JEST_FAILED = re.compile(r"^\s*● (?!Console\b)\S.*›")  # "● Suite › test" (not a "● Console" log block)
_JEST_AT = re.compile(r"^\s*at .*\(([^()\s]+:\d+:\d+)\)$")
_RSPEC_FAILED = re.compile(r"^rspec (\./\S+:\d+) # (\S.*)$")
_RSPEC_ERROR = re.compile(r"^\s*Failure/Error: \S")
_EXPECTED = re.compile(r"^\s*(?:Expected|Received|expected|got|left|right)(?: \w+)?:\s+\S")
_PYTEST_E = re.compile(r"^E\s+(\S.*)$")
_RUN_HINT = re.compile(r"passed|failed|error|skipped|deselected|warning|failure|no\s+tests\s+ran|test\s+result:|OK|FAILED"
                       r"|Ran\s")
"""In every line ``_SUMMARY``, ``_VERDICT`` or ``_RAN`` matches once its blanks are made one space."""
_RUN_FINDERS = ("passed", "fail", "error", "skipped", "deselected", "warning", "test", "OK", "FAILED", "Ran")
"""``_RUN_HINT``'s lines, by literals."""
_FAILED_FINDERS = ("FAIL", "ERROR", ") test", "● ", "rspec ./")
"""In every line ``_failed_name`` names a test from."""
_EXUNIT_RAISED = re.compile(r"^\s*\*\* \(\w[\w.]*\)")

# -- git
_COMMIT = re.compile(r"^commit ([0-9a-f]{40})\b")
_ONELINE = re.compile(r"^[*|\\/ ]*([0-9a-f]{7,40}) \S")
_COMMITTED = re.compile(r"^\[\S+(?: \(root-commit\))? [0-9a-f]{7,40}\] \S")
_CHANGED = re.compile(r"^\d+ files? changed\b")
_STAT = re.compile(r"^(\S+)\s+\|\s+(?:\d+|Bin)")
_DIFF = re.compile(r"^diff --git a/(\S+) b/")
_BRANCH = re.compile(r"^(?:On branch \S+|HEAD detached (?:at|from) \S+)$")
_LONG_STATUS = re.compile(r"^\s*(modified|new file|deleted|renamed|typechange|both modified):\s+(\S.*)$")
_SHORT_STATUS = re.compile(r"^\s?([MADRCU?!]{1,2}) (\S.*)$")
_SHORT_STATUS_START = re.compile(r"\n[^\S\n]?[MADRCU?!]{1,2} ")
"""The start of a short-status line, after the "\\n" before it (a literal first: a search skips to each "\\n")."""
_GIT_HINT = re.compile(r"changed|commit |\n\[|diff --git a/|\|\s+(?:\d|Bin)")
"""In the lines ``_git`` reads besides a one-line log (after the "\\n" before each line): a text without it holds none."""
_GIT_FINDERS = ("changed", "commit ", "\n[", "diff --git a/", re.compile(r"\|\s+(?:\d|Bin)"))

# -- searches, listings, files shown
_MATCH = re.compile(
    r"^(?P<file>[^\s:]+):(?P<n>\d+):(?P<t>.*)$|^(?P<n2>\d+):(?P<t2>.*)$"
    r"|^(?P<file3>[^\s:]*(?:/|\.\w{1,5}):)(?P<t3>.*\S.*)$"
)
_CONTEXT = re.compile(r"^(?:[^\s:]+-)?\d+-|^--$")
_FOUND = re.compile(r"^Found \d+ (?:files?|total occurrences?|matches)\b")
_MODIFIERS = (r"public|private|protected|internal|sealed|final|open|override|data|partial|inline|virtual|unsafe"
              r"|extern|readonly|static|abstract|async|synchronized|native|suspend")
_DEF = re.compile(
    r"^(\s*)(?:export\s+(?:default\s+)?)?(?:pub(?:\([\w:]+\))?\s+)?(?:(?:" + _MODIFIERS + r")\s+)*"
    r"(def|defp|defmodule|defmacrop?|defprotocol|defimpl|defguardp?|defdelegate|class|module|interface|trait"
    r"|struct|enum|union|type|fn|func|function\*?|fun|record|const|let|var|impl|mod|object|protocol)\s+"
    r"(?:\([^)]*\)\s*)?(?:mut\s+)?([A-Za-z_$][\w.$?!]*)"
)
_DEF_WORDS = ("export", "pub", "async", "static", "abstract", "def", "class", "mod", "interface", "trait", "struct",
              "enum", "union", "type", "fn", "func", "fun", "record", "const", "let", "var", "impl", "object", "protocol",
              "public", "private", "protected", "internal", "sealed", "final", "open", "override", "data", "partial",
              "inline", "virtual", "unsafe", "extern", "readonly", "synchronized", "native", "suspend")
"""What a line ``_DEF`` (or ``_METHOD``) matches starts with, after its blanks."""
_METHOD = re.compile(  # Java, C#, Kotlin: a method or constructor after its modifiers
    r"^(\s*)(?:(?:" + _MODIFIERS + r")\s+)+(?:[\w.?\[\]]+(?:<[^()=;]*>)?(?:\[\])*\??\s+)?([A-Za-z_]\w*)\s*(?:<[^()]*>\s*)?\("
)
_C_FUNCTION = re.compile(  # C: a function defined at the top level, its type before its name
    r"^(?!(?:return|else|if|while|for|switch|case|do|goto|sizeof|assert|raise|await|yield|print|del|not|echo|exec"
    r"|typedef|from|import|and|or|in|is|new|throw|delete|typeof|go|defer|using|namespace)\b)(?:(?:static|inline|extern|const|unsigned|signed|struct|enum|union|volatile)\s+)*"
    r"[A-Za-z_]\w*(?:\s*\*+\s*|\s+)([A-Za-z_]\w*)\([^;{}]*\)\s*(?:const\s*)?\{?\s*$"
)
_IDENT = re.compile(  # a commit hash, a version, a path with a file name
    r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b|\bv?\d+\.\d+\.\d+|[\w.-]*/[\w./-]*\.\w{1,5}\b"
)
_IDENT_IN = re.compile(
    r"[0-9a-f](?<!\w[0-9a-f])(?:(?<=\d)(?=[0-9a-f]*[a-f])|(?<=[a-f])(?=[0-9a-f]*\d))[0-9a-f]{6,39}\b"
    r"|v(?<!\wv)\d+\.\d+\.\d+|\d(?<!\w\d)\d*\.\d+\.\d+|/[\w./-]*\.\w{1,5}\b"
)
"""In the same lines as ``_IDENT``, found faster: each alternative starts with a character (a search skips
what cannot start one), the word boundary before it checked once it is read; a path's match may start
at its "/"."""
_IDENT_PARTS = tuple(re.compile(p) for p in (
    r"/[\w./-]*\.\w{1,5}\b",  # a path: led by a literal, the one most lines that have any hold
    r"v(?<!\wv)\d+\.\d+\.\d+",
    r"\d(?<!\w\d)\d*\.\d+\.\d+",
    r"[0-9a-f](?<!\w[0-9a-f])(?:(?<=\d)(?=[0-9a-f]*[a-f])|(?<=[a-f])(?=[0-9a-f]*\d))[0-9a-f]{6,39}\b",
))
"""``_IDENT_IN``'s alternatives one by one: a line holds a match of it when it holds one of theirs, and a
search of a literal-led one skips in C where the alternation is tried at every hex digit."""
_IDENT_FINDERS = ("/", re.compile(r"\.(?<=\d\.)\d"), re.compile(r"[0-9](?:(?<=[a-f][0-9])|(?=[a-f]))"))
"""In every line ``_IDENT`` matches, found faster: a path's "/", a version's digit-dot-digit, and a hash's
digit beside one of its letters (its 7 to 40 hex digits hold both, the \\b after it keeps every \\d in it)."""
_SNIPPET = re.compile(r"\s*Here's the result of running `cat -n` on a snippet of the edited file:$")
_FENCE = re.compile(r"^\s*```")
_NOT_NAMES = frozenset({"a", "an", "and", "as", "at", "by", "for", "from", "in", "is", "it", "of", "on", "or",
                        "that", "the", "this", "to", "with", "if", "do", "not"})
"""Words after ``class``/``type``/``module`` in prose ("module in this package"), not names."""
_TOP_ONLY = frozenset({"const", "let", "var", "type", "mod", "object"})
"""Definition words that name something worth listing only at the top level (not a local)."""
_PATH_KEYS = ("file_path", "path", "notebook_path", "filename", "file", "dir", "directory")
_COMMAND_KEYS = ("command", "cmd", "script")
_OTHER_KEYS = ("url", "query", "pattern", "q", "description", "prompt", "task_id", "skill", "handle", "name")
_WRITE_NOTE = re.compile(r"^(?:The file \S.* (has been (?:updated|created)\b.*)|(File created successfully) at:? \S.*)$")


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
    """How a tool call ended, in one line of at most ``limit`` characters (see the module docstring)."""
    if limit < 1:
        return ""
    if text == INTERRUPTED:
        return _cut("interrupted", limit)
    code = exit_status(text)
    whole = len(text) <= 2 * WINDOW
    if code is not None:
        status, failed, lines = f"exit {code}", code != 0 or is_error, _meaningful(text)
    elif _TIMED_OUT.match(text[:WINDOW]):
        body = text.split("<output>", 1)[-1].rsplit("</output>", 1)[0]
        status, failed, lines = "timed out", True, _meaningful(body)
    else:
        status, failed, lines = ("error" if is_error else "ok"), is_error, _meaningful(text)
    parts = _details(text, lines, status, failed, whole) if lines else []
    if not parts:
        parts = [_Part("no message" if status == "error" else "no output", atomic=True)]
    return _fit(status, parts, limit)


def target(tool: str, input: Mapping[str, Any], *, limit: int = 240) -> str:
    """What a tool call was aimed at — a path, a command, a pattern and where, a query, a URL.

    Empty when the input names nothing (``EnterPlanMode``); never raises on odd inputs.
    """
    get = _getter(input)
    match tool:
        case "Read" | "read_file" | "view" | "View" | "open_file" | "cat" | "NotebookRead":
            text = _read_range(get(*_PATH_KEYS), input.get("offset"), input.get("limit"))
        case "Bash" | "bash" | "execute_bash" | "shell" | "run_shell_command" | "exec_command" | "terminal":
            text = command_line(get(*_COMMAND_KEYS) or argv_command(next(
                (v for k in _COMMAND_KEYS if isinstance(v := input.get(k), list)), None)))
        case "apply_patch" | "applypatch":
            files = list(dict.fromkeys(patch_targets(get("input", "patch", "diff"))))
            text = ", ".join(files) if files else get("input", "patch", "diff")
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


# -- fragments and fitting ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Part:
    """One fragment of a detail: verbatim ``text`` (cut on the right, or on the left for a
    ``path``), or, with ``items``, a labelled list of verbatim items (``text`` is the label)."""

    text: str
    items: tuple[str, ...] = ()
    total: int = 0
    path: bool = False
    short: str = ""
    """A shorter verbatim form, used when ``text`` does not fit (an exception without its module path)."""
    atomic: bool = False
    """A count or range: shown whole or not at all (a cut one would say a wrong number)."""
    cap: int = 0
    """When more parts follow, at most this many characters (0: no cap), so one long name leaves room."""

    def render(self, width: int) -> str:
        """The fragment in at most ``width`` characters; '' when nothing useful fits."""
        if self.items:
            for k in range(len(self.items), 0, -1):
                more = max(self.total, len(self.items)) - k
                shown = f"{self.text}: " + ", ".join(self.items[:k]) + (f" (+{more} more)" if more else "")
                if len(shown) <= width:
                    return shown
            return ""
        if len(self.text) <= width:
            return self.text
        if self.atomic:
            return ""
        text = self.short or self.text
        if len(text) <= width or width < 2:
            return text if len(text) <= width else ""
        return "…" + text[-(width - 1):].lstrip() if self.path else _cut(text, width)


def _fit(status: str, parts: list[_Part], limit: int) -> str:
    """``status — part; part …`` in at most ``limit`` characters: parts in order, each whole, or cut when
    the cut still says something, or left out; a later part never pushes out an earlier one."""
    if len(status) >= limit:
        return _cut(status, limit)
    room = limit - len(status) - 3
    shown: list[str] = []
    used = 0
    for part in parts:
        gap = len(SEP) if shown else 0
        width = room - used - gap
        if width < (2 if not shown else 1):
            break
        if part.cap and part is not parts[-1]:
            width = min(width, max(part.cap, MIN_PART))
        text = part.render(width).strip()
        whole = part.render(10**6).strip()
        if not text or any(text in s for s in shown) or (shown and text != whole and len(text) < MIN_PART):
            continue
        shown.append(text)
        used += gap + len(text)
    return f"{status} — {SEP.join(shown)}" if shown else status


def _text(line: str) -> _Part:
    return _Part(_one_line(line).strip(" =-*"))


def _raised(line: str) -> _Part:
    """An ``a.b.XError: msg`` line; shortened to ``XError: msg`` when it does not fit."""
    text = _text(line).text
    name = text.split(":", 1)[0]
    return _Part(text, short=text[name.rfind(".") + 1 :] if "." in name and " " not in name else "")


def _named_path(line: str, path: str, cap: int = 0, named: int = 0) -> _Part:
    """``line`` with the folders of ``path`` in it replaced by ``…/`` when the path is long or the first
    ``named`` characters (what names the thing) pass the ``cap``: the file name stays."""
    flat = whole = _one_line(line)
    if "/" in path and (len(path) > 32 or (cap and named > cap)):
        flat = whole.replace(path, "…/" + path.rsplit("/", 1)[1], 1)
    short = whole.replace(path, "…", 1) if "::" in whole and path in whole else ""  # ``FAILED …::test_name``
    return _Part(flat, short=short, cap=cap)


# -- reading a result ----------------------------------------------------------


def _meaningful(text: str, window: int = WINDOW) -> list[str]:
    """The lines worth quoting, from the head window then the tail window (a cut line at a seam is dropped)."""
    if len(text) <= 2 * window:
        parts = [text]
    else:
        head, tail = text[:window], text[-window:]
        parts = [head[: head.rfind("\n") + 1], tail[tail.find("\n") + 1 :]]
    out: list[str] = []
    for part in parts:
        notes = any(note in part for note in _HARNESS_NOTES)
        part = (_HARNESS_BLOCKS if notes else _HARNESS_TAGS).sub("\n", part)
        lines = part.splitlines()
        if "→" in part:
            lines = [_LINE_NO.sub("", line, count=1) if "→" in line else line for line in lines]
        # Each rule drops lines; they are applied one after the other, the common one in C (filter).
        lines = list(filter(_ALNUM.search, lines))
        if "<" in part:
            lines = [line for line in lines if "<" not in line or not _TAG_LINE.match(line)]
        if "<returncode>" in part or _status_word_in(part):
            lines = [line for line in lines
                     if not (_STATUS_HEAD.fullmatch(line.strip()) or _STATUS_LINE.match(line.strip()))]
        out += lines
    return out


def _lines_any(joined: str, finders: tuple[str | re.Pattern[str], ...]) -> list[int]:
    """Indexes of the lines of ``joined`` (lines joined by "\\n") holding any of ``finders`` — a literal, or
    a pattern led by one — ascending: each line once, found by a few searches in C."""
    starts: set[int] = set()
    for finder in finders:
        if isinstance(finder, str):
            at = joined.find(finder)
            while at >= 0:
                starts.add(joined.rfind("\n", 0, at) + 1)
                end = joined.find("\n", at)
                at = joined.find(finder, end + 1) if end >= 0 else -1
        else:
            pos = 0
            while (m := finder.search(joined, pos)) is not None:
                starts.add(joined.rfind("\n", 0, m.start()) + 1)
                pos = joined.find("\n", m.start()) + 1
                if not pos:
                    break
    found: list[int] = []
    line = pos = 0
    for start in sorted(starts):
        line += joined.count("\n", pos, start)
        pos = start
        found.append(line)
    return found


def _any_in(text: str, finders: tuple[str | re.Pattern[str], ...]) -> bool:
    return any(f in text if isinstance(f, str) else f.search(text) is not None for f in finders)


def _names_ident(line: str) -> bool:
    """Whether ``_IDENT_IN`` finds a match in ``line``."""
    return any(p.search(line) is not None for p in _IDENT_PARTS)


def _status_word_in(text: str) -> bool:
    """Whether ``_STATUS_WORD`` finds a match in ``text``: by a lower-cased copy, exact but for the three
    letters outside ASCII that ``re.I`` matches with an ASCII one (then by the pattern)."""
    low = text.lower()
    if "exit" in low or "finished with" in low:
        return True
    if text.isascii() or not any(c in text for c in "\u0130\u0131\u017f"):
        return False
    return _STATUS_WORD.search(text) is not None


def _details(text: str, lines: list[str], status: str, failed: bool, whole: bool) -> list[_Part]:
    """The fragments worth showing, most important first."""
    run = _test_run(lines, failed)
    if run:
        return run
    if failed:
        return _failure(lines, error_first=status == "error")
    return (_git(lines) or _matches(lines, whole) or _shown(text, lines) or _listing(lines, whole)
            or _generic(lines))


class _Shapes:
    """The shape of each line (``_shape``) and how often each shape occurs, made on first use.

    A line is shaped only when asked about, or when it could share an asked shape: two ASCII lines of
    one shape are equal once their blanks, hex digits, "-" and "#" (all that shaping changes) are taken
    out, so a count shapes only the ASCII lines with the same rest (``_KEY``, found for every line in one
    ``bytes.translate``) and the other lines.  When most lines are not ASCII: every shape at once, one pass
    of each regex over the joined lines (no line holds a "\\n", and neither regex matches across one or
    sees past a space)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self._of: list[str] | None = None
        self._count: Counter[str] = Counter()
        self._keyed: dict[bytes, list[int]] | None = None
        self._other: Counter[str] = Counter()  # the shapes of the lines not ASCII (any may match any shape)
        self._shaped: dict[str, str] = {}

    def of(self, i: int) -> str:
        if self._of is None and self._keyed is None:
            self._prepare()
        return self._of[i] if self._of is not None else self._shape(self.lines[i])

    def count(self, shape: str) -> int:
        if self._of is None and self._keyed is None:
            self._prepare()
        if self._of is not None:
            return self._count[shape]
        assert self._keyed is not None
        alike = self._keyed.get(shape.encode().translate(_KEY, _KEY_OUT), ()) if shape.isascii() else ()
        return sum(1 for j in alike if self._shape(self.lines[j]) == shape) + self._other[shape]

    def _shape(self, line: str) -> str:
        shape = self._shaped.get(line)
        if shape is None:
            shape = self._shaped[line] = _SHAPE_FAST.sub("#", _INLINE_SPACE.sub(" ", line).lower()).strip()
        return shape

    def _prepare(self) -> None:
        joined = "\n".join(self.lines)
        keyed: dict[bytes, list[int]] = {}
        other: list[int] = []
        if self.lines:
            for j, key in enumerate(joined.encode("utf-8", "surrogatepass").translate(_KEY, _KEY_OUT).split(b"\n")):
                if key.isascii():
                    keyed.setdefault(key, []).append(j)
                else:
                    other.append(j)
        if 2 * len(other) <= len(self.lines):
            self._keyed, self._other = keyed, Counter(self._shape(self.lines[j]) for j in other)
            return
        flat = _INLINE_SPACE.sub(" ", joined).lower()
        self._of = [s.strip() for s in _SHAPE_FAST.sub("#", flat).split("\n")]
        self._count = Counter(self._of)


_KEY = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
_KEY_OUT = b"0123456789abcdefABCDEF#- \t\x0b\x0c\r\x1c\x1d\x1e\x1f"
"""What ``_Shapes`` compares ASCII lines by: lower-cased, without what a shape may change (hex digits, "-",
"#" and blanks — every ASCII character ``\\s`` matches but the line break that separates lines)."""


def _shapes(lines: list[str]) -> _Shapes:
    return _Shapes(lines)


def _shape(line: str) -> str:
    return _SHAPE.sub("#", _one_line(line).lower())


def _rarest(indexes: Iterable[int], lines: list[str], shapes: _Shapes, n: int) -> list[int]:
    """Up to ``n`` of the lines at ``indexes``, one per shape, rarest shape first, then earliest."""
    indexes = list(indexes)
    if len(indexes) < 2:  # nothing to rank: no shape needed
        return indexes[:n]
    seen: set[str] = set()
    ranked = []
    for i in indexes:
        shape = shapes.of(i)
        if shape not in seen:
            seen.add(shape)
            ranked.append((shapes.count(shape), i))
    return [i for _, i in sorted(ranked)[:n]]


def _notices(lines: list[str], shapes: _Shapes, n: int) -> list[_Part]:
    """The rarest warning or logged-error lines, each from its ``[warning]``/``warning:`` on when a
    timestamp or progress dots come before it."""
    starts = {}
    joined = "\n".join(lines)
    for i in _lines_any(joined, _NOTICE_FINDERS):
        line = lines[i]
        m = _NOTICE.search(line)
        if m and not _NOTICE_NOISE.match(line.strip()):
            starts[i] = m.start() if _JUNK_PREFIX.match(line[: m.start()]) else 0
    return [_text(lines[i][starts[i]:]) for i in _rarest(starts, lines, shapes, n)]


# -- the rules, one per shape of output --------------------------------------------


def _test_run(lines: list[str], failed: bool) -> list[_Part]:
    """A test runner's closing count; failing: the first failing test, its error, more names;
    passing: the rarest warnings.  Empty when the output is not a test run."""
    summary: list[_Part] = []
    verdict = ""
    tail = lines[-60:]
    for line in (tail[i] for i in reversed(_lines_any("\n".join(tail), _RUN_FINDERS))):  # the others match none
        s = _one_line(line)
        m = _SUMMARY.match(s)
        if m and (not m.group(1) or s.startswith("=") or " in " in s or "passed" in s or "failed" in s):
            summary = [_text(next(g for g in m.groups() if g))]
            break
        if _VERDICT.match(s):
            verdict = verdict or s
            continue
        m = _RAN.match(s)
        if m:
            summary = [_Part(m.group(1)), *([_Part(verdict)] if verdict else [])]
            break
    named = {i: part for i in _lines_any("\n".join(lines), _FAILED_FINDERS) if (part := _failed_name(lines[i]))}
    names = list(named)
    if not summary and not names:
        return []
    if not names and not failed and not any(_FAILS.search(p.text) for p in summary):
        return summary + _notices(lines, _shapes(lines), 2)
    if not names:  # failed, no test named: what went wrong (a collection error, a bad argument)
        return summary + (_test_error(lines, -1, len(lines)) or _failure(lines, error_first=False)[:2])
    summary = summary[::-1]  # a failing unittest run: its verdict first, ``Ran N tests`` after the error
    first, nxt = names[0], (names[1] if len(names) > 1 else len(lines))
    return [*summary[:1], named[first], *_test_error(lines, first, nxt), *summary[1:],
            *(named[i] for i in names[1:4])]


def _failed_name(line: str) -> _Part | None:
    """The fragment naming a failing test (pytest, unittest, ExUnit, go, cargo, Jest, RSpec), or None."""
    m = _PYTEST_FAILED.match(line.strip())
    if m:
        return _named_path(line.strip(), m.group(3), cap=NAME_CHARS, named=len(m.group(1)) + 1 + len(m.group(2)))
    m = _RSPEC_FAILED.match(line)
    if m:
        return _Part(_one_line(m.group(2)), cap=NAME_CHARS)
    m = (_UNITTEST_FAILED.match(line) or _GO_FAILED.match(line) or _EXUNIT_FAILED.match(line)
         or _CARGO_FAILED.match(line) or _JEST_FAILED.match(line))
    if m is None:
        return None
    name = line if m.re is _JEST_FAILED else m.group(m.lastindex or 0)
    return _Part(_one_line(name).strip(), cap=NAME_CHARS)


def _test_error(lines: list[str], start: int, end: int) -> list[_Part]:
    """The error of the failure whose report runs from ``start`` to ``end``, else the first error found."""
    if start >= 0:
        found = _runner_error(lines, start, end)
        if found:
            return found
    for lo, hi in ((start + 1, end), (0, len(lines))):
        for i in range(lo, hi):
            line = lines[i]
            m = _PYTEST_E.match(line)
            if m and _RAISED.match(m.group(1)) and _EXCEPTION_NAME.search(m.group(1).split(":", 1)[0]):
                after = _PYTEST_E.match(lines[i + 1]) if i + 1 < len(lines) else None
                more = [_text(after.group(1))] if after and m.group(1).rstrip().endswith(":") else []
                return [_raised(m.group(1)), *more]
            if _EXUNIT_RAISED.match(line):
                return [_text(line)]
            if i == lo and lo == start + 1 and _EXUNIT_FAILED.match(lines[start]) and i + 1 < hi:
                if re.fullmatch(r"\s*\S+\.exs?:\d+", line):  # ExUnit: name, location, then the error
                    return [_text(lines[i + 1]), _Part(line.strip(), path=True)]
        at = _exception_at(lines[lo:hi])
        if at is not None:
            return [_raised(lines[lo + at])]
    return []


def _runner_error(lines: list[str], start: int, end: int) -> list[_Part]:
    """The error of the test named at ``start`` where its runner puts it away from the name: a cargo test's
    panic (under its ``---- name stdout ----``), a Go test's log lines (after its ``--- FAIL``, or before it
    back to its ``=== RUN`` with ``-v``), the lines under a Jest ``●`` heading, an RSpec
    ``Failure/Error``; with any ``Expected``/``Received``/``left``/``right`` lines after it."""
    line = lines[start]
    at: int | None = None
    if (m := _CARGO_FAILED.match(line)) is not None:
        header = f"---- {m.group(1)} stdout ----"
        lo = next((i + 1 for i in range(start + 1, len(lines)) if lines[i].strip() == header), start + 1)
        at = next((i for i in range(lo, min(len(lines), lo + 40)) if _CARGO_PANIC.search(lines[i])), None)
        panic = _CARGO_PANIC.search(lines[at]) if at is not None else None
        if at is not None and panic is not None:
            text = lines[at][panic.start():]
            parts = [_text(text)]
            if text.rstrip().endswith(":") and at + 1 < len(lines) and lines[at + 1].strip():
                at += 1  # since Rust 1.73 the message is on the line after the location
                parts.append(_text(lines[at]))
            return parts + _expected(lines, at + 1)
        return []
    if _GO_FAILED.match(line):
        after = next((i for i in range(start + 1, min(len(lines), start + 20)) if _GO_LOG.match(lines[i])), None)
        if after is not None and all(lines[j].startswith((" ", "\t")) for j in range(start + 1, after)):
            return [_text(lines[after])]
        for i in range(start - 1, max(-1, start - 200), -1):
            if lines[i].startswith("=== RUN"):
                break
            if _GO_LOG.match(lines[i]):
                at = i
        return [_text(lines[at])] if at is not None else []
    if _JEST_FAILED.match(line):
        at = next((i for i in range(start + 1, min(end, start + 40)) if lines[i].strip()), None)
        if at is None:
            return []
        frame = next((m for m in map(_JEST_AT.match, lines[at:min(end, at + 40)]) if m), None)
        return [_text(lines[at]), *_expected(lines, at + 1, end), *([_Part(frame.group(1), path=True)] if frame else [])]
    if (m := _RSPEC_FAILED.match(line)) is not None:  # named in the closing list; reported above, by its name
        where, name = m.groups()
        heading = next((i for i in range(start) if lines[i].strip().endswith(name) and ") " in lines[i]), -1)
        at = next((i for i in range(heading + 1, start) if _RSPEC_ERROR.match(lines[i])), None)
        if at is not None:
            return [_text(lines[at]), *_expected(lines, at + 1, start), _Part(where.removeprefix("./"), path=True)]
    return []


def _expected(lines: list[str], lo: int, hi: int | None = None) -> list[_Part]:
    """Up to two ``Expected:``/``Received:`` (``left:``/``right:``, ``expected:``/``got:``) lines soon after ``lo``."""
    hi = min(len(lines) if hi is None else hi, lo + 12)
    return [_text(lines[i]) for i in range(lo, hi) if _EXPECTED.match(lines[i])][:2]


def _failure(lines: list[str], error_first: bool) -> list[_Part]:
    """A traceback's final exception and its frame, then error lines rarest first; else the last and first lines."""
    shapes = _shapes(lines)
    parts: list[_Part] = []
    at = _exception_at(lines)
    if at is not None:
        parts.append(_raised(lines[at]))
        frame = next((m for m in map(_FRAME.match, lines[at - 1 :: -1] if at else []) if m), None)
        if frame is not None:
            parts.append(_named_path(frame.string.strip(), frame.group(1)))
    joined = "\n".join(lines)
    errors = [i for i in _lines_any(joined, _ERROR_FINDERS) if i != at and _ERROR.search(lines[i].strip())]
    parts += [_text(lines[i]) for i in _rarest(errors, lines, shapes, 3)]
    if not parts:
        plain = [ln for ln in lines if not ln.strip().startswith("hint:")] or lines
        ends = [plain[0], plain[-1]] if error_first else [plain[-1], plain[0]]
        parts = [_text(ln) for ln in ends]
    return parts


def _exception_at(lines: list[str]) -> int | None:
    """Where the final ``XError: msg`` line of the last Python traceback is (stdout may be interleaved)."""
    start = max((i for i, ln in enumerate(lines) if ln.startswith(_TRACEBACK)), default=-1)
    if start < 0:
        return None
    found = [i for i in range(start + 1, len(lines))
             if _RAISED.match(lines[i]) and not lines[i].startswith(_CONTINUED)]
    named = [i for i in found if _EXCEPTION_NAME.search(lines[i].split(":", 1)[0])]
    return named[0] if named else found[-1] if found else None


def _git(lines: list[str]) -> list[_Part]:
    """Hashes and subjects of ``git log``/``show``/``commit``; branch and files of ``git status``; files of a diff."""
    if not _any_in("\n" + "\n".join(lines), _GIT_FINDERS):  # most outputs: only a one-line log can be here
        return _oneline(lines) or _status(lines)
    changed = next((_text(ln) for ln in lines if _CHANGED.match(ln.strip())), None)
    commits = [(i, m.group(1)[:12]) for i, m in enumerate(map(_COMMIT.match, lines)) if m]
    if commits:
        first = commits[0][0]
        subject = next((ln for ln in lines[first + 1 : first + 8] if ln.startswith("    ")), None)
        return [_Part(commits[0][1]), *([_text(subject)] if subject else []), *([changed] if changed else []),
                *(_Part(h) for _, h in commits[1:6])]
    committed = next((ln for ln in lines if _COMMITTED.match(ln)), None)
    if committed:
        return [_Part(_one_line(committed), cap=SUBJECT_CHARS), *([changed] if changed else [])]
    log = _oneline(lines)
    if log:
        return log
    diffed = list(dict.fromkeys(m.group(1) for m in map(_DIFF.match, lines) if m))
    if diffed:
        return [_Part("diff", items=tuple(diffed[:12]), total=len(diffed))]
    stat = [m.group(1) for m in (_STAT.match(ln.strip()) for ln in lines) if m]
    if changed and stat:
        return [changed, _Part("files", items=tuple(stat[:12]), total=len(stat))]
    return _status(lines)


def _oneline(lines: list[str]) -> list[_Part]:
    """``git log --oneline`` (at least half the lines): the newest commit's line, then more hashes."""
    oneline = [m for m in map(_ONELINE.match, lines) if m]
    if oneline and 2 * len(oneline) >= len(lines):
        newest = _Part(_one_line(oneline[0].string), cap=SUBJECT_CHARS)
        return [newest, *(_Part(m.group(1)) for m in oneline[1:8])]
    return []


def _status(lines: list[str]) -> list[_Part]:
    joined = "\n".join(lines)
    if "On branch " not in joined and "HEAD detached " not in joined and (
            5 * len(_SHORT_STATUS_START.findall("\n" + joined)) < 4 * len(lines)):
        return []  # neither a long status nor mostly short-status lines (each of those is a candidate)
    branch = next((ln.strip() for ln in lines if _BRANCH.match(ln.strip())), None)
    groups: dict[str, list[str]] = {}
    if branch:
        untracked = False
        for line in lines:
            s = line.strip()
            m = _LONG_STATUS.match(line)
            if m:
                groups.setdefault(m.group(1), []).append(_one_line(m.group(2)))
            elif s.endswith(":"):
                untracked = s == "Untracked files:"
            elif untracked and not s.startswith("(") and not _SPACE.search(s):
                groups.setdefault("untracked", []).append(s)
    else:
        short = [m for m in (_SHORT_STATUS.match(ln) for ln in lines) if m and not _SPACE.search(m.group(2))]
        if not short or 5 * len(short) < 4 * len(lines):
            return []
        for m in short:
            groups.setdefault(m.group(1), []).append(m.group(2))
    tail = [ln.strip() for ln in lines if ln.strip().startswith(("Your branch is", "nothing to commit"))]
    return [*([_Part(branch)] if branch else []), *(_Part(t) for t in tail),
            *(_Part(label, items=tuple(items[:12]), total=len(items)) for label, items in groups.items())]


def _matches(lines: list[str], whole: bool) -> list[_Part]:
    """A search's matches (``file:line:text``, ``line:text``, ``file:text``): how many, and the first ones."""
    colon = sum(1 for line in lines if ":" in line)  # at least the hits
    if not colon or 3 * (len(lines) - colon - sum(1 for line in lines if "-" in line or "Found " in line)) > 2 * colon:
        return []  # the others are at least the lines with neither a colon nor a dash or "Found "
    hits: list[str] = []
    other = 0
    for line in lines:
        if _CONTEXT.match(line) or _FOUND.match(line.strip()):
            continue
        m = _MATCH.match(line)
        if not m:
            other += 1
            continue
        flat, file = _one_line(line), m.group("file") or m.group("file3") or ""
        if "/" in file.rstrip(":/"):  # the file name and what follows: the folders are in the call's target
            flat = flat[file.rstrip(":").rstrip("/").rfind("/") + 1 :]
        hits.append(flat)
    if not hits or 3 * other > 2 * len(hits):
        return []
    count = [_Part(f"{len(hits)} matches", atomic=True)] if whole and len(hits) > 1 else []
    return count + [_Part(h) for h in hits[:6]]


def _shown(text: str, lines: list[str]) -> list[_Part]:
    """A file's content shown: the Edit/Write note, the lines shown, the names it defines."""
    note = _WRITE_NOTE.match(_SNIPPET.sub("", lines[0].strip()))
    body = lines[1:] if note else lines
    shown = _numbered(text)
    joined = "\n".join(body)
    if not shown and "```" in joined and any(_FENCE.match(ln) for ln in body):
        return [_text(next(g for g in note.groups() if g))] if note else []  # prose quoting code, not a file
    if not shown and body:
        numbers = [int(m.group(1)) for m in map(_NL_NO.match, body) if m] if "\t" in joined else []
        if 5 * len(numbers) >= 4 * len(body):
            span = f"{numbers[0]}–{numbers[-1]}"
            whole = numbers == list(range(numbers[0], numbers[0] + len(numbers)))
            shown = f"lines {span}" if whole else f"{len(numbers)} lines of {span}"  # grep through nl: a few lines
            body = [_NL_NO.sub("", ln, count=1) for ln in body]
    names = _definitions(body)
    if len(names) < (1 if shown or note else 2):
        names = []
    parts = [_text(next(g for g in note.groups() if g))] if note else []
    parts += [_Part(shown, atomic=True)] if shown else []
    parts += [_Part("defines", items=tuple(names[:12]), total=len(names))] if names else []
    return parts


def _definitions(lines: list[str]) -> list[str]:
    """Names defined in source lines, outermost first, then in order of appearance."""
    found = []
    for i, line in enumerate(lines):  # anchored: a match per line beats a search through them all
        starts = line.lstrip().startswith(_DEF_WORDS)
        m = _DEF.match(line) if starts else None
        c_function = _c_function(line) if m is None or m.group(2) in ("struct", "enum", "union") else None
        if m is not None and c_function is None:  # (``struct s *f(…)`` defines f, not s)
            indent = len(m.group(1).expandtabs(4))
            if not (indent and m.group(2) in _TOP_ONLY) and m.group(3) not in _NOT_NAMES:
                found.append((indent, i, m.group(3).rstrip(".")))
        elif c_function is not None:
            found.append((0, i, c_function.group(1)))
        elif starts and (m := _METHOD.match(line)) is not None:
            found.append((len(m.group(1).expandtabs(4)), i, m.group(2)))
    return list(dict.fromkeys(name for _, _, name in sorted(found)))


def _c_function(line: str) -> re.Match[str] | None:
    return _C_FUNCTION.match(line) if line[:1].isalpha() and "(" in line else None


def _listing(lines: list[str], whole: bool) -> list[_Part]:
    """A list of paths or names, one a line: how many, and the first ones under their common folder."""
    items = []
    for line in lines:
        s = line.strip()
        if _FOUND.match(s):
            continue
        if _SPACE.search(s):  # not one name a line: no listing (most outputs stop here, at their first line)
            return []
        items.append(s)
    if len(items) < 2:
        return []
    cut = _common_prefix(items).rfind("/") + 1
    shown = tuple(x[cut:] or x for x in items[:12])
    noun = "files" if all("/" in x or "." in x for x in items) else "entries"
    return [_Part(f"{len(items)} {noun}" if whole else noun, items=shown, total=len(items))]


def _generic(lines: list[str]) -> list[_Part]:
    """Error and warning lines (rarest first), the last line, the first, a line naming an identifier."""
    shapes = _shapes(lines)
    joined = "\n".join(lines)
    errors = [i for i in _lines_any(joined, _ERROR_FINDERS) if _ERROR.search(lines[i].strip())]
    named = [i for i in _lines_any(joined, _IDENT_FINDERS) if _names_ident(lines[i])]
    return [*(_text(lines[i]) for i in _rarest(errors, lines, shapes, 2)), *_notices(lines, shapes, 1),
            _text(lines[-1]), _text(lines[0]), *(_text(lines[i]) for i in _rarest(named, lines, shapes, 1))]


def _numbered(text: str) -> str:
    """``lines a–b`` for a file shown with ``N→`` prefixes (a Read result, an Edit snippet), else empty."""
    head = _LINE_NO_M.search(text[:2_000]) if "→" in text[:2_000] else None
    if not head:
        return ""
    last = ""
    for line in reversed(text[-2_000:].splitlines()):
        m = _LINE_NO.match(line)
        if m:
            last = m.group(1)
            break
    return f"lines {head.group(1)}–{last}" if last else ""


def _common_prefix(items: list[str]) -> str:
    lo, hi = min(items), max(items)
    n = next((i for i, (a, b) in enumerate(zip(lo, hi)) if a != b), min(len(lo), len(hi)))
    return lo[:n]


def _one_line(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)].rstrip() + "…" if limit >= 1 else ""


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
