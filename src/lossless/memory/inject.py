"""Putting memories into the context without moving the cacheable prefix.

* The index goes in the system prompt: ``system_index(store)`` returns its text.
  It changes only when memories change (see ``index.py``), so the cached prefix
  survives ordinary turns.
* Selected memories go in an attachment appended to the *latest* user message:
  ``injector.attachment(memories)`` renders them, ``append_to_last_user`` adds the
  block.  Earlier messages (the cached prefix) are never rewritten.

Budgets (the seeds'): a memory is cut to 200 lines and 4,096 bytes; a session
gets at most 60 KB of memories; a memory already injected in the session is not
injected again.  ``SessionInjector`` holds that per-session state.  The session
budget counts every byte attached — the ``<lossless-memories>`` wrapper and the
newlines between blocks too — so the attachments of a session, summed, never
exceed ``session_bytes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ..errors import MemoryError_
from ..messages import Message, Text
from .model import Memory

if TYPE_CHECKING:  # both import this module
    from .retrieval import Retriever
    from .store import MemoryStore

OPEN = "<lossless-memories>\n"
CLOSE = "\n</lossless-memories>"
WRAPPER_BYTES = len(OPEN.encode("utf-8")) + len(CLOSE.encode("utf-8")) - 1
"""What an attachment costs besides its blocks, each counted with one newline."""
PER_MEMORY_LINES = 200
PER_MEMORY_BYTES = 4096
SESSION_BYTES = 60 * 1024

SYSTEM_HEADER = (
    "# Memory\n"
    "Long-term memories from earlier sessions (user preferences, feedback, project facts, references). "
    "Relevant ones are attached to user messages as <memory> blocks; the full index follows.\n\n"
)


def cut(text: str, *, max_lines: int, max_bytes: int) -> tuple[str, bool]:
    """``text`` within both limits (cut on a character boundary), and whether it was cut."""
    lines = text.split("\n")
    cut_any = len(lines) > max_lines
    text = "\n".join(lines[:max_lines])
    data = text.encode("utf-8")
    if len(data) > max_bytes:
        text = data[:max_bytes].decode("utf-8", "ignore")
        cut_any = True
    return text, cut_any


def render_block(memory: Memory, *, max_lines: int = PER_MEMORY_LINES, max_bytes: int = PER_MEMORY_BYTES) -> str:
    head = f'<memory id="{memory.id}" type="{memory.type}" updated="{memory.updated}">'
    content = f"{memory.name} — {memory.description}\n{memory.body}" if memory.description else \
        f"{memory.name}\n{memory.body}"
    # The head and tail lines count against the per-memory budget too.
    note = f"\n[cut to fit; full text: `lossless memory show {memory.id}`]"
    budget = max_bytes - len(head.encode()) - len(note.encode()) - len("\n</memory>") - 2
    body, was_cut = cut(content.strip(), max_lines=max_lines - 3, max_bytes=max(budget, 0))
    return f"{head}\n{body}{note if was_cut else ''}\n</memory>"


class SessionInjector:
    """Per-session injection state: what was injected and how many bytes were spent."""

    def __init__(self, *, per_memory_lines: int = PER_MEMORY_LINES, per_memory_bytes: int = PER_MEMORY_BYTES,
                 session_bytes: int = SESSION_BYTES) -> None:
        self.per_memory_lines = per_memory_lines
        self.per_memory_bytes = per_memory_bytes
        self.session_bytes = session_bytes
        self.injected: set[str] = set()
        self.used_bytes = 0

    def attachment(self, memories: Sequence[Memory]) -> str:
        """The text block for ``memories`` not yet injected, within budget ("" when none).

        Invariant: ``used_bytes`` grows by exactly the UTF-8 size of the returned text."""
        blocks: list[str] = []
        spent = 0
        for m in memories:
            if m.id in self.injected:
                continue
            block = render_block(m, max_lines=self.per_memory_lines, max_bytes=self.per_memory_bytes)
            size = len(block.encode("utf-8")) + 1 + (0 if blocks else WRAPPER_BYTES)
            if self.used_bytes + spent + size > self.session_bytes:
                continue
            self.injected.add(m.id)
            spent += size
            blocks.append(block)
        if not blocks:
            return ""
        self.used_bytes += spent
        return OPEN + "\n".join(blocks) + CLOSE


def append_to_last_user(messages: Sequence[Message], text: str) -> tuple[Message, ...]:
    """A new history whose latest user message ends with ``text``; the input is not modified."""
    out = tuple(messages)
    if not text:
        return out
    for i in range(len(out) - 1, -1, -1):
        if out[i].role == "user":
            msg = out[i]
            block = Text(text=text, extra={"lossless": "memory"})
            return out[:i] + (msg.with_content(msg.content + (block,)),) + out[i + 1 :]
    raise ValueError("no user message to attach memories to")


def system_index(store: MemoryStore) -> str:
    """The memory section of the system prompt ("" when the store is empty)."""
    index = store.index_text()
    return SYSTEM_HEADER + index if index.strip() else ""


def inject(messages: Sequence[Message], store: MemoryStore, injector: SessionInjector,
           retriever: Retriever | None = None, *, query: str | None = None) -> tuple[Message, ...]:
    """Retrieve for the latest user message and attach what is new; records the use in the store."""
    from .retrieval import recall_memories

    if query is None:
        query = next((m.text for m in reversed(messages) if m.role == "user" and m.text), "")
    try:
        hits = recall_memories(query, store, retriever) if query else []
    except MemoryError_:  # a tampered store (a planted link) costs the memories, never the call;
        hits = []         # its own commands name the problem
    before = set(injector.injected)
    text = injector.attachment([h.memory for h in hits])
    try:
        store.touch(sorted(injector.injected - before))
    except MemoryError_:  # recency is a hint: a locked or tampered store must not stop the call
        pass              # (its own commands, e.g. `lossless memory list`, name the problem)
    return append_to_last_user(messages, text)
