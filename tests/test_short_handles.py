"""Short handles: an account names an item by ``sha256:`` and 8 hex digits; every store resolves
any unique start of a handle (8 to 24 digits), names the candidates when a start is shared, and a
proxy conversation resolves it among its own handles only."""

from __future__ import annotations

import hashlib
import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import data_path
from lossless import ContextConfig, ContextManager
from lossless.cli import main
from lossless.dialects import read_any
from lossless.errors import AmbiguousHandle, HandleNotFound
from lossless.markers import HANDLE_RE, as_handle, is_full, short
from lossless.proxy.turn import Scoped
from lossless.store import ArtifactStore, handle_for
from lossless.tokens import block_text
from lossless.tools import run_recall

ACCOUNT_ITEM = re.compile(r"^- .* · (sha256:[0-9a-f]+)$", re.M)


def colliding_pair() -> tuple[bytes, bytes]:
    """Two contents whose handles share their first 8 hex digits (a birthday search: ~80,000 hashes)."""
    seen: dict[str, bytes] = {}
    for i in itertools.count():
        data = f"item {i}".encode()
        key = hashlib.sha256(data).hexdigest()[:8]
        if key in seen:
            return seen[key], data
        seen[key] = data
    raise AssertionError("unreachable")


@settings(max_examples=40, deadline=None)
@given(content=st.binary(max_size=2_000), digits=st.integers(8, 24))
def test_any_start_of_a_handle_recalls_the_same_bytes(tmp_path_factory, content, digits):
    store = ArtifactStore(tmp_path_factory.mktemp("store"))
    full = store.put(content)
    start = full[: len("sha256:") + digits]
    assert store.resolve(start) == full
    assert store.get_bytes(start) == content and store.size(start) == len(content) and start in store
    assert is_full(full) and short(full) == full[:15] and HANDLE_RE.fullmatch(short(full))


WRAPPINGS = ("{h}", "`{h}`", "'{h}'", '"{h}"', "[{h}]", "<{h}>", "handle={h}", "handle: {h}", " {h}\n",
             "{hex}", "{HEX}", "`{hex}`", "handle={HEX}")
"""How a model writes a handle it read: quoted, bracketed, labelled as the marker labels it, without
``sha256:``, upper-cased."""


@settings(max_examples=40, deadline=None)
@given(content=st.text(min_size=1, max_size=500), digits=st.integers(8, 24), wrapping=st.sampled_from(WRAPPINGS))
def test_a_handle_as_a_model_writes_it_recalls_the_same_text(tmp_path_factory, content, digits, wrapping):
    store = ArtifactStore(tmp_path_factory.mktemp("store"))
    full = store.put(content)
    start = full[: len("sha256:") + digits]
    hexdigits = start.split(":", 1)[1]
    asked = wrapping.format(h=start, hex=hexdigits, HEX=hexdigits.upper())
    assert store.resolve(asked) == full and store.get(asked) == content
    answer = run_recall({"handle": asked, "limit": 10_000}, store)
    assert not answer.startswith("error:") and content in answer
    assert Scoped(store, {full}).get(asked) == store.get(full)  # a proxy conversation's recall too
    assert as_handle(asked) == start


@given(st.text(max_size=40))
def test_text_that_is_not_a_handle_is_never_made_into_one(text):
    made = as_handle(text)
    if HANDLE_RE.fullmatch(made):
        hexdigits = made.split(":", 1)[1]
        assert hexdigits.lower() in text.lower() and 8 <= len(hexdigits) <= 24
    else:
        assert made == text.strip()


def test_a_shared_start_names_every_candidate_and_a_longer_start_picks_one(tmp_path, capsys):
    a, b = colliding_pair()
    store = ArtifactStore(tmp_path / "s")
    ha, hb = store.put(a), store.put(b)
    assert short(ha) == short(hb) and ha != hb
    with pytest.raises(AmbiguousHandle) as caught:
        store.get(short(ha))
    said = str(caught.value)
    assert ha in said and hb in said and "\n" not in said
    assert short(ha) not in store
    digits = next(n for n in range(9, 25) if ha[: 7 + n] != hb[: 7 + n])
    assert store.get_bytes(ha[: 7 + digits]) == a and store.get_bytes(hb[: 7 + digits]) == b
    # the recall tool answers the model with the candidates, on one line
    answer = run_recall({"handle": short(ha)}, store)
    assert answer.startswith("error: ") and ha in answer and hb in answer
    # and the CLI says it in one line, exit 2 (as for a handle not found), no traceback
    code = main(["recall", short(ha), "--store", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert code == 2 and ha in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_an_unknown_or_malformed_start_is_not_found(tmp_path):
    store = ArtifactStore(tmp_path / "s")
    h = store.put(b"present")
    missing = "sha256:" + ("0" if h[7] != "0" else "1") + h[8:15]
    with pytest.raises(HandleNotFound, match="no artifact"):
        store.get(missing)
    for bad in ("sha256:abc", "sha256:" + "g" * 8, h[:14]):  # too short, not hex
        with pytest.raises(HandleNotFound, match="not a lossless handle"):
            store.get(bad)
        assert bad not in store


def test_an_accounts_items_are_short_and_each_recalls_its_original(tmp_path):
    session = read_any(data_path("mini-swe-agent", "django__django-15280.traj.json"))
    store_dir = tmp_path / "store"
    cm = ContextManager(config=ContextConfig(window=32_000), store=store_dir)
    view = cm.prepare(session.messages, system=session.system)
    text = "\n".join(block_text(b) for m in view.messages for b in m.content)
    items = ACCOUNT_ITEM.findall(text)
    assert items, "the snip's account lists items with their own handle"
    assert all(len(h) == len("sha256:") + 8 for h in items)
    made = {h for e in view.fired for h in e.items}
    store = ArtifactStore(store_dir)
    for h in items:
        full = store.resolve(h)
        assert full in made or full in {h2 for e in view.fired for h2 in e.handles}
        assert store.get(h) == store.get(full) and handle_for(store.get_bytes(h)) == full


def test_a_proxy_conversation_resolves_a_short_handle_among_its_own_only(tmp_path):
    store = ArtifactStore(tmp_path / "s")
    mine, theirs = store.put("mine " * 200), store.put("theirs " * 200)
    scoped = Scoped(store, {mine})
    assert scoped.get(short(mine)) == "mine " * 200 and scoped.get(mine) == "mine " * 200
    with pytest.raises(HandleNotFound, match="in this conversation"):
        scoped.get(short(theirs))  # in the store, but another conversation's
    a, b = colliding_pair()
    ha, hb = store.put(a), store.put(b)
    assert Scoped(store, {ha}).get(short(ha)) == a.decode()  # the other one is not this conversation's
    with pytest.raises(AmbiguousHandle):
        Scoped(store, {ha, hb}).get(short(ha))


def test_the_postgresql_store_resolves_a_short_handle(pg_url):
    from lossless.storage import open_store

    store = open_store(pg_url).artifacts
    a, b = colliding_pair()
    with store.batch():
        ha, hb = store.put(a), store.put(b)
    one = store.put(b"one of a kind " * 50)
    assert store.get_bytes(short(one)) == b"one of a kind " * 50 and short(one) in store
    assert store.size(one[:20]) == len(b"one of a kind " * 50)
    with pytest.raises(AmbiguousHandle) as caught:
        store.get_bytes(short(ha))
    assert ha in str(caught.value) and hb in str(caught.value)
    with pytest.raises(HandleNotFound):
        store.get_bytes("sha256:" + ("f" if one[7] != "f" else "e") * 8)
