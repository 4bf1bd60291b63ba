"""Thin: past the newest rounds, the model's replies that a snip keeps give up their reasoning, never
anything else, and each comes back whole in one recall.

- property: a thinned reply is shorter by at least the minimum, names the short handle of its whole
  text, keeps its conclusion and its last fenced block, and is never thinned again;
- on real mini-swe-agent runs, through the snip stage at 32k: every thinned reply's handle gives the
  original back; no tool call, result, thinking block or user message is changed by it; the newest
  rounds within ``verbatim_tail_fraction`` stay whole; ``verbatim_tail_fraction=1`` thins nothing;
  thinning keeps more of the outputs in the same landing;
- a reply without a call is thinned only when it offers commands no tool ran (two fenced blocks or
  more, ending in one), as a ReAct harness rejects: an answer the user read stays whole; on the real
  runs every such reply is one the harness refused, and no Claude Code answer has that shape;
- a later snip's archive holds the original reply (one recall from the context to every original),
  and its account quotes the conclusion the original gives;
- a bad ``verbatim_tail_fraction`` is one line naming it.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless import account, markers
from lossless.config import ContextConfig
from lossless.dialects.mini_swe import read_trajectory
from lossless.errors import ConfigError
from lossless.messages import Message, Text, ToolResult, ToolUse
from lossless.rounds import group_rounds
from lossless.sessions import open_session
from lossless.stages.base import StageContext
from lossless.stages.snip import snip
from lossless.stages.thin import MIN_SAVED_CHARS, thin, thin_text, unrun_commands
from lossless.store import ArtifactStore, handle_for
from lossless.tokens import default_counter

from conftest import DATA

RUNS = sorted((DATA / "mini-swe-agent").glob("*.traj.json")) if (DATA / "mini-swe-agent").exists() else []
CLAUDE = sorted((DATA / "claude-code").rglob("*.jsonl")) if (DATA / "claude-code").exists() else []
FENCED = r"^```[^\n]*\n.*?^```[ \t]*$"
"""A fenced block, as the tests read one (on its own, not the stage's pattern)."""

word = st.sampled_from(["the", "test", "fails", "because", "`parse()`", "returns", "None", "for", "an", "empty",
                        "path", "so", "let's", "check", "django/db/models.py", "line", "42", "again."])
sentence = st.lists(word, min_size=3, max_size=30).map(" ".join)
paragraph = st.lists(sentence, min_size=1, max_size=6).map(" ".join)
code = st.lists(st.sampled_from(["grep -n parse src/x.py", "cat <<'EOF' > t.py", "print(1)", "EOF", "x = 1"]),
                min_size=1, max_size=30).map(lambda lines: "```bash\n" + "\n".join(lines) + "\n```")
reply = st.lists(st.one_of(paragraph, code), min_size=1, max_size=8).map("\n\n".join)
refused = st.tuples(st.lists(paragraph, min_size=3, max_size=8), st.lists(code, min_size=2, max_size=3)).map(
    lambda parts: "\n\n".join([*parts[0], *parts[1]]))
"""A reply with two commands or more at its end, as a harness refuses them."""


@given(reply)
def test_a_thinned_reply_keeps_its_conclusion_and_last_command_and_names_its_whole(text):
    done = thin_text(text)
    if done is None:
        return
    handle, new = done
    assert handle == markers.short(handle_for(text.encode()))
    assert new.startswith(markers.THINNED_PREFIX) and markers.handles_in(new.split("\n", 1)[0]) == [handle]
    assert len(text) - len(new) >= max(MIN_SAVED_CHARS, 2 * len(text) // 5)
    body = markers.thinned_body(new)
    assert account.conclusion_of(text) in body
    blocks = re.findall(FENCED, text, re.S | re.M)
    if blocks:
        assert blocks[-1].split("\n")[0] in body and blocks[-1].split("\n")[1] in body
    assert thin_text(new) is None  # never thinned twice


@given(st.one_of(reply, refused), st.booleans())
def test_a_reply_without_a_call_is_thinned_only_when_it_offers_commands_no_tool_ran(tmp_path_factory, text, called):
    store = ArtifactStore(tmp_path_factory.mktemp("store"))
    calls = (ToolUse(id="t1", name="bash", input={"command": "ls"}),) if called else ()
    msgs = [Message(role="user", content=(Text(text="Fix the parser."),)),
            Message(role="assistant", content=(Text(text=text), *calls)),
            Message(role="user", content=(ToolResult(tool_use_id="t1", content="ok"),) if called
                    else (Text(text="Please always provide EXACTLY ONE action."),))]
    done = thin(msgs, 0, len(msgs), _ctx(store))
    blocks = re.findall(FENCED, text, re.S | re.M)
    offers = len(blocks) >= 2 and text.rstrip().endswith(blocks[-1])
    assert unrun_commands(msgs[1]) == offers
    expected = thin_text(text) if called or offers else None
    if expected is None:
        assert done.messages == msgs and done.saved == 0 and not done.blobs
    else:
        assert done.messages[1].content[0].text == expected[1] and done.saved > 0
        assert done.blobs == {expected[0]: (1, text)}
        assert done.messages[0] is msgs[0] and done.messages[2] is msgs[2]


def test_an_answer_with_code_in_it_stays_whole(tmp_path):
    answer = ("Here is what changed and how to try it.\n\n```bash\npip install -e .\n```\n\n"
              + " ".join(f"Point {k}: the parser now keeps the last byte of key {k}." for k in range(30))
              + "\n\n```python\nparse_header(b'k: v')\n```\n\nTell me if the second form is what you wanted.")
    msgs = [Message(role="user", content=(Text(text="What changed?"),)),
            Message(role="assistant", content=(Text(text=answer),)),
            Message(role="user", content=(Text(text="Thanks."),))]
    assert thin_text(answer) is not None  # long enough: only the rule keeps it whole
    assert not unrun_commands(msgs[1]) and thin(msgs, 0, 3, _ctx(ArtifactStore(tmp_path / "s"))).messages == msgs


@pytest.mark.skipif(not RUNS or not CLAUDE, reason="shared data not present: mini-swe-agent runs, Claude Code sessions")
def test_on_real_sessions_only_refused_commands_have_the_shape():
    seen = 0
    for path in RUNS + CLAUDE:
        msgs = list(open_session(path).messages)
        for i, m in enumerate(msgs):
            if m.role != "assistant" or m.tool_uses or not unrun_commands(m):
                continue
            assert path.suffix == ".json", f"{path.name}: message {i}, an answer, has the shape of refused commands"
            following = "".join(b.text for b in msgs[i + 1].content if isinstance(b, Text))
            assert following.startswith("Please always provide EXACTLY"), f"{path.name}: message {i}"
            seen += 1
    assert seen > 0


def _ctx(store: ArtifactStore, **knobs) -> StageContext:
    return StageContext(config=ContextConfig(window=32_000, **knobs), counter=default_counter(), store=store)


def _first_snips(store: ArtifactStore, **knobs):
    """(path, messages, ctx, tokens, output, result) of the first snip of each of the first real runs."""
    for path in RUNS[:10]:
        msgs = list(read_trajectory(path).messages)
        ctx = _ctx(store, **knobs)
        count = ctx.counter.count_message
        # the history as a live loop has it when it first passes the threshold
        for n in range(2, len(msgs) + 1):
            if ctx.overhead + sum(map(count, msgs[:n])) > ctx.budget.threshold and msgs[n - 1].role == "user":
                head = msgs[:n]
                tokens = ctx.count(head)
                out, result = snip(head, ctx, tokens)
                yield path, head, ctx, tokens, out, result
                break


@pytest.mark.skipif(not RUNS, reason="shared data not present: mini-swe-agent runs")
def test_real_runs_thin_only_replies_and_every_original_is_one_recall_away(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    thinned_seen = 0
    for path, msgs, ctx, tokens, out, result in _first_snips(store):
        assert result.fired, path.name
        # what follows the placeholder is the input's tail, message for message
        at = next((i for i, m in enumerate(out) if account.is_account(m)), None)
        tail = msgs if at is None else msgs[len(msgs) - (len(out) - at - 1):]
        kept = out[len(out) - len(tail):]
        for before, after in zip(tail, kept):
            if before is after:
                continue
            assert before.role == after.role and len(before.content) == len(after.content), path.name
            for x, y in zip(before.content, after.content):
                if x == y:
                    continue
                if isinstance(y, Text) and y.text.startswith(markers.THINNED_PREFIX):
                    assert before.role == "assistant" and isinstance(x, Text)
                    [handle] = markers.handles_in(y.text.split("\n", 1)[0])
                    assert store.get(handle) == x.text and store.resolve(handle) in {store.resolve(h)
                                                                                     for h in result.items}
                    thinned_seen += 1
                else:  # anything else that changed is a fold of a result
                    assert isinstance(x, ToolResult) and isinstance(y, ToolResult), path.name
        # the newest rounds within the verbatim share (as they came in) are whole
        rounds = group_rounds(tail)
        room, used = ctx.config.verbatim_tail_fraction * ctx.budget.threshold, 0
        for r in reversed(rounds):
            used += sum(ctx.counter.count_message(tail[i]) for i in range(r.start, r.stop))
            if used > room:
                break
            for m in kept[r.start:r.stop]:
                assert not any(isinstance(b, Text) and b.text.startswith(markers.THINNED_PREFIX) for b in m.content)
    assert thinned_seen > 0


@pytest.mark.skipif(not RUNS, reason="shared data not present: mini-swe-agent runs")
def test_thinning_keeps_more_outputs_and_one_share_turns_it_off(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    gained = 0
    whole = {path: out for path, *_, out, _ in _first_snips(store, verbatim_tail_fraction=1.0)}
    for path, *_, out, _ in _first_snips(store):
        results = sum(len(m.tool_results) for m in out)
        results_whole = sum(len(m.tool_results) for m in whole[path])
        assert results >= results_whole, path.name
        gained += results - results_whole
    for out in whole.values():
        assert not any(isinstance(b, Text) and b.text.startswith(markers.THINNED_PREFIX) for m in out for b in m.content)
    assert gained > 0


def test_a_later_snip_archives_the_original_reply_and_quotes_its_conclusion(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    reasoning = " ".join(f"Step {k} of the reasoning looks at `module_{k}.py` and rules it out." for k in range(20))
    conclusion = "So the bug is in `parse_header()`: it drops the last byte of the key."
    original = f"THOUGHT: {reasoning}\n\n{conclusion}\n\n```bash\ngrep -n parse_header src/http.py\n```"
    handle, new = thin_text(original)
    store.put(original)
    msgs = [Message(role="user", content=(Text(text="Fix the header parser."),)),
            Message(role="assistant", content=(Text(text=new), ToolUse(id="t1", name="bash", input={"command": "ls"}))),
            Message(role="user", content=(ToolResult(tool_use_id="t1", content="src\ntests"),))]
    archived = json.loads(account.flat_archive(msgs[1:], store))
    texts = [b.get("text") for d in archived for b in d["content"] if isinstance(b, dict)]
    assert original in texts and new not in texts
    acc = account.collect(msgs[1:], ContextConfig(), store)
    assert any(account.conclusion_of(original) in c for c in acc.conclusions)


@pytest.mark.parametrize("value", [-0.1, 1.5])
def test_a_bad_verbatim_share_is_one_line_naming_it(value):
    with pytest.raises(ConfigError, match=r"verbatim_tail_fraction \(.*\) must be from 0 to 1"):
        ContextConfig(verbatim_tail_fraction=value)
