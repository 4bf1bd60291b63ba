"""What a session's context holds, read from its transcript under the store.

Use::

    report = context_stats(Path(".lossless"))                  # the most recent session
    report = context_stats(root, "3f2a…", window=128_000, artifacts=ArtifactStore(root))
    report.text, report.data

The figures are ``lossless inspect``'s (``inspect_messages`` over what
``read_any`` reads) taken on the context as the transcript last shows it — the
messages since the last compaction boundary, which begin with the summary and
tail the model saw after it — plus the compactions the transcript recorded and
the handles in that context, each checked against the artifact store.  The
transcript logs a message as it entered; a tool result persisted or cleared
since is found by its content hash in the store and reported with its handle,
so the handles listed are the ones the model's context holds.

A session id is only ever matched against the directories that exist under
``<store>/sessions``; it is never joined into a path, so no id reaches outside.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..dialects.detect import read_any
from ..errors import StoreError
from ..inspect import inspect_messages
from ..markers import (
    CLEARED_PREFIX, FOLDED_PREFIX, PERSISTED_OPEN, SNIPPED_PREFIX, SUMMARY_OPEN, THINNED_PREFIX, counted, handles_in, is_marker,
)
from ..messages import Message, ToolResult, block_text
from ..account.archive import original_text
from ..store import ArtifactStore, handle_for, store_dir
from ..tokens import TokenCounter, default_counter

DEFAULT_WINDOW = 200_000
"""As ``lossless inspect``: the transcript does not record the model's window."""
TOP = 5
MAX_HANDLES = 100
TRANSCRIPT = "transcript.jsonl"


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    text: str
    data: Mapping[str, Any]


def sessions(root: Path) -> list[tuple[str, Path]]:
    """``(id, transcript path)`` of every session under ``root/sessions``, most recently written first.
    A transcript that is a symbolic link is left out (lossless never follows links in its store)."""
    base = root / "sessions"
    found: list[tuple[float, str, Path]] = []
    try:
        entries = list(os.scandir(base))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise StoreError(f"cannot list {base}: {exc.strerror or exc}") from None
    for entry in entries:
        path = Path(entry.path) / TRANSCRIPT
        try:
            st = path.lstat()
        except OSError:
            continue
        if entry.is_dir(follow_symlinks=False) and path.is_file() and not path.is_symlink():
            found.append((st.st_mtime, entry.name, path))
    found.sort(key=lambda t: (t[0], t[1]), reverse=True)
    return [(name, path) for _, name, path in found]


def find_session(root: Path, session: str | None) -> tuple[str, Path]:
    """The session named ``session`` (or the most recent one); ``StoreError`` naming what exists."""
    known = sessions(root)
    base = root / "sessions"
    if not known:
        raise StoreError(f"no session transcripts in {base}: a lossless run (ContextManager, the proxy) "
                         "writes them there; pass --store DIR for another store")
    match = known[0] if session is None else next((k for k in known if k[0] == session), None)
    if match is not None:
        store_dir(root, "sessions", match[0], create=False)  # a link on the way must not lead out of the store
        return match
    recent = ", ".join(name for name, _ in known[:5])
    raise StoreError(f"no session {session!r} in {base} (most recent: {recent}); "
                     "omit the id for the most recent one")


def context_stats(root: Path, session: str | None = None, *, window: int = DEFAULT_WINDOW,
                  artifacts: ArtifactStore | None = None) -> Report:
    """The report on ``session`` (default: the most recent) of the store at ``root``."""
    name, path = find_session(root, session)
    try:
        s = read_any(path)
    except RecursionError:
        raise StoreError(f"{path}: nested too deeply to read") from None
    start = s.segments()[-1][0] if s.messages else 0
    context = s.messages[start:]
    counter = default_counter()
    report = inspect_messages(context, system=s.system, window=window, top=TOP, counter=counter)
    store = artifacts or ArtifactStore(root)
    handles = _handles(context)
    moved = _moved_results(context, store, counter)
    for i, _, handle in moved:
        handles.setdefault(handle, ("result moved out since", i))
    where = {(i, tokens): handle for i, tokens, handle in moved}
    for item in report["biggest"]:
        item["moved_to"] = where.get((item["message"], item["tokens"])) if item["type"] == "tool_result" else None
    recallable = [h for h in handles if h in store]
    compactions = [{"trigger": b.trigger, "tokens_before": b.pre_tokens, "tokens_after": b.post_tokens,
                    "at_message": b.index} for b in s.boundaries]
    data = {
        "session": name,
        "transcript": str(path),
        "messages_logged": len(s.messages),
        "compactions": compactions,
        "context": {k: report[k] for k in ("messages", "tokens", "system_tokens", "window", "percent_of_window",
                                           "by_role", "by_type", "by_tool", "biggest")},
        "moved_out": {"results": len(moved), "tokens": sum(tokens for _, tokens, _ in moved)},
        "handles": {"count": len(handles), "recallable": len(recallable),
                    "listed": [{"handle": h, "in": kind, "message": i, "recallable": h in store}
                               for h, (kind, i) in list(handles.items())[:MAX_HANDLES]]},
        "warnings": list(s.warnings),
    }
    return Report(text=_render(data), data=data)


