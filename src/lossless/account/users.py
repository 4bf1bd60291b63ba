"""The user's own words for an account: which messages to quote verbatim, and how.

    entries, hidden = quote_users(texts, budget=6_000, task_budget=8_000, put=store.put_text)
    body = "\\n\\n".join(entries)

``texts`` are the user's messages, oldest first (the first one is the task).  The
entries come back oldest first and read as they stand:

- the task, whole when it fits ``task_budget`` characters, else its head and its tail
  around ``[… N characters omitted — recall <handle>]`` — the tail is kept because a
  harness puts its final instructions (how to submit) there;
- a message repeated word for word (after stripping whitespace, like a harness's format
  reminder) appears once, at its latest position, followed by ``(repeated N×)``; messages
  that differ only in their numbers ("found 2 actions", "found 3 actions") appear once too,
  the latest verbatim, the others whole behind one handle named on the line below it;
- then the newest messages, as many as fit ``budget`` characters (the newest one, when
  it alone is too big, is cut like the task); older ones are named by one line
  ``[K earlier user messages not shown — recall <handle>]`` whose handle recalls them
  as a JSON list of strings.

``hidden`` counts the input messages not shown verbatim (behind a handle, whole or in
part).  ``put(text) -> handle`` stores a text and returns its handle; it is called only
for what is left out.

Invariant protected here: no user message is dropped silently — each one is either
quoted verbatim (stripped of surrounding whitespace) in an entry, or stored whole behind
a handle that an entry names.  The entries total at most ``budget + task_budget``
characters plus two markers, and the same input gives the same entries.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Sequence

__all__ = ["clip_middle", "clipped_from", "quote_users"]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Quoted:
    text: str
    """The latest occurrence, stripped."""
    originals: tuple[str, ...]
    """Every occurrence, as given, oldest first."""

    @property
    def variants(self) -> list[str]:
        """The occurrences that differ from ``text`` (in their numbers only)."""
        return [o for o in self.originals if o.strip() != self.text]

    def render(self, put: Callable[[str], str]) -> str:
        n = len(self.originals)
        if n == 1:
            return self.text
        if not (variants := self.variants):
            return f"{self.text}\n(repeated {n}×)"
        handle = put(json.dumps(variants, ensure_ascii=False))  # full: a merge reads them back (``account._restored_user``)
        return f"{self.text}\n({n}× in all, the others differing only in numbers — recall {handle})"


def clip_middle(text: str, limit: int, handle: str) -> str:
    """``text`` cut to its head and tail around an omission marker naming ``handle``.

    ``text`` itself when it fits ``limit``; otherwise at most ``max(limit, len(marker) + 1)``
    characters, always starting with the head of ``text`` (empty when ``limit`` leaves no
    room for it) and ending with its tail when there is room for one.
    """
    if len(text) <= limit:
        return text
    widest = f"[… {len(text):,} characters omitted — recall {handle}]"  # the count can only shrink
    room = max(0, limit - len(widest) - 2)
    head, tail = room - room // 2, room // 2
    marker = f"[… {len(text) - head - tail:,} characters omitted — recall {handle}]"
    return f"{text[:head]}\n{marker}\n{text[len(text) - tail:]}" if tail else f"{text[:head]}\n{marker}"


def quote_users(
    texts: Sequence[str], *, budget: int, task_budget: int, put: Callable[[str], str], task: bool = True
) -> tuple[list[str], int]:
    """The entries to quote (oldest first) and how many messages are not shown verbatim.  With
    ``task`` False (the task is in context elsewhere) the first message is one like the others:
    repeated, it is quoted once with its repeats."""
    if not texts:
        return [], 0
    if task:
        return _fit(*_task(texts, task_budget, put), budget, put)
    return _fit(_dedupe(texts), 0, [], [], budget, put)


def _task(texts: Sequence[str], task_budget: int,
          put: Callable[[str], str]) -> tuple[list[_Quoted], int, list[str], list[str]]:
    """The task's entry (whole, clipped, or behind a handle with the earlier messages) and the rest."""
    task = texts[0].strip()
    hidden = 0
    entries: list[str] = []
    behind: list[str] = []
    if len(task) <= task_budget:
        entries = [_bare(task)]
        hidden += entries[0] != task
    elif _worth_clipping(task, task_budget):
        entries = [_bare(clip_middle(task, task_budget, clipped_from(task) or put(texts[0])))]
        hidden += 1
    else:  # a clip would show next to nothing: it goes with the earlier messages, behind one handle
        behind = [texts[0]]
    return _dedupe(texts[1:]), hidden, entries, behind


