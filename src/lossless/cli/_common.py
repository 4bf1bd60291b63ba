"""What every command shares: one-line failures, printable text, tables, JSON output,
argument types and the summarizer options.

Imported by ``lossless --help``: what it imports at the top is what every start pays
(``json`` and ``pathlib`` are imported where they are used, ``typing`` by the checker only)."""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ..errors import ConfigError

TYPE_CHECKING = False  # as in lossless/__init__.py: ``typing`` stays out of ``lossless --help``
if TYPE_CHECKING:
    from typing import Any

EXIT_USAGE = 2

FILE_HELP = ("a recorded session: Claude Code JSONL, a mini-swe-agent .traj.json, or a JSON list (or "
             "{system, messages} object) of Anthropic or OpenAI messages; the format is detected")
WINDOW_HELP = "the model's context window, in tokens"


def fail(message: str) -> int:
    print(f"lossless: error: {printable(message)}", file=sys.stderr)
    return EXIT_USAGE


def printable(text: str, *, one_line: bool = True) -> str:
    """``text`` safe to print: lone surrogates (undecodable bytes kept by a reader) as
    ``\\udcxx`` escapes instead of a ``UnicodeEncodeError``; with ``one_line``, line
    breaks as spaces, so an error or warning stays one line."""
    if one_line:
        text = " ".join(text.splitlines())
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # not a real file descriptor (an in-process caller's buffer)
        pass


# -- options ------------------------------------------------------------------
def summarizer_options(s: argparse.ArgumentParser) -> None:
    s.add_argument("--summarizer", choices=("fallback", "llm"), default="fallback",
                   help="fallback: the deterministic summary (no model); llm: summaries by --provider")
    s.add_argument("--provider", choices=("anthropic", "openai", "fake"),
                   help="model provider for --summarizer llm (keys from ANTHROPIC_API_KEY / OPENAI_API_KEY; "
                        "'fake' is lossless's offline summarizer)")
    s.add_argument("--model", help="model to summarise with")
    s.add_argument("--base-url", help="API base URL (a local OpenAI-compatible server, a proxy)")


def provider_from(args: argparse.Namespace) -> Any:
    """The provider ``--summarizer``/``--provider``/``--model``/``--base-url`` ask for (None: no model)."""
    if args.summarizer == "fallback":
        if args.provider:
            raise ConfigError("--provider is for --summarizer llm; drop it or add --summarizer llm")
        return None
    if not args.provider:
        raise ConfigError("--summarizer llm needs --provider anthropic|openai|fake (and --model)")
    from ._providers import make_provider

    return make_provider(args.provider, args.model, args.base_url)


def int_or_auto(value: str) -> int | None:
    if value == "auto":
        return None
    try:
        return count(value)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a number of tokens or 'auto', not {value!r}") from None


