"""Echo: a new result gives up what an output still in context shows, and loses nothing.

- property, through ``ContextManager.prepare`` in a live loop over sessions whose outputs repeat
  each other's blocks: what the model was sent before is never rewritten by an echo (the cached
  prefix stays), every echoed result's handle gives its whole original back in one recall, and
  every line it took out is shown by an earlier result still in the context; the view is valid;
- the lines in context kept from call to call give the same echoes as lines made afresh each call;
- a snip puts echoed results back whole before folding: the newest result stays verbatim, and no
  echo is left pointing at lines that left; after micro-compact or a summary, ``restore`` puts back
  only the echoes whose lines left (and only while there is room); it reads the store when the
  message was rebuilt from the wire;
- no echo on first sight, below a landing's size, or on a manual compaction;
- on real mini-swe-agent runs at 32k: echoes fire, each one's lines are shown earlier, and the
  loop compacts the history less often than without echo.
"""

from __future__ import annotations

import json
from pathlib import Path


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless import markers
from lossless.account.archive import original_text
from lossless.config import ContextConfig
from lossless.dialects.mini_swe import read_trajectory
from lossless.manager import ContextManager
from lossless.messages import Message, Text, ToolResult, ToolUse, result_text
from lossless.rounds import problems
from lossless.stages import fold as fold_mod
from lossless.stages.base import StageContext
from lossless.stages.echo import echo, restore
from lossless.stages.fold import key
from lossless.store import ArtifactStore
from lossless.tokens import default_counter

from conftest import DATA
from lines_kit import input_keys, output_keys

RUNS = sorted((DATA / "mini-swe-agent").glob("*.traj.json")) if (DATA / "mini-swe-agent").exists() else []

FILES = [[f"file {f} line {n}: value_{f}_{n} = compute(argument_{n}, scale={f * n})" for n in range(24)]
         for f in range(4)]


WRITTEN = [[f"def written_{f}_{n}(x): return helper_{n}(x) * {f + n}  # only the write's input has it"
            for n in range(20)] for f in range(2)]
WRITE = 10
"""A block of ``WRITE + f`` in a plan: the call writes file ``f`` (its input holds ``WRITTEN[f]``) and
its output shows the file back, numbered, as a write tool answers."""


def _output(blocks: list[int], k: int) -> str:
    """An output of whole files (block 0–3, each read again and again; ``WRITE + f``: a written
    file shown back with line numbers) and lines of its own."""
    lines = [f"$ step {k}"]
    for b in blocks:
        if b >= WRITE:
            lines += [f"{n + 1:6}→{line}" for n, line in enumerate(WRITTEN[b - WRITE])]
        else:
            lines += FILES[b] if b < len(FILES) else [f"unique line {k}.{j} of output {k}, nothing like it" for j in range(12)]
    lines.append(f"exit {k}")
    return "\n".join(lines)


def _session(plan: list[list[int]]) -> list[Message]:
    msgs = [Message(role="user", content=(Text(text="Work through the module, step by step."),))]
    for k, blocks in enumerate(plan):
        written = [b - WRITE for b in blocks if b >= WRITE]
        if written:
            use = ToolUse(id=f"t{k}", name="Write",
                          input={"file_path": f"src/written_{written[0]}.py", "content": "\n".join(WRITTEN[written[0]])})
        else:
            use = ToolUse(id=f"t{k}", name="bash", input={"command": f"run step {k}"})
        msgs += [Message(role="assistant", content=(Text(text=f"Step {k}."), use)),
                 Message(role="user", content=(ToolResult(tool_use_id=f"t{k}", content=_output(blocks, k)),))]
    return msgs


plans = st.lists(st.lists(st.integers(0, len(FILES)) | st.sampled_from([WRITE, WRITE + 1]), min_size=1, max_size=3),
                 min_size=4, max_size=40)


def _shown_before(context: list[Message], i: int) -> set[str]:
    """The lines the results and the calls' inputs before message ``i`` show."""
    return output_keys(context[:i]) | input_keys(context[:i])


