"""Consolidation: a model merges duplicates, resolves contradictions and prunes stale memories.

Use::

    c = Consolidator(store, provider)
    c.maybe_run()                # at the end of a turn: runs only when every gate opens
    c.run(dry_run=True).plan.diff()   # what it would change (``lossless memory consolidate --dry-run``)
    store.undo(result.run)       # every change of a run is reversible

Gates (all must open): ≥ 24 h since the last consolidation; at most one gate
check per 10 minutes (per process); ≥ 5 sessions touched since the last one;
and the lock file ``.consolidate-lock``.  That file's modification time *is* the
time of the last consolidation; while a run holds it, it names the holder and the
prior time, and a holder that died loses it after 1 h.  A failed run puts the
old time back, so the next check may try again.

Invariants:

* Decisions are applied by id against the store as it is on disk when the model
  has answered, under the store lock: memories written during the call are
  untouched, and a memory changed during the call is not overwritten.
* A contradiction keeps both files: the *older* one (by ``updated``) is marked
  ``superseded_by`` the newer, whatever order the model named them in.
* Scopes are never mixed (see ``scope``): it reviews only the memories of the store's
  view, and a merge or supersede between memories of different scopes is skipped (a
  fact of one project never absorbs or hides another's, nor a user-wide memory).
* Removed files go to ``.trash/``; every change is in ``.changes.jsonl`` under the run id.
* Unattended (``maybe_run``, and so ``lifecycle.session_ended``) it never deletes,
  merges away, supersedes or rewrites a ``user`` or ``feedback`` memory: an action
  that would change one is kept whole as a ``Suggestion`` in ``.suggestions.jsonl``
  and the file stays byte for byte as it was.  A person accepts one with
  ``lossless memory suggestions --accept ID`` (logged and undoable like any run).
"""

from __future__ import annotations

import difflib
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from ..providers.base import Provider
from ._fs import read_text, refuse_link, write_atomic
from ._llm import ask, parse_json
from .model import TYPES, Memory, parse_time, render_memory
from .store import MemoryStore
from .suggestions import record as record_suggestion

