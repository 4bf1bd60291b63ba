"""Scopes: several agents and projects share one memory directory without mixing.

A memory may carry a ``scope`` frontmatter key:

* ``user`` — about the person: seen by every project and every agent;
* ``project:<slug>`` — a fact of one project;
* ``agent:<slug>`` — one agent's own notes;
* absent — unscoped: seen by every view (what every memory was before scopes).

A store is opened with a ``View``::

    store = MemoryStore(directory, project="acme", agent="reviewer")
    store.view.sees("agent:writer")          # False: another agent's memory
    store.add(name=..., type="project", ...)  # written with scope "project:acme"

It sees ``user``, ``project:acme``, ``agent:reviewer`` and unscoped memories, and
nothing else: listing, search, retrieval, injection, its index, extraction and
consolidation all go through it.  ``MemoryStore(directory)`` (no project, no agent)
is unrestricted: it sees every scope, as a person administering the directory does.

A new memory gets the scope the writer gives, else ``default_scope``: ``user`` for
``user``/``feedback`` memories, ``project:<name>`` for ``project``/``reference`` ones
when the view names a project, else none.  A store never writes a memory it could
not read back (a scope outside its view is refused), and never reads, rewrites or
removes one outside its view: to that store, the memory does not exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import MemoryError_

__all__ = ["SCOPE_HELP", "View", "check_scope", "default_scope", "parse_scope"]

_SLUG = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
KINDS = ("user", "project", "agent")
SCOPE_HELP = "user, project:<name> or agent:<name>"


def parse_scope(value: object) -> str | None:
    """``value`` as a scope (None for an unscoped memory); ``ValueError`` saying what a scope
    looks like otherwise.  Names are lowercase letters, digits, ``.``, ``_`` and ``-``."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"scope must be {SCOPE_HELP}, not {value!r}")
    if value == "user":
        return value
    kind, sep, name = value.partition(":")
    if sep and kind in ("project", "agent") and _SLUG.fullmatch(name):
        return value
    raise ValueError(f"scope must be {SCOPE_HELP} (names in lowercase letters, digits, '.', '_', '-'), "
                     f"not {value!r}")


def check_scope(value: object) -> str | None:
    """``parse_scope`` raising ``MemoryError_`` (one line) instead of ``ValueError``."""
    try:
        return parse_scope(value)
    except ValueError as exc:
        raise MemoryError_(str(exc)) from None


def _name(kind: str, value: str | None) -> str | None:
    if value is None:
        return None
    scope = f"{kind}:{value}"
    check_scope(scope)
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class View:
    """Which scopes a store sees. ``View()`` (no project, no agent) sees every scope."""

    project: str | None = None
    agent: str | None = None

    def __post_init__(self) -> None:
        _name("project", self.project)
        _name("agent", self.agent)

    @property
    def unrestricted(self) -> bool:
        return self.project is None and self.agent is None

    @property
    def scopes(self) -> tuple[str, ...] | None:
        """The scopes seen besides unscoped memories (None: every scope)."""
        if self.unrestricted:
            return None
        return ("user",) + ((f"project:{self.project}",) if self.project else ()) + \
            ((f"agent:{self.agent}",) if self.agent else ())

    def sees(self, scope: str | None) -> bool:
        scopes = self.scopes
        return scope is None or scopes is None or scope in scopes

    def default_scope(self, memory_type: str) -> str | None:
        return default_scope(memory_type, project=self.project) if not self.unrestricted else None

    def check_writable(self, scope: str | None, memory_id: str) -> None:
        """Refuse a write this view could not read back."""
        if not self.sees(scope):
            raise MemoryError_(f"memory {memory_id!r} has scope {scope!r}, outside this store's view "
                               f"({self.describe()}): open the store with that project or agent")

    def describe(self) -> str:
        scopes = self.scopes
        return "every scope" if scopes is None else ", ".join(scopes) + " and unscoped memories"


def default_scope(memory_type: str, *, project: str | None) -> str | None:
    """The scope of a new memory of ``memory_type`` when the writer gives none."""
    if memory_type in ("user", "feedback"):
        return "user"
    return f"project:{project}" if project else None
