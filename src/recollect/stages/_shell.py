"""Which files a shell command reads and writes, for the fallback summary's file lists."""

from __future__ import annotations

import re
import shlex

SHELL_READERS = frozenset({"cat", "head", "tail", "less", "more", "bat", "nl", "wc"})
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "|&", ";;"})
_WRITES = frozenset({">", ">>", ">|", "&>", "&>>"})
_SKIP_NEXT = frozenset({"<<", "<<<", ">&", "<&"})


def shell_files(command: str) -> tuple[list[str], list[str]]:
    """Files a shell command reads (cat/head/tail/sed -n, ``<``) or writes (``>``, ``>>``, tee).

    Returns (files read, files written).  Best effort: an unparsable command
    (unbalanced quotes) gives nothing.
    """
    reads: list[str] = []
    writes: list[str] = []
    try:
        tokens = list(shlex.shlex(command, posix=True, punctuation_chars=True))
    except ValueError:
        return reads, writes
    segment: list[str] = []
    i = 0
    while i <= len(tokens):
        tok = tokens[i] if i < len(tokens) else ";"
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if tok in _SEPARATORS or "\n" in tok:
            _segment_files(segment, reads, writes)
            segment = []
        elif tok in _WRITES or tok == "<":
            if nxt and not nxt.startswith(("&", "/dev/")) and nxt not in _SEPARATORS:
                (writes if tok != "<" else reads).append(nxt)
            if segment and segment[-1].isdigit():
                segment.pop()  # the fd of "2>"
            i += 1
        elif tok in _SKIP_NEXT:
            if segment and segment[-1].isdigit():
                segment.pop()
            i += 1
        else:
            segment.append(tok)
        i += 1
    return reads, writes


def _segment_files(words: list[str], reads: list[str], writes: list[str]) -> None:
    if not words:
        return
    name, args = words[0].rsplit("/", 1)[-1], words[1:]
    if name == "tee":
        writes.extend(a for a in args if not a.startswith("-"))
        return
    if name == "sed":
        if "-n" not in args or "-i" in args:
            return
        positional = [a for a in args if not a.startswith("-")]
        reads.extend(positional[1:])  # the first is the script
        return
    if name in SHELL_READERS:
        skip = False
        for a in args:
            if skip:
                skip = False
            elif a in ("-n", "-c"):
                skip = True
            elif not a.startswith("-") and not a.lstrip("+-").isdigit():
                reads.append(a)


_HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)\s*(['\"]?)([A-Za-z_][\w.-]*)\2")


def command_line(command: str) -> str:
    """A command on one line, for an account: heredoc bodies become ``[N lines]``, comments go.

    Continuation lines are joined and separate lines are joined with `` ; `` so every
    command stays visible, and the command's own words are kept as written.
    """
    lines = command.replace("\\\n", " ").split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line and not line.startswith("#"):
            out.append(line)
        for m in _HEREDOC.finditer(lines[i]):
            delim, tabs = m.group(3), m.group(1) == "-"
            j = i + 1
            while j < len(lines) and (lines[j].lstrip("\t") if tabs else lines[j]) != delim:
                j += 1
            if out:
                out[-1] += f" [{j - i - 1} lines]"
            i = j
        i += 1
    return " ; ".join(out)
