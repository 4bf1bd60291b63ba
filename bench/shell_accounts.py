"""File lists from shell commands on real mini-swe-agent runs: lossless's shell_files against the old one.

    python bench/shell_accounts.py [--data ../shared/data/mini-swe-agent] [--show]

Over every command of the trajectories, side by side with the previous ``shell_files``
(a token scan that knew no heredocs and no ``sed -i``, kept below as the baseline):

* ``sed -i`` edits: every ``sed`` invocation with ``-i``/``--in-place`` found by an
  independent line-by-line ``shlex`` reading outside heredoc bodies; its expected file is
  the invocation's last word.  Detected = that file is among the files reported modified.
* heredoc-body words: names reported (read or modified) that occur nowhere in the command
  outside its heredoc bodies, and that no ``+++``/``*** … File:`` patch header nor literal
  ``open('…', 'w')`` in a body names — words like ``sys``, ``import``, ``for``.

``--show`` prints the misses and the body words.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from lossless.dialects.mini_swe import read_trajectory  # noqa: E402
from lossless.account.shell import shell_files  # noqa: E402

HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)\s*(['\"]?)([A-Za-z_][\w.-]*)\2")
NAMED_IN_BODY = re.compile(r"^(?:\+\+\+ (?:b/)?|\*\*\* (?:Update|Add|Delete) File: )(\S+)|open\(\s*['\"]([^'\"]+)['\"]", re.M)
SEPARATORS = {";", "&&", "||", "|", "&", "(", ")"}


def split_bodies(command: str) -> tuple[list[str], list[str]]:
    """(the command's own lines, its heredoc bodies), by a plain line scan."""
    lines = command.replace("\\\n", " ").split("\n")
    own, bodies, i = [], [], 0
    while i < len(lines):
        own.append(lines[i])
        for m in HEREDOC.finditer(lines[i]):
            j = i + 1
            while j < len(lines) and (lines[j].lstrip("\t") if m.group(1) else lines[j]) != m.group(3):
                j += 1
            bodies.append("\n".join(lines[i + 1 : j]))
            i = j
        i += 1
    return own, bodies


def sed_edits(command: str) -> list[str]:
    """The file each ``sed -i`` invocation edits, read line by line with shlex."""
    out = []
    for line in split_bodies(command)[0]:
        try:
            tokens = list(shlex.shlex(line, posix=True, punctuation_chars=True))
        except ValueError:
            continue
        segment: list[str] = []
        for tok in tokens + [";"]:
            if tok in SEPARATORS or tok.startswith(("&", ">", "<")):
                words = [w for w in segment if not re.match(r"^[A-Za-z_]\w*=", w)]
                if words and words[0] == "sed" and any(w.startswith(("-i", "--in-place")) for w in words[1:]):
                    out.append(words[-1])
                segment = [] if tok in SEPARATORS else segment + [tok]
            else:
                segment.append(tok)
    return out


def body_words(command: str, names: list[str]) -> list[str]:
    own, bodies = split_bodies(command)
    outside = "\n".join(own)
    named = {a or b for body in bodies for a, b in NAMED_IN_BODY.findall(body)}
    return [n for n in names if n not in outside and n not in named and any(n in b for b in bodies)]


# -- the baseline: the previous shell_files, unchanged ---------------------------------------------

BASE_READERS = frozenset({"cat", "head", "tail", "less", "more", "bat", "nl", "wc"})
BASE_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "|&", ";;"})
BASE_WRITES = frozenset({">", ">>", ">|", "&>", "&>>"})
BASE_SKIP_NEXT = frozenset({"<<", "<<<", ">&", "<&"})


def baseline_shell_files(command: str) -> tuple[list[str], list[str]]:
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
        if tok in BASE_SEPARATORS or "\n" in tok:
            _baseline_segment(segment, reads, writes)
            segment = []
        elif tok in BASE_WRITES or tok == "<":
            if nxt and not nxt.startswith(("&", "/dev/")) and nxt not in BASE_SEPARATORS:
                (writes if tok != "<" else reads).append(nxt)
            if segment and segment[-1].isdigit():
                segment.pop()
            i += 1
        elif tok in BASE_SKIP_NEXT:
            if segment and segment[-1].isdigit():
                segment.pop()
            i += 1
        else:
            segment.append(tok)
        i += 1
    return reads, writes


def _baseline_segment(words: list[str], reads: list[str], writes: list[str]) -> None:
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
        reads.extend(positional[1:])
        return
    if name in BASE_READERS:
        skip = False
        for a in args:
            if skip:
                skip = False
            elif a in ("-n", "-c"):
                skip = True
            elif not a.startswith("-") and not a.lstrip("+-").isdigit():
                reads.append(a)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/mini-swe-agent"))
    parser.add_argument("--show", action="store_true")
    args = parser.parse_args(argv)
    paths = sorted(Path(args.data).glob("*.traj.json"))
    if not paths:
        print(f"{args.data}: no *.traj.json here; pass --data", file=sys.stderr)
        return 2
    commands = [u.input["command"] for p in paths for m in read_trajectory(p).messages for u in m.tool_uses]
    rows = {}
    for label, fn in (("baseline", baseline_shell_files), ("lossless", shell_files)):
        edits = found = words = heredoc_cmds = 0
        for cmd in commands:
            reads, writes = fn(cmd)
            expected = sed_edits(cmd)
            edits += len(expected)
            hits = [e for e in expected if e in writes]
            found += len(hits)
            bad = body_words(cmd, reads + writes)
            words += len(bad)
            heredoc_cmds += bool(bad)
            if args.show and (bad or len(hits) < len(expected)):
                print(f"[{label}] missed {sorted(set(expected) - set(hits))} body words {bad[:8]}: {cmd[:100]!r}")
        rows[label] = (edits, found, words, heredoc_cmds)
    print(f"{len(paths)} trajectories, {len(commands):,} commands, "
          f"{sum(bool(split_bodies(c)[1]) for c in commands)} with a heredoc")
    print(f"{'':10} {'sed -i edits':>12} {'detected':>9} {'body words':>11} {'commands':>9}")
    for label, (edits, found, words, cmds) in rows.items():
        print(f"{label:10} {edits:12,} {found:9,} {words:11,} {cmds:9,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
