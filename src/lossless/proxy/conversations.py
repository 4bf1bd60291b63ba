"""Which conversation a request continues: a hash chain over its messages.

A client sends its whole history every time.  Each message is hashed in a
canonical form that ignores ``cache_control`` (clients move their breakpoints every
turn), and the hashes are chained, ``h_i = H(h_{i-1}, m_i)``, from a seed naming the
route.  After a request, its conversation's *tip* is the chain hash of the client's
messages; the next request continues the conversation whose tip is the longest
prefix of its own chain:

    conversations = Conversations(factory)
    hashes = chain("anthropic", stripped, tenant)
    conv, k = conversations.claim("anthropic", hashes, stripped, tenant=tenant)  # k already seen
    ...                                                  # conv.handed + what is new → prepare
    conversations.settle(conv, hashes[-1], in_flight=True)   # the tip moves
    conversations.answered(conv, answer_key(shown))      # what the client was given

The invariant protected here: a request is given a conversation only when that
conversation's last request was exactly its first ``k`` messages *and* the message
after them is the answer the proxy returned for it (``answer_key``), or a fresh one —
never a wrong one.  Two clients that sent the same history (two forks of a session,
two agents with one opening) each get their own conversation, and each continues its
own: one client's answer, or the recall rounds behind it, never reaches the other's
request.  A tip may stand for several conversations; ``claim`` picks the one whose
answer the client echoes.  While a conversation's answer is in flight no other
request can claim it.  The chain is seeded by route and tenant (``tenant_of``), so
conversations of different API keys never meet.

The registry is bounded, by count and by the bytes of the requests its conversations hold
(``max_bytes``): beyond either, the least recently used is *parked* — its last forwarded view,
answer, handles and pending recall rounds written to the store as one artifact, and only its
tip kept here (a few hundred bytes).  A later continuation of it is restored from there: its
manager starts from that view, so the request forwarded is the one it would have been (the
upstream's cached prefix survives) and costs O(new) again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import marshal
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal

from .settings import Route
from .stats import ConversationStats

__all__ = ["Conversation", "Conversations", "answer_key", "chain", "digest", "tenant_of"]

RecallMode = Literal["off", "on", "client"]
TIPS_PER_HISTORY = 8
"""Conversations one history can stand for at once (forks of it); the oldest leaves the index."""


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


def chain(route: Route, messages: list[Any], tenant: str = "") -> list[bytes]:
    """``h_1 … h_n`` for ``messages`` (``hashes[k - 1]`` stands for the first ``k``), seeded by
    the route and the tenant: a route or a tenant never continues another's conversation."""
    h = hashlib.blake2b(f"{route}\0{tenant}".encode(), digest_size=16).digest()
    out = []
    for m in messages:
        h = hashlib.blake2b(h + digest(m), digest_size=16).digest()
        out.append(h)
    return out


def tenant_of(secret: bytes, credential: str | None) -> str:
    """The tenant a credential (an API key, or a configured header's value) stands for: a
    keyed hash, 16 hex digits, never the credential itself; "" for a request without one."""
    if not credential:
        return ""
    return hmac.new(secret, credential.encode("utf-8", "surrogatepass"), hashlib.blake2b).hexdigest()[:16]


def answer_key(message: Any) -> bytes:
    """What identifies an answer as the client echoes it: its tool calls' ids when it has
    any (the provider makes them unique per answer), else its text without whitespace.
    Thinking, signatures and formatting the client may drop or rewrite do not count.  On the
    Responses API an answer is a list of output items: their calls' ids, else their texts."""
    ids: list[str] = []
    texts: list[str] = []
    if isinstance(message, list):
        for item in message:
            if not isinstance(item, dict):
                continue
            if item.get("type") in ("function_call", "custom_tool_call") or "call_id" in item:
                ids.append(str(item.get("call_id")))
            elif item.get("type", "message") == "message":
                content = item.get("content")
                parts = [content] if isinstance(content, str) else content if isinstance(content, list) else []
                texts += [str(p) if isinstance(p, str) else str(p.get("text") or "") for p in parts
                          if isinstance(p, (str, dict))]
        message = None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") in ("tool_use", "server_tool_use"):
                ids.append(str(block.get("id")))
            elif block.get("type") == "text":
                texts.append(str(block.get("text") or ""))
    for call in (message.get("tool_calls") or []) if isinstance(message, dict) else []:
        if isinstance(call, dict):
            ids.append(str(call.get("id")))
    key = "\x00".join(ids) if ids else "".join("".join(texts).split())
    return hashlib.blake2b(f"{bool(ids)}\x01{key}".encode("utf-8", "surrogatepass"), digest_size=16).digest()


