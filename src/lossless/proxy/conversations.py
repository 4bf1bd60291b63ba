"""Which conversation a request continues: a hash chain over its messages.

A client sends its whole history every time.  Each message is hashed in a
canonical form that ignores ``cache_control`` (clients move their breakpoints every
turn), and the hashes are chained, ``h_i = H(h_{i-1}, m_i)``, from a seed naming the
route.  After a request, its conversation's *tip* is the chain hash of the client's
messages; the next request continues the conversation whose tip is the longest
prefix of its own chain:

    conversations = Conversations(factory)
    hashes = chain("anthropic", stripped_messages)
    conv, k = conversations.claim("anthropic", hashes)   # k messages already seen (0: a new one)
    ...                                                  # conv.handed + what is new → prepare
    conversations.settle(conv, hashes[-1])               # the tip moves

The invariant protected here: a request is given a conversation only when that
conversation's last request was exactly its first ``k`` messages, or a fresh one —
never a wrong one.  ``claim`` takes the tip out of the index, so two requests in
flight never share a manager, and a second client that sent the same history gets a
fresh conversation once the first has moved on (correct, just not incremental).
The registry is bounded (least recently used closed first).
"""

from __future__ import annotations

import hashlib
import marshal
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal

from .settings import Route
from .stats import ConversationStats

__all__ = ["Conversation", "Conversations", "chain", "digest"]

RecallMode = Literal["off", "on", "client"]


def digest(message: Any) -> bytes:
    """The hash of one message (already stripped of ``cache_control``).

    The bytes hashed are ``marshal`` format 2 of the parsed JSON value: a pure
    function of the value (format 2 has no back-references, so no dependence on
    which objects are shared), about ten times cheaper than ``json.dumps``, and
    never kept beyond this process.  Keys are hashed in the order the client sent
    them: clients serialise the same objects the same way each turn, and one that
    does not is only handled from scratch (never wrongly) — cheaper than sorting
    every key of the history.  A string content hashes as its one text block."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str) and content:
        # A turn sent as one text block while it is the newest (to carry a breakpoint) and as a
        # string afterwards, as Claude Code does, is the same turn: hash both as the block list.
        message = {**message, "content": [{"type": "text", "text": content}]}
    return hashlib.blake2b(marshal.dumps(message, 2), digest_size=16).digest()


def chain(route: Route, messages: list[Any]) -> list[bytes]:
    """``h_1 … h_n`` for ``messages`` (``hashes[k - 1]`` stands for the first ``k``)."""
    h = hashlib.blake2b(route.encode(), digest_size=16).digest()
    out = []
    for m in messages:
        h = hashlib.blake2b(h + digest(m), digest_size=16).digest()
        out.append(h)
    return out


@dataclass(eq=False)
class Conversation:
    """One client conversation: its manager and what the proxy knows of it.

    ``handed`` is the list given to the manager last time (the same dict objects, so
    the manager's identity check recognises the prefix in O(1)); ``pending`` is what
    the model said that the client never saw (recall rounds), spliced into the next
    request.  Mutated only by the request that holds ``lock``."""

    id: str
    route: Route
    manager: Any
    handed: list[Any] = field(default_factory=list)
    tip: bytes | None = None
    recall: RecallMode = "off"
    pending: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    stats: ConversationStats = field(default_factory=ConversationStats)

    def close(self) -> None:
        self.manager.close()


class Conversations:
    """The registry: tips → conversations, least recently used closed beyond ``capacity``."""

    def __init__(self, factory: Callable[[str, Route], Any], *, capacity: int = 1_000) -> None:
        self._factory = factory
        self._capacity = capacity
        self._by_id: OrderedDict[str, Conversation] = OrderedDict()
        self._tips: dict[bytes, str] = {}
        self._lock = threading.Lock()
        self.evicted = 0

    def claim(self, route: Route, hashes: list[bytes]) -> tuple[Conversation, int]:
        """The conversation whose tip is the longest prefix of ``hashes`` and that
        prefix's length, or a new conversation and 0.  The tip leaves the index until
        ``settle``: a concurrent request with the same prefix gets a fresh one."""
        with self._lock:
            for k in range(len(hashes), 0, -1):
                cid = self._tips.get(hashes[k - 1])
                if cid is not None:
                    conv = self._by_id[cid]
                    del self._tips[hashes[k - 1]]
                    conv.tip = None
                    self._by_id.move_to_end(cid)
                    return conv, k
            conv = Conversation(id=uuid.uuid4().hex[:16], route=route, manager=None)
            self._by_id[conv.id] = conv
            evict = self._overflow()
        conv.manager = self._factory(conv.id, route)
        for old in evict:
            old.close()
        return conv, 0

    def settle(self, conv: Conversation, tip: bytes | None) -> None:
        """``conv`` now ends at ``tip`` (None: it cannot be continued).  Whoever held
        that tip before loses it: the latest conversation to reach a history owns it."""
        with self._lock:
            if conv.id not in self._by_id:
                return  # evicted meanwhile
            if conv.tip is not None:
                self._tips.pop(conv.tip, None)
            conv.tip = tip
            if tip is not None:
                previous = self._tips.get(tip)
                if previous is not None and previous in self._by_id:
                    self._by_id[previous].tip = None
                self._tips[tip] = conv.id

    def forget(self, conv: Conversation) -> None:
        """Drop a conversation that never got going (its first request was refused)."""
        with self._lock:
            self._by_id.pop(conv.id, None)
            if conv.tip is not None:
                self._tips.pop(conv.tip, None)
        conv.close()

    def _overflow(self) -> list[Conversation]:
        out = []
        while len(self._by_id) > self._capacity:
            _, old = self._by_id.popitem(last=False)
            if old.tip is not None:
                self._tips.pop(old.tip, None)
            self.evicted += 1
            out.append(old)
        return out

    def __iter__(self) -> Iterator[Conversation]:
        with self._lock:
            return iter(list(self._by_id.values()))

    def __len__(self) -> int:
        return len(self._by_id)

    def close(self) -> None:
        for conv in self:
            conv.close()