def count(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 0, not {value!r}")
    return n


def positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n <= 0:
        raise argparse.ArgumentTypeError(f"expected a whole number > 0, not {value!r}")
    return n


def request_tools(path: Any, session: Any) -> list[Any] | None:
    """The ``tools`` of a request body (``{"system", "messages", "tools"}``) that ``session``
    was read from, if it is one; None for every other format."""
    import json
    from pathlib import Path

    if session.format not in ("anthropic", "openai"):
        return None
    try:
        data = json.loads(Path(path).read_bytes())
    except (OSError, ValueError):  # read_any has read it already: what it could not take, it reported
        return None
    tools = data.get("tools") if isinstance(data, dict) else None
    return tools if isinstance(tools, list) and all(isinstance(t, dict) for t in tools) else None


# -- output -------------------------------------------------------------------
@contextmanager
def unwinding_on_termination() -> Iterator[None]:
    """Within this block SIGTERM and SIGHUP unwind the command as Ctrl-C does, so its ``finally``
    blocks run (the demo removes its temporary store) and it exits with 128 + the signal's number.
    Only around work of the main thread that ends by itself: a server waiting on a thread that
    reads stdin would wait for that thread instead of stopping."""
    found = {}
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
            try:
                found[sig] = signal.signal(sig, _exit_for)
            except ValueError:  # not the main thread: signals are not ours to take
                break
    try:
        yield
    finally:
        for sig, handler in found.items():
            signal.signal(sig, handler)


def _exit_for(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: "1 call", "3 calls", "2 entries",
    "1 memory"; ``plural`` for a noun the rule gets wrong.  Never "call(s)"."""
    if n == 1:
        return f"{n:,} {noun}"
    if plural is None:
        if noun.endswith("y") and noun[-2:-1] not in tuple("aeiou"):
            plural = noun[:-1] + "ies"
        elif noun.endswith(("s", "x", "ch", "sh")):
            plural = noun + "es"
        else:
            plural = noun + "s"
    return f"{n:,} {plural}"


def print_json(data: Any) -> int:
    import json

    print(printable(json.dumps(data, indent=2, ensure_ascii=False, default=str), one_line=False))
    return 0


def warn(args: argparse.Namespace, warnings: Sequence[str]) -> None:
    """Warnings are printed once the command has succeeded: a failure is exactly one line."""
    args.warnings.extend(warnings)


def _broken_pipe() -> None:
    """What rich's console does when the reader of its output has gone (``| head``): raise, so ``main``
    ends quietly with 0, rather than rich's own exit with 1."""
    raise BrokenPipeError


class Out:
    """Tables and lines; rich when it is installed, plain aligned text otherwise."""

    def __init__(self) -> None:
        try:
            from rich.console import Console
        except ImportError:
            self.console = None
        else:
            self.console = Console(highlight=False, soft_wrap=True)
            self.console.on_broken_pipe = _broken_pipe  # type: ignore[method-assign]  # rich exits 1; `| head` is 0
            if not self.console.is_terminal and "COLUMNS" not in os.environ:
                # Piped or captured: rich would squeeze tables into 80 columns, folding numbers
                # mid-digit; a file has no width, so tables take the width their content needs.
                self.console.width = 200

    def line(self, text: str = "") -> None:
        text = printable(text, one_line=False)
        if self.console is not None:
            self.console.print(text, markup=False)
        else:
            print(text)

    def segments(self, parts: Sequence[tuple[str, str]]) -> None:
        """One line of ``(text, colour)`` parts: coloured with rich, plain text otherwise."""
        if self.console is None:
            print("".join(printable(t) for t, _ in parts))
            return
        from rich.text import Text

        line = Text()
        for text, colour in parts:
            line.append(printable(text), style=colour or None)
        self.console.print(line)

    def table(self, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        rows = [[printable(str(x)) for x in r] for r in rows]
        if self.console is not None:
            from rich.table import Table

            layout, boxed = _column_widths(headers, rows, self.console.width)
            t = Table(title=title, title_justify="left")
            if not boxed:
                t.box, t.pad_edge = None, False
            for i, h in enumerate(headers):
                if layout is None:
                    t.add_column(h, overflow="fold")
                else:  # an id, a number a person copies into the next command: whole, or folded last
                    w, whole = layout[i]
                    if len(h) > w:  # a header wraps at its spaces, whatever its cells do
                        h = _wrap_words(h, w)
                    t.add_column(h, width=w, no_wrap=whole, overflow="fold")
            for r in rows:
                t.add_row(*r)
            self.console.print(t)
            return
        widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
        print(title)
        for r in (headers, *rows):
            print("  " + "  ".join(str(x).ljust(w) for x, w in zip(r, widths)))


_ID = re.compile(r"[0-9a-f]{6,}(?:-[0-9a-f]+)*|[a-z]+_[0-9A-Za-z]{6,}")
_NUMBER = re.compile(r"[$€£]?[-+]?[\d,.]+[%×kKMGB]*|[–-]|\d{4}-\d\d-\d\d")


def _wrap_words(text: str, width: int) -> str:
    """``text`` on as many lines as its words need at ``width`` (a longer word folded)."""
    lines: list[str] = []
    words = [w[k:k + width] for w in text.split() for k in range(0, len(w), max(width, 1))]
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "\n".join(lines)


def _column_widths(headers: Sequence[str], rows: Sequence[Sequence[str]],
                   width: int) -> tuple[list[tuple[int, bool]] | None, bool]:
    """The table's layout at ``width`` columns: None when it fits as it is, else per column its
    width and whether its cells stay on one line, and whether the table keeps its box (only when
    everything fits in it as it is).

    Each column has a width that keeps it whole: its longest cell, or for text with spaces (a
    path, a date with its time) its longest word up to 20, wrapping at the spaces.  A table too
    wide for its box loses it; a narrower terminal then loses the wholeness of word-like columns (a model's name, the
    widest first), then of text, then of numbers; an id column stays whole longest.  What is no
    longer whole folds, sharing what is left in proportion to its natural width."""
    n = len(headers)
    natural = [max([len(r[i]) for r in rows if i < len(r)] + [max(map(len, h.split() or [""]))])
               for i, h in enumerate(headers)]
    if sum(natural) + 3 * n + 1 <= width:
        return None, True
    free = 4  # the least a folding column is given
    need, rank, one_line = [free] * n, [4] * n, [False] * n
    for i in range(n):
        cells = [r[i] for r in rows if i < len(r) and r[i]]
        if not cells:
            continue
        if any(" " in c or len(c) > 40 for c in cells):
            need[i], rank[i] = max(free, min(20, max(len(w) for c in cells for w in c.split() or [""]))), 2
            continue
        need[i], one_line[i] = max(map(len, cells)), True  # a header folds before a cell does
        values = [c for c in cells if not c.isalpha()] or cells  # a "total" row's label is not a value
        is_id = headers[i].split()[-1:] == ["id"] or all(_ID.fullmatch(c) for c in values)
        rank[i] = 0 if is_id or i == 0 else 1 if all(_NUMBER.fullmatch(c) for c in values) else 3  # the first names the row
    kept = [i for i in range(n) if rank[i] < 4]
    room = width - (2 * n - 2)  # no box: two spaces between columns
    while kept and sum(need[i] for i in kept) + free * (n - len(kept)) > room:
        kept.remove(max(kept, key=lambda i: (rank[i], need[i])))
    folding = [i for i in range(n) if i not in kept]
    spare = room - sum(need[i] for i in kept) - free * len(folding)
    widths = {}
    for i in kept:  # a header's words whole too, and text less wrapped, while there is room
        widths[i] = need[i] + max(0, min(spare, natural[i] - need[i]))
        spare -= widths[i] - need[i]
    left = room - sum(widths.values()) - free * len(folding)
    if left < 0:
        return None, False  # too narrow for any layout: everything folds
    total = sum(natural[i] - free for i in folding) or 1
    share = {i: free + min(natural[i] - free, left * (natural[i] - free) // total) for i in folding}
    return [(widths[i], one_line[i]) if i in kept else (share[i], False) for i in range(n)], False
