"""The fidelity benchmark's own measures, on hand-made histories whose answers are known."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless.messages import Message, Text, ToolResult, ToolUse
from lossless.store import ArtifactStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import _fidelity_metrics as fm  # noqa: E402
import _fidelity_report as report  # noqa: E402
import _fidelity_synth as synth  # noqa: E402
import _fidelity_worker as worker  # noqa: E402

FACT_HERE = "replica-7 lag 4812ms exceeds budget"
FACT_ONE = "peak resident memory 18734 MiB"
FACT_TWO = "E   AssertionError: retry limit 7 != 8"
FACT_NOWHERE = "this string was never stored anywhere"


def _call(tid: str, name: str, args: dict, body: str, is_error: bool = False) -> tuple[Message, Message]:
    return (Message(role="assistant", content=(ToolUse(id=tid, name=name, input=args),)),
            Message(role="user", content=(ToolResult(tool_use_id=tid, content=body, is_error=is_error),)))


@pytest.fixture
def scene(tmp_path: Path) -> dict:
    """Two removed calls (one accounted for), a fact in context, one behind one handle,
    one behind two chained handles, one lost."""
    store = ArtifactStore(tmp_path)
    bash = _call("a", "Bash", {"command": "python -m pytest tests/test_upload.py -q -x --timeout=30"},
                 f"Exit code 1\ncollected 3 items\n{FACT_TWO}\n1 failed, 2 passed", is_error=True)
    read = _call("b", "Read", {"file_path": "src/upload.py"}, "1\tRETRY = 7\n2\tdef upload(): ...")
    inner = store.put(json.dumps([{"role": m.role, "content": fm.block_lines(m.content[0])} for m in bash + read]))
    outer = store.put(f"[archive of older rounds; handle={inner}]")
    direct = store.put(f"metrics dump\n{FACT_ONE}\n")
    context = [
        Message(role="user", content=(Text(text="Fix the flaky upload."),)),
        Message(role="user", content=(Text(text=(
            "[earlier rounds removed]\n"
            f"- Bash python -m pytest tests/test_upload.py -q → exit 1 (handle={outer})\n"
            f"- metrics: handle={direct}")),)),
        Message(role="assistant", content=(Text(text=f"Noted: {FACT_HERE}."),)),
    ]
    seen = {"a": (bash[0].content[0], bash[1].content[0]), "b": (read[0].content[0], read[1].content[0])}
    return {"store": store, "context": context, "seen": seen}


def test_facts_present_and_recall_depth(scene: dict) -> None:
    text = fm.context_text(scene["context"])
    facts = [fm.Fact(t, "planted", 0) for t in (FACT_HERE, FACT_ONE, FACT_TWO, FACT_NOWHERE)]
    assert fm.present(facts, text) == [True, False, False, False]
    depths = fm.recall_depths([FACT_ONE, FACT_TWO, FACT_NOWHERE], text, scene["store"].get)
    assert depths == [1, 2, None]


def test_recall_depth_unreadable_handle_is_unreachable(scene: dict) -> None:
    context = "see handle=sha256:" + "0" * 24

    def get(handle: str) -> str | None:
        return None if handle.endswith("0" * 24) else scene["store"].get(handle)

    assert fm.recall_depths([FACT_ONE], context, get) == [None]


def test_account_coverage_needs_tool_target_and_outcome_on_one_line(scene: dict) -> None:
    removed = fm.removed_calls(scene["seen"], scene["context"])
    assert [c.id for c in removed] == ["a", "b"]
    bash, read = removed
    assert (bash.tool, bash.target, bash.outcomes, bash.numeric) == (
        "Bash", "python -m pytest tests/test_upload.py -q", ("1",), True)
    assert read.target == "src/upload.py"
    assert fm.account_coverage(removed, fm.context_text(scene["context"])) == [True, False]
    # the same words split over two lines, or the wrong exit status, do not count
    assert fm.account_coverage([bash], "Bash python -m pytest tests/test_upload.py -q\nexit 1") == [False]
    assert fm.account_coverage([bash], "Bash python -m pytest tests/test_upload.py -q → exit 0") == [False]
    assert fm.account_coverage([read], "Read src/upload.py: ok") == [True]
    assert fm.account_coverage([read], "Read src/upload.py: ok " + "x" * 500) == [False]


def test_call_facts_reads_mini_swe_return_codes() -> None:
    use = ToolUse(id="m", name="bash", input={"command": "cd /testbed &&\n   grep -rn  foo ."})
    res = ToolResult(tool_use_id="m", content="<returncode>2</returncode>\n<output>\nno match\n</output>")
    facts = fm.call_facts(use, res)
    assert (facts.target, facts.outcomes) == ("cd /testbed && grep -rn foo .", ("2",))


def test_derive_facts_from_real_shapes() -> None:
    msgs = [
        Message(role="user", content=(Text(text="\n  Please fix the parser for nested lists\nthanks"),)),
        *_call("x", "Read", {"file_path": "/repo/src/parser.py"}, "     1→import re\n     2→PATTERN = re.compile('x+')"),
        *_call("y", "Bash", {"command": "make"}, "building...\nerror: undefined symbol parse_list\nmake: stop"),
    ]
    got = [(f.kind, f.text, f.entered) for f in fm.derive_facts(msgs)]
    assert got == [("user", "Please fix the parser for nested lists", 0), ("path", "/repo/src/parser.py", 1),
                   ("result", "PATTERN = re.compile('x+')", 2), ("result", "error: undefined symbol parse_list", 4)]


def test_meter_reads_the_shared_prefix_and_counts_prefix_changes() -> None:
    a, b, c = (Message(role="user", content=(Text(text=t),)) for t in "abc")
    meter = fm.Meter(lambda m: 10, overhead=5)
    meter.add([a])
    meter.add([a, b])
    meter.add([a, c])
    assert (meter.read, meter.write, meter.prefix_changes) == (5 + 10 + 5 + 10, 5 + 10 + 10 + 10, 1)
    assert meter.cost == pytest.approx(30 * 0.1 + 35 * 1.25)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 5)), min_size=1, max_size=12))
def test_pareto_marks_exactly_the_undominated(points: list[tuple[float, float]]) -> None:
    marks = report.pareto(points)
    assert any(marks)
    for (f, c), on in zip(points, marks):
        dominated = any(g >= f and k <= c and (g > f or k < c) for g, k in points)
        assert on is not dominated


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(alphabet="ab \n\t-:", min_size=1, max_size=30), min_size=1, max_size=6))
def test_every_line_of_the_context_is_found_as_a_fact(lines: list[str]) -> None:
    msgs = [Message(role="user", content=(Text(text=t),)) for t in lines]
    text = fm.context_text(msgs)
    facts = [fm.Fact(fm.norm(t), "x", 0) for t in lines]
    assert all(fm.present(facts, text))


def test_synthetic_sessions_are_deterministic_and_carry_their_facts() -> None:
    one, two = synth.generate(seed=5, rounds=40), synth.generate(seed=5, rounds=40)
    assert one == two
    assert one != synth.generate(seed=6, rounds=40)
    assert len(one["facts"]) >= 8
    for f in one["facts"]:
        assert f["text"] in json.dumps(one["messages"][f["message"]], ensure_ascii=False)


def test_worker_live_loop_on_a_small_synthetic_session() -> None:
    job = {"source": {"seed": 3, "rounds": 60}, "window": 8_000, "samples": 4}
    raw = worker.run({**job, "policy": "unmanaged"})
    assert raw["facts"] > 5 and raw["facts_end"] == raw["facts"] and raw["missing"] == 0
    managed = worker.run({**job, "policy": "new"})
    assert managed["first_compaction"] is not None and managed["facts_end"] < managed["facts"]
    assert managed["reachable"] == managed["missing"] > 0  # lossless: every original is recallable
    assert managed["over"] == managed["invalid"] == 0
    assert managed["cost"] < raw["cost_unmanaged"] == raw["cost"]
    # each call's time to make the view, and whether it compacted
    assert len(managed["turn_ms"]) == len(managed["turn_cpu_ms"]) == len(managed["turn_compacted"]) == managed["calls"]
    assert sum(managed["turn_compacted"]) == managed["compacting_calls"] and all(t > 0 for t in managed["turn_ms"])


def test_fill_is_measured_after_compactions_of_the_history_not_after_a_persist() -> None:
    """A call where only persist moved one large result out is not a landing: the band is for
    snips and summaries, and the report's fill leaves such a call out (the worker says which)."""
    job = {"source": {"seed": 2, "rounds": 120}, "window": 16_000, "samples": 4, "policy": "new"}
    managed = worker.run(job)
    assert len(managed["landings"]) == len(managed["fills"]) == managed["compacting_calls"] > 0
    assert managed["stages"].get("persist", 0) > 0 and 0 < sum(managed["landings"]) < len(managed["landings"])
    row = {**managed, "window": 16_000}
    landed = [f for f, ok in zip(managed["fills"], managed["landings"]) if ok]
    shown = report.main_line("new", [row])[8]
    assert shown == f"{100.0 * sum(f / row['threshold'] for f in landed) / len(landed):.1f}%"
    assert report.main_line("old", [{**row, "landings": None}])[8] == \
        f"{100.0 * sum(f / row['threshold'] for f in managed['fills']) / len(managed['fills']):.1f}%"