def _check_echoes(context: list[Message], store: ArtifactStore, originals: dict[str, str],
                  strict: bool = True) -> int:
    """Every echoed result in ``context``: one recall gives its original, and (``strict``) each line
    it took out is shown by a result or a call's input before it. Returns how many there are."""
    seen = 0
    for i, m in enumerate(context):
        for r in m.tool_results:
            text = result_text(r)
            handle = markers.echoed_handle(text)
            if handle is None:
                continue
            seen += 1
            whole = store.get(handle)
            assert whole == originals[r.tool_use_id]
            kept = set(text.partition("\n")[2].split("\n"))
            earlier = _shown_before(context, i)
            gone = [x for x in whole.split("\n") if x not in kept]
            assert gone
            assert not strict or all(key(x) in earlier or fold_mod._trivial(key(x)) for x in gone)
    return seen


@settings(max_examples=40, deadline=None)
@given(plans, st.sampled_from([4_096, 6_000, 8_000]))
def test_a_live_loop_echoes_without_rewriting_what_was_sent_and_loses_nothing(tmp_path_factory, plan, window):
    store_dir = tmp_path_factory.mktemp("echo")
    msgs = _session(plan)
    originals = {r.tool_use_id: original_text(r) for m in msgs for r in m.tool_results}
    cm = ContextManager(store=store_dir, window=window, transcript=False)
    history: list[Message] = []
    taken = 0
    degraded = False
    for stop in range(1, len(msgs) + 1, 2):  # each request ends with the user's message or a result
        new = msgs[taken:stop]
        taken = stop
        prepared = cm.prepare(history + new)
        out = prepared.messages
        fired = {e.stage for e in prepared.events if e.fired}
        if history and fired <= {"echo", "persist"}:
            # only new results changed: what the model was sent before is the same objects
            assert len(out) == len(history) + len(new) and all(a is b for a, b in zip(out, history))
        assert not problems(out, "anthropic")
        # micro-compact and the summaries may clear what an echo pointed at: it is put back whole while
        # the context has room, else at the next snip; its handle gives it whole either way
        if fired & {"microcompact", "summary"}:
            degraded = True
        elif "snip" in fired:
            degraded = False
        _check_echoes(out, cm.store, originals, strict=not degraded)
        history = out


def test_the_lines_kept_between_calls_give_the_echoes_made_afresh(tmp_path):
    """``ctx.memo`` carries the lines shown from one call to the next; without it they are made
    from the context each call: the same results either way."""
    msgs = _session([[0], [1], [4], [0, 1], [WRITE], [2], [4], [1, WRITE], [0, 2], [3], [2, 3], [4], [0]])
    cfg = ContextConfig(window=4_096)
    memo: dict = {}
    kept_out: list[Message] = []
    fresh_out: list[Message] = []
    for stop in range(3, len(msgs) + 1, 2):
        results = []
        for memo_here, prior in ((memo, kept_out), (None, fresh_out)):
            ctx = StageContext(config=cfg, counter=default_counter(), store=ArtifactStore(tmp_path / "s"),
                               fresh_from=len(prior), memo=memo_here)
            working = prior + msgs[len(prior):stop] if prior else msgs[:stop]
            out, res = echo(working, ctx, 10**6)  # far above a landing: echo decides
            if memo_here is not None:
                memo_here["view"] = out
            results.append((out, res.fired))
        (kept_out, a), (fresh_out, b) = results
        assert a == b
        assert [result_text(r) for m in kept_out for r in m.tool_results] == \
               [result_text(r) for m in fresh_out for r in m.tool_results]
    assert any(markers.echoed_handle(result_text(r)) for m in kept_out for r in m.tool_results)