_KINDS = ((PERSISTED_OPEN, "persisted output"), (CLEARED_PREFIX, "cleared result"),
          (SNIPPED_PREFIX, "snipped messages"), (SUMMARY_OPEN, "summary"), (FOLDED_PREFIX, "folded result"),
          (THINNED_PREFIX, "thinned reply"))


def _handles(context: Sequence[Message]) -> dict[str, tuple[str, int]]:
    """Each distinct handle in ``context``, in order, with the marker it first appears in and that message."""
    found: dict[str, tuple[str, int]] = {}
    for i, m in enumerate(context):
        for b in m.content:
            text = block_text(b)
            kind = next((k for prefix, k in _KINDS if text.startswith(prefix)), "mentioned")
            for h in handles_in(text):
                found.setdefault(h, (kind, i))
    return found


def _moved_results(context: Sequence[Message], store: ArtifactStore,
                   counter: TokenCounter) -> list[tuple[int, int, str]]:
    """The tool results of ``context`` that a stage moved out after the transcript logged them
    (persist and micro-compact store a result's text under its content hash): ``(message index,
    tokens, handle)`` of each.  The transcript keeps such a result whole; the model sees its marker."""
    moved: list[tuple[int, int, str]] = []
    for i, m in enumerate(context):
        for b in m.content:
            if isinstance(b, ToolResult):
                text = original_text(b)
                handle = handle_for(text.encode("utf-8", "surrogatepass"))
                if text and not is_marker(text) and handle in store:
                    moved.append((i, counter.count_block(b), handle))
    return moved


def _render(d: Mapping[str, Any]) -> str:
    c = d["context"]
    lines = [
        f"session {d['session']} ({d['transcript']})",
        f"context since the last compaction, as logged: {c['messages']} messages, ~{c['tokens']:,} tokens "
        f"({c['percent_of_window']}% of a {c['window']:,}-token window); {d['messages_logged']} messages logged "
        "in all",
    ]
    for key, title in (("by_role", "role"), ("by_type", "block type"), ("by_tool", "tool")):
        if c[key]:
            lines.append(f"  by {title}: " + ", ".join(f"{k} {v:,}" for k, v in c[key].items()))
    for it in c["biggest"]:
        tool = f" ({it['tool']})" if it["tool"] else ""
        gone = f" — moved out since, recall {it['moved_to']}" if it["moved_to"] else ""
        lines.append(f"  biggest: message {it['message']} {it['type']}{tool} {it['tokens']:,} tokens{gone}: "
                     f"{it['preview'][:80]}")
    out = d["moved_out"]
    if out["results"]:
        lines.append(f"  moved out since (persisted or cleared; markers with handles in context): "
                     f"{counted(out['results'], 'tool result')}, ~{out['tokens']:,} of those tokens")
    comps = d["compactions"]
    lines.append(f"compactions: {len(comps)}" + ("" if comps else " (none yet)"))
    for i, b in enumerate(comps, 1):
        before = "?" if b["tokens_before"] is None else f"{b['tokens_before']:,}"
        after = "?" if b["tokens_after"] is None else f"{b['tokens_after']:,}"
        lines.append(f"  {i}. {b['trigger']}: {before} → {after} tokens")
    h = d["handles"]
    lines.append(f"handles in context: {h['count']} ({h['recallable']} recallable with the recall tool)")
    lines += [f"  {x['handle']}  ({x['in']}, message {x['message']})" + ("" if x["recallable"] else " — not in the store")
              for x in h["listed"][:20]]
    if h["count"] > 20:
        lines.append(f"  … and {h['count'] - 20} more")
    if d["warnings"]:
        lines.append(f"({counted(len(d['warnings']), 'reader warning')}: {d['warnings'][0]})")
    return "\n".join(lines)
