from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless import markers
from lossless.config import ContextConfig
from lossless.messages import Image, Message, Text, ToolResult, ToolUse, assistant, user
from lossless.rounds import validate
from lossless.stages.base import StageContext
from lossless.stages.persist import original_text, persist
from lossless.store import ArtifactStore
from lossless.tokens import default_counter

from strategies import histories

CONFIGS = [
    ContextConfig(),
    ContextConfig(window=16_000, persist_chars=10_000, persist_shell_chars=5_000, persist_message_chars=30_000),
    ContextConfig(window=8_000, persist_chars=3_000, persist_shell_chars=3_000, persist_message_chars=4_000,
                  preview_chars=500),
]


def make_ctx(store_root, config: ContextConfig | None = None) -> StageContext:
    return StageContext(config=config or ContextConfig(), counter=default_counter(), store=ArtifactStore(store_root))


def history(*outputs: tuple[str, str | tuple]) -> list[Message]:
    """One round per output: (tool name, result content)."""
    msgs = [user("go")]
    for i, (tool, content) in enumerate(outputs):
        call = ToolUse(id=f"t{i}", name=tool, input={})
        msgs += [assistant(call), Message(role="user", content=(ToolResult(tool_use_id=call.id, content=content),))]
    return msgs


def results(messages):
    return [r for m in messages for r in m.tool_results]


@given(messages=histories(), config=st.sampled_from(CONFIGS))
def test_persist_properties(tmp_path_factory, messages, config):
    ctx = make_ctx(tmp_path_factory.mktemp("store"), config)
    before = copy.deepcopy(messages)
    thinking = [b for m in messages for b in m.content if b.type in ("thinking", "redacted_thinking")]
    tokens = ctx.count(messages)

    out, res = persist(messages, ctx, tokens)

    validate(out)
    assert messages == before and all(a.content == b.content for a, b in zip(messages, before))
    assert [b for m in out for b in m.content if b.type in ("thinking", "redacted_thinking")] == thinking
    assert all(x is y for x, y in zip([b for m in out for b in m.content if b.type in ("thinking", "redacted_thinking")],
                                      thinking))
    assert len(out) == len(messages)
    assert res.tokens_after == ctx.count(out)
    if not res.fired:
        assert out is messages
    else:
        assert res.handles and res.tokens_after < tokens
    # Every handle in a new marker recalls exactly what the marker replaced; untouched messages are the same objects.
    for old, new in zip(messages, out):
        if new is old:
            continue
        for a, b in zip(old.content, new.content):
            if b is a:
                continue
            if isinstance(b, Text):  # a text of the user's or the assistant's over the token limit
                assert isinstance(a, Text) and b.text.startswith(markers.PERSISTED_OPEN)
                (handle,) = set(markers.handles_in(b.text.split("\n", 1)[0]))
                assert handle in res.handles and ctx.store.get(handle) == a.text
                assert not any(x.type in ("thinking", "redacted_thinking") for x in new.content)
                continue
            assert isinstance(b, ToolResult) and b.tool_use_id == a.tool_use_id and b.is_error == a.is_error
            (handle,) = set(markers.handles_in(original_text(b)))
            assert handle in res.handles
            assert ctx.store.get(handle) == original_text(a)
            if not isinstance(a.content, str):  # images stay in place
                assert [x for x in b.content if isinstance(x, Image)] == [x for x in a.content if isinstance(x, Image)]
    # Every result is under the limits now, or a marker.
    for r in results(out):
        text = original_text(r)
        assert markers.is_marker(text) or len(text) <= config.persist_chars
    # Idempotent, and the cache makes the second run a no-op on the same list.
    again, res2 = persist(out, ctx, res.tokens_after)
    assert again is out and not res2.fired and res2.tokens_after == res.tokens_after
    # A fresh copy (no memo) of the output is also left alone: markers are recognised by text.
    fresh = copy.deepcopy(out)
    for m in fresh:
        m._memo.clear()
    again, res3 = persist(fresh, ctx, res.tokens_after)
    assert again is fresh and not res3.fired


def test_shell_limit_is_30k_other_tools_50k(tmp_path):
    ctx = make_ctx(tmp_path)
    msgs = history(("Bash", "a" * 30_001), ("Read", "b" * 30_001), ("Read", "c" * 50_001), ("Bash", "d" * 30_000))
    out, res = persist(msgs, ctx, ctx.count(msgs))
    assert res.fired and len(res.handles) == 2
    texts = [original_text(r) for r in results(out)]
    assert texts[0].startswith(markers.PERSISTED_OPEN) and "output of Bash" in texts[0]
    assert texts[1] == "b" * 30_001
    assert texts[2].startswith(markers.PERSISTED_OPEN) and "output of Read" in texts[2]
    assert texts[3] == "d" * 30_000
    assert out[4] is msgs[4] and out[8] is msgs[8] and out[1] is msgs[1]
    assert ctx.store.get(res.handles[0]) == "a" * 30_001


