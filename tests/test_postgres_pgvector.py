"""The dense side over PostgreSQL through pgvector: the database ranks the embeddings, keeps them as
rows, embeds a changed memory again, and keeps to the store's view.  The server is a real one with
the extension (the ``pgserver`` wheel's binaries; Debian 12 has no pgvector package)."""

from __future__ import annotations

import pytest

from lossless.errors import ConfigError
from lossless.memory import embed, recall_memories
from lossless.memory.retrieval import HybridRetriever
from lossless.storage import open_store


@pytest.fixture
def embedder():
    try:
        embed.model_dir()
    except ConfigError:
        pytest.skip("the embed extra is not installed")
    return embed.shared_embedder()


def rows(store) -> dict[str, str]:
    with store.artifacts.db.cursor() as cur:
        cur.execute("SELECT id, digest FROM lossless.memory_vectors")
        return dict(cur.fetchall())


def test_the_database_ranks_embeddings_that_follow_every_change(pgvector_url, embedder, monkeypatch):
    monkeypatch.setenv(embed.ENV, "1")
    store = open_store(pgvector_url)
    ms = store.memory
    ms.add(name="pet rest", description="The kitten is resting on a rug by the heater.", type="user", body="")
    ms.add(name="Revenue", description="Quarterly revenue grew by ten percent.", type="project", body="")
    ms.add(name="Deploys", description="Releases go out on Friday afternoons.", type="project", body="")
    query = "Where does my cat sleep?"
    ranked = ms.dense_search(embedder, query, 3)
    assert ranked is not None and [m.id for m, _ in ranked][0] == "pet-rest"
    assert set(rows(store)) == {"pet-rest", "revenue", "deploys"}  # the vectors are rows of the database
    # the same cosines as the in-process ranking of the same texts
    from lossless.memory.embed import memory_text

    local = embedder.encode([memory_text(m.name, m.description, m.body) for m, _ in ranked]) @ embedder.encode([query])[0]
    assert [round(c, 4) for _, c in ranked] == [round(float(c), 4) for c in local]
    assert [h.memory.id for h in recall_memories(query, ms)] == ["pet-rest"]
    # an edit is embedded again before it is ranked; a deleted memory leaves the results
    before = rows(store)["revenue"]
    ms.update("revenue", description="The cat naps in a basket on the sofa.")
    again = ms.dense_search(embedder, query, 3)
    assert rows(store)["revenue"] != before and {m.id for m, _ in again[:2]} == {"pet-rest", "revenue"}
    ms.delete("pet-rest")
    assert "pet-rest" not in [m.id for m, _ in ms.dense_search(embedder, query, 3)]


def test_a_view_never_sees_another_agents_memory_through_the_dense_side(pgvector_url, embedder, monkeypatch):
    monkeypatch.setenv(embed.ENV, "1")
    store = open_store(pgvector_url)
    store.memory.add(name="Cat notes", description="The kitten sleeps on the heater rug.", type="project",
                     body="", scope="agent:writer")
    store.memory.add(name="Weather", description="It rained all week.", type="project", body="")
    reviewer = store.memory_view(project="acme", agent="reviewer")
    found = reviewer.dense_search(embedder, "Where does my cat sleep?", 5)
    assert found is not None and "cat-notes" not in [m.id for m, _ in found]
    hits = HybridRetriever(embedder=embedder).select_store("Where does my cat sleep?", reviewer)
    assert "cat-notes" not in [h.memory.id for h in hits]
    writer = store.memory_view(agent="writer")
    assert [m.id for m, _ in writer.dense_search(embedder, "Where does my cat sleep?", 1)] == ["cat-notes"]


def test_without_pgvector_the_dense_side_ranks_in_the_process(pg_url, embedder, monkeypatch):
    monkeypatch.setenv(embed.ENV, "1")
    ms = open_store(pg_url).memory
    ms.add(name="pet rest", description="The kitten is resting on a rug by the heater.", type="user", body="")
    assert ms.dense_search(embedder, "Where does my cat sleep?", 3) is None
    assert [h.memory.id for h in recall_memories("Where does my cat sleep?", ms)] == ["pet-rest"]