def test_echo_names_the_call_whose_output_shows_the_lines(tmp_path):
    msgs = _session([[0], [4], [0]])
    ctx = StageContext(config=ContextConfig(window=4_096), counter=default_counter(),
                       store=ArtifactStore(tmp_path / "s"), fresh_from=len(msgs) - 2)
    out, res = echo(msgs, ctx, 10**6)
    assert res.fired and res.handles
    text = result_text(out[-1].tool_results[0])
    assert text.startswith(markers.FOLDED_PREFIX) and "repeat an earlier output" in text
    assert "[… 24 lines as in the output of `run step 0` …]" in text
    assert "$ step 2" in text and "exit 2" in text  # its first and last lines stay
    assert out[:-1] == msgs[:-1] and all(a is b for a, b in zip(out[:-1], msgs[:-1]))


def test_a_file_shown_back_by_the_call_that_wrote_it_is_echoed_against_its_input(tmp_path):
    """A write tool that answers with the whole file it was given: the new result points at the
    call's input, which is in context; what only the result says stays; one recall gives it all."""
    msgs = _session([[0], [4], [WRITE, 4]])
    store = ArtifactStore(tmp_path / "s")
    ctx = StageContext(config=ContextConfig(window=4_096), counter=default_counter(), store=store,
                       fresh_from=len(msgs) - 2)  # the write's call and its result are new
    out, res = echo(msgs, ctx, 10**6)
    assert res.fired
    text = result_text(out[-1].tool_results[0])
    assert "repeat an earlier output or a call's input" in text.partition("\n")[0]
    assert "[… 20 lines as in the input of Write src/written_0.py …]" in text
    assert not any(line in text for line in WRITTEN[0])
    assert "unique line 2.0 of output 2, nothing like it" in text and "exit 2" in text
    assert store.get(markers.echoed_handle(text)) == result_text(msgs[-1].tool_results[0])
    assert out[-2] is msgs[-2]  # the call itself, with its input, is what the model was sent


def test_no_echo_on_first_sight_below_a_landing_or_on_a_manual_compaction(tmp_path):
    msgs = _session([[0], [4], [0]])
    store = ArtifactStore(tmp_path / "s")
    cfg = ContextConfig(window=4_096)
    first = StageContext(config=cfg, counter=default_counter(), store=store, fresh_from=0)
    assert not echo(msgs, first, 10**6)[1].fired
    later = StageContext(config=cfg, counter=default_counter(), store=store, fresh_from=len(msgs) - 2)
    landing = int(cfg.snip_target_fraction * cfg.budget.threshold)
    assert not echo(msgs, later, landing)[1].fired
    assert echo(msgs, later, landing + 1)[1].fired
    manual = StageContext(config=cfg, counter=default_counter(), store=store, fresh_from=len(msgs) - 2,
                          trigger="manual")
    assert not echo(msgs, manual, 10**6)[1].fired


def test_restore_gives_the_whole_result_back_from_the_memo_or_the_store(tmp_path):
    msgs = _session([[0], [4], [0]])
    store = ArtifactStore(tmp_path / "s")
    ctx = StageContext(config=ContextConfig(window=4_096), counter=default_counter(), store=store,
                       fresh_from=len(msgs) - 2)
    out, res = echo(msgs, ctx, 10**6)
    assert res.fired
    back, added = restore(out, ctx)
    assert back[-1] is msgs[-1] and added > 0  # from the memo: the very message
    rebuilt = [m.with_content(m.content) for m in out]  # as from the wire: no memo
    back, added2 = restore(rebuilt, ctx)
    assert result_text(back[-1].tool_results[0]) == original_text(msgs[-1].tool_results[0]) and added2 == added


