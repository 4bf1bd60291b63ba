"""Bounded episodes: collapse cuts a long stretch without a user turn into pieces of at
most ``max_tokens``, at natural boundaries (a todo done, a task closed, a passing test
run, a git commit) when one is in reach, else at the last round under the bound — and
never inside an API round."""

from __future__ import annotations

import pytest
from conftest import data_path
from hypothesis import given
from hypothesis import strategies as st
from strategies import histories
from test_snip import Chars4, assert_whole_rounds, decode

from lossless import markers
from lossless.compaction import Collapser, LLMSummarizer, episodes
from lossless.compaction.collapse import MAX_EPISODE_TOKENS, NATURAL, REACH, Episode, _natural
from lossless.config import ContextConfig
from lossless.dialects.claude_code import read_session
from lossless.messages import Message, Text, Thinking, ToolResult, ToolUse, assistant, user
from lossless.rounds import group_rounds, validate
from lossless.stages.base import StageContext
from lossless.store import ArtifactStore
from lossless.testing import FakeProvider
from lossless.tokens import default_counter

LONG = ("4d5611e5-241a-462a-8d15-5122611a9569", "8463c716-a2ea-4c14-9efa-87158ebd9f20",
        "ae4a77f8-aedd-4bc1-888f-c94edc91af04")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> ArtifactStore:
    return ArtifactStore(tmp_path_factory.mktemp("store"))


def size(messages, count, start: int, stop: int) -> int:
    return sum(count(messages[i]) for i in range(start, stop))


def check_pieces(messages: list[Message], pieces: list[Episode], bound: int, count) -> None:
    """What every list of pieces must satisfy, whatever the history."""
    rounds = group_rounds(messages)
    at = {r.start: r for r in rounds}
    ends = {r.stop: k for k, r in enumerate(rounds)}
    natural = _natural(messages, rounds)
    for a, b in zip(pieces, pieces[1:]):
        assert a.stop <= b.start  # in order, no message in two pieces
    for e in pieces:
        # Never inside a round: a piece starts where a round starts and stops where one stops.
        assert e.start in at and e.stop in ends, e
        total = size(messages, count, e.start, e.stop)
        inside = [r for r in rounds if e.start <= r.start < e.stop]
        assert total <= bound or len(inside) == 1, (e, total)
        if e.cut == "bound":
            # cut because the next round would not fit, and no natural boundary was in reach
            nxt = at[e.stop]
            assert total + size(messages, count, nxt.start, nxt.stop) > bound
            for r in inside:
                if natural[ends[r.stop]]:
                    assert size(messages, count, e.start, r.stop) < REACH * bound, (e, r)
        elif e.cut in NATURAL:
            assert natural[ends[e.stop]] == e.cut and total >= REACH * bound
            if e.stop in at:  # no later natural boundary before the bound was passed over
                later = [r for r in rounds if e.stop <= r.start and natural[ends[r.stop]]
                         and size(messages, count, e.start, r.stop) <= bound]
                assert not later, (e, later)
        else:
            assert e.cut == "request"


def lone_round(messages: list[Message], i: int) -> bool:
    return any(r.start == i and r.stop == i + 1 for r in group_rounds(messages))


# -- real sessions ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", LONG)
@pytest.mark.parametrize("bound", [MAX_EPISODE_TOKENS, 8_000])
def test_real_sessions_are_cut_into_bounded_episodes_at_natural_boundaries(name, bound):
    messages = read_session(data_path("claude-code", f"{name}.jsonl")).messages
    count = default_counter().count_message
    pieces = episodes(messages, max_tokens=bound, count=count)
    check_pieces(messages, pieces, bound, count)
    # The pieces cover exactly the finished episodes of the unbounded view.
    whole = episodes(messages)
    expected = {i for e in whole for i in range(e.start, e.stop)}
    covered = [i for e in pieces for i in range(e.start, e.stop)]
    assert len(covered) == len(set(covered)) and set(covered) <= expected
    assert all(lone_round(messages, i) for i in expected - set(covered))
    # Each long unbounded episode is now several, and real work gives natural cuts.
    longest = max(whole, key=lambda e: e.stop - e.start)
    assert size(messages, count, longest.start, longest.stop) > bound
    assert len([e for e in pieces if longest.start <= e.start < longest.stop]) >= 2
    assert any(e.cut in NATURAL for e in pieces)