def test_the_landed_default_runs_from_its_own_archived_source(tmp_path: Path) -> None:
    import fidelity

    try:
        src = fidelity.extract_today(fidelity.ROOT, fidelity.TODAY, tmp_path)
    except SystemExit:  # a shallow clone without that commit: nothing to compare against
        pytest.skip(f"commit {fidelity.TODAY} is not in this clone")
    assert (src / "lossless" / "manager.py").is_file()
    job = {"policy": "today", "source": {"seed": 4, "rounds": 30, "name": "s", "group": "synthetic"},
           "window": 8_000, "samples": 2}
    row = fidelity.run_job(job, src)
    assert "error" not in row, row.get("error")
    assert row["calls"] > 30 and row["over"] == row["invalid"] == 0 and row["reachable"] == row["missing"]


@pytest.mark.parametrize("argv", [["--policies", "new,bogus"], ["--data", "/nonexistent/data"]])
def test_bad_arguments_are_one_line_and_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    import fidelity

    assert fidelity.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fidelity: ") and "\n" not in err


def test_frontier_skips_knobs_the_config_does_not_have() -> None:
    import fidelity

    sweep = {"micro_keep": [3, 10], "renamed_knob": (1, 2, 3)}  # as --knobs passes it: JSON lists
    points, skipped = fidelity.frontier_points({"window", "micro_keep"}, sweep)
    assert (points, skipped) == ([{"micro_keep": 3}, {"micro_keep": 10}], ["renamed_knob"])
    assert fidelity.config_fields(fidelity.ROOT / "src") >= {"window", "micro_keep"}