def test_marker_content(tmp_path):
    ctx = make_ctx(tmp_path)
    text = "".join(f"line {i}\n" for i in range(10_000))
    out, res = persist(history(("Grep", text)), ctx, 0)
    marker = original_text(results(out)[0])
    assert f'chars="{len(text)}"' in marker and 'lines="10000"' in marker
    assert "recall" in marker and res.handles[0] in marker
    preview = marker.split("characters):\n", 1)[1].rsplit("\n</persisted-output>", 1)[0]
    assert text.startswith(preview) and 1_000 < len(preview) <= 2_000
    assert text[len(preview)] == "\n"  # cut at a line end
    assert res.tokens_after < 0 and res.tokens_before == 0  # tokens_after = tokens - old + new


def test_message_total_persists_largest_first(tmp_path):
    ctx = make_ctx(tmp_path)
    sizes = [45_000, 48_000, 44_000, 49_000, 46_000]  # each under 50k, together 232k > 200k
    calls = [ToolUse(id=f"t{i}", name="Read", input={}) for i in range(len(sizes))]
    msgs = [user("go"), assistant(*calls),
            Message(role="user", content=tuple(ToolResult(tool_use_id=c.id, content=str(i) * n)
                                               for i, (c, n) in enumerate(zip(calls, sizes))))]
    out, res = persist(msgs, ctx, ctx.count(msgs))
    texts = [original_text(r) for r in out[2].tool_results]
    persisted = [i for i, t in enumerate(texts) if markers.is_marker(t)]
    assert persisted == [3]  # 232k - 49k + marker < 200k: only the largest
    assert sum(len(t) for t in texts) <= 200_000
    assert res.detail.startswith("persisted 1 tool result ")


def test_message_total_with_tight_limit_goes_on_until_under(tmp_path):
    cfg = ContextConfig(persist_message_chars=60_000)
    ctx = make_ctx(tmp_path, cfg)
    calls = [ToolUse(id=f"t{i}", name="Read", input={}) for i in range(4)]
    msgs = [user("go"), assistant(*calls),
            Message(role="user", content=tuple(ToolResult(tool_use_id=c.id, content=c.id * 10_000) for c in calls))]
    out, res = persist(msgs, ctx, ctx.count(msgs))
    texts = [original_text(r) for r in out[2].tool_results]
    assert sum(markers.is_marker(t) for t in texts) == 2 and sum(len(t) for t in texts) <= 60_000


def test_list_content_keeps_images_in_place(tmp_path):
    ctx = make_ctx(tmp_path)
    img = Image(source={"type": "base64", "media_type": "image/png", "data": "AAAA"})
    content = (img, Text(text="x" * 40_000), Text(text="y" * 20_000))
    out, res = persist(history(("Read", content)), ctx, 0)
    new = results(out)[0].content
    assert new[0] is img and isinstance(new[1], Text) and len(new) == 2
    assert markers.is_marker(new[1].text)
    assert ctx.store.get(res.handles[0]) == "x" * 40_000 + "\n" + "y" * 20_000


def test_unknown_tool_and_error_results(tmp_path):
    ctx = make_ctx(tmp_path)
    msgs = history(("custom", "z" * 50_001))
    msgs[-1] = Message(role="user", content=(ToolResult(tool_use_id="t0", content="z" * 50_001, is_error=True),))
    out, res = persist(msgs, ctx, 0)
    r = results(out)[0]
    assert r.is_error and "output of custom" in r.content


def test_marker_never_bigger_than_original(tmp_path):
    cfg = ContextConfig(persist_chars=100, persist_shell_chars=100, persist_message_chars=150)
    ctx = make_ctx(tmp_path, cfg)
    msgs = history(("Read", "q" * 1_500), ("Read", "r" * 5_000))
    out, res = persist(msgs, ctx, 0)
    assert results(out)[0] is results(msgs)[0]  # a 1,500-char marker would not be smaller
    assert markers.is_marker(results(out)[1].content)


