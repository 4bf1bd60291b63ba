"""Post-compact re-attachment: what a summary must not make the model forget.

After a compaction the model has lost the files it was reading and the user's
standing instructions, and would otherwise re-read them (or, worse, work from the
summary's memory of them).  So the summary message carries, re-read FROM DISK at
compaction time:

- the user's instruction files (``LOSSLESS.md``, ``CLAUDE.md``, ``AGENTS.md`` in the
  project directory), unless their text is already in the system prompt or the tail;
- up to 5 files most recently read (``file_path``/``path`` of Read-like tool calls in
  the replaced part), each ≤ 5,000 tokens, ≤ 50,000 in all — skipped when missing,
  binary, outside the project directory, or still in the verbatim tail unchanged.

The budgets are the seeds' and keep re-attachment from triggering the next
compaction by itself; the caller also passes the room left under the threshold.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

from ..config import READ_TOOLS as CONFIG_READ_TOOLS
from ..messages import Message, ToolResult, result_text
from ..stages.summary import READ_TOOLS as SUMMARY_READ_TOOLS
from ..tokens import TokenCounter

__all__ = ["Attachment", "ReattachConfig", "collect", "render"]

INSTRUCTION_FILES = ("LOSSLESS.md", "CLAUDE.md", "AGENTS.md")
_LINE_NO = re.compile(r"^\s*\d+(?:→|\t|:|\|)", re.M)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReattachConfig:
    enabled: bool = True
    root: str | os.PathLike[str] | None = None
    """The project directory; None means the working directory at compaction time."""
    max_files: int = 5
    max_tokens_per_file: int = 5_000
    max_total_tokens: int = 50_000
    instruction_files: tuple[str, ...] = INSTRUCTION_FILES
    """Names looked up in ``root``; each is capped at ``max_tokens_per_file``."""
    max_instruction_tokens: int = 10_000
    """Budget for the instruction files together (apart from the 50,000 for files read)."""
    read_tools: frozenset[str] = CONFIG_READ_TOOLS | SUMMARY_READ_TOOLS
    path_keys: tuple[str, ...] = ("file_path", "path", "notebook_path")
    allow_outside_root: bool = False
    """Re-read files outside ``root`` too (off: a path in a tool call is not a licence to read anywhere)."""


@dataclass(frozen=True, slots=True)
class Attachment:
    kind: Literal["file", "instructions"]
    path: str
    text: str
    tokens: int
    truncated: bool


def collect(replaced: Sequence[Message], tail: Sequence[Message], cfg: ReattachConfig, counter: TokenCounter, *,
            budget: int, system: Any = None) -> list[Attachment]:
    """What to re-attach, instruction files first, within ``budget`` tokens."""
    if not cfg.enabled or budget <= 0:
        return []
    root = Path(cfg.root) if cfg.root is not None else Path.cwd()
    try:
        root = root.resolve()
    except OSError:
        return []
    out: list[Attachment] = []
    seen_text = _flat(_system_text(system) + "\n" + "\n".join(_texts(tail)))
    left_instr = min(cfg.max_instruction_tokens, budget)
    for name in cfg.instruction_files:
        item = _read(root / name, name, "instructions", cfg, counter, min(cfg.max_tokens_per_file, left_instr))
        if item is None or _flat(item.text) in seen_text:
            continue
        out.append(item)
        left_instr -= item.tokens
        budget -= item.tokens
    left = min(cfg.max_total_tokens, budget)
    attached = 0
    for raw in _recent_paths(replaced, cfg):
        if attached >= cfg.max_files or left <= 0:
            break
        path = _resolve(raw, root, cfg)
        if path is None:
            continue
        item = _read(path, raw, "file", cfg, counter, min(cfg.max_tokens_per_file, left))
        if item is None or _still_in_tail(raw, path, item.text, tail, cfg, root):
            continue
        out.append(item)
        left -= item.tokens
        attached += 1
    return out


def render(attachments: Sequence[Attachment]) -> str:
    """The re-attached context as one Markdown section (empty string when there is none)."""
    if not attachments:
        return ""
    parts = ["## Re-attached context", "Read again from disk when this summary was made: these are the current "
             "contents, more recent than anything the summary says about them."]
    for a in attachments:
        tag = "instructions" if a.kind == "instructions" else "file"
        cut = ' truncated="true"' if a.truncated else ""
        body = a.text.replace("</lossless-summary", "<\\/lossless-summary").replace(f"</{tag}>", f"<\\/{tag}>")
        parts.append(f'<{tag} path="{a.path}"{cut}>\n{body}\n</{tag}>')
    return "\n\n".join(parts)


# -- internals ---------------------------------------------------------------------------

def _recent_paths(messages: Sequence[Message], cfg: ReattachConfig) -> list[str]:
    """Paths of Read-like calls, most recent first, each once."""
    seen: dict[str, None] = {}
    for m in reversed(messages):
        for use in reversed(m.tool_uses):
            if use.name not in cfg.read_tools:
                continue
            raw = next((use.input.get(k) for k in cfg.path_keys if isinstance(use.input.get(k), str)), None)
            if raw and raw.strip() and raw not in seen:
                seen[raw] = None
    return list(seen)


def _resolve(raw: str, root: Path, cfg: ReattachConfig) -> Path | None:
    try:
        path = Path(raw).expanduser()
        path = (path if path.is_absolute() else root / path).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    if not cfg.allow_outside_root and not path.is_relative_to(root):
        return None
    return path


def _read(path: Path, label: str, kind: Literal["file", "instructions"], cfg: ReattachConfig,
          counter: TokenCounter, cap: int) -> Attachment | None:
    if cap <= 0:
        return None
    try:
        if not path.is_file():
            return None
        with path.open("rb") as f:
            data = f.read(max(4096, cap * 16) + 1)
    except OSError:
        return None
    if b"\x00" in data:
        return None  # binary
    limit_hit = len(data) > max(4096, cap * 16)
    text = data.decode("utf-8", "replace")
    if not text.strip():
        return None
    tokens = counter.count_text(text)
    truncated = limit_hit
    while tokens > cap and text:
        text = text[: int(len(text) * min(0.9, cap / tokens))]
        tokens = counter.count_text(text)
        truncated = True
    if not text.strip():
        return None
    return Attachment(kind=kind, path=label, text=text, tokens=tokens, truncated=truncated)


def _still_in_tail(raw: str, path: Path, text: str, tail: Sequence[Message], cfg: ReattachConfig, root: Path) -> bool:
    """The tail read the same file and what it got is still what is on disk."""
    want = _flat(_LINE_NO.sub("", text))
    results = {r.tool_use_id: r for m in tail for r in m.tool_results}
    for m in tail:
        for use in m.tool_uses:
            if use.name not in cfg.read_tools:
                continue
            other = next((use.input.get(k) for k in cfg.path_keys if isinstance(use.input.get(k), str)), None)
            if other is None or (other != raw and _resolve(other, root, cfg) != path):
                continue
            result = results.get(use.id)
            if isinstance(result, ToolResult) and not result.is_error and want in _flat(
                    _LINE_NO.sub("", result_text(result))):
                return True
    return False


def _texts(messages: Sequence[Message]) -> list[str]:
    out: list[str] = []
    for m in messages:
        out.append(m.text)
        out.extend(result_text(r) for r in m.tool_results)
    return out


def _system_text(system: Any) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    return "\n".join(str(b.get("text", "")) for b in system if hasattr(b, "get"))


def _flat(text: str) -> str:
    return " ".join(text.split())
