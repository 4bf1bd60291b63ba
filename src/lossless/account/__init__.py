"""Accounts: what a removal leaves in context in place of what it removed.

    acc = collect(removed, config)            # what the removed messages established
    body = acc.render(budget_chars=6_000)     # Markdown for the marker that replaces them
    acc.commit(store, body)                   # write the per-item originals the body names

An account is deterministic, small next to what it replaces, and readable at a
glance: the user's own words (verbatim, within a budget; what the budget trims sits
behind a handle), then one line per removed tool call — its tool, its target (file,
command, query, URL), its outcome (exit status, the error or the last meaningful
line) and the handle of *that item's* original — the files read and modified, the
assistant's conclusions and the open todos.  It is the model's map of what left its
context: each line tells it whether recalling would help, and with which handle.

Flat handles (recall depth 1): every handle an account shows resolves in one recall
to an original — a tool result's exact text, the user's exact words, or the JSON of
the removed messages (``flat_archive``), which never contains another account or
summary and in which results an earlier micro-compact had cleared are restored.
Compacting again *merges* accounts: an earlier account found in the removed range is
parsed back (its lines are carried as written, its range handle listed under
"Earlier ranges"), never archived inside the new one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

from .. import markers
from ..config import SHELL_TOOLS, ContextConfig
from ..errors import LosslessError
from ..messages import Message, Text, ToolResult, ToolUse, result_text
from ..rounds import INTERRUPTED
from .outcome import outcome as _outcome, target as _target
from .keylines import key_lines
from .shell import argv_command, patch_targets, shell_files
from .users import clipped_from, quote_users
from .archive import archive_json, original_text, text_chars, with_text
from ..store import ArtifactStore, handle_for
from .text import clip as _clip, dedup_last as _dedup_last, escape as _escape, fold_calls_counted as _fold_calls
from .text import short as _short
from .text import newest_fit as _newest_fit, one_line as _one_line, unescape as _unescape

__all__ = ["Account", "collect", "conclusion_of", "flat_archive", "is_account", "parse_into", "restored"]

H_USERS = "## User messages (verbatim, oldest first)"
H_CALLS = ("## Tool calls (oldest first: tool target → outcome · handle of its output, where it is long enough to "
           "recall alone; the range's handle above holds every output)")
H_FILES = "## Files"
H_CONCLUSIONS = "## Assistant conclusions (oldest first)"
H_TODOS = "## Open todos"
H_EARLIER = "## Earlier summaries (carried forward)"
H_RANGES = "## Earlier ranges (each recalls the exact messages it replaced)"
H_ACCOUNT = "## Account of the removed messages (deterministic, item by item; recall a handle to read an item)"
"""Separates a model's summary from the account beneath it."""
HEADERS = (H_USERS, H_CALLS, H_FILES, H_CONCLUSIONS, H_TODOS, H_EARLIER, H_RANGES)
BRIEF_BELOW_CHARS = 2_400
"""An account budgeted under this many characters (windows of a few thousand tokens) says its
headings in brief (``_BRIEF``): on a 2k window the full ones were a third of the account."""
_BRIEF = {H_USERS: "## User messages", H_CALLS: "## Tool calls (→ outcome · handle)",
          H_CONCLUSIONS: "## Assistant conclusions", H_EARLIER: "## Earlier summaries", H_RANGES: "## Earlier ranges"}
_STEMS = tuple((h.split(" (", 1)[0], h) for h in HEADERS)
"""A heading is read back by its stem, so a brief one and an older, longer wording parse alike."""

TARGET_CHARS, OUTCOME_CHARS, CONCLUSION_CHARS, TODO_CHARS, EARLIER_CHARS = 160, 140, 320, 200, 6_000
RESTORE_BYTES = 2_000_000
"""Moved results up to this size are put back in a range's archive (so one recall of the
range reaches them); a bigger one stays behind its own handle."""
MIN_CONCLUSION_CHARS = 24
_CONCLUSIONS_SHARE = ContextConfig().account_conclusions_fraction
"""The default share of the room conclusions take (read once, not per account)."""
KEY_PREFIX = markers.KEY_LINE
"""Opens a key line: a line of the call's output above it, verbatim (``keylines``)."""
KEY_SHARE = 0.7
"""Of the room left for calls, the share their key lines may take when there are any: the rest lists
the calls themselves (what was done, and the handle of each output)."""
KEEP_RANGES = 6
"""Earlier ranges listed one by one at most; beyond, neighbours are joined (``Account.fold``)."""
KEEP_HIDDEN = 4
"""Lines for trimmed user messages listed at most; beyond, neighbours are joined."""
_RANGE_LINE = re.compile(r"- (sha256:[0-9a-f]{24}) \((\d+|\?) messages\)")
_HIDDEN_LINE = re.compile(r"\[(\d+) earlier user messages? not shown — recall (sha256:[0-9a-f]{24})\]")
ITEM_HANDLE_CHARS = 600
"""A call's output gets a handle of its own from this size: a shorter one is mostly in its
outcome line already, and the range's handle holds it (one handle for the many small items,
so handles stay a small share of the context)."""
GROUP_MIN = 3
"""Calls with the same target that share one line and handle: several (a file read twice keeps a
line and a handle for each read, as any call worth recalling on its own)."""
"""Shorter assistant texts ("Done.", "No") carry no conclusion worth a line."""
TASK_MIN_CHARS = 8_000
TASK_SHARE = 0.45
"""Share of the user-message budget the first message (the task) may take whole."""

