"""Fold: what stays after a snip holds each repeated line once, where it is newest, and loses nothing.

- property: a folded text keeps its first and last lines and every line a later output does not
  repeat, in order; each run it takes out is lines found later (or too short to say anything);
- on real mini-swe-agent runs, through the snip stage: every folded result's handle gives its
  whole original back in one recall, every line it took out is verbatim in a later result or in
  the input of its own or a later call still in the context, and the snip keeps more messages
  than it would without folding;
- a file read, then written whole: the read gives up the lines the write's input shows, naming
  the write; a write tool's answer that shows the file back folds against its own call's input;
- micro-compact clears a folded result naming the same original; a later snip's archive and
  account name the original too (one recall from the context to every original).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from lossless import account, markers
from lossless.account.archive import original_text
from lossless.config import ContextConfig
from lossless.dialects.mini_swe import read_trajectory
from lossless.messages import Message, ToolResult, ToolUse, Text, result_text
from lossless.stages import fold as fold_mod
from lossless.stages.base import StageContext
from lossless.stages.fold import fold, fold_text, key
from lossless.stages.microcompact import microcompact
from lossless.stages.snip import snip
from lossless.store import ArtifactStore
from lossless.tokens import default_counter

from conftest import DATA
from lines_kit import input_keys, output_keys

RUNS = sorted((DATA / "mini-swe-agent").glob("*.traj.json")) if (DATA / "mini-swe-agent").exists() else []

words = st.sampled_from(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "}", "", "    "])
lines = st.lists(words, min_size=1, max_size=12).map(" ".join)


@st.composite
def outputs(draw: st.DrawFn) -> tuple[list[str], set[str]]:
    """An output's lines, and the lines of later outputs: some of its own (with a read's line
    numbers, or spaced differently), some others."""
    segments = draw(st.lists(st.tuples(st.lists(lines, min_size=1, max_size=20), st.booleans()), min_size=1,
                             max_size=8))
    text_lines = [x for seg, _ in segments for x in seg]
    repeated = [r for seg, r in segments for _ in seg]
    assume(len(text_lines) >= 5)
    numbered = draw(st.booleans())
    later = {f"{n:6}\t{x}  " if numbered else f"  {x}" for n, (x, r) in enumerate(zip(text_lines, repeated)) if r}
    return text_lines, later | draw(st.sets(lines, max_size=10))


@given(outputs())
def test_a_folded_text_keeps_what_no_later_output_repeats(case):
    text_lines, later = case
    text = "\n".join(text_lines)
    later_keys = {key(x) for x in later}
    done = fold_text(text, later_keys)
    if done is None:
        return
    body, n, folded = done
    assert n == len(text_lines) and 0 < folded < n
    out = body.split("\n")
    assert out[0] == text_lines[0] and out[-1] == text_lines[-1]
    # Walk the original against the body: each body line is the next original line, or a run marker
    # standing for that many original lines, all repeated later or trivial.
    i = 0
    taken = 0
    for line in out:
        run = [int(w) for w in line.split() if w.isdigit()] if line.startswith("[… ") and "repeated in a later" in line else []
        if run and not (i < n and text_lines[i] == line):
            k = run[0]
            chunk = text_lines[i:i + k]
            assert len(chunk) == k
            assert all(key(x) in later_keys or fold_mod._trivial(key(x)) for x in chunk)
            assert sum(not fold_mod._trivial(key(x)) for x in chunk) >= 2
            i += k
            taken += k
        else:
            assert text_lines[i] == line
            i += 1
    assert i == n and taken == folded
    assert len(text) - len(body) >= fold_mod.MIN_SAVED_CHARS


def _ctx(store: ArtifactStore, window: int) -> StageContext:
    return StageContext(config=ContextConfig(window=window), counter=default_counter(), store=store)


def _runs_over_the_threshold(store: ArtifactStore) -> Iterator[tuple[Path, list[Message], StageContext, int]]:
    """(path, messages, a 32k context, their tokens) of the first real runs a snip fires on."""
    for path in RUNS[:8]:
        msgs = list(read_trajectory(path).messages)
        ctx = _ctx(store, 32_000)
        tokens = ctx.count(msgs)
        if tokens > ctx.budget.threshold:
            yield path, msgs, ctx, tokens


def _context_keys(messages: list[Message], after: int) -> set[str]:
    """The lines that later results, and the inputs of the result's own and later calls, show."""
    return output_keys(messages[after + 1:]) | input_keys(messages[after - 1:])


