"""Retrieval (lexical, LLM with fallback), injection budgets, and LoCoMo recall on real data."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from conftest import data_path

from lossless.errors import Overloaded, ProviderConnectionError
from lossless.memory import (
    KeywordRetriever, LexicalIndex, LexicalRetriever, LLMRetriever, MemoryStore, SessionInjector,
    append_to_last_user, inject, recall_memories, system_index,
)
from lossless.memory.inject import PER_MEMORY_BYTES
from lossless.messages import Text, assistant, user
from conftest import Scripted


@pytest.fixture
def store(tmp_path):
    s = MemoryStore(tmp_path / "mem")
    s.add(name="Use tabs", description="The user indents code with tabs, never spaces", type="user",
          body="Always indent Python and Go with tabs.")
    s.add(name="Real database in tests", description="Integration tests must hit a real database",
          type="feedback", body="Do not mock the database: last quarter mocked tests hid a broken migration.")
    s.add(name="Pipeline bugs", description="Pipeline bugs are tracked in Linear project INGEST",
          type="reference", body="File ingestion pipeline bugs in Linear, project INGEST.")
    return s


@pytest.mark.parametrize("backend", ["python", "fts5"])
def test_lexical_finds_the_obvious_and_nothing_for_junk(store, backend):
    r = LexicalRetriever(backend=backend)
    ms = store.recent()
    assert [h.memory.id for h in r.select("should I mock the database in integration tests?", ms)][0] == \
        "real-database-in-tests"
    assert r.select("how should I indent this file", ms)[0].memory.id == "use-tabs"
    assert r.select("what's the weather in Lisbon tomorrow", ms) == []
    assert r.select("asdf qwerty", ms) == []
    assert r.select("the and of", ms) == []


def test_keyword_baseline_and_recall_memories(store):
    assert KeywordRetriever().select("tabs", store.recent())[0].memory.id == "use-tabs"
    assert [h.memory.id for h in recall_memories("where are pipeline bugs tracked", store)][:1] == ["pipeline-bugs"]


def test_superseded_memories_are_not_retrieved(store):
    m = store.get("use-tabs")
    store.put(m.with_changes(extra={"superseded_by": "x"}))
    assert all(h.memory.id != "use-tabs" for h in recall_memories("indent tabs", store))
    assert "use-tabs" not in store.index_text()


def test_llm_selection_is_used_when_it_answers(store):
    p = Scripted('Sure: {"selected": ["pipeline-bugs.md", "use-tabs"]}')
    hits = LLMRetriever(p).select("anything", store.recent())
    assert [h.memory.id for h in hits] == ["pipeline-bugs", "use-tabs"] and hits[0].source == "llm"
    assert p.requests[0].purpose == "memory-select" and "use-tabs" in p.requests[0].messages[0].text
    assert LLMRetriever(Scripted('{"selected": []}')).select("tabs", store.recent()) == []


@pytest.mark.parametrize("reply", [
    Overloaded("busy", status=529), ProviderConnectionError("reset"), RuntimeError("bug in adapter"),
    "I think use-tabs", '{"selected": "use-tabs"}', '{"selected": ["nope"]}', "", "[1, 2]",
])
def test_every_llm_failure_falls_back_to_lexical(store, reply):
    r = LLMRetriever(Scripted(reply))
    hits = r.select("how do I indent with tabs", store.recent())
    assert [h.memory.id for h in hits][:1] == ["use-tabs"]
    assert hits[0].source == "lexical-fallback" and r.last_error


def test_injection_budgets_and_no_reinjection(store):
    assert SessionInjector(session_bytes=900).attachment([store.get("use-tabs")]) != ""
    inj = SessionInjector()
    big = store.add(name="big", description="big", type="project", body="\n".join(f"line {i} " * 20 for i in range(400)))
    assert SessionInjector(session_bytes=900).attachment([big]) == ""  # over the session budget
    text = inj.attachment([big])
    block = text.split("<memory ", 1)[1]
    assert len(("<memory " + block).encode()) <= PER_MEMORY_BYTES + 40 and "lossless memory show big" in text
    assert len(text.splitlines()) <= 202
    inj = SessionInjector()
    first = inj.attachment(store.recent())
    assert first.count("<memory ") == 4 and inj.attachment(store.recent()) == ""
    small = SessionInjector(session_bytes=300)
    assert small.attachment(store.recent()).count("<memory ") <= 1


def test_attachment_goes_on_the_latest_user_message_only(store):
    history = (user("first"), assistant("ok"), user("should I mock the database?"))
    out = inject(history, store, SessionInjector())
    assert out[:2] == history[:2] and history[2].content == (Text(text="should I mock the database?"),)
    assert "real-database-in-tests" in out[2].content[-1].text
    assert append_to_last_user(history, "") == history
    assert system_index(store).startswith("# Memory") and "(use-tabs.md)" in system_index(store)
    assert "real-database-in-tests" in store.usage()


def _locomo_recall_at_5(index, sample, ids) -> float:
    total = n = 0
    for qa in sample["qa"]:
        gold = set(re.findall(r"D\d+:\d+", " ".join(map(str, qa.get("evidence", [])))))
        if qa.get("category") in (1, 2, 3, 4) and gold:
            top = {ids[i] for i, _ in index.search(qa["question"], 5)}
            total += len(gold & top) / len(gold)
            n += 1
    return total / n


def test_locomo_recall_beats_the_fts5_reference():
    path = data_path("locomo", "locomo-dev.json")
    sample = json.loads(path.read_text())[0]
    docs, ids = [], []
    for key, turns in sample["conversation"].items():
        if re.fullmatch(r"session_\d+", key):
            for t in turns:
                docs.append((t["speaker"], t["text"], t.get("blip_caption", "")))
                ids.append(t["dia_id"])
    default = _locomo_recall_at_5(LexicalIndex(docs), sample, ids)
    assert default > 0.53  # 0.541 measured; the FTS5 backend gets 0.523 on this conversation
    assert default >= _locomo_recall_at_5(LexicalIndex(docs, backend="fts5"), sample, ids)


def test_a_common_verb_alone_does_not_pull_a_memory_in(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    store.add(name="Use tabs", description="The user indents code with tabs", type="user", body="Tabs, never spaces.")
    store.add(name="Real database", description="Integration tests hit a real database", type="feedback",
              body="Never mock the database.")
    r = LexicalRetriever()  # FTS5's idf cannot rank two documents: the default uses BM25F below 20,000
    assert [h.memory.id for h in r.select("what database should I use for the tests?", store.recent())] == \
        ["real-database"]
    assert r.select("which editor do you want me to use?", store.recent()) == []
    assert r.select("What kind of thing do we need to make?", store.recent()) == []


@pytest.mark.parametrize("backend", ["python", "fts5"])
def test_a_when_question_prefers_a_memory_that_speaks_of_a_time(backend):
    docs = [("billing deploy", "How to deploy the billing service",
             "Deploy billing: run the billing migrations, then deploy billing with make deploy."),
            ("billing", "We moved the billing service", "Deployed billing to the new cluster last Friday."),
            ("ci", "CI runs on every push", "The pipeline runs tests on every push.")]
    query = "When did we deploy the billing service?"
    assert LexicalIndex(docs, backend=backend, time_boost=0).search(query, 3)[0][0] == 0
    assert LexicalIndex(docs, backend=backend).search(query, 3)[0][0] == 1
    assert LexicalIndex(docs, backend=backend).search("How do we deploy the billing service?", 3)[0][0] == 0


@pytest.mark.parametrize("backend", ["python", "fts5"])
def test_context_counts_but_less_than_the_document_itself(backend):
    docs = [("Gina", "Nice! What's it for?", "", "I bought a clipboard with a notepad attached"),
            ("Jon", "Keeps me organised.", "", "Nice! What's it for?"),
            ("Tim", "My clipboard with a notepad is great", "", "")]
    hits = LexicalIndex(docs, backend=backend).search("clipboard notepad", 3)
    assert [d for d, _ in hits] == [2, 0]
    assert LexicalIndex([d[:3] for d in docs], backend=backend).search("clipboard notepad", 3)[0][0] == 2


ASCII_WORD = re.compile(r"[a-z0-9]+")


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=200))
def test_ascii_text_is_cut_into_the_same_words_as_before(text):
    """Words of any script are indexed now; ASCII text gives exactly the words it always gave, so
    no English store ranks differently."""
    from lossless.memory.lexical import STOP_WORDS, words

    before = [w for w in ASCII_WORD.findall(text.lower().replace("'", "")) if w not in STOP_WORDS]
    assert words(text) == before
    assert words(text + " é") == before + ["é"]  # one word of another script: the path for any script agrees


@pytest.mark.parametrize(("name", "body", "query"), [
    ("ключ развёртывания", "Ключ развёртывания хранится в хранилище секретов.", "где хранится ключ"),
    ("Προτιμήσεις", "Ο χρήστης προτιμά σύντομες απαντήσεις.", "σύντομες απαντήσεις"),
    ("用户偏好", "用户喜欢简洁的回答，不要长篇大论。", "简洁回答"),
    ("ユーザー設定", "ユーザーはタブでインデントする。", "インデント"),
    ("Müller préféré", "Herr Müller prefers the café on the corner.", "müller café"),
])
def test_a_memory_written_in_any_script_is_found_by_its_words(tmp_path, name, body, query):
    """Before, only [a-z0-9] runs were words: a memory in Russian, Greek or Chinese was never found,
    and "Müller" was "m" and "ller"."""
    s = MemoryStore(tmp_path / "mem")
    s.add(name="Use tabs", description="The user indents code with tabs", type="user", body="Tabs, never spaces.")
    target = s.add(name=name, description=name, type="user", body=body)
    hits = s.search(query, limit=5)
    assert hits and hits[0][0].id == target.id, hits
