"""The dense side of retrieval (``lossless[embed]``): the numpy encoder, its vector cache, fusion."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless.errors import ConfigError
from lossless.memory import LexicalRetriever, MemoryStore, recall_memories
from lossless.memory import embed
from lossless.memory.retrieval import HybridRetriever, default_retriever, fuse


def _installed() -> bool:
    try:
        embed.model_dir()
    except ConfigError:
        return False
    return True


needs_model = pytest.mark.skipif(not _installed(), reason="the embed extra is not installed")

# Reference vectors: the first 8 components of each sentence's embedding as computed once by
# sentence-transformers 6.2.0 on torch 2.13.0 (CPU), SentenceTransformer(<the wheel's model
# directory>).encode(..., normalize_embeddings=True), in a throwaway environment.
REFERENCE = {
    "The cat sits on the mat.":
        [0.134177, -0.0329, -0.024804, 0.041439, -0.036348, 0.041814, 0.031217, 0.037202],
    "A kitten is resting on a rug.":
        [0.075357, 0.01511, 0.012094, 0.06079, -0.004022, 0.056365, -0.027142, -0.002098],
    "Caroline went to the LGBTQ support group on 7 May 2023.":
        [-0.062869, 0.000315, -0.01066, 0.082236, -0.058818, 0.048739, -0.057321, -0.083753],
    "x " * 400:  # past the 256-token limit: truncated as the reference truncates
        [-0.002061, -0.037469, -0.031494, -0.042564, -0.100168, -0.082647, -0.03391, 0.000215],
}
REFERENCE_COSINE = 0.64113  # cat/mat against kitten/rug, same source


@pytest.fixture(scope="module")
def embedder() -> embed.Embedder:
    return embed.shared_embedder()


@needs_model
def test_encoder_matches_the_reference_implementation(embedder):
    vecs = embedder.encode(list(REFERENCE))
    assert vecs.shape == (len(REFERENCE), 384)
    for row, want in zip(vecs, REFERENCE.values()):
        assert [round(float(x), 4) for x in row[:8]] == pytest.approx(want, abs=2e-4)
        assert float(row @ row) == pytest.approx(1.0, abs=1e-5)
    assert float(vecs[0] @ vecs[1]) == pytest.approx(REFERENCE_COSINE, abs=1e-4)


@needs_model
def test_paraphrases_are_closer_than_unrelated_sentences(embedder):
    a, b, c, d = embedder.encode(["I indent my code with tabs.", "Use tab characters for indentation.",
                                  "The quarterly revenue grew by ten percent.", "Sales rose 10% this quarter."])
    assert a @ b > a @ c + 0.3 and a @ b > a @ d + 0.3
    assert c @ d > c @ a + 0.3
    assert embedder.encode([]).shape == (0, 384)


@needs_model
def test_the_wheel_carries_the_upstream_weights():
    path = embed.model_dir() / "model.safetensors"
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    assert digest.hexdigest() == embed.WEIGHTS_SHA256
    assert (embed.model_dir() / "LICENSE").read_text("utf-8").count("Apache License") >= 1


@needs_model
def test_model_files_other_than_the_pinned_ones_are_refused(tmp_path):
    embed.verify(embed.model_dir())  # the installed files pass
    for name in embed.PINNED:
        copy = tmp_path / name
        copy.mkdir()
        for other in embed.PINNED:
            target = copy / other
            if other == name:
                target.write_bytes((embed.model_dir() / other).read_bytes()[:-1] + b" ")
            else:
                target.symlink_to(embed.model_dir() / other)
        with pytest.raises(ConfigError, match=f"{name} is not the all-MiniLM-L6-v2 file"):
            embed.verify(copy)


@needs_model
def test_nothing_is_downloaded_at_run_time(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    fresh = embed.Embedder()  # not the shared one: this one loads under the block
    vec = fresh.encode(["offline all the way"])
    assert vec.shape == (1, 384)


def test_a_missing_extra_is_one_actionable_line(monkeypatch, tmp_path):
    monkeypatch.setattr(embed, "_PACKAGE", "lossless_no_such_model_wheel")
    with pytest.raises(ConfigError, match=r"pip install 'lossless\[embed\]'") as err:
        embed.model_dir()
    assert "\n" not in str(err.value)
    monkeypatch.setenv(embed.ENV, "1")
    with pytest.raises(ConfigError, match="embed"):
        recall_memories("anything", MemoryStore(tmp_path / "mem"))


def test_off_unless_asked_for(monkeypatch):
    monkeypatch.delenv(embed.ENV, raising=False)
    assert isinstance(default_retriever(), LexicalRetriever)
    monkeypatch.setenv(embed.ENV, "0")
    assert isinstance(default_retriever(), LexicalRetriever)


@pytest.fixture
def store(tmp_path):
    s = MemoryStore(tmp_path / "mem")
    s.add(name="pet rest", description="The kitten is resting on a rug by the heater.", type="user", body="")
    s.add(name="Revenue", description="Quarterly revenue grew by ten percent.", type="project", body="")
    s.add(name="Deploy", description="Deploys go through the staging cluster first.", type="project",
          body="Never push straight to production.")
    return s


@needs_model
def test_hybrid_finds_a_paraphrase_lexical_misses(store, embedder):
    query = "Where does my cat sleep?"
    assert LexicalRetriever().select_store(query, store) == []
    hits = HybridRetriever(embedder=embedder).select_store(query, store)
    assert [h.memory.id for h in hits] == ["pet-rest"]
    assert HybridRetriever(embedder=embedder).select("quantum chromodynamics on a lattice", store.recent()) == []


@needs_model
def test_vectors_are_cached_and_follow_hand_edits(store, embedder, monkeypatch):
    monkeypatch.setenv(embed.ENV, "1")
    index = embed.vector_index(store.catalog, embedder)
    assert recall_memories("how do deploys reach production?", store)[0].memory.id == "deploy"
    assert index.embedded == 3 and len(index) == 3
    recall_memories("revenue this quarter", store)
    assert index.embedded == 3  # nothing changed: nothing embedded again
    path = store.dir / "revenue.md"
    path.write_text(path.read_text("utf-8").replace("Quarterly revenue grew by ten percent.",
                                                    "The office plants need watering on Fridays."), "utf-8")
    (store.dir / "deploy.md").unlink()
    hits = [h.memory.id for h in recall_memories("who waters the greenery?", store)]
    assert hits[0] == "revenue" and "deploy" not in hits
    assert index.embedded == 4 and len(index) == 2  # the edited file alone was embedded again
    again = embed.VectorIndex(MemoryStore(store.dir).catalog, embedder)  # another process: reads the file
    again.refresh()
    assert again.embedded == 0 and len(again) == 2


keys = st.lists(st.tuples(st.sampled_from("abcdefghij"), st.floats(0, 50, allow_nan=False)), max_size=12)


@settings(max_examples=150, deadline=None)
@given(lexical=keys, dense=keys, method=st.sampled_from(["rrf", "score"]), weight=st.floats(0.05, 0.95))
def test_fusion_is_a_permutation_of_the_candidates(lexical, dense, method, weight):
    lexical = sorted(lexical, key=lambda t: -t[1])
    dense = sorted(dense, key=lambda t: -t[1])
    fused = [k for k, _ in fuse(lexical, dense, method=method, weight=weight)]
    assert sorted(fused) == sorted({k for k, _ in lexical + dense})
    alone = [k for k, _ in fuse(lexical, [], method=method, weight=weight)]
    assert alone == list(dict.fromkeys(k for k, _ in lexical))  # no dense side: the lexical order


def test_lexical_retrieval_loads_no_model_or_numpy(tmp_path):
    code = ("import sys; from lossless.memory import MemoryStore, recall_memories; "
            f"s = MemoryStore({str(tmp_path / 'mem')!r}); s.add(name='tabs', description='indent with tabs', "
            "type='user', body=''); print(len(recall_memories('indent', s))); "
            "print(sorted(m for m in ('numpy', 'tokenizers', 'threadpoolctl') if m in sys.modules))")
    env = {k: v for k, v in os.environ.items() if k != embed.ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["1", "[]"]


def test_cli_search_names_the_extra_when_enabled_without_it(store, monkeypatch, capsys):
    from lossless.cli import main

    monkeypatch.setenv(embed.ENV, "1")
    monkeypatch.setattr(embed, "_PACKAGE", "lossless_no_such_model_wheel")
    assert main(["memory", "--dir", str(store.dir), "search", "cat"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'lossless[embed]'" in err


@needs_model
def test_cli_search_uses_the_dense_side_when_enabled(store, monkeypatch, capsys):
    from lossless.cli import main

    monkeypatch.setenv(embed.ENV, "1")
    assert main(["memory", "--dir", str(store.dir), "search", "where", "does", "my", "cat", "sleep"]) == 0
    assert "pet-rest" in capsys.readouterr().out
    monkeypatch.delenv(embed.ENV)
    assert main(["memory", "--dir", str(store.dir), "search", "where", "does", "my", "cat", "sleep"]) == 0
    assert "(nothing relevant)" in capsys.readouterr().out


@needs_model
def test_a_torn_vector_file_is_rebuilt_and_a_link_is_refused(store, embedder):
    from lossless.errors import MemoryError_

    path = store.dir / ".index" / embed.VECTORS_DB
    store.catalog.refresh()
    path.write_bytes(b"not a database at all" * 10)
    index = embed.VectorIndex(store.catalog, embedder)
    assert index.search(embedder.encode(["cat nap"])[0], 1)[0][0] == "pet-rest"
    assert index.embedded == 3
    index.close()
    path.unlink()
    path.symlink_to(store.dir / "elsewhere.sqlite3")
    with pytest.raises(MemoryError_, match="symbolic link"):
        embed.VectorIndex(store.catalog, embedder).refresh()
    assert not (store.dir / "elsewhere.sqlite3").exists()


@needs_model
def test_the_dense_side_keeps_to_the_store_view(tmp_path, embedder, monkeypatch):
    monkeypatch.setenv(embed.ENV, "1")
    admin = MemoryStore(tmp_path / "mem")
    admin.add(name="cat nap", description="The kitten is resting on a rug.", type="project", body="",
              scope="agent:writer")
    admin.add(name="deploys", description="Deploys go through staging first.", type="project", body="",
              scope="agent:reviewer")
    reviewer = MemoryStore(tmp_path / "mem", agent="reviewer")
    assert recall_memories("where does my cat sleep?", reviewer) == []
    index = embed.vector_index(reviewer.catalog, embedder)
    assert len(index) == 1  # the writer's memory is not even in the reviewer's matrix
    writer = MemoryStore(tmp_path / "mem", agent="writer")
    assert [h.memory.id for h in recall_memories("where does my cat sleep?", writer)] == ["cat-nap"]
    assert embed.vector_index(writer.catalog, embedder).embedded == 0  # embedded when written, not by a query
    again = MemoryStore(tmp_path / "mem", agent="reviewer")  # the writer's pass deleted none of the reviewer's
    recall_memories("how do deploys go out?", again)
    assert embed.vector_index(again.catalog, embedder).embedded == 0


@needs_model
def test_memories_are_embedded_on_write_and_no_query_embeds_the_store(tmp_path, embedder, monkeypatch, capsys):
    from lossless.cli import main

    store = MemoryStore(tmp_path / "mem")
    for i in range(embed.QUERY_ENCODE + 4):  # written before the dense side was on: no vectors
        store.add(name=f"fact {i}", description=f"note number {i} about the garden", type="project", body="")
    monkeypatch.setenv(embed.ENV, "1")
    index = embed.vector_index(store.catalog, embedder)
    assert recall_memories("garden notes", store, HybridRetriever(embedder=embedder))  # the lexical side answers
    assert index.embedded == 0 and index.missing == embed.QUERY_ENCODE + 4  # the query embedded nothing
    assert main(["memory", "--dir", str(store.dir), "search", "garden"]) == 0
    assert "20 memories without a vector yet" in capsys.readouterr().err
    assert main(["memory", "--dir", str(store.dir), "embed"]) == 0
    assert "embedded 20 memories in" in capsys.readouterr().out
    recall_memories("garden notes", store, HybridRetriever(embedder=embedder))
    assert index.embedded == 0 and index.missing == 0 and len(index) == 20  # read from the file the CLI filled
    store.add(name="cat nap", description="The kitten is resting on a rug.", type="user", body="")
    assert index.embedded == 1  # by add(), on write
    hits = HybridRetriever(embedder=embedder).select_store("where does my cat sleep?", store)
    assert [h.memory.id for h in hits] == ["cat-nap"] and index.embedded == 1  # and not again by the query
