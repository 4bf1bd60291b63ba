"""Extraction: after a turn ends without tool use, a model proposes memory operations.

Use (in the agent loop)::

    extractor = Extractor(store, provider)
    ...
    if response.stop_reason != "tool_use":
        extractor.turn_ended(messages)       # records; runs when the burst is over
    extractor.poll()                         # e.g. before waiting for the user; or flush() at exit

Rules:

* Debounced: turns that end within ``debounce`` seconds of each other form one
  burst and give one extraction, covering every message since the last one —
  found by the last messages it covered, not by a count, so a view that a stage
  shortened in the middle still yields every new message.
* The memories lossless attached to user messages are not dialogue: they are
  left out of what the model reads, so they are never extracted again.
* Skipped (and the cursor advanced) when the agent wrote memories itself with
  the memory tool during the burst.
* The model answers ``{"operations": [...]}`` with ``add`` / ``update`` /
  ``delete`` naming existing memories by id, or nothing.  An ``add`` that
  duplicates a stored memory (same id, or the same description or body) is not
  written twice.  Secrets are redacted by the store before anything is written.
* The dialogue's messages are numbered (``[3] user: …``) and an ``add`` names the ones
  its fact came from (``"from": [3]``).  The memory keeps those messages and the
  ``SOURCE_TURNS`` on each side as its ``context`` (``source_context``: at most
  ``SOURCE_CONTEXT_CHARS``, redacted like everything); without a usable ``from`` it
  keeps the last ``CONTEXT_CHARS`` of what the user said.  Retrieval ranks the context
  as a low-weight field, so a memory is found by the words of the conversation it came
  from too.
* The model sees the 100 existing memories the dialogue matches best (then the most
  recent), not the whole store.
* Any model failure or unparsable reply writes nothing and is reported in the
  ``Extraction`` result; it never raises into the agent loop.
* Deferred (the burst kept pending, reason "deferred") when the provider failed
  transiently (429, 529, 5xx, no answer) or skipped the call because it is failing
  (``ProviderUnavailable``, no request sent): a later poll extracts the same messages.
* Scoped (see ``scope``): the model sees, and its operations may name, only the
  memories of the store's view; what it adds gets the view's default scope.

Operations are planned before anything is written (``plan_operations``, pure): what
each would write, or why it is skipped (``duplicates <id>``, ``no such memory``).
``lossless memory extract SESSION --dry-run`` prints that plan; ``extract_session``
(in ``harvest``) covers a whole recorded session in chunks.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Sequence

from ..errors import ProviderError, ProviderUnavailable, LosslessError
from ..messages import Message, Text
from ..providers.base import Provider
from ..providers.retry import is_retryable
from ._llm import ask, parse_json
from .model import TYPES, Memory, one_line, slugify
from .redact import redact
from .scope import View
from .store import MemoryStore
from .tool import wrote_memories

EXTRACT_SYSTEM = (
    "You maintain an agent's long-term memory. From the dialogue, keep only what will help in future "
    "sessions: the user's preferences (type user), feedback on how to work (feedback), project facts and "
    "decisions (project), where things are (reference). Never store secrets, passwords or keys. Do not "
    "repeat what an existing memory already says: update it by id instead. Reply with JSON only:\n"
    '{"operations": [{"op": "add", "name": "...", "type": "user|feedback|project|reference", '
    '"description": "one line", "body": "...", "from": [<number of each message it comes from>]}, '
    '{"op": "update", "id": "<existing id>", '
    '"description": "...", "body": "..."}, {"op": "delete", "id": "<existing id>", "reason": "..."}]}\n'
    'Reply {"operations": []} when there is nothing new. The dialogue\'s messages are numbered [n]: give '
    'each add the numbers of the messages its fact comes from.'
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Extraction:
    """What one extraction did. ``error`` is set when the model path failed (nothing written)."""

    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    """Operations not applied, each with the reason."""
    error: str | None = None
    reason: str = "ran"
    """"ran", "agent-wrote-memories", "nothing-new" or "deferred"."""
    proposals: tuple[Proposal, ...] = ()
    """What the model proposed, as planned against the store (written unless a dry run)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """One proposed operation as it applies to the store now.  ``op`` "skip" is one that will
    not be applied; ``note`` says why (``duplicates <id>``, ``no such memory``, …)."""

    op: Literal["add", "update", "delete", "skip"]
    id: str
    memory: Memory | None = None
    """What ``add``/``update`` would write (secrets redacted); None for ``delete`` and ``skip``."""
    changes: Mapping[str, str] | None = None
    """The fields an ``update`` changes."""
    note: str = ""
    """``skip``: why; ``delete``: the model's reason."""

    def line(self) -> str:
        """The proposal in one line, as ``lossless memory extract`` prints it."""
        m = self.memory
        if self.op == "add" and m is not None:
            return f"add     {m.id} ({m.type}, {m.scope or 'unscoped'}): {m.description or one_line(m.body)[:80]}"
        if self.op == "update" and m is not None:
            return f"update  {m.id}: {', '.join(sorted(self.changes or {}))} -> {m.description or one_line(m.body)[:80]}"
        if self.op == "delete":
            return f"delete  {self.id}" + (f": {self.note}" if self.note else "")
        return f"skip    {self.note}"