def test_a_snip_puts_echoes_back_and_keeps_the_newest_result_whole(tmp_path):
    """Files read over and over at a small window: echoes between snips; at each snip the newest
    result whole (the older copy gives its lines up to it), and no echo pointing at lines that left."""
    plan = [[k % 4, 4] for k in range(30)]
    msgs = _session(plan)
    originals = {r.tool_use_id: original_text(r) for m in msgs for r in m.tool_results}
    cm = ContextManager(store=tmp_path / "s", window=8_000, transcript=False)
    history: list[Message] = []
    echoes = snips = taken = 0
    for stop in range(1, len(msgs) + 1, 2):
        prepared = cm.prepare(history + msgs[taken:stop])
        taken = stop
        fired = {e.stage for e in prepared.events if e.fired}
        history = prepared.messages
        echoes += "echo" in fired
        if "snip" in fired:
            snips += 1
            assert result_text(history[-1].tool_results[0]) == originals[f"t{stop // 2 - 1}"]  # verbatim
            assert not any(markers.echoed_handle(result_text(r)) for m in history for r in m.tool_results)
        _check_echoes(history, cm.store, originals)
    assert echoes and snips


def test_restore_keeps_an_echo_whose_lines_are_still_shown(tmp_path):
    msgs = _session([[0], [4], [0]])
    ctx = StageContext(config=ContextConfig(window=4_096), counter=default_counter(),
                       store=ArtifactStore(tmp_path / "s"), fresh_from=len(msgs) - 2)
    out, res = echo(msgs, ctx, 10**6)
    assert res.fired
    same, added = restore(out, ctx, lost_only=True)  # file 0's first read is still there
    assert added == 0 and same[-1] is out[-1]
    gone = [out[0], *out[3:]]  # the round that read it first is gone
    back, added = restore(gone, ctx, lost_only=True)
    assert added > 0 and result_text(back[-1].tool_results[0]) == original_text(msgs[-1].tool_results[0])


@pytest.mark.skipif(not RUNS, reason="shared data not present: mini-swe-agent runs")
def test_real_runs_echo_and_compact_less_often(tmp_path):
    from lossless.pipeline import DEFAULT_STAGES

    without_echo = tuple((n, s) for n, s in DEFAULT_STAGES if n != "echo")
    landings = {True: 0, False: 0}
    echoed = 0
    for n, path in enumerate(RUNS[:10]):
        s = read_trajectory(path)
        msgs = list(s.messages)
        originals = {r.tool_use_id: original_text(r) for m in msgs for r in m.tool_results}
        stops = [c.index for c in s.calls if c.index > 0]
        for with_echo in (True, False):
            store_dir = tmp_path / f"{n}-{with_echo}"
            cm = (ContextManager(store=store_dir, window=32_000, transcript=False) if with_echo else
                  ContextManager(store=store_dir, window=32_000, transcript=False, stages=without_echo))
            history: list[Message] = []
            taken = 0
            for stop in stops:
                prepared = cm.prepare(history + msgs[taken:stop], system=s.system)
                taken = stop
                history = prepared.messages
                landings[with_echo] += any(e.fired and e.stage == "snip" for e in prepared.events)
                assert not problems(history, "openai")
            if with_echo:
                echoed += _check_echoes(history, cm.store, originals)
    assert echoed > 0
    assert landings[True] < landings[False]


def _wire_loop(store_dir: Path, plan: list[list[int]], dialect: str) -> int:
    """A live loop of wire dicts; each view checked against its whole neutral view converted.
    Returns the calls an echo fired in."""
    from lossless.dialects.anthropic import message_to_dict
    from lossless.dialects.openai import to_openai

    msgs = _session(plan)
    wire = to_openai(msgs) if dialect == "openai" else [message_to_dict(m) for m in msgs]
    # the same conversation as wire dicts: each request is the previous view plus what is new
    cuts = [i for i, d in enumerate(wire, 1) if d["role"] in ("user", "tool")
            and not (i < len(wire) and wire[i]["role"] == "tool")]
    cm = ContextManager(store=store_dir, window=4_096, transcript=False, dialect=dialect)
    view: list = []
    taken = 0
    echoed = 0
    for stop in cuts:
        prepared = cm.prepare(view + wire[taken:stop])
        taken = stop
        view = prepared.messages
        whole = to_openai(prepared.neutral) if dialect == "openai" else [message_to_dict(m) for m in prepared.neutral]
        assert view == whole
        assert prepared.state.tokens == cm._overhead + sum(map(cm.counter.count_message, prepared.neutral))
        echoed += any(e.fired and e.stage == "echo" for e in prepared.events)
    return echoed


