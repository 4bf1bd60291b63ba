"""The extracted-facts bench goes through the product: what it scores is what extraction stored."""

from __future__ import annotations

import importlib.util
import sys

from conftest import ROOT


def _bench():
    sys.path.insert(0, str(ROOT / "bench"))  # it imports the retrieval bench's readers
    spec = importlib.util.spec_from_file_location("memory_extracted", ROOT / "bench" / "memory_extracted.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FILLER = ["The weather turned cold again this week and the garden needs work before winter comes.",
          "Work has been busy with quarterly planning, endless meetings and a new manager to meet."]


def sample() -> dict:
    turns = [{"speaker": "Ann", "dia_id": "D1:1", "text": "Did you go anywhere fun lately?"},
             {"speaker": "Bob", "dia_id": "D1:2", "text": "Yes, the harbour festival on Saturday was packed."},
             {"speaker": "Ann", "dia_id": "D1:3", "text": "I bought a red kite there for my niece."},
             *({"speaker": "Ann" if i % 2 else "Bob", "dia_id": f"D1:{i}", "text": FILLER[i % 2]}
               for i in range(4, 16))]
    return {"sample_id": "s1",
            "conversation": {"speaker_a": "Ann", "speaker_b": "Bob", "session_1": turns,
                             "session_1_date_time": "1:00 pm on 8 May, 2023"},
            "observation": {"session_1_observation": {
                "Ann": [["Ann bought a red kite for her niece.", "D1:3"]],
                "Bob": [["Bob says quarterly planning keeps him busy.", "D1:15"]]}},
            "qa": [{"question": "What happened at the harbour festival?", "answer": "a kite", "evidence": ["D1:3"],
                    "category": 4}]}


def test_a_cited_source_finds_the_fact_by_its_neighbours_and_the_chunk_tail_does_not():
    bench = _bench()
    cites = bench.evaluate([sample()], {}, cite=True, hybrid=False)
    blind = bench.evaluate([sample()], {}, cite=False, hybrid=False)
    assert cites["memories"] == blind["memories"] == 2 and cites["requests"] == 1
    # the question's words are only in the turn before the fact's source: its neighbourhood
    assert cites["lexical"]["overall"]["R@5"] == 100.0
    assert blind["lexical"]["overall"]["R@5"] == 0.0
