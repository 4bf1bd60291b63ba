"""Hysteresis: a compaction lands at 55–70 % of the threshold when the history has that much, and
the next one waits for 30 % of the threshold of new content — never on consecutive requests, on
real sessions (live loops, as an agent adopting each view) and on a conversation made of long
pasted documents, where the user's own words fill the window."""

from __future__ import annotations

import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import data_path
from lossless import ContextManager
from lossless.dialects.detect import read_any
from lossless.messages import Message, Text
from lossless.rounds import validate
from test_manager import make_round

MOVES = {"snip", "microcompact", "summary", "fallback_summary", "collapse", "autocompact", "session_memory"}
"""Stages that change what was sent before (persist only replaces the newest result)."""


def _live(cm: ContextManager, messages: list[Message], system: str | None) -> list[tuple[int, int, int, bool]]:
    """Prepare before each assistant turn and adopt the view; per call (tokens before the
    stages, tokens sent, the threshold, whether a stage moved earlier content)."""
    out = []
    history: list[Message] = []
    for i, m in enumerate(messages):
        history = [*history, m]
        if m.role != "user" or (i + 1 < len(messages) and messages[i + 1].role != "assistant"):
            continue
        view = cm.prepare(history, system=system, now=_when(m))  # the clock of the session, not today's
        moved = [e for e in view.fired if e.stage in MOVES]
        before = moved[0].tokens_before if moved else view.state.tokens
        out.append((before, view.state.tokens, cm.budget.threshold, bool(moved)))
        history = list(view.messages)
    return out


def _when(message: Message) -> float | None:
    from datetime import datetime

    ts = message.meta.get("timestamp")
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() if isinstance(ts, str) else None