def test_the_session_with_one_long_request_is_no_longer_one_summary(store):
    """ae4a77f8: four typed requests, the first served by 276 messages. Collapse at a
    200,000-token window summarises several bounded pieces of it, not one of them all."""
    messages = read_session(data_path("claude-code", f"{LONG[2]}.jsonl")).messages
    counter = default_counter()
    whole = episodes(messages)
    assert [(e.start, e.stop) for e in whole] == [(0, 276)]
    cfg = ContextConfig(window=140_000)  # the session (~124k tokens) is over the collapse trigger here
    ctx = StageContext(config=cfg, counter=counter, store=store, trigger="auto")
    tokens = ctx.count(messages)
    assert tokens > 0.9 * ctx.budget.threshold
    fake = FakeProvider()
    out, result = Collapser(LLMSummarizer(fake, counter=counter))(messages, ctx, tokens)
    validate(out)
    assert result.fired and len(result.handles) >= 2, result.detail
    collapsed = [m for m in out if (m.marker or {}).get("kind") == "collapse"]
    for m in collapsed:
        covered = decode(store.get(m.marker["handle"]))
        assert sum(counter.count_message(x) for x in covered) <= MAX_EPISODE_TOKENS or len(group_rounds(covered)) == 1
    # Pieces are collapsed oldest first.
    first = decode(store.get(result.handles[0]))
    assert first[0].content == messages[0].content


# -- generated histories -----------------------------------------------------------------------