def _fit(quoted: list[_Quoted], hidden: int, entries: list[str], behind: list[str], budget: int,
         put: Callable[[str], str]) -> tuple[list[str], int]:
    """The newest messages that fit ``budget``, the older ones behind one handle, after ``entries``."""
    shown: list[str] = []
    later: list[str] = []
    used = 0
    cut = len(quoted)  # quoted[:cut] are not shown
    for q in reversed(quoted):
        entry = q.render(put) if used + len(q.text) <= budget else ""
        if entry == q.text:
            entry = _bare(entry)
        if not entry or used + len(entry) > budget:
            break
        shown.append(entry)
        used += len(entry)
        hidden += len(q.variants)  # behind the handle on its last line
        cut -= 1
    if cut and cut == len(quoted) and _worth_clipping(quoted[-1].text, budget):
        # not even the newest fits: cut it rather than hide it whole
        newest = quoted[-1]
        shown.append(_bare(clip_middle(newest.text, budget, clipped_from(newest.text) or put(newest.originals[-1]))))
        later = list(newest.originals[:-1])  # its other occurrences go with the earlier messages
        hidden += 1
        cut -= 1
    behind = behind + [o for q in quoted[:cut] for o in q.originals] + later
    # A message an earlier account clipped is named by its own original's handle, not stored
    # again clipped (that would take two recalls to reach its words).
    clipped = [h for o in behind if (h := clipped_from(o))]
    hidden += len(clipped)
    entries.extend(_HIDDEN_ONE.format(h) for h in clipped)
    behind = [o for o in behind if not clipped_from(o)]
    if behind:
        hidden += len(behind)
        label = "message" if len(behind) == 1 else "messages"
        entries.append(f"[{len(behind)} earlier user {label} not shown — recall {put(json.dumps(behind, ensure_ascii=False))}]")
    entries.extend(reversed(shown))
    return entries, hidden


_HIDDEN_ONE = "[1 earlier user message not shown — recall {}]"
MIN_CLIP_SHOWN = 60
"""A clipped message showing fewer characters of its own than this is named by its handle alone."""
_CLIPPED = re.compile(r"\n\[… [\d,]+ characters omitted — recall (sha256:[0-9a-f]{24})\](?:\n|$)")


def _worth_clipping(text: str, limit: int) -> bool:
    """Whether ``clip_middle(text, limit, …)`` shows at least ``MIN_CLIP_SHOWN`` characters of it
    (a carried clip always is: it names its own handle)."""
    if clipped_from(text) is not None:
        return True
    probe = clip_middle(text, limit, "sha256:" + "0" * 24)
    return _bare(probe) == probe


def _bare(text: str) -> str:
    """A clipped message that shows next to nothing of its own (a small window's budget) as the
    line naming its handle alone; any other text as it is."""
    handle = clipped_from(text)
    if handle is None or len(text) >= len(_HIDDEN_ONE.format(handle)) + MIN_CLIP_SHOWN:
        return text
    return _HIDDEN_ONE.format(handle)


def clipped_from(text: str) -> str | None:
    """The handle of the whole message ``text`` was clipped from (by ``clip_middle``), or None."""
    found = _CLIPPED.findall(text)
    return found[0] if len(found) == 1 else None


_NUMBER = re.compile(r"\d+")
_VARIANT_CHARS = 200
"""Messages this long that differ only in numbers are one entry: a harness's reminder, not a
person's short request ("try option 1", "try option 2"), which stays verbatim each time."""


def _dedupe(texts: Sequence[str]) -> list[_Quoted]:
    """Distinct non-blank messages, each at its latest position, with all its occurrences.

    Messages that differ only in their numbers (a harness's "found 3 actions" reminder) are one
    entry: the latest verbatim, the others whole behind one handle (named when it is rendered)."""
    occurrences: dict[str, list[str]] = {}
    last: dict[str, int] = {}
    for i, t in enumerate(texts):
        stripped = t.strip()
        if not stripped:
            continue
        key = _NUMBER.sub("#", stripped) if len(stripped) >= _VARIANT_CHARS else stripped
        occurrences.setdefault(key, []).append(t)
        last[key] = i
    order = sorted(last, key=last.__getitem__)
    return [_Quoted(text=occurrences[k][-1].strip(), originals=tuple(occurrences[k])) for k in order]