def _said(m: Message) -> str:
    """What the message says, without the memory attachments lossless added to it."""
    return "\n".join(b.text for b in m.content
                     if isinstance(b, Text) and b.extra.get("lossless") != "memory").strip()


def _spoken(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """(role, what was said) of each message that says something: the dialogue, message ``n``
    of it (numbered from 1) being item ``n - 1``."""
    return [(m.role, said) for m in messages if (said := _said(m))]


def dialogue_part(n: int, role: str, said: str) -> str:
    """Message ``n`` of a dialogue as the extraction model reads it."""
    return f"[{n}] {role}: {said}"


def _dialogue(messages: Sequence[Message], max_chars: int) -> str:
    text = "\n\n".join(dialogue_part(n, role, said) for n, (role, said) in enumerate(_spoken(messages), 1))
    return text[-max_chars:]


CONTEXT_CHARS = 400
"""Without a source named, the last characters of what the user said, kept beside a memory as its
``context`` (see ``catalog.memory_doc``)."""
SOURCE_TURNS = 2
"""The messages on each side of a fact's source kept in its context: a reply often names its topic
only in the turns around it (two each side ranked best on LoCoMo's dialog turns, RESULTS §4)."""
SOURCE_CONTEXT_CHARS = 1_200


def source_context(said: Sequence[str], cited: Sequence[int], fact: str = "") -> str:
    """The dialogue a fact came from: messages ``cited`` (indexes into ``said``) and the
    ``SOURCE_TURNS`` on each side, in order, one line each — the cited ones first, then
    the nearest, within ``SOURCE_CONTEXT_CHARS``.  Cited messages too long for that keep,
    each, the stretch that shares the most words with ``fact`` (a fact from the end of a
    long paste keeps the end).  Redacted; "" when nothing cited is in ``said``."""
    lines = [one_line(t) for t in said]
    at = sorted({i for i in cited if 0 <= i < len(lines)})
    if at and sum(len(lines[i]) + 1 for i in at) > SOURCE_CONTEXT_CHARS:
        share = SOURCE_CONTEXT_CHARS // len(at) - 1
        for i in at:
            lines[i] = _stretch(lines[i], share, fact)
    picked, budget = set(at), SOURCE_CONTEXT_CHARS - sum(len(lines[i]) + 1 for i in at)
    for d in range(1, SOURCE_TURNS + 1):
        for j in (j for i in at for j in (i - d, i + d)):
            if 0 <= j < len(lines) and j not in picked and len(lines[j]) + 1 <= budget:
                picked.add(j)
                budget -= len(lines[j]) + 1
    return redact(" ".join(lines[j] for j in sorted(picked))[:SOURCE_CONTEXT_CHARS])


def _stretch(text: str, size: int, fact: str) -> str:
    """The ``size`` characters of ``text`` holding the most distinct words of ``fact`` (the first such; the
    start of ``text`` when none), in steps of a tenth of ``size``."""
    if len(text) <= size:
        return text
    wanted = {w for w in re.findall(r"[^\W_]{3,}", fact.lower())}
    step = max(1, size // 10)
    best, best_at = 0, 0
    for start in range(0, len(text) - size + step, step):
        start = min(start, len(text) - size)
        found = len(wanted & set(re.findall(r"[^\W_]{3,}", text[start:start + size].lower())))
        if found > best:
            best, best_at = found, start
    return text[best_at:best_at + size]


def _cited(op: dict[str, Any]) -> list[int]:
    """The 0-based messages an operation's ``from`` names (numbers from 1; junk ignored)."""
    raw = op.get("from")
    out = []
    for v in raw if isinstance(raw, list) else [raw]:
        if (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, str) and v.strip().isdigit()):
            out.append(int(v) - 1)
    return out


PROMPT_MEMORIES = 100
"""Existing memories shown to the model: those the dialogue's words match best, then the most recent."""


def _context(messages: Sequence[Message]) -> str:
    """What the user said in the dialogue, latest last, within ``CONTEXT_CHARS``: indexed at a low
    weight with each memory extracted from it, it finds the memory by the words around it."""
    said = " ".join(one_line(t) for m in messages if m.role == "user" and (t := _said(m)))
    return said[-CONTEXT_CHARS:].lstrip()


def _existing(store: MemoryStore, messages: Sequence[Message]) -> list:
    query = " ".join(_said(m) for m in messages if m.role == "user")[-2000:]
    ranked = [m for m, _ in store.search(query, PROMPT_MEMORIES // 2)] if query.strip() else []
    seen = {m.id for m in ranked}
    return (ranked + [m for m in store.catalog.top(PROMPT_MEMORIES)[0] if m.id not in seen])[:PROMPT_MEMORIES]


def _norm(text: str) -> str:
    return one_line(text).lower()


class Extractor:
    """Per-session extraction state (cursor and debounce clock) over one store."""

    def __init__(self, store: MemoryStore, provider: Provider, *, debounce: float = 30.0, max_chars: int = 12_000,
                 model: str | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.store, self.provider = store, provider
        self.debounce, self.max_chars, self.model, self.clock = debounce, max_chars, model, clock
        self._covered: tuple[Message, ...] = ()
        """The last messages the previous extraction covered: where the next one starts."""
        self._pending: Sequence[Message] | None = None
        self._last_turn = 0.0
        self.runs = 0

    def turn_ended(self, messages: Sequence[Message]) -> None:
        """Record that a turn ended without tool use; ``messages`` is the full history so far."""
        self._pending = tuple(messages)
        self._last_turn = self.clock()

    def poll(self) -> Extraction | None:
        """Run the pending extraction if the burst is over (``debounce`` seconds of quiet)."""
        if self._pending is None or self.clock() - self._last_turn < self.debounce:
            return None
        return self.flush()

    def flush(self) -> Extraction | None:
        """Run the pending extraction now (at session end), if any."""
        if self._pending is None:
            return None
        messages, self._pending = self._pending, None
        new = self._since_covered(messages)
        covered, self._covered = self._covered, tuple(messages[-2:])
        if wrote_memories(u for m in new for u in m.tool_uses):
            return Extraction(reason="agent-wrote-memories")
        if not any(_said(m) for m in new):
            return Extraction(reason="nothing-new")
        result = self.extract(new)
        if result.reason == "deferred":  # nothing was sent: try the same burst again later
            self._pending, self._covered = messages, covered
        else:
            self.runs += 1
        return result

    def _since_covered(self, messages: Sequence[Message]) -> Sequence[Message]:
        """The messages after the last ones already covered (all of them when those
        were compacted away, or on the first extraction)."""
        k = len(self._covered)
        if k:
            for end in range(len(messages), k - 1, -1):
                if tuple(messages[end - k : end]) == self._covered:
                    return messages[end:]
        return messages

    def extract(self, messages: Sequence[Message]) -> Extraction:
        """One extraction over ``messages`` (no debounce): ask, then apply against the store."""
        prompt = extraction_prompt(_existing(self.store, messages), _dialogue(messages, self.max_chars))
        try:
            ops = ask_operations(self.provider, prompt, model=self.model)
        except ProviderError as exc:
            transient = isinstance(exc, ProviderUnavailable) or is_retryable(exc)
            return Extraction(error=f"{type(exc).__name__}: {exc}", reason="deferred" if transient else "ran")
        except Exception as exc:  # a failed side-call writes nothing and never breaks the loop
            return Extraction(error=f"{type(exc).__name__}: {exc}")
        return apply_operations(self.store, ops, context=_context(messages),
                                sources=[said for _, said in _spoken(messages)])


def extraction_prompt(existing: Sequence[Memory], dialogue: str) -> str:
    catalog = "\n".join(f"- {m.id} ({m.type}): {m.description}" for m in existing) or "(none)"
    return f"Existing memories:\n{catalog}\n\nDialogue:\n{dialogue}"


def ask_operations(provider: Provider, prompt: str, *, model: str | None = None) -> list[Any]:
    """The operations the model proposes for ``prompt``; ``ProviderError`` or ``ValueError``
    (an unparsable reply) when it gives none."""
    ops = parse_json(ask(provider, system=EXTRACT_SYSTEM, prompt=prompt, purpose="memory-extract",
                         max_tokens=2048, model=model))
    ops = ops.get("operations") if isinstance(ops, dict) else ops
    if not isinstance(ops, list):
        raise ValueError('expected {"operations": [...]}')
    return ops


def plan_operations(current: Mapping[str, Memory], ops: Sequence[Any], *, view: View = View(),
                    context: str = "", sources: Sequence[str] = (), scope: str | None = None,
                    taken: Callable[[str], bool] = lambda _id: False) -> list[Proposal]:
    """What ``ops`` would do to a store holding ``current`` (the memories its view sees), in order,
    each planned against the ones before it (two adds of one fact: the second is a duplicate).

    An ``add`` that repeats a memory (same id, description or body, after normalising
    spaces and case) is a skip naming it; ``update``/``delete`` of an id not in ``current``
    (another agent's memory included) is a skip.  An added memory's id avoids ``taken``
    ids (files outside the view) with a numeric suffix; its scope is ``scope``, else the
    view's default for its type; its context is ``source_context(sources, from)`` when the
    add names its source messages in ``sources`` (the dialogue, message 1 first), else
    ``context``.  Pure: nothing is read or written."""
    current = dict(current)
    # normalised text -> the ids holding it (several memories may share one, e.g. after an update)
    seen_desc: dict[str, dict[str, None]] = {}
    seen_body: dict[str, dict[str, None]] = {}

    def index(m: Memory, *, keep: bool = True) -> None:
        for seen, text in ((seen_desc, m.description), (seen_body, m.body)):
            key = _norm(text)
            if not key:
                continue
            if keep:
                seen.setdefault(key, {})[m.id] = None
            elif m.id in seen.get(key, {}):
                del seen[key][m.id]
                if not seen[key]:
                    del seen[key]

    for m in current.values():
        index(m)
    out: list[Proposal] = []
    for op in ops:
        kind = op.get("op") if isinstance(op, dict) else None
        try:
            if kind == "add":
                assert isinstance(op, dict)
                fact = f"{op.get('description') or ''} {op.get('body') or ''}"
                p = _plan_add(op, current, seen_desc, seen_body, view=view,
                              context=source_context(sources, _cited(op), fact) or context, scope=scope,
                              taken=taken)
                if p.memory is not None:
                    current[p.id] = p.memory
                    index(p.memory)
            elif kind in ("update", "delete"):
                assert isinstance(op, dict)
                mid = str(op.get("id", ""))
                if mid not in current:
                    p = Proposal(op="skip", id=mid, note=f"{kind} {mid!r}: no such memory")
                elif kind == "delete":
                    p = Proposal(op="delete", id=mid, note=str(op.get("reason", "extraction")))
                    index(current.pop(mid), keep=False)
                else:
                    changes = {k: redact(str(op[k])) for k in ("name", "description", "body") if op.get(k)}
                    if op.get("type") in TYPES:
                        changes["type"] = op["type"]
                    new = current[mid].with_changes(**changes)
                    p = Proposal(op="update", id=mid, memory=new, changes=changes)
                    index(current[mid], keep=False)
                    current[mid] = new
                    index(new)
            elif kind in (None, "none", "nothing"):
                continue
            else:
                p = Proposal(op="skip", id="", note=f"unknown op {json.dumps(op)[:80]}")
        except LosslessError as exc:
            p = Proposal(op="skip", id="", note=f"{kind}: {exc}")
        out.append(p)
    return out


def _plan_add(op: dict[str, Any], current: dict[str, Memory], seen_desc: dict[str, dict[str, None]],
              seen_body: dict[str, dict[str, None]],
              *, view: View, context: str, scope: str | None, taken: Callable[[str], bool]) -> Proposal:
    name, body = redact(str(op.get("name") or "")), redact(str(op.get("body") or ""))
    desc, mtype = one_line(redact(str(op.get("description") or ""))), op.get("type", "project")
    if mtype not in TYPES:
        mtype = "project"
    mid = slugify(name or desc)
    dup = current.get(mid) and mid or next(iter(seen_desc.get(_norm(desc)) or seen_body.get(_norm(body)) or ()), "")
    if dup:
        return Proposal(op="skip", id=mid, note=f"add {mid}: duplicates {dup}")
    free, n = mid, 1
    while taken(free) and free not in current:
        n += 1
        free = f"{mid[:60]}-{n}"
    memory = Memory(id=free, name=name or mid, description=desc, type=mtype, body=body, created="", updated="",
                    extra={"context": context} if context else {}, scope=scope or view.default_scope(mtype))
    return Proposal(op="add", id=free, memory=memory)


def apply_operations(store: MemoryStore, ops: Sequence[Any], *, run: str | None = None,
                     context: str = "", sources: Sequence[str] = (), scope: str | None = None) -> Extraction:
    """Plan ``ops`` (``plan_operations``) and apply them, under the store lock, against the
    memories of the store's view as they are now.  Each added memory keeps the dialogue it
    came from as its context (its cited messages of ``sources``, else ``context``); ``run``
    names them all in the change log (``store.undo(run)`` reverts them)."""
    added, updated, deleted, skipped = [], [], [], []
    with store.lock():
        current = {m.id: m for m in store.memories()}
        plan = plan_operations(current, ops, view=store.view, context=context, sources=sources, scope=scope,
                               taken=lambda i: store.path_for(i).exists())
        for p in plan:
            try:
                if p.op == "add" and p.memory is not None:
                    store.create(p.memory, run=run, op="add")
                    added.append(p.id)
                elif p.op == "update":
                    store.update(p.id, run=run, **dict(p.changes or {}))
                    updated.append(p.id)
                elif p.op == "delete":
                    store.delete(p.id, run=run, reason=p.note)
                    deleted.append(p.id)
                else:
                    skipped.append(p.note)
            except LosslessError as exc:
                skipped.append(f"{p.op}: {exc}")
    return Extraction(added=tuple(added), updated=tuple(updated), deleted=tuple(deleted), skipped=tuple(skipped),
                      proposals=tuple(plan))