@settings(max_examples=15, deadline=None)
@given(plans, st.sampled_from(["anthropic", "openai"]))
def test_the_wire_view_built_from_what_is_new_is_the_whole_view_converted(tmp_path_factory, plan, dialect):
    """When only new results changed (an echo), the manager converts and checks only them: the
    wire list it returns is still exactly its whole neutral view converted, and its count is
    the count of that view."""
    _wire_loop(tmp_path_factory.mktemp("wire"), plan, dialect)


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
def test_echoes_fire_in_the_wire_loop(tmp_path, dialect):
    assert _wire_loop(tmp_path, [[k % 4, 4] for k in range(24)], dialect) > 0


def test_through_the_proxy_a_file_read_again_is_echoed_and_what_was_sent_stays_the_same_bytes(tmp_path):
    """The official Anthropic SDK → ``lossless proxy`` → the fake server: an agent reads one file
    again after each small edit. Once the context is past a landing, a new read arrives with the
    unchanged lines pointed at (the run line names the earlier ``cat``); the next request carries
    that message byte for byte unless a snip came between (which puts it back whole); every request
    is valid and fits; a recall of the echo's handle gives the whole read back."""
    pytest.importorskip("anthropic")
    from proxy_kit import check_requests, proxied, sdk_client

    lines = [f"def handler_{n}(request):  # route /api/v1/items/{n} with its own checks" for n in range(60)]
    with proxied(tmp_path) as (srv, proxy):
        client = sdk_client(proxy, "anthropic")
        history: list = [{"role": "user", "content": "Tidy app.py, one handler at a time."}]
        for turn in range(30):
            srv.enqueue([{"type": "tool_use", "id": f"toolu_{turn:03d}", "name": "Bash",
                          "input": {"command": "cat app.py"}}])
            answer = client.messages.create(model="claude-test", max_tokens=2_000, messages=history,
                                            tools=[{"name": "Bash", "description": "Run a command.",
                                                    "input_schema": {"type": "object"}}])
            lines[turn] = f"def handler_{turn}(request):  # tidied on turn {turn}"
            history += [{"role": "assistant", "content": [b.model_dump(mode="json", exclude_none=True)
                                                          for b in answer.content]},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{turn:03d}",
                                                      "content": "\n".join(lines)}]}]
        first_echo = next(markers.echoed_handle(m["content"][0]["content"]) for r in srv.requests
                          for m in r.body["messages"][-1:] if isinstance(m["content"], list)
                          and m["content"][0].get("type") == "tool_result"
                          and markers.echoed_handle(m["content"][0]["content"]))
        srv.enqueue([{"type": "tool_use", "id": "toolu_recall_1", "name": "recall", "input": {"handle": first_echo}}],
                    "Done.")
        history.append({"role": "user", "content": "Show me one of the reads you were sent in part."})
        client.messages.create(model="claude-test", max_tokens=2_000, messages=history)
        recalled = json.dumps(srv.requests[-1].body["messages"][-1])
        stats = proxy.stats()
    assert "def handler_0(request):  # tidied on turn 0" in recalled and "handler_59(request)" in recalled
    sent = [r.body["messages"] for r in srv.requests if r.path == "/v1/messages"][:-2]
    echoed = 0
    for i, request in enumerate(sent[:-1]):
        content = request[-1]["content"]
        last = content[0] if isinstance(content, list) and content else {}
        text = last.get("content") if last.get("type") == "tool_result" else None
        if isinstance(text, str) and markers.echoed_handle(text):
            echoed += 1
            assert "lines as in the output of `cat app.py`" in text
            after = sent[i + 1]
            snipped = any("[lossless: snipped" in json.dumps(m) for m in after)
            assert after[len(request) - 1] == request[-1] or snipped
    assert echoed >= 3 and stats["conversations"][0]["stages"].get("echo", 0) >= 3
    check_requests(srv, "anthropic", 20_000)
