"""The ways real agents hand their history to ``prepare``, each checked for the same
guarantees: valid, under budget, and every message logged once as it enters."""

from __future__ import annotations

import json

from lossless import ContextManager, validate
from lossless.dialects.anthropic import from_anthropic
from lossless.dialects.openai import from_openai
from lossless.transcript import read_entries


def anthropic_round(i: int, size: int) -> list[dict]:
    tid = f"toolu_{i:05d}"
    return [
        {"role": "assistant", "content": [{"type": "text", "text": f"step {i}"},
                                          {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": f"cat f{i}"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": f"line {i}\n" * size}]},
    ]


def openai_round(i: int, size: int) -> list[dict]:
    calls = [{"id": f"call_{i}_{k}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"cat f{i}.{k}"})}}
             for k in range(2)]
    return [
        {"role": "assistant", "content": f"step {i}", "tool_calls": calls},
        *({"role": "tool", "tool_call_id": c["id"], "content": f"line {i}\n" * size} for c in calls),
    ]


def logged(root, session: str) -> list[dict]:
    entries = read_entries(root / "sessions" / session / "transcript.jsonl").entries
    return [e for e in entries if e.get("type") in ("user", "assistant")]


def test_an_agent_passing_fresh_copies_each_turn_is_logged_once_and_sent_the_same(store_dir, tmp_path):
    """json round-trip of the whole list every turn: no identity to recognise, but equal values."""
    sent_by: dict[str, list[str]] = {}
    for mode, root in (("own", tmp_path / "own"), ("copies", store_dir)):
        cm = ContextManager(window=16_000, store=root, session_id=mode)
        mine = [{"role": "user", "content": "task"}]
        seq = []
        for i in range(50):
            mine = mine + anthropic_round(i, 40 + (i * 53) % 500)
            arg = json.loads(json.dumps(mine)) if mode == "copies" else mine
            view = cm.prepare(arg, system="be brief")
            validate(from_anthropic(view.messages))
            assert view.state.tokens <= cm.budget.threshold
            seq.append(json.dumps(view.messages, sort_keys=True))
        cm.close()
        assert len(logged(root, mode)) == len(mine), mode
        sent_by[mode] = seq
    assert sent_by["copies"] == sent_by["own"]


def test_openai_agent_keeping_its_own_list_is_incremental(store_dir, tmp_path):
    """OpenAI dialect, own full list: each message logged once, batches (not a snip every
    turn), and the same requests as an agent adopting view.messages."""
    runs: dict[bool, tuple[list[str], int]] = {}
    for adopt, root in ((False, store_dir), (True, tmp_path / "adopt")):
        session = "adopt" if adopt else "own"
        cm = ContextManager(window=16_000, store=root, session_id=session, dialect="openai")
        mine: list[dict] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "task"}]
        sent = mine
        seq, fired = [], 0
        for i in range(40):
            new = openai_round(i, 10 + (i * 41) % 120)
            mine = mine + new
            view = cm.prepare((sent + new) if adopt else mine)
            sent = view.messages
            assert sent[0] == {"role": "system", "content": "be brief"}
            validate(from_openai(sent), "openai")
            assert view.state.tokens <= cm.budget.threshold
            fired += bool(view.fired)
            seq.append(json.dumps(view.messages, sort_keys=True))
        cm.close()
        assert len(logged(root, session)) == len(from_openai(mine)) - 1, session  # the system prompt is not a message
        runs[adopt] = (seq, fired)
    assert runs[False][0] == runs[True][0]
    assert 0 < runs[False][1] < 40 // 4


def test_a_system_prompt_rebuilt_each_turn_is_counted_each_time(store_dir):
    """Strings built per turn may reuse a freed one's id: the count must follow the text."""
    cm = ContextManager(window=200_000, store=store_dir, transcript=False)
    history = [{"role": "user", "content": "hi"}]
    for i in range(20):
        text = ("x" * 4000) if i % 2 else " ".join(["ab1"] * 1000)  # same length, different tokens
        expected = cm.counter.count_system(text)
        view = cm.prepare(history, system="".join(text))
        assert view.state.tokens == expected + cm.counter.count_message(view.neutral[0]), i
        del text, view


def test_a_tool_appended_to_the_same_list_is_counted(store_dir):
    cm = ContextManager(window=200_000, store=store_dir, transcript=False)
    history = [{"role": "user", "content": "hi"}]
    tools = [{"name": "a", "description": "x", "input_schema": {"type": "object"}}]
    before = cm.prepare(history, tools=tools).state.tokens
    tools.append({"name": "b", "description": "y " * 2000, "input_schema": {"type": "object"}})
    after = cm.prepare(history, tools=tools).state.tokens
    assert after > before + 1000


def test_on_a_small_window_the_newest_result_is_persisted_not_summarised_away(store_dir):
    """Each result alone is over the 16k window's whole budget in tokens but under the 30k
    shell limit in characters.  The model must still see the call it made and a marker
    for its output (preview + handle) — not a summary saying the command ran."""
    cm = ContextManager(window=16_000, store=store_dir, transcript=False)
    mine = [{"role": "user", "content": "task"}]
    for i in range(6):
        mine = mine + anthropic_round(i, 3000)
        view = cm.prepare(mine)
        validate(from_anthropic(view.messages))
        assert view.state.tokens <= cm.budget.threshold
        call, result = view.messages[-2:]
        assert call == mine[-2]
        (block,) = result["content"]
        assert block["tool_use_id"] == f"toolu_{i:05d}" and "sha256:" in block["content"]
        assert block["content"].count(f"line {i}") > 50  # the preview


def test_the_transcript_read_back_after_summaries_is_the_context_that_was_sent(store_dir):
    """Claude Code's layout: boundary, then the summary (isCompactSummary), then what follows —
    so reading the transcript back gives the context the model saw, with no repair."""
    from lossless.dialects.anthropic import to_anthropic
    from lossless.dialects.claude_code import read_session

    from lossless.config import ContextConfig

    # snip held off, so the loop compacts by summaries: boundaries to read back
    cm = ContextManager(config=ContextConfig(window=16_000, snip_trigger_fraction=5.0), store=store_dir,
                        session_id="back")
    mine = [{"role": "user", "content": "task"}]
    summaries = 0
    for i in range(12):
        mine = mine + anthropic_round(i, 700)
        view = cm.prepare(mine)
        summaries += any(e.boundary for e in view.fired)
    cm.close()
    assert summaries >= 2
    path = store_dir / "sessions" / "back" / "transcript.jsonl"
    session = read_session(path)
    assert not session.warnings
    assert len(session.boundaries) == summaries
    live = session.messages[session.boundaries[-1].index:]
    assert to_anthropic(live) == view.messages
    assert live[0].meta.get("is_compact_summary")
    entries = read_entries(path).entries
    assert [e["compactMetadata"]["trigger"] for e in entries if e.get("subtype") == "compact_boundary"] == ["auto"] * summaries