def test_no_op_is_cached_per_message(tmp_path, monkeypatch):
    ctx = make_ctx(tmp_path)
    msgs = history(*[("Bash", "small output\n" * 50)] * 20)
    out, res = persist(msgs, ctx, 123)
    assert out is msgs and not res.fired and res.tokens_after == 123
    assert all("persist" in m._memo for m in msgs)

    import lossless.stages.persist as mod

    def boom(*a, **k):
        raise AssertionError("a checked message was checked again")

    monkeypatch.setattr(mod, "_persist_message", boom)
    assert persist(msgs, ctx, 123)[0] is msgs
    # A different configuration is a different verdict.
    other = make_ctx(tmp_path, ContextConfig(persist_shell_chars=100))
    with pytest.raises(AssertionError, match="checked again"):
        persist(msgs, other, 123)


def test_a_result_too_big_for_a_small_window_is_persisted_whatever_its_characters(tmp_path):
    """At 16k (threshold 10,800) a 27k-character result is under the 30k shell limit but
    alone takes over half the budget: kept whole, the only way to fit would be to summarise
    the round the model has not even read yet."""
    ctx = make_ctx(tmp_path, ContextConfig(window=16_000))
    text = "".join(f"line {i}: some output of the command\n" for i in range(700))
    assert len(text) < 30_000 and ctx.counter.count_text(text) > ctx.budget.threshold // 2
    small = "ok\n" * 200
    msgs = history(("Bash", text), ("Bash", small))
    out, res = persist(msgs, ctx, ctx.count(msgs))
    assert res.fired and len(res.handles) == 1
    first, second = results(out)
    assert markers.is_marker(original_text(first)) and ctx.store.get(res.handles[0]) == text
    assert second is results(msgs)[1]
    # the same on a 200k window: far under its budget, nothing to do
    big = make_ctx(tmp_path, ContextConfig())
    assert not persist(msgs, big, big.count(msgs))[1].fired


def test_a_user_paste_too_big_for_the_window_is_persisted_with_a_preview(tmp_path):
    from lossless.store import ArtifactStore as _Store

    cfg = ContextConfig(window=16_000)
    ctx = StageContext(config=cfg, counter=default_counter(), store=_Store(tmp_path))
    paste = "".join(f"2026-11-22 10:{i % 60:02d} worker[{i}] ERROR timeout after 30s\n" for i in range(3_000))
    msgs = [Message(role="user", content=(Text(text="Why does the worker time out? Log:"), Text(text=paste)))]
    out, res = persist(msgs, ctx, ctx.count(msgs))
    assert res.fired and res.tokens_after < cfg.budget.threshold
    assert out[0].content[0].text == "Why does the worker time out? Log:"  # the question is untouched
    marker = out[0].content[1].text
    assert "text the user sent" in marker and marker.startswith("<persisted-output")
    assert _Store(tmp_path).get(res.handles[0]) == paste
    again, res2 = persist(out, ctx, res.tokens_after)
    assert again is out and not res2.fired


def test_an_answer_too_big_for_the_window_is_persisted_and_the_account_names_it(tmp_path):
    """A model caught in a loop can write 150,000 characters in one answer (one of the shared
    mini-swe-agent runs does).  Left verbatim, the next snip must take every round before it to
    get under its target; stored like a pasted log, the recent work stays."""
    from lossless import account

    cfg = ContextConfig(window=16_000)
    ctx = make_ctx(tmp_path, cfg)
    runaway = "".join(f"Wait, line {i} says `return mmsubsup`, so maybe the variable is wrong.\n" for i in range(2_000))
    call = ToolUse(id="t9", name="Bash", input={"command": "nl -ba mathml.py"})
    msgs = [user("Fix the MathML printer."), assistant(runaway, call),
            Message(role="user", content=(ToolResult(tool_use_id="t9", content="799 return msubsup"),))]
    out, res = persist(msgs, ctx, ctx.count(msgs))
    assert res.fired and "long answer" in res.detail and res.tokens_after < cfg.budget.threshold // 2
    text, use = out[1].content
    assert use is call and out[2] is msgs[2]  # the call and its result stay exactly as they were
    assert "text the assistant wrote" in text.text and ctx.store.get(res.handles[0]) == runaway
    validate(out)
    again, res2 = persist(out, ctx, res.tokens_after)
    assert again is out and not res2.fired
    # The account of a range holding it points at the whole answer.
    acc = account.collect(out, cfg, ctx.store)
    assert any(res.handles[0] in line for line in acc.conclusions)
    # An answer with thinking goes back to the API exactly: left as it is.
    from lossless.messages import Thinking

    thought = [user("Fix it."), Message(role="assistant", content=(Thinking(thinking="hm", signature="s"), Text(text=runaway)))]
    same, res3 = persist(thought, ctx, ctx.count(thought))
    assert same is thought and not res3.fired