@pytest.mark.skipif(not RUNS, reason="shared data not present: mini-swe-agent runs")
def test_snip_folds_real_runs_and_every_original_is_one_recall_away(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    folded_seen = 0
    for path, msgs, ctx, tokens in _runs_over_the_threshold(store):
        out, result = snip(msgs, ctx, tokens)
        assert result.fired, path.name
        assert result.tokens_after < tokens
        originals = {r.tool_use_id: original_text(r) for m in msgs for r in m.tool_results}
        for i, m in enumerate(out):
            for r in m.tool_results:
                text = result_text(r)
                handle = markers.folded_handle(text)
                if handle is None:
                    continue
                folded_seen += 1
                assert handle in result.items
                whole = store.get(handle)
                assert whole == originals[r.tool_use_id]  # one recall: the original, exactly
                later = _context_keys(out, i)
                kept = text.partition("\n")[2].split("\n")
                gone = [x for x in whole.split("\n") if x not in kept]
                assert gone and all(key(x) in later or fold_mod._trivial(key(x)) for x in gone), path.name
    assert folded_seen >= 5


@pytest.mark.skipif(not RUNS, reason="shared data not present: mini-swe-agent runs")
def test_folding_keeps_more_of_the_recent_work(tmp_path, monkeypatch):
    store = ArtifactStore(tmp_path / "store")
    gained = 0
    for path, msgs, ctx, tokens in _runs_over_the_threshold(store):
        with_fold, _ = snip(msgs, ctx, tokens)
        with monkeypatch.context() as m:
            m.setattr(fold_mod, "MIN_SAVED_CHARS", 10**9)  # folding never pays: the plain snip
            without, _ = snip(msgs, ctx, tokens)
        assert len(with_fold) >= len(without), path.name
        gained += len(with_fold) - len(without)
    assert gained > 0


def _history(store: ArtifactStore) -> list[Message]:
    """A task, a file read twice (the second time after an edit), and more work after."""
    body = [f"def function_{k}(argument_{k}):\n    return compute_value_{k}(argument_{k}) * {k}" for k in range(40)]
    gone = [f"# a note the edit removed, number {k}, about argument_{k} and its range" for k in range(12)]
    first = "\n".join(f"{n:6}\t{line}" for n, line in enumerate("\n".join([*body, *gone]).split("\n"), 1))
    second_lines = "\n".join(body).split("\n")
    second_lines.insert(10, "# the one line the edit added, unique to the second read")
    second = "\n".join(f"{n:6}\t{line}" for n, line in enumerate(second_lines, 1))
    msgs = [Message(role="user", content=(Text(text="Fix the module."),))]
    outputs = [f"noise output {k}: " + "x" * 50 + "\n" + "\n".join(f"filler line {k}.{j} " + "y" * 60 for j in range(30))
               for k in range(6)]
    for k, out in enumerate([first, *outputs, second, "done\n" * 3]):
        use = ToolUse(id=f"t{k}", name="bash", input={"command": f"step {k}"})
        msgs += [Message(role="assistant", content=(Text(text=f"Step {k}."), use)),
                 Message(role="user", content=(ToolResult(tool_use_id=f"t{k}", content=out),))]
    return msgs


def test_micro_compact_and_a_later_snip_reach_the_folded_original_in_one_recall(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    msgs = _history(store)
    ctx = _ctx(store, 8_000)
    done = fold(msgs, 1, ctx)
    assert done.results == 1 and done.saved > 0
    [(handle, (index, whole))] = done.blobs.items()
    assert whole == original_text(msgs[index].tool_results[0])
    store.put(whole)
    folded = done.messages
    text = result_text(folded[index].tool_results[0])
    assert text.startswith(markers.FOLDED_PREFIX) and markers.folded_handle(text) == handle

    # micro-compact clears it under pressure, naming the same original
    cfg = ContextConfig(window=8_000, micro_keep=1, micro_min_batch_fraction=0.0, micro_trigger_fraction=0.0)
    mctx = StageContext(config=cfg, counter=default_counter(), store=store)
    cleared, res = microcompact(folded, mctx, mctx.count(folded))
    assert res.fired
    ctext = result_text(cleared[index].tool_results[0])
    assert ctext.startswith(markers.CLEARED_PREFIX) and handle in ctext

    # an account of a range holding it names the original; the range's archive holds the original
    acc = account.collect(folded[1:index + 1], cfg, store)
    assert any(markers.short(handle) in line for line in acc.calls)
    archived = json.loads(account.flat_archive(folded[1:index + 1], store))
    contents = [b.get("content") for d in archived for b in d["content"] if isinstance(b, dict)]
    assert any(whole == c or (isinstance(c, list) and any(p.get("text") == whole for p in c)) for c in contents)


def _rewrite(answer: str, body: list[str], read: str) -> list[Message]:
    written = "\n".join([*body, "# the line the write added, at its end"])
    return [Message(role="user", content=(Text(text="Rewrite mod.py."),)),
            Message(role="assistant", content=(ToolUse(id="r", name="Read", input={"file_path": "mod.py"}),)),
            Message(role="user", content=(ToolResult(tool_use_id="r", content=read),)),
            Message(role="assistant", content=(ToolUse(id="w", name="Write",
                                                       input={"file_path": "mod.py", "content": written}),)),
            Message(role="user", content=(ToolResult(tool_use_id="w", content=answer),)),
            Message(role="assistant", content=(Text(text="Done."),)),
            Message(role="user", content=(Text(text="Thanks."),))]


def test_a_read_gives_up_what_a_later_write_shows_and_a_write_what_its_own_input_shows(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    body = [f"def function_{k}(argument_{k}): return compute_value_{k}(argument_{k}) * {k}" for k in range(30)]
    read = "\n".join(f"{n:6}\t{line}" for n, line in enumerate(["# the header only the read shows, here", *body], 1))
    shown = "The file mod.py has been updated. Here's the result:\n" + "\n".join(
        f"{n:6}→{line}" for n, line in enumerate(body, 1)) + "\n(end)"
    # a write that answers in one line: the read gives up what its input shows
    # a write that shows the file back: that answer gives up what its own input shows (and the read,
    # what that later output shows)
    # (a folded text keeps its first and last lines: the read's last line stays)
    for answer, i, folds, run in (("The file mod.py has been written.", 2, 1, 29), (shown, 4, 2, 30)):
        msgs = _rewrite(answer, body, read)
        done = fold(msgs, 1, _ctx(store, 8_000))
        assert done.results == folds
        text = result_text(done.messages[i].tool_results[0])
        first, _, rest = text.partition("\n")
        assert "repeat a later output or a call's input" in first
        assert f"[… {run} lines as in the input of Write mod.py …]" in rest
        assert done.blobs[markers.folded_handle(text)] == (i, result_text(msgs[i].tool_results[0]))
        assert not any(line in rest for line in body[:-1])
        assert done.messages[3] is msgs[3]  # the write's input is never folded
        assert "# the header only the read shows, here" in result_text(done.messages[2].tool_results[0])


@given(st.text(max_size=120))
def test_a_line_says_something_from_six_letters_or_digits_in_its_first_64_characters(k):
    assert fold_mod._trivial(k) == (sum(c.isalnum() for c in k[:64]) < 6)


def test_a_call_input_of_any_depth_is_read_in_order():
    deep: object = "the innermost line"
    for _ in range(5_000):  # deeper than Python's recursion limit
        deep = [deep]
    use = ToolUse(id="d", name="Write", input={"file_path": "a.py", "content": "one\ntwo", "nested": deep,
                                                  "more": {"x": ["three", {"y": "four"}]}})
    [(_, keys)] = fold_mod.input_keys(Message(role="assistant", content=(use,)))
    assert keys == ["a.py", "one", "two", "the innermost line", "three", "four"]


def test_an_account_of_a_folded_result_quotes_what_only_it_said_never_a_run_line(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    msgs = _history(store)
    done = fold(msgs, 1, _ctx(store, 8_000))
    (index, whole), = done.blobs.values()
    store.put(whole)
    text = result_text(done.messages[index].tool_results[0])
    assert markers.RUN_LINE.search(text)  # the folded result has a run line …
    acc = account.collect(done.messages[1:index + 1], ContextConfig(window=8_000), store)
    rendered = acc.render(budget_chars=20_000)
    assert not markers.RUN_LINE.search(rendered)  # … which its account never quotes
    assert "# a note the edit removed, number" in rendered  # what only it said is a key line