READ_TOOLS = frozenset({"Read", "read_file", "view", "View", "NotebookRead", "open_file", "cat"})
WRITE_TOOLS = frozenset(
    {"Edit", "Write", "MultiEdit", "NotebookEdit", "write_file", "edit_file", "create_file", "write", "edit"}
)
_FENCE = re.compile(r"```.*?(```|$)", re.S)
_USER_BLOCK = re.compile(r"<user-message>\n(.*?)\n</user-message>", re.S)
_EARLIER_BLOCK = re.compile(r"<earlier-summary>\n(.*?)\n</earlier-summary>", re.S)
_HIDDEN = re.compile(r"\[\d+ earlier user messages? not shown — recall sha256:[0-9a-f]{24}\]")
_REPEATED = re.compile(r"(.*)\n\(repeated (\d+)×\)", re.S)


def is_account(m: Message) -> bool:
    """True for a message lossless wrote in place of removed messages (snip, summaries)."""
    kind = (m.marker or {}).get("kind")
    if kind in ("snip", "summary", "collapse", "account"):
        return True
    return m.role == "user" and len(m.content) == 1 and isinstance(m.content[0], Text) and (
        m.content[0].text.startswith((markers.SNIPPED_PREFIX, markers.SUMMARY_OPEN)))


@dataclass(slots=True)
class Account:
    """What a removed range established, oldest first.  Mutable while it is collected."""

    users: list[str] = field(default_factory=list)
    hidden_users: list[str] = field(default_factory=list)
    """Lines carried from earlier accounts that name a handle for trimmed user messages."""
    calls: list[str] = field(default_factory=list)
    """Rendered call lines (``- tool target → outcome · handle``), carried lines as written.  A fresh
    call's outcome is analysed only when a render's budget reaches its line (``later``); until then
    the line shows ``…`` for it (``lines()`` gives every line analysed)."""
    later: dict[int, Callable[[], str]] = field(default_factory=dict, repr=False)
    """Index in ``calls`` → its whole line, for the lines whose outcome is not analysed yet: at
    first sight of a long range most calls fold into one counted line, which needs only their tool."""
    keys: list[tuple[str, ...] | str] = field(default_factory=list)
    """Beside each call line: the key lines an earlier account quoted under it, or the text of its
    output, whose key lines (``key_lines``) are ranked only if the budget reaches that call."""
    read: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    conclusions: list[str] = field(default_factory=list)
    todos: list[str] | None = None
    earlier: list[str] = field(default_factory=list)
    """Bodies of earlier summaries written by a model (or session notes), carried whole."""
    task_in_view: bool = False
    """The task is in context (pinned): the first user message here gets no task's allowance."""
    conclusions_share: float = _CONCLUSIONS_SHARE
    """The most of the room the conclusions take (``ContextConfig.account_conclusions_fraction``)."""
    ranges: list[str] = field(default_factory=list)
    """Rendered range lines (``- sha256:… (N messages)``) of earlier removals."""
    blobs: dict[str, str] = field(default_factory=dict)
    """handle → original text of every per-item handle shown; written by ``commit``."""
    store: ArtifactStore | None = field(default=None, repr=False)
    """The store it was collected with: rendering joins its lines for hidden user messages there."""
    present: set[str] = field(default_factory=set, repr=False)
    """Lines still in context beside the account (of the results that stay): never quoted as key lines."""
    hidden_limit: int = KEEP_HIDDEN
    """Lines for hidden user messages it shows at most (``ContextConfig.account_lines``)."""

    # -- building -----------------------------------------------------------------------
    def put(self, text: str) -> str:
        handle = handle_for(text.encode("utf-8", "surrogatepass"))
        self.blobs.setdefault(handle, text)
        return handle

    def commit(self, store: ArtifactStore, shown: str | None = None) -> tuple[str, ...]:
        """Write the originals this account names; returns their handles.  With ``shown`` (the text
        that carries the account into context), only those whose handle it shows, in full or short:
        a call folded into a counted line shows none, and the range's archive already holds its
        output (at first sight of a long session, most of the per-item originals)."""
        named = None if shown is None else {markers.short(h) for h in markers.handles_in(shown)}
        written = []
        for handle, text in self.blobs.items():
            if named is None or markers.short(handle) in named:
                store.put(text)
                written.append(handle)
        return tuple(written)

    def fold(self, store: ArtifactStore, *, ranges: int = KEEP_RANGES, hidden: int = KEEP_HIDDEN) -> None:
        """Keep what merging carries forward bounded: beyond ``ranges`` earlier ranges, adjacent
        ones become one range (their archives joined, flat, under one new handle); beyond
        ``hidden`` lines for trimmed user messages, adjacent ones become one line (their texts
        joined under one new handle); the smallest neighbours first.  Every handle still recalls originals in one step; an
        archive the store cannot give back is left as it was."""
        self.ranges = _fold_ranges(self.ranges, store, ranges)
        self.hidden_users = _fold_hidden(self.hidden_users, store, hidden)

    def lines(self) -> list[str]:
        """Every call line, each outcome analysed."""
        for i, whole in self.later.items():
            self.calls[i] = whole()
        self.later.clear()
        return self.calls

    def _reach(self, budget: int) -> None:
        """Analyse the outcomes of the newest calls whose shortened lines (the least ``fold_calls`` lists
        a call in) fit ``budget``: no call older than those can be listed by a render within it."""
        used = 0
        for i in range(len(self.calls) - 1, -1, -1):
            if not self.later:
                return
            whole = self.later.pop(i, None)
            if whole is not None:
                self.calls[i] = whole()
            used += len(_short(self.calls[i])) + 1
            if used > budget:
                return

    # -- rendering ----------------------------------------------------------------------
    def render(self, budget_chars: int, user_chars: int | None = None) -> str:
        """The account as Markdown within about ``budget_chars`` characters.

        What the budget cannot hold is never dropped silently: the oldest user messages
        go behind a handle, the oldest call lines are folded into one line per tool
        (the range handle holds them), conclusions and earlier summaries are clipped."""
        brief = budget_chars < BRIEF_BELOW_CHARS
        budget = max(300 if brief else 600, budget_chars)

        def head(heading: str) -> str:
            return _BRIEF.get(heading, heading) if brief else heading

        parts: list[str] = []
        share = int(budget * 0.4)
        users = self._users(share if user_chars is None else min(user_chars, share))
        if users:
            parts += [head(H_USERS), *users]
        fixed = sum(len(p) + 1 for p in parts)
        todos = [_one_line(t, TODO_CHARS) for t in (self.todos or [])][:20]
        files = self._files(max(300, budget // 2))  # the map of files is worth more per character than old calls
        rest = budget - fixed - sum(len(t) + 3 for t in todos) - sum(len(f) + 1 for f in files)
        rest -= sum(len(r) + 1 for r in self.ranges)
        earlier = _clip("\n\n".join(self.earlier), max(300, min(EARLIER_CHARS, rest // 4))) if self.earlier else ""
        rest -= len(earlier)
        conclusions = _newest_fit(self.conclusions, max(0 if brief else 200, int(rest * self.conclusions_share)))
        rest -= sum(len(c) + 1 for c in conclusions)
        keyed = not brief and any(self.keys)
        calls, folded = self._fitted(max(300, int(rest * (1 - KEY_SHARE)) if keyed else rest))
        if keyed:
            listed = _chars(calls)
            with_keys = self._with_keys(calls, folded, rest - listed)
            keys = _chars(with_keys) - listed
            if folded and rest - listed - keys > rest // 10:  # few key lines to show: the calls take the room back
                calls, folded = self._fitted(max(300, rest - keys))
                with_keys = self._with_keys(calls, folded, rest - _chars(calls))
            calls = with_keys
        if earlier:
            parts += [head(H_EARLIER), f"<earlier-summary>\n{_escape(earlier)}\n</earlier-summary>"]
        if calls:
            parts += [head(H_CALLS), *calls]
        if files:
            parts += [head(H_FILES), *files]
        if conclusions:
            parts += [head(H_CONCLUSIONS), *conclusions]
        if todos:
            parts += [head(H_TODOS), *(f"- {t}" for t in todos)]
        if self.ranges:
            parts += [head(H_RANGES), *self.ranges]
        return "\n".join(parts) if parts else "(no user messages, tool calls or assistant text in this part)"

    def _fitted(self, budget: int) -> tuple[list[str], int]:
        """``fold_calls_counted`` of the call lines within ``budget``, the outcomes it can list analysed."""
        self._reach(budget)
        return _fold_calls(self.calls, budget)

    def _with_keys(self, shown: list[str], folded: int, budget: int) -> list[str]:
        """``shown`` (the call lines as ``fold_calls`` fitted them, its first ``folded`` calls in one
        line) with key lines under the calls listed one by one, within ``budget`` characters: one
        line for each call in turn, newest call first, then a second line each, and so on; each
        call's lines in the order they stand in its output, none quoted twice."""
        offset = len(shown) - len(self.calls)  # call i is shown[i + offset] from call ``folded`` on
        ranked = {i: self._keys_of(i) for i in range(folded, len(self.calls))}
        taken: dict[int, list[int]] = {i: [] for i in ranked}
        quoted = set(shown)
        # The calls that still have a line at this rank, newest first: a call whose lines ran out
        # leaves the pass (one call with a thousand key lines beside hundreds with two made every
        # rank walk them all), and the passes end once no line could fit.
        active = [i for i in sorted(ranked, reverse=True) if ranked[i]]
        least = len(KEY_PREFIX) + 1
        rank = 0
        while budget >= least and active:
            for i in active:
                line = ranked[i][rank][1]
                cost = least + len(line)
                if cost <= budget and line not in quoted and line not in self.present and line not in shown[i + offset]:
                    quoted.add(line)
                    taken[i].append(rank)
                    budget -= cost
            rank += 1
            active = [i for i in active if rank < len(ranked[i])]
        out: list[str] = []
        for j, line in enumerate(shown):
            out.append(line)
            i = j - offset
            for k in sorted(taken.get(i, ()), key=lambda k: ranked[i][k][0]):
                out.append(KEY_PREFIX + _escape(ranked[i][k][1]))
        return out

    def _keys_of(self, i: int) -> tuple[tuple[int, str], ...]:
        """Call ``i``'s key lines, best first, each with its place in the output (carried ones: as shown)."""
        keys = self.keys[i] if i < len(self.keys) else ()
        return key_lines(keys) if isinstance(keys, str) else tuple(enumerate(keys))

    def _users(self, budget: int) -> list[str]:
        # The task is kept whole within a generous budget — never more than the users' whole share
        # three times over (on a small window 8,000 characters would be most of it, and the account would outgrow it).
        if self.task_in_view:  # no task here: its allowance (a third of the share) goes to the others
            quoted, _ = quote_users(self.users, budget=budget + budget // 3, task_budget=0, put=self.put, task=False)
        else:
            task = max(min(TASK_MIN_CHARS, 3 * budget), int(budget * TASK_SHARE))
            quoted, _ = quote_users(self.users, budget=budget, task_budget=task, put=self.put)
        out = [*self.hidden_users]
        new = [q for q in quoted if _HIDDEN.fullmatch(q)]
        if self.store is not None and out and new and len(out) + len(new) > self.hidden_limit:
            # the lines this range adds join the carried ones, so the account keeps to its limit
            joined = _fold_hidden([*out, *new], _Pending(self, self.store), self.hidden_limit)
            if len(joined) < len(out) + len(new):
                out, quoted = joined, [q for q in quoted if not _HIDDEN.fullmatch(q)]
        for q in quoted:
            out.append(q if _HIDDEN.fullmatch(q) else f"<user-message>\n{_escape(q)}\n</user-message>")
        return out

    def _files(self, budget: int) -> list[str]:
        """The files modified and read, newest last, within ``budget`` characters each list."""
        out = []
        for label, items in (("modified", self.modified), ("read", self.read)):
            names = [_one_line(n, 160) for n in _dedup_last(items)]
            shown = _newest_fit(names, budget // 2, sep=2)
            if shown:
                more = f" (+{len(names) - len(shown)} older)" if len(shown) < len(names) else ""
                out.append(f"- {label}{more}: " + ", ".join(shown))
        return out


# -- collecting ------------------------------------------------------------------------------

def collect(messages: Sequence[Message], config: ContextConfig | None = None,
            store: ArtifactStore | None = None, *, task_in_view: bool = False) -> Account:
    """The account of ``messages`` (the range being removed), oldest first.

    Earlier accounts and summaries in the range are merged, not nested.  Which tools
    are shells and which read files come from ``config`` (besides the usual names).
    With ``store``, what merging carries forward stays bounded (``Account.fold``, as many
    lines as the window's account can hold).  ``task_in_view``: the task stays in context (a
    pinned head), so the range's first user message is quoted as any other, not as the task."""
    cfg = config or ContextConfig()
    acc = Account(task_in_view=task_in_view, conclusions_share=cfg.account_conclusions_fraction)
    shell, reads = cfg.shell_tools | SHELL_TOOLS, cfg.read_tools | READ_TOOLS
    calls: dict[str, ToolUse] = {}
    fresh: list[tuple[int, ToolResult | None]] = []  # (index in acc.calls, the result unless a stage moved it)
    for m in messages:
        if is_account(m):
            parse_into(acc, m.text)
            continue
        own = [markers.thinned_body(b.text) for b in m.content if isinstance(b, Text) and b.text.strip()
               and (not markers.is_marker(b.text) or b.text.startswith(markers.THINNED_PREFIX))]
        for b in m.content:  # text that persist moved (the user's, an answer): its handle, one recall away
            if isinstance(b, Text) and b.text.startswith(markers.PERSISTED_OPEN):
                first = markers.handles_in(b.text.split("\n", 1)[0])[:1]
                if m.role == "user":
                    acc.hidden_users.extend(f"[1 earlier user message not shown — recall {h}]" for h in first)
                else:
                    acc.conclusions.extend(f"- [a long answer not shown — recall {h}]" for h in first)
        if m.role == "user" and own and not m.tool_results:
            acc.users.append("\n".join(own))
        elif m.role == "user" and own:
            acc.users.extend(own)
        elif m.role == "assistant" and own:
            conclusion = conclusion_of("\n".join(own))
            if len(conclusion) >= MIN_CONCLUSION_CHARS:
                acc.conclusions.append(f"- {conclusion}")
        for use in m.tool_uses:
            calls[use.id] = use
            _files(use, acc, shell, reads)
            if use.name == "TodoWrite":
                todos = use.input.get("todos") if isinstance(use.input, Mapping) else None
                if isinstance(todos, list):
                    acc.todos = [f"[{t.get('status', '?')}] {t.get('content', '')}" for t in todos
                                 if isinstance(t, dict) and t.get("status") != "completed"]
        for r in m.tool_results:
            line, its_own, source, whole = _call_line(r, calls.get(r.tool_use_id), acc, shell, m._memo)
            fresh.append((len(acc.calls), r if its_own else None))
            if whole is not None:
                acc.later[len(acc.calls)] = whole
            acc.calls.append(line)
            acc.keys.append(source)
    _group_repeats(acc, fresh)
    if store is not None:
        # A user message an earlier account clipped is quoted (or put behind a handle) from its
        # whole text again, so what merging carries is never a clip of a clip.
        acc.users = [u for text in acc.users for u in _restored_user(text, store)]
        ranges, hidden = cfg.account_lines()
        acc.fold(store, ranges=ranges, hidden=hidden)
        acc.store, acc.hidden_limit = store, hidden
    return acc


def _chars(lines: Sequence[str]) -> int:
    """Characters of ``lines`` as rendered, one per line."""
    return sum(len(line) + 1 for line in lines)


class _Pending:
    """A store as an account being rendered sees it: what it will write (its blobs, written by
    ``commit`` if it is used) and what the store holds."""

    def __init__(self, acc: Account, store: ArtifactStore) -> None:
        self.acc, self.store = acc, store

    def __contains__(self, handle: str) -> bool:
        return handle in self.acc.blobs or handle in self.store

    def get(self, handle: str) -> str:
        return self.acc.blobs[handle] if handle in self.acc.blobs else self.store.get(handle)

    def put(self, text: str) -> str:
        return self.acc.put(text)


_VARIANTS = re.compile(r"(.*)\n\((\d+)× in all, the others differing only in numbers — recall (sha256:[0-9a-f]{24})\)",
                       re.S)


def _restored_user(text: str, store: ArtifactStore) -> list[str]:
    """The user messages an earlier account's entry stands for: one quoted with its numeric
    variants behind a handle comes back as every occurrence, so merging never nests them."""
    found = _VARIANTS.fullmatch(text)
    if found is None or found.group(3) not in store:
        return [_unclipped(text, store)]
    try:
        others = json.loads(store.get(found.group(3)))
    except (LosslessError, ValueError):
        return [text]
    if not (isinstance(others, list) and all(isinstance(x, str) for x in others)):
        return [text]
    latest = found.group(1)
    return [*others, *[latest] * max(1, int(found.group(2)) - len(others))]


def _unclipped(text: str, store: ArtifactStore) -> str:
    handle = clipped_from(text)
    if handle is None or handle not in store:
        return text
    try:
        return store.get(handle)
    except LosslessError:
        return text


def _group_repeats(acc: Account, fresh: list[tuple[int, ToolResult | None]]) -> None:
    """Calls repeated with the same target in one range (a file read again, a command run again)
    become one line: ``×N``, the newest outcome, and one handle whose text holds each output in
    full, oldest first (``GROUP_MIN`` or more; a result an earlier stage moved keeps its line)."""
    members: dict[str, list[tuple[int, ToolResult]]] = {}
    for i, r in fresh:
        call = acc.calls[i].partition(" → ")[0]
        if r is not None and " " in call[2:] and result_text(r) != INTERRUPTED:  # a target says it is the same call
            members.setdefault(call, []).append((i, r))
    gone: set[int] = set()
    grouped = [(call, group) for call, group in members.items() if len(group) >= GROUP_MIN
               and sum(text_chars(r) for _, r in group) >= ITEM_HANDLE_CHARS]
    in_groups = {i for _, group in grouped for i, _ in group}
    still_shown = {acc.calls[i].rpartition(" · ")[2] for i, _ in fresh if i not in in_groups}
    for call, group in grouped:
        texts = [original_text(r) for _, r in group]
        for text in texts:  # a member's own original is in the group's text now (unless another line shows it)
            own = handle_for(text.encode("utf-8", "surrogatepass"))
            if markers.short(own) not in still_shown:
                acc.blobs.pop(own, None)
        handle = acc.put(group_text(call[2:], texts))
        whole = acc.later.pop(group[-1][0], None)
        newest = whole() if whole is not None else acc.calls[group[-1][0]]
        said = newest.partition(" → ")[2]
        body, sep, tail = said.rpartition(" · ")
        outcome = body if sep and markers.HANDLE_RE.fullmatch(tail) else said
        acc.calls[group[-1][0]] = f"{call} ×{len(group)}, the last → {outcome} · {markers.short(handle)}"
        gone.update(i for i, _ in group[:-1])
    if gone:
        kept = [i for i in range(len(acc.calls)) if i not in gone]
        acc.later = {n: acc.later[i] for n, i in enumerate(kept) if i in acc.later}
        acc.calls = [acc.calls[i] for i in kept]
        acc.keys = [acc.keys[i] for i in kept]


def group_text(call: str, texts: Sequence[str]) -> str:
    """The text behind a group's handle: each output whole, oldest first, under a numbered rule."""
    parts = [f"[{len(texts)} outputs of {call}, oldest first]"]
    for n, text in enumerate(texts, 1):
        parts.append(f"--- output {n} of {len(texts)} ---\n{text}")
    return "\n".join(parts)


def _call_line(r: ToolResult, use: ToolUse | None, acc: Account, shell: frozenset[str],
               memo: dict[str, Any] | None = None) -> tuple[str, bool, str, Callable[[], str] | None]:
    """A result's line, whether the result is its own (not one an earlier stage moved: its
    line names the handle this account writes, or none for a short output), the text its key
    lines come from (what of the output is still here: none for a moved one but a fold's), and,
    while its outcome is not analysed yet, what gives its whole line (the line shows ``…``)."""
    # A result's handle and outcome are analysed once per message (its ``_memo``), not on every compaction.
    seen = memo.setdefault("account", {}) if memo is not None else {}
    known = seen.get(r.tool_use_id)
    if known is not None and known[0] is r:
        _, handle, outcome, put, source = known
        if put:
            acc.blobs.setdefault(handle, original_text(r))
    else:
        handle, outcome, put, source = _analysed(r, acc)
        known = seen[r.tool_use_id] = [r, handle, outcome, put, source]
    tool = use.name if use is not None else "tool"
    target = _target(tool, use.input if use is not None else {}) if use is not None else ""
    target = _one_line(target, TARGET_CHARS)
    shown = f" `{target}`" if target and tool in shell else (f" {target}" if target else "")
    called, tail = f"- {tool}{shown} → ", f" · {markers.short(handle)}" if handle else ""
    if outcome is not None:
        return called + _one_line(outcome, OUTCOME_CHARS) + tail, put or not handle, source, None
    entry = known

    def whole() -> str:
        if entry[2] is None:
            entry[2] = _outcome(source, is_error=r.is_error, limit=OUTCOME_CHARS)
        return called + _one_line(entry[2], OUTCOME_CHARS) + tail
    return called + "…" + tail, put or not handle, source, whole


def _analysed(r: ToolResult, acc: Account) -> tuple[str, str | None, bool, str]:
    """The handle a result's line shows, its outcome (None for an output of its own, analysed when a
    line needs it: ``_call_line``), whether the handle is one ``acc`` must write, and the text its key
    lines come from."""
    text = original_text(r)  # its text parts: a marker is one whatever parts (an image, a document) stand before it
    handles = markers.handles_in(text) if markers.is_marker(text) else []
    if handles:  # already moved (persisted, cleared or folded): its handle is the original's
        if text.startswith(markers.FOLDED_PREFIX):  # what only it said is still here to analyse
            body = markers.without_runs(text.partition("\n")[2])  # (a run line says nothing of it)
            return handles[0], _outcome(body, is_error=r.is_error, limit=OUTCOME_CHARS), False, body
        return handles[0], _marker_outcome(text, r.is_error), False, ""
    original = original_text(r)  # as persist and micro-compact store it (images stay in the range)
    handle = acc.put(original) if len(original) >= ITEM_HANDLE_CHARS else ""
    if text == INTERRUPTED:
        return handle, "interrupted", bool(handle), ""
    return handle, None, bool(handle), text


def _marker_outcome(text: str, is_error: bool) -> str:
    m = re.search(r"\) → (.*?); handle=", text)  # a cleared marker that already names its outcome
    if m:
        return m.group(1)
    return "error (output stored)" if is_error else "ok (output stored)"


def _files(use: ToolUse, acc: Account, shell: frozenset[str], reads: frozenset[str]) -> None:
    inp = use.input if isinstance(use.input, Mapping) else {}
    if use.name in shell:
        command = inp.get("command") or inp.get("cmd")
        if isinstance(command, list):
            command = argv_command(command)
        if isinstance(command, str):
            r, w = shell_files(command)
            acc.read.extend(r)
            acc.modified.extend(w)
        return
    if use.name in ("apply_patch", "applypatch"):  # Codex's edit tool: its envelope names the files
        patch = next((v for k in ("input", "patch", "diff") if isinstance(v := inp.get(k), str)), "")
        acc.modified.extend(dict.fromkeys(patch_targets(patch)))
        return
    path = next((inp[k] for k in ("file_path", "path", "notebook_path", "filename")
                 if isinstance(inp.get(k), str) and inp[k].strip()), None)
    if path is None:
        return
    if use.name == "str_replace_editor":
        (acc.read if inp.get("command") == "view" else acc.modified).append(path)
    elif use.name in WRITE_TOOLS:
        acc.modified.append(path)
    elif use.name in reads:
        acc.read.append(path)


_LABEL = re.compile(r"^\s*(?:THOUGHT|Thought|REASONING|Reasoning)\s*:\s*")
"""The label a ReAct-style agent (mini-swe-agent's ``THOUGHT:``) puts before its reasoning: a format, not words."""
_NAMES = re.compile(r"[`/\d]|\"[^\"]+\"|(?<!\w)'[^']+'|\w_\w|[a-z][A-Z]|\w\.\w")
"""What makes a short conclusion say something: code, a quote, a path, a number, an identifier."""
SAYS_NOTHING_BELOW = 48
"""A conclusion shorter than this that names nothing ("Now let's verify the change.", "Run
reproduction script.") only announces the call under it, which the account lists anyway."""


@lru_cache(maxsize=4_096)  # each compaction that covers a message collects it again
def conclusion_of(text: str) -> str:
    """The assistant's conclusion in a text: its last meaningful paragraph, code and a reasoning
    label removed; empty when it is short and names nothing."""
    prose = _FENCE.sub("", text).strip()
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", prose) if p.strip()]
    if not paragraphs:
        return ""
    last = paragraphs[-1]
    if len(paragraphs) > 1 and len(last) < 80:
        last = paragraphs[-2] + " " + last
    last = _one_line(_LABEL.sub("", last), CONCLUSION_CHARS)
    return "" if len(last) < SAYS_NOTHING_BELOW and not _NAMES.search(last) else last


def parse_into(acc: Account, text: str) -> None:
    """Merge an earlier account or summary (its rendered text) into ``acc``."""
    opening = text.split("\n", 1)[0]
    handle = next(iter(markers.handles_in(opening)), None)
    n = re.search(r'messages="(\d+)"|snipped (\d+) earlier messages', opening)
    count = next((g for g in (n.groups() if n else ()) if g), "?")
    if 'source="model"' in opening or 'kind="session-notes"' in opening:
        body = text.split("\n", 1)[1] if "\n" in text else ""
        body = body.rsplit(markers.SUMMARY_CLOSE, 1)[0]
        own, _, carried = body.partition("\n" + H_ACCOUNT)
        acc.earlier.append(_unescape(own.strip()))
        if carried:
            _parse_sections(acc, carried)
    else:
        _parse_sections(acc, text)
    if handle:
        acc.ranges.append(f"- {handle} ({count} messages)")


def _parse_sections(acc: Account, text: str) -> None:
    for block in _EARLIER_BLOCK.findall(text):
        acc.earlier.append(_unescape(block))
    for quoted in _USER_BLOCK.findall(text):
        m = _REPEATED.fullmatch(_unescape(quoted))  # a message quoted once for several: as many again
        acc.users.extend([m.group(1)] * int(m.group(2)) if m else [_unescape(quoted)])
    rest = _EARLIER_BLOCK.sub("", _USER_BLOCK.sub("", text))
    section = None
    called = False  # a call line of this account was read: key lines below it are its own
    for line in rest.splitlines():
        if line.startswith("## "):
            section = next((h for stem, h in _STEMS if line.startswith(stem)), None)
            if section == H_TODOS:
                acc.todos = []
            continue
        if section == H_USERS and _HIDDEN.fullmatch(line):
            acc.hidden_users.append(line)
        elif section == H_CALLS and called and line.startswith(KEY_PREFIX):
            keys = acc.keys[-1]
            acc.keys[-1] = (*(keys if isinstance(keys, tuple) else ()), _unescape(line[len(KEY_PREFIX):]))
        elif not line.startswith("- "):
            continue
        elif section == H_CALLS:
            acc.calls.append(line)
            acc.keys.append(())
            called = True
        elif section == H_CONCLUSIONS:
            acc.conclusions.append(line)
        elif section == H_TODOS and acc.todos is not None:
            acc.todos.append(line[2:])
        elif section == H_RANGES:
            acc.ranges.append(line)
        elif section == H_FILES:
            label, _, names = line[2:].partition(": ")
            target = acc.modified if label.startswith("modified") else acc.read
            target.extend(n for n in names.split(", ") if n)


# -- folding what merging carries ------------------------------------------------------------

def _fold_ranges(lines: list[str], store: ArtifactStore, keep: int) -> list[str]:
    def join(a: str, b: str) -> tuple[str, int]:
        parts = [json.loads(a), json.loads(b)]
        if not all(isinstance(x, list) for x in parts):
            raise ValueError("not a message archive")
        joined = [*parts[0], *parts[1]]
        return json.dumps(joined, ensure_ascii=False, separators=(",", ":")), len(joined)

    return _fold(lines, store, keep, _RANGE_LINE, 2, 1, join, lambda h, n: f"- {h} ({n} messages)")


def _fold_hidden(lines: list[str], store: ArtifactStore | _Pending, keep: int) -> list[str]:
    def render(handle: str, n: int) -> str:
        return f"[{n} earlier user {'message' if n == 1 else 'messages'} not shown — recall {handle}]"

    def join(a: str, b: str) -> tuple[str, int]:
        joined = [*_messages_of(a), *_messages_of(b)]
        return json.dumps(joined, ensure_ascii=False), len(joined)

    return _fold(lines, store, keep, _HIDDEN_LINE, 1, 2, join, render)


def _messages_of(text: str) -> list[str]:
    """The user messages behind a hidden line's handle: a JSON list of them, or one message."""
    if text.startswith("["):
        try:
            found = json.loads(text)
        except ValueError:
            return [text]
        if isinstance(found, list) and all(isinstance(x, str) for x in found):
            return found
    return [text]


def _fold(lines: list[str], store: ArtifactStore | _Pending, keep: int, pattern: re.Pattern[str], count_group: int,
          handle_group: int, join: Callable[[str, str], tuple[str, int]],
          render: Callable[[str, int], str]) -> list[str]:
    """Join adjacent lines, the pair with the fewest messages first, until at most ``keep`` are
    left; each join reads just its two originals and writes one.  Joining the small pieces first
    keeps what a long session rewrites near O(n log n), not a growing prefix every time."""
    out = list(lines)
    while len(out) > keep:
        parsed = [pattern.fullmatch(line) for line in out]
        if any(m is None or not m.group(count_group).isdigit() for m in parsed):
            return lines
        sizes = [int(m.group(count_group)) for m in parsed if m is not None]
        i = min(range(len(out) - 1), key=lambda j: sizes[j] + sizes[j + 1])
        a, b = parsed[i], parsed[i + 1]
        assert a is not None and b is not None
        pair = (pattern.pattern, a.group(handle_group), b.group(handle_group))
        joined = _JOINED.get(pair)  # the same pair is joined again on the next compaction: one stat each, not a read
        if joined is None or not all(h in store for h in (*pair[1:], joined[0])):
            try:
                text, n = join(store.get(pair[1]), store.get(pair[2]))
            except (LosslessError, ValueError):
                return lines
            joined = _JOINED[pair] = (store.put(text), n)
            if len(_JOINED) > 4_096:
                _JOINED.clear()
        out[i: i + 2] = [render(joined[0], joined[1] or sizes[i] + sizes[i + 1])]
    return out


_JOINED: dict[tuple[str, str, str], tuple[str, int]] = {}
"""(line kind, handle, handle) → the handle of the two joined and its message count: content-addressed,
so true in any store that holds all three."""


# -- the flat archive ------------------------------------------------------------------------

def flat_archive(messages: Sequence[Message], store: ArtifactStore | None) -> str:
    """The exact JSON stored behind a range handle: the removed messages, flat.

    Earlier accounts and summaries are left out (the new account carries them and
    lists their own range handles), and a result an earlier micro-compact cleared is
    put back to its original text when the store has it, so one recall of the range
    reaches every original in it.  Deterministic: same input, same bytes."""

    kept = [restored(m, store) for m in messages if not is_account(m)]
    return archive_json(kept)


def restored(m: Message, store: ArtifactStore | None) -> Message:
    """``m`` with the results an earlier stage moved put back (up to ``RESTORE_BYTES``
    each: a giant output stays behind its own handle, which the account lists)."""
    if store is None:
        return m
    if m.role == "assistant":  # a reply thinned in context is archived whole
        blocks, changed = list(m.content), False
        for i, b in enumerate(blocks):
            if isinstance(b, Text) and b.text.startswith(markers.THINNED_PREFIX):
                handle = next(iter(markers.handles_in(b.text.split("\n", 1)[0])), None)
                if handle and handle in store:
                    blocks[i] = Text(text=store.get(handle), cache_control=b.cache_control, extra=b.extra)
                    changed = True
        return m.with_content(blocks) if changed else m
    if m.role != "user" or not m.tool_results:
        return m
    blocks, changed = list(m.content), False
    for i, b in enumerate(blocks):
        if isinstance(b, ToolResult):
            text = original_text(b)
            if text.startswith((markers.CLEARED_PREFIX, markers.PERSISTED_OPEN, markers.FOLDED_PREFIX)):
                handle = next(iter(markers.handles_in(text)), None)
                if handle and handle in store and store.size(handle) <= RESTORE_BYTES:
                    blocks[i] = with_text(b, store.get(handle))
                    changed = True
    return m.with_content(blocks) if changed else m