# -- facts drawn from every line, the baseline, the peer -----------------------------------
import _fidelity_baseline as baseline  # noqa: E402
import _fidelity_facts as facts  # noqa: E402


def _outputs_history(sizes: list[int]) -> tuple[list[Message], list[list[str]]]:
    """A task, then one Bash call per size whose output has that many unique lines."""
    msgs = [Message(role="user", content=(Text(text="Investigate the failing nightly build please"),))]
    lines_of = []
    for j, n in enumerate(sizes):
        lines = [f"output {j} line {k} value {1000 * j + k} checksum {(j * 7919 + k * 104729):x}" for k in range(n)]
        lines_of.append(lines)
        msgs += _call(f"t{j}", "Bash", {"command": f"run step {j}"}, "\n".join(lines))
    return msgs, lines_of


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(3, 15), min_size=1, max_size=6), st.integers(0, 10_000))
def test_sampler_draws_from_head_middle_and_tail_of_every_output(sizes: list[int], seed: int) -> None:
    msgs, lines_of = _outputs_history(sizes)
    drawn = facts.sample_facts(msgs, seed=seed, k=10_000)
    texts = {f.text for f in drawn}
    for lines in lines_of:  # every line is a candidate: the first, the middle ones, the last
        assert {lines[0], lines[len(lines) // 2], lines[-1]} <= texts
    for where in ("head", "middle", "tail"):
        assert any(f.kind == f"{where}:result" for f in drawn)
    assert any(f.kind.endswith(":user") for f in drawn)
    small = facts.sample_facts(msgs, seed=seed, k=3)
    assert small == facts.sample_facts(msgs, seed=seed, k=3) and {f.text for f in small} <= texts
    assert [f.entered for f in small] == sorted(f.entered for f in small)


def test_sampler_is_uniform_over_positions_not_biased_to_the_last_line() -> None:
    msgs, lines_of = _outputs_history([30] * 8)
    drawn = [f for seed in range(40) for f in facts.sample_facts(msgs, seed=seed, k=6)]
    share = {w: sum(f.kind.startswith(w) for f in drawn) / len(drawn) for w in ("head", "middle", "tail")}
    assert all(0.2 < v < 0.47 for v in share.values()), share
    last = {lines[-1] for lines in lines_of}
    assert sum(f.text in last for f in drawn) / len(drawn) < 0.1


def test_sampler_skips_repeated_and_short_lines() -> None:
    repeated = "the same long line appears in two outputs here"
    msgs = [Message(role="user", content=(Text(text="short"),)),
            *_call("a", "Read", {"file_path": "x"}, f"     1→{repeated}\n     2→only once in this session, line alpha"),
            *_call("b", "Read", {"file_path": "y"}, f"{repeated}\n----------------------------------")]
    got = [f.text for f in facts.sample_facts(msgs, seed=1, k=50)]
    assert got == ["only once in this session, line alpha"]


def test_synthetic_facts_sit_anywhere_in_their_output() -> None:
    g = synth.generate(seed=7, rounds=200)
    placed = [f for f in g["facts"] if f["kind"].split(":")[0] in ("head", "middle", "tail")]
    assert {f["kind"].split(":")[0] for f in placed} == {"head", "middle", "tail"}
    on_last = 0
    for f in placed:
        bodies = [b["content"] for b in g["messages"][f["message"]]["content"] if f["text"] in b.get("content", "")]
        assert bodies
        on_last += bodies[0].rstrip("\n").splitlines()[-1] == f["text"]
    assert on_last / len(placed) < 0.3


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    msgs = [Message(role="user", content=(Text(text="the task " * draw(st.integers(1, 30))),))]
    for r in range(draw(st.integers(0, 25))):
        if draw(st.booleans()) and r % 3 == 0:
            msgs.append(Message(role="user", content=(Text(text="a note from the user " * draw(st.integers(1, 9))),)))
        calls = draw(st.integers(0, 3))
        ids = [f"r{r}c{k}" for k in range(calls)]
        msgs.append(Message(role="assistant", content=(Text(text="thinking " * draw(st.integers(1, 5))),)
                            + tuple(ToolUse(id=i, name="Bash", input={"command": i}) for i in ids)))
        if ids:
            msgs.append(Message(role="user", content=tuple(
                ToolResult(tool_use_id=i, content="out " * draw(st.integers(1, 400))) for i in ids)))
    return msgs


@settings(max_examples=60, deadline=None)
@given(histories(), st.integers(10, 3_000))
def test_baseline_keeps_the_first_message_and_never_splits_a_round(msgs: list[Message], budget: int) -> None:
    from lossless.rounds import problems
    from lossless.tokens import default_counter

    count = default_counter().count_message
    kept = baseline.keep_recent(msgs, budget, count)
    assert kept[0] is msgs[0]
    units = baseline.units(msgs)
    ids = {id(m) for m in kept}
    whole = [u for u in units if all(id(msgs[i]) in ids for i in u)]
    assert all(all(id(msgs[i]) in ids for i in u) or not any(id(msgs[i]) in ids for i in u) for u in units)
    if len(msgs) > 1:  # a suffix of whole units, the latest always
        assert whole and whole[-1] is units[-1] and whole == units[len(units) - len(whole):]
        assert len(whole) == 1 or sum(count(m) for m in kept) <= budget
    assert not problems(kept)


def test_baseline_cuts_only_past_the_threshold() -> None:
    msgs, _ = _outputs_history([40, 40, 40])
    size = sum(len(fm.context_text([m])) for m in msgs)
    rounds = baseline.RecentRounds(threshold=10 ** 9, keep_tokens=10, count=lambda m: len(fm.context_text([m])))
    assert rounds(msgs) == msgs
    rounds.threshold = size // 2
    cut = rounds(msgs)
    assert cut[0] is msgs[0] and cut[-2:] == msgs[-2:] and len(cut) == 3


def test_worker_runs_the_baseline_and_one_shot() -> None:
    job = {"source": {"seed": 3, "rounds": 60}, "window": 8_000, "samples": 4, "policy": "baseline"}
    row = worker.run(job)
    assert row["first_compaction"] is not None and row["invalid"] == row["over"] == 0
    assert row["fills"] and all(f <= row["threshold"] for f in row["fills"])
    assert 0 < row["facts_oneshot"] < row["facts"] and row["oneshot_compacted"]
    assert row["handle_share"] == 0 and row["account_max"] == 0
    new = worker.run({**job, "policy": "new"})
    assert new["stages"] and new["account_max"] > 0 and new["handle_share"] > 0


def test_the_openhands_peer_runs_when_its_venv_exists() -> None:
    import fidelity

    python = fidelity.PEER_VENV / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no peer venv at {fidelity.PEER_VENV} (python bench/fidelity.py --peer makes it)")
    job = {"source": {"seed": 3, "rounds": 60}, "window": 16_000, "samples": 4, "policy": "openhands",
           "peer_python": str(python), "peer_src": str(fidelity.ROOT / "src")}
    row = worker.run(job)
    assert "error" not in row, row.get("error")
    assert row["stages"].get("condense", 0) > 0 and row["model_calls"] > 0
    assert row["invalid"] == 0 and row["facts_end"] < row["facts"]
    assert row["account_max"] > 0  # its summary message
    # its steps timed in its own process: one per call, the condensing ones among them
    assert len(row["turn_ms"]) == row["calls"] and sum(row["turn_compacted"]) == row["compacting_calls"] > 0


def test_the_langchain_peer_runs_on_a_real_session_when_its_venv_exists() -> None:
    """LangChain's middleware on a Claude Code subagent session at 16k: it summarises, every
    request stays valid, and after that the summary message leads the context while what it
    keeps are the original messages themselves."""
    import fidelity
    from _fidelity_policies import make_policy
    from _peer_client import LANGCHAIN_OPENING, SUMMARY
    from conftest import data_path
    from lossless.rounds import problems
    from lossless.tokens import default_counter

    python = fidelity.LANGCHAIN_VENV / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no peer venv at {fidelity.LANGCHAIN_VENV} (python bench/fidelity.py --policies langchain makes it)")
    source = {"file": str(data_path("claude-code", "subagent.jsonl")), "name": "subagent", "group": "claude-code"}
    job = {"source": source, "window": 16_000, "samples": 4, "policy": "langchain",
           "peer_python": str(python), "peer_src": str(fidelity.ROOT / "src")}
    row = worker.run(job)
    assert "error" not in row, row.get("error")
    assert row["stages"].get("condense", 0) > 0 and row["model_calls"] > 0
    assert row["invalid"] == row["over"] == 0 and row["facts_end"] < row["facts"]
    assert row["account_max"] > 0  # its summary message, counted as the account

    s = worker.load(source)
    counter = default_counter()
    overhead = counter.count_system(s["system"])
    policy = make_policy(job, "", counter, overhead, s["messages"])
    try:
        history: list[Message] = []
        taken = 0
        for stop in s["stops"]:
            new = s["messages"][taken:stop]
            history = policy.prepare(history + new, new, s["system"], None)
            taken = stop
            assert not problems(history)
            if policy.fired["condense"]:
                assert history[0].role == "user" and history[0].content[0].text == f"{LANGCHAIN_OPENING}\n\n{SUMMARY}"
                seen = s["messages"][:stop]
                for m in history[1:]:  # an original kept whole, or some blocks of one
                    assert any(m is o or all(b in o.content for b in m.content) for o in seen)
        assert policy.fired["condense"]
    finally:
        policy.close()


def test_no_peer_leaves_the_peer_policies_out(monkeypatch: pytest.MonkeyPatch) -> None:
    import fidelity

    from conftest import data_path

    data_path("claude-code")  # --quick takes its inputs from the shared sessions
    seen: list[str] = []
    monkeypatch.setattr(fidelity, "ensure_peer", lambda *a: pytest.fail("--no-peer must not make the venv"))
    monkeypatch.setattr(fidelity, "run_all", lambda jobs, paths, n: seen.extend(j["policy"] for j in jobs) or [])
    monkeypatch.setattr(fidelity.report, "tables", lambda *a: "")
    assert fidelity.main(["--quick", "--no-peer", "--policies", "unmanaged,openhands,langchain,baseline"]) == 0
    assert seen and set(seen) == {"unmanaged", "baseline"}


def test_each_peer_gets_its_own_venv_and_a_missing_one_is_skipped_in_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import fidelity

    from conftest import data_path

    data_path("claude-code")
    asked: list[tuple[object, str]] = []
    jobs: list[dict] = []

    def ensure(venv: object, name: str) -> tuple[str | None, str]:
        asked.append((venv, name))
        return (None, "no Python found") if name == "openhands" else ("/peer/python", "reused")

    monkeypatch.setattr(fidelity, "ensure_peer", ensure)
    monkeypatch.setattr(fidelity, "run_all", lambda js, paths, n: jobs.extend(js) or [])
    monkeypatch.setattr(fidelity.report, "tables", lambda *a: "")
    assert fidelity.main(["--quick", "--policies", "openhands,langchain,new"]) == 0
    assert asked == [(fidelity.PEER_VENV, "openhands"), (fidelity.LANGCHAIN_VENV, "langchain")]
    assert {j["policy"] for j in jobs} == {"langchain", "new"}
    assert all(j.get("peer_python") == ("/peer/python" if j["policy"] == "langchain" else None) for j in jobs)
    assert capsys.readouterr().err.splitlines()[0] == "fidelity: the openhands peer is skipped: no Python found"


def _row(policy: str, name: str, group: str, end: int, once: int, facts: int = 20, window: int = 32_000) -> dict:
    return {"policy": policy, "window": window, "source": {"name": name, "group": group},
            "facts": facts, "facts_end": end, "facts_oneshot": once}


def test_the_issues_measure_sums_real_inputs_and_names_those_below_each_peer() -> None:
    rows = [_row("openhands", "a", "claude-code", 8, 8), _row("new", "a", "claude-code", 12, 9),
            _row("openhands", "b", "mini-swe-agent", 18, 4), _row("new", "b", "mini-swe-agent", 16, 6),
            _row("openhands", "s", "synthetic", 0, 0), _row("new", "s", "synthetic", 20, 20),
            _row("langchain", "a", "claude-code", 2, 1), _row("langchain", "b", "mini-swe-agent", 3, 2)]
    text = report.against_peers(rows, ["openhands", "langchain", "new"], [32_000])
    lines = [ln for ln in text.splitlines() if ln.startswith("| 32,000")]
    live_oh = next(ln for ln in lines if " live " in ln and "openhands" in ln)
    # synthetic left out: 12 + 16 against 8 + 18; target min(round(1.25 × 8), 20) + min(round(1.25 × 18), 20) = 10 + 20
    assert [c.strip() for c in live_oh.split("|")[5:10]] == ["28", "26", "1.077", "30", "2 short"]
    assert "b (16 vs 18)" in live_oh and "a (" not in live_oh
    once_oh = next(ln for ln in lines if "1-shot" in ln and "openhands" in ln)
    assert [c.strip() for c in once_oh.split("|")[5:10]] == ["15", "12", "1.250", "15", "yes"]
    assert len(lines) == 4  # live and one-shot, beside each of the two peers
    assert report.against_peers(rows, ["new"], [32_000]) == ""  # no peer in the run: no table
    assert live_oh.split("|")[10].strip() == "–"  # rows without fact masks: no opening split


def test_the_opening_both_keep_and_what_the_target_asks_after_it() -> None:
    assert report.opening("1110110", "1111000") == (3, 2, 1)
    assert report.opening("0111", "1111") == (0, 3, 4) and report.opening(None, "1") is None
    a_oh, a_new = _row("openhands", "a", "claude-code", 8, 8), _row("new", "a", "claude-code", 10, 8)
    a_oh["facts_mask"], a_new["facts_mask"] = "1" * 6 + "0" * 12 + "11", "1" * 6 + "1111" + "0" * 10
    b_oh, b_new = _row("openhands", "b", "mini-swe-agent", 4, 4), _row("new", "b", "mini-swe-agent", 5, 4)
    b_oh["facts_mask"], b_new["facts_mask"] = "0011" + "1" * 2 + "0" * 14, "1" * 5 + "0" * 15
    text = report.against_peers([a_oh, a_new, b_oh, b_new], ["openhands", "new"], [32_000])
    live = next(ln for ln in text.splitlines() if ln.startswith("| 32,000") and " live " in ln)
    # openings 6 and 0; after them new keeps 4 + 5, the peer 2 + 4; target 10 + 5 = 15, less 6 + 0 = 9 asked
    assert live.split("|")[10].strip() == "9 / 6 (9)"


def test_costs_are_also_given_in_dollars_at_a_named_models_price() -> None:
    from lossless.modelinfo import price

    per = price(report.PRICED).input / 1e6
    rows = [{**_row("new", "a", "claude-code", 1, 1), "cost": 2_000_000.0, "cost_unmanaged": 5_000_000.0},
            {**_row("new", "b", "mini-swe-agent", 1, 1), "cost": 1_000_000.0, "cost_unmanaged": 4_000_000.0},
            {**_row("openhands", "a", "claude-code", 1, 1), "error": "boom"}]
    line = report.dollars(rows, ["new", "openhands"])
    assert f"new ${3_000_000 * per:,.2f} (worst input ${2_000_000 * per:,.2f}, a; unmanaged ${9_000_000 * per:,.2f})" \
        in line
    assert "openhands" not in line.split("):", 1)[1]  # a system whose every run failed has no figure


def test_the_anatomy_splits_the_final_context_at_the_account_and_finds_the_loops_facts() -> None:
    """``bench/anatomy.py``: the parts of a compacted session's final context add up to it, the head
    holds the task, and the facts found in the parts are the facts the fidelity worker counts."""
    import anatomy
    from conftest import data_path

    path = data_path("mini-swe-agent", "sphinx-doc__sphinx-8638.traj.json")
    found = anatomy.parts(path, 16_000)
    row = worker.run({"policy": "new", "source": {"file": str(path)}, "window": 16_000, "samples": 4})
    assert found["account"][0] > 0 and found["head"][0] > 0 and found["recent"][0] > 0  # it compacted
    assert sum(facts for _, facts in found.values()) >= row["facts_end"] > 0  # a fact in two parts counts in both
    assert found["account"][0] <= 16_000 // 10 + 200  # the map stays near a tenth of the window