@given(role=st.sampled_from(["user", "assistant"]), lines=st.integers(1, 2_500), thinking=st.booleans(),
       window=st.sampled_from([8_000, 16_000, 32_000]), tail=st.booleans())
def test_a_text_is_stored_exactly_when_it_alone_is_over_half_the_threshold(tmp_path_factory, role, lines, thinking,
                                                                          window, tail):
    """Any text of the user's or the assistant's: stored (preview, handle, the original exactly) when it
    alone is over half the threshold, except beside an assistant's thinking; the request stays valid and
    a second pass changes nothing."""
    from lossless.messages import Thinking

    cfg = ContextConfig(window=window)
    ctx = make_ctx(tmp_path_factory.mktemp("store"), cfg)
    text = "".join(f"step {i}: the value of x_{i % 97} is {i * 7919 % 10_007}\n" for i in range(lines))
    blocks: list = [Text(text=text)]
    if role == "assistant" and thinking:
        blocks.insert(0, Thinking(thinking="Let me think.", signature="sig"))
    if tail:
        blocks.append(Text(text="That is all."))
    msgs = [user("Work it out."), Message(role=role, content=tuple(blocks))]
    if role == "assistant":
        msgs.append(user("Go on."))
    out, res = persist(msgs, ctx, ctx.count(msgs))
    over = ctx.counter.count_text(text) > cfg.persist_threshold_fraction * cfg.budget.threshold
    expect = over and not (role == "assistant" and thinking)
    assert res.fired == expect
    validate(out)
    if not expect:
        assert out is msgs
        return
    moved = next(b for b in out[1].content if isinstance(b, Text) and b.text.startswith(markers.PERSISTED_OPEN))
    (handle,) = markers.handles_in(moved.text.split("\n", 1)[0])
    assert ctx.store.get(handle) == text and res.handles == (handle,)
    assert [b for b in out[1].content if b is not moved] == [b for b in blocks if b.text != text]
    assert res.tokens_after == ctx.count(out) < res.tokens_before
    again, res2 = persist(out, ctx, res.tokens_after)
    assert again is out and not res2.fired


def _quoted(marker: str) -> list[str]:
    body = marker.split("stand out (errors and warnings, definitions, identifiers, then the rarest):\n", 1)
    return [line[len(markers.KEY_LINE):] for line in body[1].splitlines() if line.startswith(markers.KEY_LINE)] \
        if len(body) == 2 else []


def test_a_stored_output_quotes_the_lines_past_its_preview_that_stand_out(tmp_path):
    """A 100,000-character test log with a failure past its preview and an error near its end: the
    preview shows the head, and the marker quotes both verbatim under it."""
    ctx = make_ctx(tmp_path)
    rows = [f"tests/test_api.py::test_case_{i:04d} PASSED{' ' * 20}[{i // 30:3d}%]" for i in range(1_500)]
    rows[150] = "tests/test_api.py::test_parse_header FAILED - AssertionError: expected 'utf-8', got 'latin-1'"
    rows[1_450] = "ValueError: header 'Content-Type' has no charset"
    text = "\n".join(rows)
    out, _ = persist(history(("Bash", text)), ctx, 0)
    marker = original_text(results(out)[0])
    quoted = _quoted(marker)
    assert rows[150] in quoted and rows[1_450] in quoted, quoted
    assert len(quoted) <= 8 and len(marker) < len(text) // 10
    preview = marker.split("characters):\n", 1)[1].split("\nLines further on", 1)[0]
    assert text.startswith(preview) and not any(q in preview for q in quoted)
    normalised = {" ".join(line.split()) for line in text.splitlines()}
    assert all(q in normalised or q.endswith("…") for q in quoted)


@given(st.lists(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=120),
                min_size=400, max_size=900))
def test_every_quoted_line_of_a_stored_output_is_its_own_and_not_in_its_preview(tmp_path_factory, lines):
    ctx = make_ctx(tmp_path_factory.mktemp("s"), ContextConfig(window=16_000, persist_chars=3_000))
    text = "\n".join(lines)
    out, _ = persist(history(("Bash", text)), ctx, 0)
    marker = original_text(results(out)[0])
    if not marker.startswith(markers.PERSISTED_OPEN):
        return  # too small to persist
    quoted = _quoted(marker)
    assert len(quoted) <= 8
    normalised = " \n ".join(" ".join(line.split()) for line in text.splitlines())
    assert all(q.rstrip("…") in normalised for q in quoted), quoted