@st.composite
def long_histories(draw) -> tuple[list[Message], int]:
    """Finished stretches (a request or a summary, then up to 25 rounds of varied work),
    then the newest request; and the index where the newest request starts."""
    out: list[Message] = []
    tid = 0
    done: list[str] = []
    blocks = draw(st.integers(1, 4))
    for block in range(blocks + 1):
        if block and block < blocks and draw(st.integers(0, 3)) == 0:
            out.append(Message(role="user", content=(Text(text=f'{markers.SUMMARY_OPEN} handle="h{block}">…'),),
                               meta={"lossless": {"kind": "collapse", "handle": f"h{block}"}}))
        else:
            if block == blocks:
                newest = len(out)
            out.append(user(f"Request {block}: " + "do the thing. " * draw(st.integers(1, 30))))
        for _ in range(draw(st.integers(0, 25 if block < blocks else 4))):
            kind = draw(st.sampled_from(["read", "pass", "fail", "commit", "todo", "text", "parallel", "think"]))
            n = draw(st.sampled_from([10, 200, 1_000, 3_000, 8_000]))
            if kind == "text":
                out.append(assistant("Thinking aloud. " * (n // 16 + 1)))
                continue
            calls: list[tuple[str, dict, str, bool]] = []
            if kind in ("read", "parallel", "think"):
                calls.append(("Read", {"file_path": "src/a.py"}, "   1→x = 1\n" * (n // 10 + 1), False))
            if kind in ("pass", "parallel"):
                calls.append(("Bash", {"command": "pytest -q"}, "." * n + "\n12 passed in 0.3s", False))
            if kind == "fail":
                calls.append(("Bash", {"command": "pytest -q"}, "F" * n + "\n1 failed, 3 passed in 0.3s", True))
            if kind == "commit":
                calls.append(("Bash", {"command": "git commit -am 'fix'"},
                              "[main abc1234] fix\n 1 file changed, 2 insertions(+)", False))
            if kind == "todo":
                done.append(f"item {len(done)}")
                todos = [{"content": d, "status": "completed"} for d in done] + [{"content": "later",
                                                                                 "status": "pending"}]
                calls.append(("TodoWrite", {"todos": todos}, "Todos have been modified successfully", False))
            uses = []
            for name, args, _, _ in calls:
                tid += 1
                uses.append(ToolUse(id=f"toolu_{tid:05d}", name=name, input=args))
            head = (Thinking(thinking="hm", signature="sig"),) if kind == "think" else ()
            out.append(Message(role="assistant", content=(*head, *uses)))
            out.append(Message(role="user", content=tuple(
                ToolResult(tool_use_id=u.id, content=text, is_error=err) for u, (_, _, text, err) in zip(uses, calls))))
    return out, newest


BOUNDS = st.sampled_from([60, 300, 1_000, 2_500, 6_000])


@given(long_histories(), BOUNDS)
def test_every_message_of_a_finished_stretch_is_in_exactly_one_episode(drawn, bound):
    messages, newest = drawn
    validate(messages)
    count = Chars4().count_message
    pieces = episodes(messages, max_tokens=bound, count=count)
    check_pieces(messages, pieces, bound, count)
    covered = [i for e in pieces for i in range(e.start, e.stop)]
    assert len(covered) == len(set(covered))
    finished = {i for i in range(newest) if (messages[i].marker or {}).get("kind") != "collapse"}
    assert set(covered) <= finished
    # A message left out is a round of one message that was a piece alone (not worth a summary).
    assert all(lone_round(messages, i) for i in finished - set(covered))
    # The newest request's episode is never cut or listed.
    assert all(e.stop <= newest for e in pieces)


@given(histories(max_rounds=40), BOUNDS)
def test_pieces_of_any_history_never_split_a_round(messages, bound):
    count = Chars4().count_message
    pieces = episodes(messages, max_tokens=bound, count=count)
    check_pieces(messages, pieces, bound, count)
    whole = {i for e in episodes(messages) for i in range(e.start, e.stop)}
    assert {i for e in pieces for i in range(e.start, e.stop)} <= whole


@given(long_histories(), st.sampled_from([300, 1_000, 2_500]), st.sampled_from([8_000, 16_000]))
def test_collapsing_bounded_episodes_keeps_the_request_valid(store, drawn, bound, window):
    messages, newest = drawn
    ctx = StageContext(config=ContextConfig(window=window), counter=Chars4(), store=store, trigger="auto")
    tokens = ctx.count(messages)
    c = Collapser(LLMSummarizer(FakeProvider(), counter=Chars4()), max_episode_tokens=bound)
    out, result = c(messages, ctx, tokens)
    validate(out)
    assert_whole_rounds(out)
    if not result.fired:
        assert out is messages
        return
    assert result.tokens_after == ctx.count(out) < tokens
    assert all(a is b for a, b in zip(out[len(out) - (len(messages) - newest):], messages[newest:]))
    for m in out:
        if (m.marker or {}).get("kind") == "collapse" and m.marker["handle"] in result.handles:
            covered = decode(store.get(m.marker["handle"]))
            assert sum(Chars4().count_message(x) for x in covered) <= bound or len(group_rounds(covered)) == 1


def test_a_cut_goes_to_the_last_natural_boundary_in_reach():
    def work(i: int, command: str, output: str, n: int = 400) -> list[Message]:
        use = ToolUse(id=f"t{i}", name="Bash", input={"command": command})
        return [Message(role="assistant", content=(Text(text="x" * n), use)),
                Message(role="user", content=(ToolResult(tool_use_id=f"t{i}", content=output),))]

    count = Chars4().count_message
    msgs = [user("Ship it."), *work(0, "ls", "a"), *work(1, "pytest", "3 passed in 0.1s"),
            *work(2, "ls", "a"), *work(3, "git commit -m x", "[main 1234567] x"),
            *work(4, "pytest", "1 failed, 2 passed"),  # a failing run is no boundary
            *work(5, "ls", "b"), *work(6, "ls", "c"), user("Next.")]
    sizes = [count(m) for m in msgs]
    assert sum(sizes[:5]) < 300 <= sum(sizes[:9]) <= 600 < sum(sizes[:11])
    # Bound 600: the tests (before half of it) are too early; the commit is in reach.
    pieces = episodes(msgs, max_tokens=600, count=count)
    assert [(e.start, e.stop, e.cut) for e in pieces] == [(0, 9, "commit"), (9, 15, "request")]
    # Bound 400: the commit is out of reach, the tests are in; then the commit.
    pieces = episodes(msgs, max_tokens=400, count=count)
    assert [(e.start, e.stop, e.cut) for e in pieces][:2] == [(0, 5, "tests passed"), (5, 9, "commit")]
    # Bound 250: one round a piece (the user's request rides with the first), named by how it ends.
    pieces = episodes(msgs, max_tokens=250, count=count)
    assert [(e.stop, e.cut) for e in pieces] == [(3, "bound"), (5, "tests passed"), (7, "bound"), (9, "commit"),
                                                 (11, "bound"), (13, "bound"), (15, "request")]
    check_pieces(msgs, pieces, 250, count)
    # A todo list re-sent with the same items done is no new boundary.
    todo = [{"content": "a", "status": "completed"}]
    again = [Message(role="assistant", content=(ToolUse(id=f"d{k}", name="TodoWrite", input={"todos": todo}),))
             for k in range(2)]
    answers = [Message(role="user", content=(ToolResult(tool_use_id=f"d{k}", content="ok"),)) for k in range(2)]
    hist = [user("Go."), again[0], answers[0], again[1], answers[1]]
    assert _natural(hist, group_rounds(hist)) == [None, "todo done", None]