def echoes(answer: bytes | None, new: list[Any]) -> bool:
    """Whether ``new`` starts with the answer whose ``answer_key`` is ``answer`` (None: any)."""
    if answer is None:
        return True
    first = new[0] if new else None
    if isinstance(first, dict) and "type" in first and (first["type"] != "message" or "role" in first):
        from .responses import echo_length  # Responses items: the answer is some of the leading output items

        if first["type"] != "message" or first.get("role") == "assistant":
            return echo_length(new, answer) > 0
    return isinstance(first, dict) and first.get("role") == "assistant" and answer_key(first) == answer


@dataclass(frozen=True, slots=True)
class Parked:
    """A conversation moved out of memory: where its state lies in the store, and what ``claim``
    needs to know whether a request continues it."""

    handle: str
    route: Route
    tenant: str
    answer: bytes | None


@dataclass(eq=False)
class Conversation:
    """One client conversation: its manager and what the proxy knows of it.

    ``handed`` is the list given to the manager last time (the same dict objects, so
    the manager's identity check recognises the prefix in O(1)); ``pending`` is what
    the model said that the client never saw (recall rounds), spliced into the next
    request; ``answer`` identifies the answer the client was given (``answer_key``; None:
    none was, so any continuation is the client's own), and ``in_flight`` is true while it
    is being made.  Mutated only by the request that holds ``lock``."""

    id: str
    route: Route
    manager: Any
    tenant: str = ""
    handed: list[Any] = field(default_factory=list)
    tip: bytes | None = None
    answer: bytes | None = None
    in_flight: bool = False
    handles: set[str] = field(default_factory=set)
    """Every handle a view of this conversation held: all that its recall may answer."""
    recall: RecallMode = "off"
    pending: Any = None
    adapter: Any = None
    """On the Responses API, the ``adapters.responses.ResponsesContext`` over ``manager``."""
    size: int = 0
    """Bytes of its last request: what the registry's byte bound counts."""
    view: list[Any] = field(default_factory=list)
    """The messages last forwarded (the manager's own list): what parking saves."""
    restored: dict[str, Any] | None = None
    """Set on a conversation just restored from the store: the calibration it had (may be empty)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    stats: ConversationStats = field(default_factory=ConversationStats)

    def continues(self, new: list[Any]) -> bool:
        """Whether a request whose messages after this conversation's tip are ``new`` is this
        conversation going on: nothing is in flight, and it starts with the answer the client
        was given (when it was given one)."""
        return not self.in_flight and echoes(self.answer, new)

    def close(self) -> None:
        self.manager.close()


class Conversations:
    """The registry: tips → conversations, least recently used closed beyond ``capacity``."""

    def __init__(self, factory: Callable[[str, Route, str], Any], *, capacity: int = 1_000,
                 max_bytes: int | None = None, store: Any = None, shared: Any = None) -> None:
        self._factory = factory
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._store = store
        """Artifacts (``put``/``get``) where evicted conversations are parked; None: closed, forgotten."""
        self._parked: OrderedDict[bytes, list[Parked]] = OrderedDict()
        self._shared = shared
        """``shared.SharedTips`` when replicas share a PostgreSQL store: consulted before memory."""
        self.published = 0
        self.parked = 0
        self.restored = 0
        self._by_id: OrderedDict[str, Conversation] = OrderedDict()
        self._tips: dict[bytes, list[str]] = {}
        self._lock = threading.Lock()
        self.evicted = 0

    def claim(self, route: Route, hashes: list[bytes], messages: list[Any], *,
              tenant: str = "") -> tuple[Conversation, int]:
        """The conversation whose tip is the longest prefix of ``hashes`` and which the
        rest of ``messages`` continues (``Conversation.continues``), with that prefix's
        length; else a new conversation and 0.  The tip leaves the index until ``settle``:
        a concurrent request with the same prefix gets a fresh one."""
        published = [row for row in (self._shared.longest(hashes, route, tenant) if self._shared is not None else [])
                     if echoes(row[2], messages[row[0]:])]
        with self._lock:
            for k in range(len(hashes), 0, -1):
                if published and published[0][0] > k:
                    break  # another replica went further with this conversation: restore its state
                ids = self._tips.get(hashes[k - 1])
                if not ids:
                    continue
                for cid in reversed(ids):  # the most recent fork first
                    conv = self._by_id[cid]
                    if conv.continues(messages[k:]):
                        self._untip(conv)
                        self._by_id.move_to_end(cid)
                        return conv, k
            found = self._from_replicas(published, messages) or self._unpark(route, hashes, messages, tenant)
            k = found[1] if found else 0
            conv = Conversation(id=uuid.uuid4().hex[:16], route=route, manager=None, tenant=tenant)
            self._by_id[conv.id] = conv
            evict = self._overflow(keep=conv)
        if found is not None:
            _restore(conv, found[0])
        conv.manager = self._factory(conv.id, route, tenant)
        self._park(evict)
        return conv, k

    def _unpark(self, route: Route, hashes: list[bytes], messages: list[Any],
                tenant: str) -> tuple[dict[str, Any], int] | None:
        """The saved state of the parked conversation this request continues, and its length."""
        if not self._parked or self._store is None:
            return None
        for k in range(len(hashes), 0, -1):
            refs = self._parked.get(hashes[k - 1])
            for ref in reversed(refs or []):
                if ref.route == route and ref.tenant == tenant and echoes(ref.answer, messages[k:]):
                    refs.remove(ref)  # type: ignore[union-attr]
                    if not refs:
                        del self._parked[hashes[k - 1]]
                    try:
                        record = json.loads(self._store.get(ref.handle))
                    except Exception:  # noqa: BLE001 - a store that lost it: handled from scratch
                        return None
                    self.restored += 1
                    return record, k
        return None

    def settle(self, conv: Conversation, tip: bytes | None, *, in_flight: bool = False) -> None:
        """``conv`` now ends at ``tip`` (None: it cannot be continued); ``in_flight``: its
        answer is being made (``answered`` ends that).  Other conversations at the same tip
        keep it (forks of one history), the oldest beyond ``TIPS_PER_HISTORY`` losing it."""
        with self._lock:
            if conv.id not in self._by_id:
                return  # evicted meanwhile
            self._untip(conv)
            conv.tip = tip
            conv.in_flight = in_flight
            if in_flight:
                conv.answer = None
            if tip is not None:
                ids = self._tips.setdefault(tip, [])
                ids.append(conv.id)
                while len(ids) > TIPS_PER_HISTORY:
                    dropped = self._by_id.get(ids.pop(0))
                    if dropped is not None:
                        dropped.tip = None

    def answered(self, conv: Conversation, key: bytes | None) -> None:
        """The answer to ``conv``'s request reached its client (``key``: ``answer_key`` of
        what the client was shown; None: it was given none, or only part of one)."""
        with self._lock:
            conv.answer = key
            conv.in_flight = False

    def _untip(self, conv: Conversation) -> None:
        if conv.tip is None:
            return
        ids = self._tips.get(conv.tip)
        if ids is not None:
            if conv.id in ids:
                ids.remove(conv.id)
            if not ids:
                del self._tips[conv.tip]
        conv.tip = None

    def forget(self, conv: Conversation) -> None:
        """Drop a conversation that never got going (its first request was refused)."""
        with self._lock:
            self._by_id.pop(conv.id, None)
            self._untip(conv)
        conv.close()

    def _from_replicas(self, published: list[tuple[int, str, bytes | None]],
                       messages: list[Any]) -> tuple[dict[str, Any], int] | None:
        for k, handle, _ in published:
            try:
                record = json.loads(self._store.get(handle))
            except Exception:  # noqa: BLE001 - a record the store lost: handled from scratch
                continue
            self.restored += 1
            return record, k
        return None

    @property
    def sharing(self) -> bool:
        return self._shared is not None

    def publish(self, conv: Conversation) -> None:
        """Share ``conv``'s state with the other replicas (after its answer reached the client).
        Does I/O: call it off the event loop."""
        if self._shared is None or self._store is None:
            return
        with conv.lock:
            if conv.tip is None or not conv.view:
                return
            tip, answer = conv.tip, conv.answer
            data = json.dumps(_record(conv), ensure_ascii=False).encode("utf-8", "surrogatepass")
        handle = self._store.put(data)
        self._shared.publish(tip, conv.route, conv.tenant, handle, answer)
        self.published += 1

    def _overflow(self, keep: Conversation | None = None) -> list[tuple[Conversation, bytes | None]]:
        """Take the least recently used out while over a bound (never ``keep``, nor one whose
        answer is in flight); each with its tip, for ``_park``."""
        out = []
        total = sum(c.size for c in self._by_id.values()) if self._max_bytes is not None else 0
        for cid in list(self._by_id):
            over_bytes = self._max_bytes is not None and total > self._max_bytes
            if len(self._by_id) <= self._capacity and not over_bytes:
                break
            old = self._by_id[cid]
            if old is keep or old.in_flight:
                continue
            del self._by_id[cid]
            tip = old.tip
            self._untip(old)
            total -= old.size
            self.evicted += 1
            out.append((old, tip))
        return out

    def _park(self, evicted: list[tuple[Conversation, bytes | None]]) -> None:
        """Write each evicted conversation's state to the store (outside the registry's lock)
        and keep its tip; then close its manager."""
        for conv, tip in evicted:
            try:
                if self._store is not None and tip is not None and conv.view:
                    handle = self._store.put(json.dumps(_record(conv), ensure_ascii=False).encode("utf-8",
                                                                                                "surrogatepass"))
                    with self._lock:
                        self._parked.setdefault(tip, []).append(Parked(handle, conv.route, conv.tenant, conv.answer))
                        self._parked.move_to_end(tip)
                        while len(self._parked) > PARKED_TIPS:
                            self._parked.popitem(last=False)
                        self.parked += 1
            except Exception:  # noqa: BLE001 - a conversation that cannot be parked is only handled afresh
                pass
            conv.close()

    def trim(self) -> None:
        """Apply the bounds now (after a request changed a conversation's size)."""
        with self._lock:
            evict = self._overflow()
        self._park(evict)

    def __iter__(self) -> Iterator[Conversation]:
        with self._lock:
            return iter(list(self._by_id.values()))

    def __len__(self) -> int:
        return len(self._by_id)

    def close(self) -> None:
        for conv in self:
            conv.close()


PARKED_TIPS = 100_000
"""Parked conversations remembered (a tip and a handle each, ~200 bytes); the oldest are forgotten."""


def _record(conv: Conversation) -> dict[str, Any]:
    """What a parked conversation needs to go on: JSON, as the store keeps it."""
    pending = conv.pending
    return {"version": 1, "route": conv.route, "tenant": conv.tenant, "view": conv.view,
            "answer": conv.answer.hex() if conv.answer is not None else None, "recall": conv.recall,
            "handles": sorted(conv.handles), "overhead": conv.stats.overhead, "client_tokens": conv.stats.client_tokens,
            "calibration": _calibration(conv),
            "pending": None if pending is None else {
                "rounds": pending.rounds, "last": pending.last, "last_answers": pending.last_answers,
                "shown": pending.shown.hex() if pending.shown is not None else None}}


def _calibration(conv: Conversation) -> dict[str, Any] | None:
    """The usage report the manager's estimates rest on, when it was for the view being parked:
    restored with it, the manager estimates (and so compacts) exactly as it would have."""
    calibrator = getattr(conv.manager, "calibrator", None)
    reported = getattr(calibrator, "_reported", None)
    observed = getattr(calibrator, "_observed", ())
    last = getattr(conv.manager, "_last_out", ())  # the neutral view (on Chat Completions, fewer than the wire's)
    if reported is None or len(observed) != len(last) or not all(a is b for a, b in zip(observed, last)):
        return None
    return {"reported": reported, "overhead": getattr(calibrator, "_overhead", None)}


def _restore(conv: Conversation, record: dict[str, Any]) -> None:
    from .turn import Pending

    conv.restored = record.get("calibration") or {}
    conv.handed = list(record["view"])
    conv.view = conv.handed
    conv.recall = record["recall"]
    conv.handles = set(record["handles"])
    conv.answer = bytes.fromhex(record["answer"]) if record["answer"] else None
    conv.stats.overhead = record["overhead"]
    conv.stats.client_tokens = record["client_tokens"]
    if record["pending"]:
        p = record["pending"]
        conv.pending = Pending([(m, [tuple(a) for a in answers]) for m, answers in p["rounds"]], p["last"],
                               [tuple(a) for a in p["last_answers"]],
                               bytes.fromhex(p["shown"]) if p["shown"] else None)
