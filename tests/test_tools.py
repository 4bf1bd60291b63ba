from __future__ import annotations

from lossless import ContextManager
from lossless.tools import DEFINITIONS, NAMES, run_recall
from lossless.store import ArtifactStore


def test_recall_tool_pages_through_an_artifact(tmp_path):
    store = ArtifactStore(tmp_path)
    text = "".join(f"line {i}\n" for i in range(10_000))
    h = store.put(text)
    first = run_recall({"handle": h, "limit": 1000}, store)
    assert first.startswith(f"[{h}: characters 0–1,000 of {len(text):,}; call again with offset=1000")
    pages, offset = [], 0
    while offset < len(text):
        out = run_recall({"handle": h, "offset": offset, "limit": 7000}, store)
        body = out.split("\n", 1)[1]
        pages.append(body)
        offset += len(body)
    assert "".join(pages) == text
    small = store.put("short")
    assert run_recall({"handle": small}, store) == "short"
    assert run_recall({"handle": "sha256:" + "1" * 24}, store).startswith("error: no artifact")
    assert run_recall({"handle": small, "offset": "x"}, store).startswith("error:")


def test_tool_definitions_and_dispatch(tmp_path):
    assert NAMES == {"recall", "compact"} and all("input_schema" in d for d in DEFINITIONS)
    cm = ContextManager(window=32_000, store=tmp_path, transcript=False)
    h = cm.store.put("original")
    assert cm.run_tool("recall", {"handle": h}) == "original"
    tiny = [{"role": "user", "content": "task"}]
    assert cm.run_tool("compact", {}, tiny).startswith("[Nothing compacted: a summary would not be smaller")
    history = [{"role": "user", "content": "task"}]
    for i in range(30):
        history += [{"role": "assistant", "content": f"working on part {i} " * 40},
                    {"role": "user", "content": f"continue with part {i + 1}"}]
    assert cm.run_tool("compact", {"instructions": "keep names"}, history).startswith("[Compacted")
    assert cm.last.neutral[0].text.startswith("<lossless-summary")
    assert cm.run_tool("nope", {}).startswith("error:")


def test_the_models_compact_call_mid_turn_stays_last_and_answerable(tmp_path):
    from lossless.dialects.anthropic import from_anthropic
    from lossless.rounds import validate
    from lossless.testing import FakeProvider

    for provider in (None, FakeProvider()):
        cm = ContextManager(window=32_000, store=tmp_path, transcript=False, provider=provider, session_notes=False)
        history = [{"role": "user", "content": "task: port the parser"}]
        for i in range(30):
            history += [{"role": "assistant", "content": f"working on part {i} " * 40},
                        {"role": "user", "content": f"continue with part {i + 1}"}]
        call = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_c1", "name": "compact", "input": {}}]}
        history.append(call)
        answer = cm.run_tool("compact", {}, history)
        assert answer.startswith("[Compacted"), answer
        assert cm.last.messages[-1] is call  # still last, for the agent to answer
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_c1", "content": answer}]}
        nxt = cm.prepare(cm.last.messages + [result])
        validate(from_anthropic(nxt.messages))
        assert len(nxt.messages) < len(history)
