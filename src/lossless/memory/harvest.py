"""Memories from a recorded session: ``lossless memory extract SESSION [--dry-run]``.

Use::

    session = read_any("~/.claude/projects/x/abc.jsonl")     # or a mini-swe-agent trajectory
    result = extract_session(store, provider, session.messages, dry_run=True)
    for p in result.proposals: print(p.line())              # nothing written
    result = extract_session(store, provider, session.messages, run="extract-…")
    store.undo(result.run)                                   # every memory it wrote, reverted

What the model reads is the *dialogue*: what the user and the assistant said in text
(tool calls and their results are left out: they are where a session's bulk and its
pasted secrets live, and rarely what is worth remembering), with secrets redacted
before anything leaves the machine.  It is cut at message boundaries into chunks of at
most ``max_chars`` characters (a longer message is cut into pieces), one request per
chunk, oldest first: a long session costs several small requests (each well inside
any window: the chunk, the ≤ 100 existing memories it matches, the instructions),
never one request over the window.

Each chunk's proposals are planned against the store plus what the chunks before it
proposed, so a fact said twice in a session is proposed once, and a fact already
stored is a skip naming the memory it duplicates.  Without ``dry_run`` each chunk's
operations are applied once it is answered, under ``run`` (one id for the whole
session, so ``store.undo(run)`` reverts it all).  A chunk whose request fails is
named in ``errors`` and the others still run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..messages import Message
from ..providers.base import Provider
from .extract import (
    Proposal, _context, _existing, _said, apply_operations, ask_operations, dialogue_part, extraction_prompt,
    plan_operations,
)
from .model import Memory
from .redact import redact
from .store import MemoryStore

__all__ = ["CHUNK_CHARS", "Chunk", "SessionExtraction", "chunk_dialogue", "extract_session"]

CHUNK_CHARS = 12_000
"""Dialogue characters per request (about 3,000 tokens): the live extractor's ``max_chars``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunk:
    """Part of a session's dialogue: ``text`` is what messages ``start`` to ``stop - 1`` said,
    numbered from 1 (``[1] user: …``); ``said`` is each numbered message's text (redacted)."""

    start: int
    stop: int
    text: str
    messages: tuple[Message, ...]
    said: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionExtraction:
    proposals: tuple[Proposal, ...] = ()
    chunks: int = 0
    """Requests made (one per chunk)."""
    errors: tuple[str, ...] = ()
    """One line per chunk that produced nothing, naming its messages."""
    run: str | None = None
    """The change-log run of what was written (None for a dry run)."""
    written: int = 0
    """Memories added, updated or deleted."""
    write_errors: tuple[str, ...] = ()
    """Planned operations the store refused when they were written (a racing writer, a limit)."""


def chunk_dialogue(messages: Sequence[Message], max_chars: int = CHUNK_CHARS) -> list[Chunk]:
    """The dialogue of ``messages`` (redacted) in chunks of at most ``max_chars`` characters, at message
    boundaries where a message fits; every character said is in exactly one chunk, in order."""
    if max_chars < 100:
        raise ValueError(f"a chunk of {max_chars} characters cannot hold a message: use at least 100")
    chunks: list[Chunk] = []
    parts: list[str] = []
    size, start = 0, 0
    held: list[Message] = []
    texts: list[str] = []

    def close(stop: int) -> None:
        nonlocal parts, size, held, texts
        if parts:
            chunks.append(Chunk(start=start, stop=stop, text="\n\n".join(parts), messages=tuple(held),
                                said=tuple(texts)))
        parts, size, held, texts = [], 0, [], []

    for i, m in enumerate(messages):
        said = _said(m)
        if not said:
            continue
        said = redact(said)
        part = dialogue_part(len(parts) + 1, m.role, said)
        if parts and size + 2 + len(part) > max_chars:
            close(i)
            part = dialogue_part(1, m.role, said)
        if not parts:
            start = i
        rest = said
        while len(part) > max_chars:  # one message longer than a chunk: its own pieces
            cut = max_chars - (len(part) - len(rest))
            chunks.append(Chunk(start=i, stop=i + 1, text=part[:max_chars], messages=(m,), said=(rest[:cut],)))
            rest = rest[cut:]
            part = dialogue_part(1, f"{m.role} (continued)", rest)
        parts.append(part)
        held.append(m)
        texts.append(rest)
        size += len(part) + (2 if len(parts) > 1 else 0)
    close(len(messages))
    return chunks


def extract_session(store: MemoryStore, provider: Provider, messages: Sequence[Message], *, dry_run: bool = False,
                    max_chars: int = CHUNK_CHARS, model: str | None = None, scope: str | None = None,
                    run: str | None = None) -> SessionExtraction:
    """Propose (``dry_run``) or write the memories worth keeping from ``messages``; see the module doc."""
    chunks = chunk_dialogue(messages, max_chars)
    planned: dict[str, Memory | None] = {}  # dry run: what earlier chunks proposed, by id (None: deleted)
    proposals: list[Proposal] = []
    errors: list[str] = []
    write_errors: list[str] = []
    written = 0
    for n, chunk in enumerate(chunks, 1):
        existing = _existing(store, chunk.messages)
        if dry_run:
            existing = [m for m in existing if planned.get(m.id, m) is not None]
            existing += [m for m in planned.values() if m is not None and m not in existing]
        try:
            ops = ask_operations(provider, extraction_prompt(existing, chunk.text), model=model)
        except Exception as exc:  # one chunk's failure costs that chunk alone
            errors.append(f"chunk {n}/{len(chunks)} (messages {chunk.start}-{chunk.stop - 1}): "
                          f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
            continue
        context, sources = _context(chunk.messages), chunk.said
        if dry_run:
            current = {m.id: m for m in store.memories()}
            for mid, m in planned.items():
                if m is None:
                    current.pop(mid, None)
                else:
                    current[mid] = m
            plan = plan_operations(current, ops, view=store.view, context=context, sources=sources, scope=scope,
                                   taken=lambda i: i not in current and store.path_for(i).exists())
            for p in plan:
                if p.op in ("add", "update"):
                    planned[p.id] = p.memory
                elif p.op == "delete":
                    planned[p.id] = None
            proposals.extend(plan)
        else:
            result = apply_operations(store, ops, run=run, context=context, sources=sources, scope=scope)
            proposals.extend(result.proposals)
            written += len(result.added) + len(result.updated) + len(result.deleted)
            notes = {p.note for p in result.proposals if p.op == "skip"}
            write_errors.extend(s for s in result.skipped if s not in notes)
    return SessionExtraction(proposals=tuple(proposals), chunks=len(chunks), errors=tuple(errors),
                             run=None if dry_run else run, written=written, write_errors=tuple(write_errors))