def _check(calls: list[tuple[int, int, int, bool]], *, window: int, steady: bool = False) -> int:
    """``steady``: every turn adds little, so no two compactions may be consecutive; otherwise
    two may be, when the one request between them brought 30 % of the threshold or more."""
    fired = [n for n, c in enumerate(calls) if c[3]]
    if steady:
        assert all(b - a > 1 for a, b in zip(fired, fired[1:])), f"compactions on consecutive requests: {fired}"
    high = [n for n in fired if calls[n][0] > calls[n][2] and calls[n][1] > 0.7 * calls[n][2]]
    # Above the band only when what must stay verbatim (the newest round) is itself most of it.
    assert len(high) <= max(1, len(fired) // 8), [(n, calls[n]) for n in high]
    for a, b in zip(fired, fired[1:]):
        landed, threshold = calls[a][1], calls[a][2]
        if a not in high:
            assert calls[b][0] - landed >= 0.3 * threshold, (a, b, landed, calls[b][0], threshold)
    assert all(c[1] <= window for c in calls)
    return len(fired)


@pytest.mark.parametrize("window", [32_000, 64_000])
@pytest.mark.parametrize("name", ["4d5611e5-241a-462a-8d15-5122611a9569", "8463c716-a2ea-4c14-9efa-87158ebd9f20"])
def test_real_sessions_compact_rarely_and_land_in_the_band(tmp_path, name, window):
    session = read_any(data_path("claude-code", f"{name}.jsonl"))
    cm = ContextManager(window=window, store=str(tmp_path), transcript=False, session_notes=False)
    calls = _live(cm, list(session.messages), session.system)
    assert _check(calls, window=window) >= 1
    landed = [c[1] / c[2] for c in calls if c[3] and c[0] > c[2]]
    # on average in the band (55–70 % of the threshold), most landings near it; rounds are whole,
    # so one can fall short or over
    assert landed and 0.5 <= sum(landed) / len(landed) <= 0.7, landed
    assert sum(0.45 <= x <= 0.72 for x in landed) >= 0.6 * len(landed), landed


@pytest.mark.parametrize("window", [32_000, 64_000])
def test_a_runaway_answer_does_not_take_the_recent_work_with_it(tmp_path, window):
    """In this run the model writes one answer of 159,065 characters (a loop of doubt) near the
    end.  Kept verbatim, the next snip had to take it — and every round before it — to reach its
    target: it landed at 19 % of the threshold at 32k and 11 % at 64k.  Now the answer is stored
    on first sight with a preview and its handle, and every landing stays near the band."""
    session = read_any(data_path("mini-swe-agent", "sympy__sympy-15976.traj.json"))
    longest = max(len(b.text) for m in session.messages if m.role == "assistant" for b in m.content
                  if isinstance(b, Text))
    assert longest > 150_000
    cm = ContextManager(window=window, store=str(tmp_path), transcript=False, session_notes=False)
    calls = _live(cm, list(session.messages), session.system)
    landed = [c[1] / c[2] for c in calls if c[3] and c[0] > c[2]]
    assert all(x >= 0.45 for x in landed), landed
    _check(calls, window=window)


def _pastes(n: int, words: int, seed: int, *, prose: bool = False) -> list[Message]:
    """``n`` pasted documents of ``words`` words, each answered.  ``prose``: made-up words of
    letters (the ``w123`` words differ only in their numbers, which an account quotes once as
    variants of one message)."""
    import random

    rnd = random.Random(seed)
    vocab = (["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9))) for _ in range(2_000)]
             if prose else [f"w{rnd.randrange(10_000)}" for _ in range(2_000)])
    out = []
    for i in range(n):
        doc = " ".join(rnd.choice(vocab) for _ in range(words))
        out.append(Message(role="user", content=(Text(text=f"Document {i}:\n{doc}\nWhat does it say?"),)))
        out.append(Message(role="assistant", content=(Text(text=f"Document {i} is about {vocab[i % 50]}."),)))
    return out


@settings(max_examples=8, deadline=None)
@given(st.sampled_from([2_048, 4_096, 8_192]), st.floats(0.3, 1.0), st.integers(0, 10_000))
def test_a_conversation_of_long_pastes_never_compacts_twice_in_a_row(tmp_path_factory, window, share, seed):
    """No tools: the user's messages are what fills the window (pastes of up to ~200 tokens at
    2k, ~400 at 4k, ~800 at 8k: 15 % of the threshold at most, so two of them are never a whole
    gap); old ones go behind handles with their head, and an account carries only as many lines
    as its window holds, so it stays small and compactions stay apart."""
    words = int(share * {2_048: 60, 4_096: 120, 8_192: 240}[window])
    messages = _pastes(60, words, seed)
    store = tmp_path_factory.mktemp("s")
    cm = ContextManager(window=window, store=str(store), transcript=False, session_notes=False)
    calls = _live(cm, messages, None)
    _check(calls, window=window, steady=True)
    last = cm.prepare(messages[:1], system=None)  # a fresh start is valid too
    validate(last.messages)


@settings(max_examples=8, deadline=None)
@given(st.sampled_from([2_048, 4_096]), st.floats(0.5, 1.0), st.integers(0, 10_000), st.booleans())
@example(window=2_048, share=0.5, seed=3, prose=False)  # one quoted paste of codes kept it at 208 tokens
def test_a_small_windows_account_stays_a_tenth_of_it_and_each_hidden_handle_recalls_the_words(
        tmp_path_factory, window, share, seed, prose):
    """A conversation of pastes at 2k/4k, prose or codes of about two characters a token: each
    account (the snip's message) is at most 10 % of the window, shows at most the lines its window
    allows for hidden user messages, and each of those handles recalls, in one step, the user's
    own messages."""
    import json

    from lossless import account, markers
    from lossless.account import _HIDDEN_LINE

    messages = _pastes(60, int(share * {2_048: 60, 4_096: 120}[window]), seed, prose=prose)
    words = {b.text.strip() for m in messages if m.role == "user" for b in m.content if isinstance(b, Text)}
    store = tmp_path_factory.mktemp("s")
    cm = ContextManager(window=window, store=str(store), transcript=False, session_notes=False)
    history: list[Message] = []
    accounts = 0
    for m in messages:
        history = [*history, m]
        if m.role != "user":
            continue
        view = cm.prepare(history, system=None)
        history = list(view.messages)
        for a in (x for x in history if account.is_account(x)):
            accounts += 1
            assert cm.counter.count_message(a) <= 0.10 * window, a.text
            hidden = [h for h in _HIDDEN_LINE.finditer(a.text)]
            assert len(hidden) <= cm.config.account_lines()[1], a.text
            for h in hidden:
                behind = cm.store.get(h.group(2))
                said = json.loads(behind) if behind.startswith("[") else [behind]
                assert len(said) == int(h.group(1)) and all(s.strip() in words for s in said)
            assert all(markers.is_full(h) or len(h) >= 15 for h in markers.handles_in(a.text))
    assert accounts


def _tools(tokens: int) -> list[dict]:
    """Tool schemas of about ``tokens`` tokens (an agent with many tools, or MCP servers)."""
    return [{"name": f"tool_{i}", "description": "Reads a file and reports its lines. " * 60,
             "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
            for i in range(max(1, tokens // 600))]


@pytest.mark.parametrize("window, share", [(32_000, 0.3), (32_000, 0.5), (32_000, 0.6), (32_000, 0.7), (64_000, 0.6)])
@settings(max_examples=2, deadline=None)
@given(seed=st.integers(0, 1_000))
def test_a_large_system_prompt_and_tools_leave_the_recent_work_its_room(tmp_path_factory, window, share, seed):
    """Tool schemas (with the system prompt) taking a large share of the threshold: snip pins no more
    of the first rounds, and lets its account take no more of what is left, than leaves the recent
    rounds a third of the target, so the next compaction stays a stretch of work away and, while the
    fixed part is at most about half the threshold, the landing stays near the band.  Before, at 32k
    with tools at 0.45 / 0.52 / 0.61 of the threshold, 4 / 8 / 31 compactions came on consecutive
    requests, landing at up to 0.89 / 0.95 / 0.99 of it."""
    rng = random.Random(seed)
    cm = ContextManager(window=window, store=str(tmp_path_factory.mktemp("s")), transcript=False)
    threshold = cm.budget.threshold
    tools = _tools(int(share * threshold))
    fixed = cm.counter.count_tools(tools)
    history: list = [{"role": "user", "content": "Fix the failing tests."}]
    fired, landed = [], []
    for turn in range(110):
        history += make_round(turn, rng.choice([150, 300, 600]))
        view = cm.prepare(history, tools=tools)
        moved = any(e.stage in MOVES for e in view.fired)
        fired.append(moved)
        if moved:
            landed.append(view.state.tokens / threshold)
            validate(view.neutral)
        history = view.messages
    assert any(fired), (fixed, threshold)
    assert not any(a and b for a, b in zip(fired, fired[1:])), (fixed / threshold, [n for n, f in enumerate(fired) if f])
    if fixed <= 0.55 * threshold:
        assert max(landed) <= 0.8, (fixed / threshold, [round(x, 2) for x in landed])


def test_a_system_prompt_and_tools_over_the_threshold_by_themselves_are_named_once(tmp_path, caplog):
    """Nothing a stage does can bring such a request under the threshold: the manager says so, once,
    with the figures and what to do, rather than compacting every request in silence."""
    cm = ContextManager(window=32_000, store=str(tmp_path), transcript=False)
    tools = _tools(int(1.3 * cm.budget.threshold))
    assert cm.counter.count_tools(tools) > cm.budget.threshold
    history: list = [{"role": "user", "content": "Fix the failing tests."}]
    with caplog.at_level("WARNING", logger="lossless"):
        for turn in range(3):
            history += make_round(turn, 50)
            history = cm.prepare(history, tools=tools).messages
    said = [r.getMessage() for r in caplog.records if "system prompt and tools" in r.getMessage()]
    assert len(said) == 1, said
    assert f"{cm.budget.threshold:,}" in said[0] and "32,000-token window" in said[0] and "larger window" in said[0]
    caplog.clear()
    small = ContextManager(window=32_000, store=str(tmp_path / "b"), transcript=False)
    with caplog.at_level("WARNING", logger="lossless"):
        small.prepare([{"role": "user", "content": "hi"}], tools=_tools(2_000))
    assert not [r for r in caplog.records if "system prompt and tools" in r.getMessage()]


@pytest.mark.parametrize("window, most_high", [(16_000, 0.15), (24_000, 0.05)])
def test_small_windows_on_every_shared_session(tmp_path, window, most_high):
    """Every shared session at windows where a mini-swe-agent task is a fifth to a third of the
    threshold: never over the window; after a landing in the band, the next compaction only once 30 %
    of the threshold of new work came in; and few landings above the band — those the newest round or
    the task itself forces.  Before the pinned head gave way to a large first output and to a large
    newest round, 66 of 288 and 12 of 190 landings were above it (bench/cadence.py, RESULTS §6)."""
    paths = sorted(data_path("claude-code").glob("*.jsonl")) + sorted(data_path("mini-swe-agent").glob("*.traj.json"))
    high = fired = 0
    for n, path in enumerate(paths):
        session = read_any(path)
        cm = ContextManager(window=window, store=str(tmp_path / str(n)), transcript=False, session_notes=False)
        calls = _live(cm, list(session.messages), session.system)
        assert all(c[1] <= window for c in calls), path.name
        moved = [k for k, c in enumerate(calls) if c[3]]
        for a, b in zip(moved, moved[1:]):
            landed, threshold = calls[a][1], calls[a][2]
            if landed <= 0.7 * threshold:
                assert calls[b][0] - landed >= 0.3 * threshold, (path.name, a, b, landed, calls[b][0], threshold)
        high += sum(calls[k][1] > 0.7 * calls[k][2] for k in moved)
        fired += len(moved)
    assert fired and high <= most_high * fired, (high, fired)  # now 34 of 272 and 7 of 189