LOCK_NAME = ".consolidate-lock"
CONSOLIDATE_SYSTEM = (
    "You consolidate an agent's long-term memories. Merge duplicates into one memory; when two memories "
    "contradict, say which is superseded by which; delete memories that are stale or useless. Leave good "
    "memories alone. Reply with JSON only:\n"
    '{"actions": [{"op": "merge", "ids": ["a", "b"], "name": "...", "type": "user|feedback|project|reference", '
    '"description": "one line", "body": "..."}, {"op": "supersede", "old": "<id>", "new": "<id>", '
    '"reason": "..."}, {"op": "delete", "id": "<id>", "reason": "..."}, {"op": "update", "id": "<id>", '
    '"description": "...", "body": "..."}]}\nReply {"actions": []} when nothing needs to change.'
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsolidationConfig:
    min_hours: float = 24.0
    """Hours since the last consolidation before another may run."""
    scan_interval: float = 600.0
    """Seconds between two gate checks in one process."""
    min_sessions: int = 5
    """Sessions touched since the last consolidation."""
    lock_ttl: float = 3600.0
    """Seconds after which a dead holder's lock may be taken."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    op: str
    id: str
    before: str | None
    after: str | None
    reason: str = ""
    memory: Memory | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Suggestion:
    """An action held back because it would change a protected memory: what it would do, for a person."""

    op: str
    ids: tuple[str, ...]
    reason: str
    changes: tuple[Change, ...]

    def as_entry(self, run: str | None) -> dict[str, Any]:
        return {"run": run, "op": self.op, "ids": list(self.ids), "reason": self.reason,
                "changes": [{"op": c.op, "id": c.id, "before": c.before, "after": c.after, "reason": c.reason}
                            for c in self.changes]}


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    changes: tuple[Change, ...] = ()
    skipped: tuple[str, ...] = ()
    suggestions: tuple[Suggestion, ...] = ()

    def diff(self) -> str:
        """A unified diff of every change (deleted files against /dev/null)."""
        out: list[str] = []
        for c in self.changes:
            out.append(f"# {c.op} {c.id}" + (f": {c.reason}" if c.reason else ""))
            out.extend(difflib.unified_diff(
                (c.before or "").splitlines(), (c.after or "").splitlines(),
                f"a/{c.id}.md" if c.before is not None else "/dev/null",
                f"b/{c.id}.md" if c.after is not None else "/dev/null (moved to trash)", lineterm=""))
        out.extend(f"# suggested (protected, not applied): {s.op} {', '.join(s.ids)}" + (f": {s.reason}" if s.reason
                   else "") for s in self.suggestions)
        out.extend(f"# skipped: {s}" for s in self.skipped)
        return "\n".join(out) + ("\n" if out else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsolidationResult:
    status: str
    """"applied", "suggested", "dry-run", "nothing-to-do", "locked", "failed", or the closed gate's name."""
    run: str | None = None
    plan: Plan = Plan()
    error: str | None = None


class Consolidator:
    def __init__(self, store: MemoryStore, provider: Provider | None, *, config: ConsolidationConfig | None = None,
                 sessions_dir: str | os.PathLike[str] | None = None, model: str | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store, self.provider, self.model, self.clock = store, provider, model, clock
        self.config = config or ConsolidationConfig()
        self.sessions_dir = Path(sessions_dir) if sessions_dir is not None else store.dir.parent / "sessions"
        self.lock_path = store.dir / LOCK_NAME
        self._last_check: float | None = None

    # -- gates --------------------------------------------------------------------
    def _lock_state(self) -> tuple[float, dict[str, Any] | None, float]:
        """(last consolidation time, holder or None, lock mtime)."""
        refuse_link(self.lock_path)
        try:
            mtime = self.lock_path.stat().st_mtime
            text = read_text(self.lock_path).strip()
        except FileNotFoundError:
            return 0.0, None, 0.0
        except UnicodeDecodeError:
            text = ""
        try:
            holder = json.loads(text) if text else None
        except ValueError:
            holder = None
        if isinstance(holder, dict) and "pid" in holder:
            return float(holder.get("prior", 0.0)), holder, mtime
        return mtime, None, mtime

    def last_consolidated(self) -> float:
        return self._lock_state()[0]

    def sessions_since(self, since: float) -> int:
        """Sessions touched after ``since``: a session directory, or a file in it (a
        transcript appended to), modified since.  Appending to a file does not change
        its directory's time, so a resumed session is seen only through its files."""
        if not self.sessions_dir.is_dir():
            return 0

        def touched(p: Path) -> bool:
            try:
                if p.stat().st_mtime > since:
                    return True
                return p.is_dir() and any(f.stat().st_mtime > since for f in p.iterdir())
            except OSError:  # a session removed while we look
                return False

        return sum(1 for p in self.sessions_dir.iterdir() if touched(p))

    def gate(self) -> str | None:
        """None when a consolidation may run now, else the name of the closed gate."""
        now = self.clock()
        last, holder, mtime = self._lock_state()
        if now - last < self.config.min_hours * 3600:
            return "too-soon"
        if self._last_check is not None and now - self._last_check < self.config.scan_interval:
            return "throttled"
        self._last_check = now
        if self.sessions_since(last) < self.config.min_sessions:
            return "few-sessions"
        if holder is not None and now - mtime < self.config.lock_ttl:
            return "locked"
        return None

    def maybe_run(self) -> ConsolidationResult | None:
        """Consolidate when every gate opens.  Unattended, it never changes what the user
        said (``user`` and ``feedback`` memories): an action on one becomes a suggestion
        for a person to accept (``lossless memory suggestions``)."""
        return None if self.gate() is not None else self.run(protect=PROTECTED_TYPES)

    # -- the lock ------------------------------------------------------------------
    def _acquire(self) -> float | None:
        with self.store.lock():
            last, holder, mtime = self._lock_state()
            if holder is not None and self.clock() - mtime < self.config.lock_ttl:
                return None
            info = {"pid": os.getpid(), "host": socket.gethostname(), "prior": last}
            write_atomic(self.lock_path, json.dumps(info).encode("utf-8"))
            return last

    def _release(self, *, success: bool, prior: float) -> None:
        with self.store.lock():
            write_atomic(self.lock_path, b"")
            stamp = self.clock() if success else prior
            os.utime(self.lock_path, (stamp, stamp), follow_symlinks=False)

    # -- the run ---------------------------------------------------------------------
    def run(self, *, dry_run: bool = False, protect: frozenset[str] = frozenset()) -> ConsolidationResult:
        """Consolidate now (no time or session gate; the lock still applies unless ``dry_run``)."""
        if self.provider is None:
            return ConsolidationResult(status="failed", error="no model configured for consolidation")
        prior = None if dry_run else self._acquire()
        if not dry_run and prior is None:
            return ConsolidationResult(status="locked")
        run = time.strftime("%Y%m%dT%H%M%S", time.gmtime(self.clock())) + f"-{os.getpid()}"
        success = False
        try:
            snapshot = {m.id: m for m in self.store.recent(MAX_REVIEWED)}
            if len(snapshot) < 2:
                success = True
                return ConsolidationResult(status="nothing-to-do", run=run)
            try:
                reply = ask(self.provider, system=CONSOLIDATE_SYSTEM, prompt=_catalog(snapshot.values()),
                            purpose="memory-consolidate", max_tokens=4096, model=self.model)
                actions = parse_json(reply)
                actions = actions.get("actions") if isinstance(actions, dict) else actions
                if not isinstance(actions, list):
                    raise ValueError('expected {"actions": [...]}')
            except Exception as exc:  # the model path failed: nothing changes, the gate reopens
                return ConsolidationResult(status="failed", run=run, error=f"{type(exc).__name__}: {exc}")
            with self.store.lock():
                plan = plan_changes(snapshot, {m.id: m for m in self.store.memories()}, actions, protect=protect)
                if dry_run:
                    return ConsolidationResult(status="dry-run", run=run, plan=plan)
                for sug in plan.suggestions:
                    record_suggestion(self.store, sug.as_entry(run))
                for c in plan.changes:
                    if c.after is None:
                        self.store.delete(c.id, run=run, reason=c.reason)
                    elif c.memory is not None:
                        self.store.put(c.memory, run=run, op=f"consolidate-{c.op}")
            success = True
            status = "applied" if plan.changes else "suggested" if plan.suggestions else "nothing-to-do"
            return ConsolidationResult(status=status, run=run, plan=plan)
        finally:
            if prior is not None:
                self._release(success=success, prior=prior)


MAX_REVIEWED = 200
"""Memories one run shows the model, the most recently updated: a prompt of 10,000 memories
would not fit a window, and older ones were reviewed by earlier runs."""
PROTECTED_TYPES = frozenset({"user", "feedback"})
"""What unattended consolidation never changes: what the user told us."""


def _catalog(memories: Iterable[Memory]) -> str:
    parts = []
    for m in memories:
        body = m.body if len(m.body) <= 1500 else m.body[:1500] + " …"
        scope = f"; scope: {m.scope}" if m.scope else ""
        parts.append(f"## {m.id}\ntype: {m.type}{scope}; updated: {m.updated}\ndescription: {m.description}\n{body}")
    return "Memories:\n\n" + "\n\n".join(parts)


def plan_changes(snapshot: dict[str, Memory], current: dict[str, Memory], actions: list[Any], *,
                 protect: frozenset[str] = frozenset()) -> Plan:
    """Turn the model's actions into changes against ``current`` (the disk now).

    An action that would change a memory whose type is in ``protect`` (delete it,
    merge it away or into another, supersede it, rewrite it) is not applied: it is
    kept whole as a ``Suggestion``.  Nothing the user said changes without a person.

    An action is skipped when a memory it names is gone, or was changed since the
    ``snapshot`` the model saw (a concurrent write wins over the consolidation).
    """
    changes: list[Change] = []
    suggestions: list[Suggestion] = []
    skipped: list[str] = []
    touched: set[str] = set()

    def usable(ids: list[str], what: str) -> bool:
        for i in ids:
            if i not in current or i not in snapshot:
                skipped.append(f"{what}: no memory {i!r}")
                return False
            if current[i].updated != snapshot[i].updated or current[i].body != snapshot[i].body:
                skipped.append(f"{what}: {i!r} changed during consolidation")
                return False
            if i in touched:
                skipped.append(f"{what}: {i!r} already changed by an earlier action")
                return False
        scopes = {current[i].scope for i in ids}
        if len(scopes) > 1:
            skipped.append(f"{what}: {', '.join(map(repr, ids))} are in different scopes "
                           f"({', '.join(sorted(s or 'unscoped' for s in scopes))}); scopes are never mixed")
            return False
        return True

    for a in actions:
        if not isinstance(a, dict):
            skipped.append(f"not an action: {str(a)[:60]}")
            continue
        op, reason = a.get("op"), str(a.get("reason", ""))
        planned = _action(a, op, reason, current, usable, skipped)
        if not planned:
            continue
        guarded = sorted({c.id for c in planned if current[c.id].type in protect})
        if guarded:
            suggestions.append(Suggestion(op=str(op), ids=tuple(dict.fromkeys(c.id for c in planned)),
                                          reason=reason or planned[0].reason, changes=tuple(planned)))
        else:
            changes.extend(planned)
        touched.update(c.id for c in planned)
    return Plan(changes=tuple(changes), skipped=tuple(skipped), suggestions=tuple(suggestions))


def _action(a: dict[str, Any], op: Any, reason: str, current: dict[str, Memory],
            usable: Callable[[list[str], str], bool], skipped: list[str]) -> list[Change]:
    """The changes one action would make (empty when it is skipped)."""
    out: list[Change] = []

    def change(op: str, old: Memory, new: Memory | None, why: str) -> None:
        out.append(Change(op=op, id=old.id, before=render_memory(old), after=render_memory(new) if new else None,
                          reason=why, memory=new))

    if op == "merge":
        ids = list(dict.fromkeys(str(i) for i in a.get("ids", []) if isinstance(i, str)))
        if len(ids) < 2:
            skipped.append("merge: needs two or more ids")
        elif usable(ids, "merge"):
            keep = max((current[i] for i in ids), key=lambda m: (parse_time(m.updated), m.id))
            mtype = a.get("type") if a.get("type") in TYPES else keep.type
            merged = keep.with_changes(
                name=str(a.get("name") or keep.name), description=str(a.get("description") or keep.description),
                type=mtype, body=str(a.get("body") or keep.body),
                extra={**keep.extra, "merged_from": sorted(i for i in ids if i != keep.id)})
            change("merge", keep, merged, reason or f"merged {', '.join(ids)}")
            for i in ids:
                if i != keep.id:
                    change("merge-remove", current[i], None, f"merged into {keep.id}")
    elif op == "supersede":
        pair = [str(a.get("old", "")), str(a.get("new", ""))]
        if pair[0] != pair[1] and usable(pair, "supersede"):
            older, newer = sorted((current[i] for i in pair), key=lambda m: (parse_time(m.updated), m.created))
            marked = older.with_changes(extra={**older.extra, "superseded_by": newer.id,
                                               "superseded_reason": reason or "contradicted by a newer memory"})
            change("supersede", older, marked, f"superseded by {newer.id}")
    elif op == "delete":
        mid = str(a.get("id", ""))
        if usable([mid], "delete"):
            change("delete", current[mid], None, reason or "pruned as stale")
    elif op == "update":
        mid = str(a.get("id", ""))
        if usable([mid], "update"):
            fields = {k: str(a[k]) for k in ("name", "description", "body") if a.get(k)}
            change("update", current[mid], current[mid].with_changes(**fields), reason)
    else:
        skipped.append(f"unknown action {str(op)!r}")
    return out
