"""Which files a shell command reads and which it modifies, for accounts and file lists.

    reads, writes = shell_files("sed -i 's/a/b/' src/x.py && cat <<'EOF' > notes.txt\\nsys\\nEOF")
    # ([], ['src/x.py', 'notes.txt'])
    command_line("cat <<'EOF' > a.py\\nimport sys\\nEOF\\npython3 a.py")
    # "cat <<'EOF' > a.py [1 lines] ; python3 a.py"

A small lexer follows the shell's own rules — quotes, escapes, line continuations,
comments, ``$(…)`` and backquote substitutions (read as commands of their own) and
heredocs, whose bodies are data: never parsed as commands or names.  Then, per simple
command:

- **modified**: redirection targets (``>``, ``>>``, ``&>``), ``tee`` arguments,
  ``sed -i`` / ``perl -i`` files, ``cp`` destinations, ``mv`` sources and destinations,
  ``touch``, ``rm``, ``git checkout``/``restore``/``mv``/``rm`` paths, the files a patch
  names when its text is in the command (``apply_patch`` envelopes, ``git apply`` /
  ``patch`` with ``+++ b/path`` headers, also through a file the same command wrote),
  ``ed`` files written with ``w``, and literal ``open('path', 'w')`` in Python given
  inline (``python -c``, ``python - <<EOF``);
- **read**: ``cat``/``head``/``tail``/``less``/``more``/``bat``/``nl``/``wc`` and
  ``sed`` without ``-i`` arguments, ``<`` redirections.

Paths are kept as written (``cd dir && …`` does not rewrite them).

Invariants protected here: a reported name is a literal word of the command or a path
a patch or inline script names — never a flag, a number, ``-``, a word with ``$``,
a glob or a reserved word, never a word of a heredoc body; each list has no duplicate;
any text gives two lists of str and never an exception, in time linear in its length
(substitutions nested deeper than eight levels are skipped, not followed).

The module is longer than most in the package: the lexer and the per-program rules share
one invariant (what counts as a word) and read best together.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["argv_command", "command_line", "patch_targets", "shell_files"]

SHELL_READERS = frozenset({"cat", "head", "tail", "less", "more", "bat", "nl", "wc"})
_SEPARATORS = frozenset({";", "&&", "||", "|", "|&", "&", "(", ")", ";;", "\n"})
_OPERATORS = ("&>>", "<<<", "<<-", "&&", "||", ";;", "|&", ">>", ">|", "&>", "<<", "<>", ">&", "<&",
              ";", "&", "|", "(", ")", "<", ">")
_WRITES = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
_RESERVED = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "case", "esac",
                       "for", "select", "in", "function", "time", "!", "{", "}", "[[", "]]", "coproc"})
_SKIPPED_SEGMENTS = frozenset({"for", "select", "case", "function"})
_PREFIXES = frozenset({"sudo", "nohup", "time", "command", "exec", "builtin", "env", "nice", "stdbuf", "xargs"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
_NUMBER = re.compile(r"^[+-]?\d+[KMGkmg%]?$")
_PATCH_TARGETS = re.compile(r"^(?:\*\*\* (?:Update|Add|Delete) File: |\*\*\* Move to: |\+\+\+ (?:b/)?)(\S[^\n]*)", re.M)
_PY_WRITES = re.compile(
    r"""\bopen\(\s*(['"])([^'"\n]+)\1\s*,\s*(?:mode\s*=\s*)?(['"])[rbt]*[wax+][^'"]*\3"""
    r"""|\bPath\(\s*(['"])([^'"\n]+)\4\s*\)\.write_(?:text|bytes)\("""
)
_BRACE = re.compile(r"\{[^\s{}]*(?:,|\.\.)[^\s{}]*\}")
_NAME = re.compile(r"[A-Za-z_]\w*")
_VALUED = {
    "head": ("-n", "-c", "--lines", "--bytes"),
    "tail": ("-n", "-c", "--lines", "--bytes", "-s", "--sleep-interval", "--pid"),
    "nl": ("-b", "-d", "-f", "-h", "-i", "-l", "-n", "-s", "-v", "-w"),
}
"""Reader options whose value is the next word (``head -n 20 f``)."""
_WRAPPER_VALUED = frozenset({"-u", "-g", "-n", "-I", "-P", "-L", "-d", "-s", "-k", "-E", "-a", "--signal", "-C"})
_MAX_LEVEL = 8
"""Substitutions nested deeper than this are skipped, not analysed (bounded recursion)."""
_PLAIN = re.compile(r"[^\\ \t\n#'\"`$;&|()<>*?\[{]+")
"""A run of characters the lexer only adds to the current word (consumed at once, not one by one)."""
_DOUBLE_PLAIN = re.compile(r'[^"\\$`]+')
"""The same inside double quotes."""
_CONTINUATION = re.compile(r"[ \t]*\\\n[ \t]*")
_HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)\s*(['\"]?)([A-Za-z_][\w.-]*)\2")


@dataclass(frozen=True, slots=True)
class _Word:
    text: str
    literal: bool
    """False when the word holds an expansion or a glob: it names no file as written."""


@dataclass(slots=True)
class _Lexer:
    """Tokens of one command text: ``_Word``, operator strings, and heredoc bodies (``("body", text)``)."""

    src: str
    level: int = 0
    tokens: list = field(default_factory=list)
    inner: list[str] = field(default_factory=list)
    """The text of every ``$(…)`` and backquote substitution, analysed as commands of their own."""

    def run(self, i: int = 0, stop: bool = False) -> int:
        """Lex from ``i``; with ``stop``, until the ``)`` closing a substitution.  Returns the index after it."""
        s, n = self.src, len(self.src)
        buf: list[str] = []
        started = literal = False
        pending: list[tuple[int, str, bool]] = []  # heredocs waiting for the end of the line
        depth = 0

        def end_word() -> None:
            nonlocal started, literal
            if started:
                self.tokens.append(_Word("".join(buf), literal))
            buf.clear()
            started, literal = False, True

        literal = True
        while i < n:
            c = s[i]
            if c == "\\" and i + 1 < n:
                if s[i + 1] != "\n":
                    buf.append(s[i + 1])
                    started = True
                i += 2
            elif c in " \t":
                end_word()
                i += 1
            elif c == "\n":
                end_word()
                self.tokens.append("\n")
                i = self._bodies(i + 1, pending)
                pending = []
            elif c == "#" and not started:
                while i < n and s[i] != "\n":
                    i += 1
            elif c == "'":
                text, i, closed = _quoted(s, i)
                buf.append(text)
                started, literal = True, literal and closed  # an unclosed quote names nothing
            elif c == '"':
                i, lit = self._double(i + 1, buf)
                started, literal = True, literal and lit
            elif c == "`":
                text, i, _ = _quoted(s, i)
                self.inner.append(text)
                started, literal = True, False
            elif c == "$":
                i = self._dollar(i)
                started, literal = True, False
            elif stop and c == ")" and depth == 0:
                end_word()
                return i + 1
            elif c in "<>" and i + 1 < n and s[i + 1] == "(":  # process substitution: a word naming no file
                started, literal, i = True, False, self._substitution(i + 2)
            elif c in ";&|()<>":
                if c in "<>" and started and literal and "".join(buf).isdigit():
                    buf.clear()
                    started = False  # the fd of 2>, 1>>
                end_word()
                op = next(o for o in _OPERATORS if s.startswith(o, i))
                depth += {"(": 1, ")": -1}.get(op, 0)
                self.tokens.append(op)
                i += len(op)
                if op in ("<<", "<<-"):
                    i = self._delimiter(i, op == "<<-", pending)
            else:
                if c in "*?[" or (c == "{" and _BRACE.match(s, i)):
                    literal = False
                buf.append(c)
                started = True
                i += 1
                plain = _PLAIN.match(s, i)
                if plain is not None:
                    buf.append(plain.group())
                    i = plain.end()
        end_word()
        self._bodies(n, pending)
        return n

    def _double(self, i: int, buf: list[str]) -> tuple[int, bool]:
        s, n, literal = self.src, len(self.src), True
        while i < n and s[i] != '"':
            if s[i] == "\\" and i + 1 < n and s[i + 1] in '"\\$`\n':
                if s[i + 1] != "\n":
                    buf.append(s[i + 1])
                i += 2
            elif s[i] == "$":
                i, literal = self._dollar(i), False
            elif s[i] == "`":
                text, i, _ = _quoted(s, i)
                self.inner.append(text)
                literal = False
            else:
                plain = _DOUBLE_PLAIN.match(s, i)
                if plain is not None:
                    buf.append(plain.group())
                    i = plain.end()
                else:  # a backslash that escapes nothing: itself
                    buf.append(s[i])
                    i += 1
        return i + 1, literal and i < n

    def _dollar(self, i: int) -> int:
        """Skip a ``$…`` expansion; a ``$(…)`` command substitution is lexed for its own files."""
        s, n = self.src, len(self.src)
        if s.startswith("$((", i):  # arithmetic: no command inside
            return _closing(s, i + 2)
        if s.startswith("$(", i):
            return self._substitution(i + 2)
        if s.startswith("${", i):
            j = s.find("}", i)
            return n if j < 0 else j + 1
        if i + 1 < n and s[i + 1] in "@*#?$!-0123456789":
            return i + 2
        m = _NAME.match(s, i + 1)
        return m.end() if m else i + 1

    def _substitution(self, i: int) -> int:
        """Find the ``)`` closing a substitution opened before ``i``; keep its text for analysis."""
        if self.level >= _MAX_LEVEL:  # too deep to follow: count parentheses only
            return _closing(self.src, i)
        j = _Lexer(self.src, level=self.level + 1).run(i, stop=True)
        self.inner.append(self.src[i : j - 1])
        return j

    def _delimiter(self, i: int, tabs: bool, pending: list[tuple[int, str, bool]]) -> int:
        """Read a heredoc's delimiter word; its body is read at the end of the line."""
        s, n = self.src, len(self.src)
        while i < n and s[i] in " \t":
            i += 1
        word: list[str] = []
        while i < n and s[i] not in " \t\n;&|()<>":
            if s[i] in "'\"":
                text, i, _ = _quoted(s, i)
                word.append(text)
            else:
                word.append(s[i] if s[i] != "\\" else "")
                i += 1
        self.tokens.append(("body", ""))
        pending.append((len(self.tokens) - 1, "".join(word), tabs))
        return i

    def _bodies(self, i: int, pending: list[tuple[int, str, bool]]) -> int:
        """Consume the bodies of the heredocs opened on the line just ended, in order."""
        s, n = self.src, len(self.src)
        for slot, delim, tabs in pending:
            lines: list[str] = []
            while i < n:
                j = s.find("\n", i)
                j = n if j < 0 else j
                line = s[i:j]
                i = j + 1
                if (line.lstrip("\t") if tabs else line) == delim:
                    break
                lines.append(line)
            self.tokens[slot] = ("body", "\n".join(lines))
        return min(i, n)


def _closing(s: str, i: int) -> int:
    """The index after the ``)`` closing a ``(`` opened just before ``i``, by counting parentheses."""
    depth = 1
    while i < len(s) and depth:
        depth += {"(": 1, ")": -1}.get(s[i], 0)
        i += 1
    return i


def _quoted(s: str, i: int) -> tuple[str, int, bool]:
    """The text between the quote at ``i`` and its closing twin: (text, index after it, closed?)."""
    j = s.find(s[i], i + 1)
    return (s[i + 1 : j], j + 1, True) if j >= 0 else (s[i + 1 :], len(s), False)


def shell_files(command: str) -> tuple[list[str], list[str]]:
    """Files a shell command reads and modifies: ``(reads, writes)``, each in order of first mention."""
    reads, writes = _files_of(command)
    return list(reads), list(writes)


@lru_cache(maxsize=4_096)
def _files_of(command: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Each command is lexed once: an account is collected again on every compaction that covers it."""
    reads: list[str] = []
    writes: list[str] = []
    _analyse(command, reads, writes, 0)
    return tuple(dict.fromkeys(reads)), tuple(dict.fromkeys(writes))


def _analyse(command: str, reads: list[str], writes: list[str], level: int) -> None:
    lexer = _Lexer(command, level=level)
    lexer.run()
    written: dict[str, str] = {}  # file -> the heredoc text this command wrote to it (a patch applied later)
    segment: list = []
    for token in [*lexer.tokens, ";"]:
        if isinstance(token, str) and token in _SEPARATORS:
            if segment:
                _simple(segment, reads, writes, written)
            segment = []
        else:
            segment.append(token)
    if level < _MAX_LEVEL:
        for inner in lexer.inner:
            _analyse(inner, reads, writes, level + 1)


def _simple(tokens: list, reads: list[str], writes: list[str], written: dict[str, str]) -> None:
    """One simple command: its redirections, then what its program does with its arguments."""
    words: list[_Word] = []
    body: str | None = None
    sources: list[_Word] = []  # < file
    targets: list[_Word] = []  # > file
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if isinstance(t, _Word):
            words.append(t)
        elif isinstance(t, tuple):
            body = t[1]
        elif t in _WRITES or t in ("<", ">&"):
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if isinstance(nxt, _Word):
                i += 1
                if t == "<":
                    sources.append(nxt)
                elif t != ">&" or not (nxt.text.isdigit() or nxt.text == "-"):
                    targets.append(nxt)
        elif t in ("<<<", "<&") and i + 1 < len(tokens) and isinstance(tokens[i + 1], _Word):
            i += 1
        i += 1
    reads.extend(w.text for w in sources if _is_path(w))
    writes.extend(w.text for w in targets if _is_path(w))
    words = _strip_prefixes(words)
    if not words or words[0].text in _SKIPPED_SEGMENTS:
        return
    name, args = words[0].text.rsplit("/", 1)[-1], words[1:]
    if body is not None and name in ("cat", "tee"):
        for w in targets + args:
            written[w.text] = body
    patches = [body] if body is not None else []
    patches += [written[w.text] for w in sources if w.text in written]
    _program(name, args, body, patches, reads, writes, written)


def _program(name: str, args: list[_Word], body: str | None, patches: list[str],
             reads: list[str], writes: list[str], written: dict[str, str]) -> None:
    paths = [a.text for a in args if _is_path(a)]
    if name in SHELL_READERS:
        reads.extend(_positional(args, _VALUED.get(name, ())))
    elif name == "tee":
        writes.extend(paths)
    elif name == "sed":
        in_place, files = _sed(args)
        (writes if in_place else reads).extend(files)
    elif name == "perl" and any(re.fullmatch(r"-[a-zA-Z]*i\S*", a.text) for a in args):
        given = any(a.text in ("-e", "-E") or re.fullmatch(r"-[a-zA-Z]*[eE]", a.text) for a in args)
        files = _positional(args, ("-e", "-E", "-M"))
        writes.extend(files if given else files[1:])
    elif name == "cp":
        dest = _cp_dest(args)
        writes.extend([dest] if dest else [])
    elif name in ("mv", "rm", "touch", "truncate", "unlink", "shred"):
        writes.extend(_positional(args, ("-t", "-S", "-d", "-r", "-s", "--suffix", "--target-directory")))
    elif name == "git":
        _git(args, patches, reads, writes, written)
    elif name == "patch":
        _patch(args, patches, writes, written)
    elif name in ("apply_patch", "applypatch"):
        writes.extend(patch_targets("\n".join(patches + [a.text for a in args])))
    elif re.fullmatch(r"python[\d.]*|pypy[\d.]*", name):
        code = next((args[k + 1].text for k, a in enumerate(args[:-1]) if a.text == "-c"), None)
        scripts = [a for a in args if not a.text.startswith("-") or a.text == "-"]
        if code is None and body is not None and (not scripts or scripts[0].text == "-"):
            code = body
        writes.extend(_py_writes(code or ""))
    elif name in ("ed", "ex") and paths:
        if body is None or re.search(r"^\s*w", body, re.M):
            writes.append(paths[0])


def _strip_prefixes(words: list[_Word]) -> list[_Word]:
    """Drop assignments, reserved words and wrappers (``sudo``, ``env``, ``timeout 10``) before the program."""
    i = 0
    while i < len(words):
        text = words[i].text
        if _ASSIGNMENT.match(text) or (text in _RESERVED and text not in _SKIPPED_SEGMENTS):
            i += 1
        elif text in _PREFIXES or text == "timeout":
            i += 1
            while i < len(words) and (words[i].text.startswith("-") or _ASSIGNMENT.match(words[i].text)):
                i += 2 if words[i].text in _WRAPPER_VALUED else 1
            if text == "timeout" and i < len(words):
                i += 1  # the duration
        else:
            break
    return words[i:]


def _positional(args: list[_Word], valued: tuple[str, ...] = ()) -> list[str]:
    """The arguments that are paths, skipping options and the values of ``valued`` options."""
    out: list[str] = []
    skip = after = False
    for a in args:
        if skip:
            skip = False
        elif a.text == "--" and not after:
            after = True
        elif a.text.startswith("-") and not after:
            skip = a.text in valued
        elif _is_path(a):
            out.append(a.text)
    return out


def _sed(args: list[_Word]) -> tuple[bool, list[str]]:
    """(in place?, the files) — the script is the first operand unless given by ``-e``/``-f``."""
    in_place = script = False
    operands: list[_Word] = []
    i = 0
    while i < len(args):
        a = args[i].text
        if a == "--":
            operands += args[i + 1 :]
            break
        if a.startswith("--"):
            in_place = in_place or a.split("=", 1)[0] == "--in-place"
            script = script or a.split("=", 1)[0] in ("--expression", "--file")
            i += a in ("--expression", "--file", "--line-length")
        elif a.startswith("-") and len(a) > 1:
            for k, ch in enumerate(a[1:]):
                if ch == "i":  # the rest of the word is a backup suffix
                    in_place = True
                    nxt = args[i + 1].text if i + 1 < len(args) else None
                    if a == "-i" and (nxt == "" or (nxt and re.fullmatch(r"\.[\w.~-]+", nxt) and len(args) > i + 3)):
                        i += 1  # BSD: -i '' / -i .bak
                    break
                if ch in "efl":
                    script = script or ch != "l"
                    i += k == len(a) - 2  # the value is the next word
                    break
        else:
            operands.append(args[i])
        i += 1
    files = operands if script else operands[1:]
    return in_place, [w.text for w in files if _is_path(w)]


def _cp_dest(args: list[_Word]) -> str | None:
    for k, a in enumerate(args):
        if a.text in ("-t", "--target-directory") and k + 1 < len(args):
            return args[k + 1].text if _is_path(args[k + 1]) else None
        if a.text.startswith("--target-directory="):
            return a.text.split("=", 1)[1] or None
    operands = _positional(args, ("-S", "--suffix"))
    return operands[-1] if len(operands) >= 2 else None


def _git(args: list[_Word], patches: list[str], reads: list[str], writes: list[str], written: dict[str, str]) -> None:
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        i += 2 if args[i].text in ("-C", "-c") else 1
    if i >= len(args):
        return
    sub, rest = args[i].text, args[i + 1 :]
    if sub in ("checkout", "restore"):
        texts = [a.text for a in rest]
        if "--" in texts:
            writes.extend(a.text for a in rest[texts.index("--") + 1 :] if _is_path(a))
        else:
            named = _positional(rest, ("-b", "-B", "--orphan", "-s", "--source"))
            writes.extend(p for p in named if "." in p.rsplit("/", 1)[-1].strip("."))
    elif sub in ("mv", "rm"):
        writes.extend(_positional(rest))
    elif sub == "apply" and not {"--check", "--stat", "--numstat", "--summary"} & {a.text for a in rest}:
        files = _positional(rest, ("-p", "--directory", "--exclude", "--include"))
        for f in files:
            if f in written:
                patches = patches + [written[f]]
            else:
                reads.append(f)
        writes.extend(patch_targets("\n".join(patches)))


def _patch(args: list[_Word], patches: list[str], writes: list[str], written: dict[str, str]) -> None:
    texts = [a.text for a in args]
    if "--dry-run" in texts:
        return
    for k, t in enumerate(texts[:-1]):
        if t in ("-i", "--input") and texts[k + 1] in written:
            patches = patches + [written[texts[k + 1]]]
    operands = _positional(args, ("-i", "--input", "-o", "--output", "-d", "--directory", "-p", "-F", "-B", "-r", "-z"))
    writes.extend(operands[:1] or patch_targets("\n".join(patches)))


def argv_command(argv: object) -> str:
    """A command given as its argument list (Codex's ``shell``: ``["bash", "-lc", "…"]``) as one command
    line: a shell's ``-c`` script as it is, any other list quoted as a shell would need it; '' if not a list
    of strings."""
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return ""
    if len(argv) >= 3 and argv[-2] in ("-c", "-lc", "-ic") and argv[0].rsplit("/", 1)[-1] in _SHELLS:
        return argv[-1]
    return shlex.join(argv)


_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish"})


def patch_targets(text: str) -> list[str]:
    """The files a patch changes: ``apply_patch`` envelope lines and unified diff ``+++`` headers."""
    out = []
    for m in _PATCH_TARGETS.finditer(text):
        path = m.group(1).split("\t", 1)[0].rstrip()
        if path and path != "/dev/null":
            out.append(path)
    return out


def _py_writes(code: str) -> list[str]:
    """Paths that inline Python opens for writing with a literal name (``open('x', 'w')``, ``Path('x').write_text``)."""
    return [m.group(2) or m.group(5) for m in _PY_WRITES.finditer(code)]


def _is_path(word: _Word) -> bool:
    t = word.text
    return (
        word.literal
        and bool(t.strip())
        and t not in ("-", ".", "..", "{}")
        and not t.startswith(("-", "/dev/", "&"))
        and "\n" not in t
        and "\t" not in t
        and t not in _RESERVED
        and not _NUMBER.match(t)
    )


def command_line(command: str) -> str:
    """A command on one line, for an account: heredoc bodies become ``[N lines]``, comments go.

    Continuation lines are joined and separate lines are joined with `` ; `` so every
    command stays visible; the command's own words are kept as written.
    """
    lines = _CONTINUATION.sub(" ", command).split("\n")
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
