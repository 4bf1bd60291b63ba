"""Memories from dialogue keep their conversational context, and retrieval uses it."""

from __future__ import annotations

import json

from lossless.memory import Extractor, MemoryStore, recall_memories
from lossless.messages import assistant, user
from conftest import Scripted


def test_an_extracted_memory_is_found_by_the_words_around_it(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    reply = json.dumps({"operations": [{"op": "add", "name": "Staging host", "type": "reference",
                                        "description": "Staging runs on kestrel-02", "body": "kestrel-02"}]})
    ex = Extractor(store, Scripted(reply), debounce=0)
    ex.turn_ended([user("Where do the nightly deploy previews live? token ghp_" + "x" * 36),
                   assistant("On kestrel-02.")])
    assert ex.poll().added == ("staging-host",)
    m = store.get("staging-host")
    assert "nightly deploy previews" in m.extra["context"] and "x" * 36 not in m.extra["context"]
    # The memory's own text never says "nightly" or "previews": its context does.
    assert [h.memory.id for h in recall_memories("nightly previews", store)] == ["staging-host"]


def test_the_extraction_prompt_shows_the_matching_memories_not_the_whole_store(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    for i in range(120):
        store.add(name=f"fact {i}", description=f"unrelated fact number {i}", type="project", body="x")
    store.add(name="glaze", description="celadon glaze needs feldspar", type="project", body="3:1")
    p = Scripted(json.dumps({"operations": []}))
    ex = Extractor(store, p, debounce=0)
    ex.turn_ended([user("what about the celadon glaze again?"), assistant("feldspar")])
    ex.poll()
    prompt = p.requests[0].messages[0].text
    assert "- glaze (project)" in prompt and prompt.count("\n- ") <= 100


def test_the_live_extractor_keeps_the_messages_around_the_one_a_memory_cites(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    reply = json.dumps({"operations": [{"op": "add", "name": "Staging host", "type": "reference", "from": [2],
                                        "description": "Staging runs on kestrel-02", "body": "kestrel-02"}]})
    p = Scripted(reply)
    ex = Extractor(store, p, debounce=0)
    later = [user(f"Unrelated question {i} about the {w} page?") for i, w in enumerate(["login", "billing", "help"])]
    ex.turn_ended([user("Where do the nightly deploy previews live?"), assistant("On kestrel-02."), *later])
    assert ex.poll().added == ("staging-host",)
    assert "[1] user: Where do the nightly deploy previews live?\n\n[2] assistant: On kestrel-02." in \
        p.requests[0].messages[0].text
    context = store.get("staging-host").extra["context"]
    # message 2 and two on each side: the question before it, the next two after; not the last one
    assert context == ("Where do the nightly deploy previews live? On kestrel-02. Unrelated question 0 about the "
                       "login page? Unrelated question 1 about the billing page?")
