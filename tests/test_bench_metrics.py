"""The benchmarks' own metrics: the baselines they time and the figures they print must
measure what RESULTS.md says they do (a flattering metric is a bug here)."""

from __future__ import annotations

import importlib.util
import json
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT, data_path


def _load(name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


overhead = _load("overhead")
token_accuracy = _load("token_accuracy")
replay_all = _load("replay_all")
memory_retrieval = _load("memory_retrieval")


@settings(max_examples=15)
@given(rounds=st.integers(min_value=1, max_value=80))
def test_teaching_loop_keeps_fifty_messages_and_three_results(rounds):
    messages = [{"role": "user", "content": "task"}]
    for n in range(rounds):
        messages.extend(overhead.round_dicts(n))
        overhead.teaching_turn(messages)
        assert len(messages) <= overhead.SNIP_MAX_MESSAGES + 1
    results = overhead._tool_results(messages)
    intact = [b for b in results if b["content"] != overhead.PLACEHOLDER]
    assert len(intact) == min(3, len(results))
    assert intact == results[-len(intact):]


def test_floor_is_one_serialisation_of_the_new_round():
    new = overhead.round_dicts(7)
    assert overhead.floor_turn(new) == len(json.dumps(new))


@settings(max_examples=30)
@given(deltas=st.lists(st.integers(min_value=1, max_value=50_000), min_size=1, max_size=40))
def test_appended_metric_fails_the_zero_counter_and_passes_a_perfect_one(deltas):
    zero = token_accuracy._appended_stats([(0, d) for d in deltas])
    perfect = token_accuracy._appended_stats([(d, d) for d in deltas])
    assert zero["mean_abs_pct"] == 100.0 and zero["weighted_abs_pct"] == 100.0
    assert perfect["mean_abs_pct"] == 0.0 and perfect["weighted_abs_pct"] == 0.0
    assert zero["recorded_tokens"] == perfect["predicted_tokens"] == sum(deltas)


def test_cost_before_overflow_is_the_whole_cost_when_the_unmanaged_run_fits():
    from lossless.dialects.detect import read_any
    from lossless.replay import replay

    session = read_any(data_path("mini-swe-agent", "astropy__astropy-13398.traj.json"))
    fits = replay(session, 128_000)
    assert fits.unmanaged_over_window_calls == 0
    whole = replay_all.before_overflow(fits, 128_000)
    assert whole["calls"] == fits.calls
    assert abs(whole["unmanaged"] - fits.cost["unmanaged"]) <= 1
    assert abs(whole["managed"] - fits.cost["managed"]) <= 1

    over = replay(session, 32_000)
    assert over.unmanaged_over_window_calls > 0
    part = replay_all.before_overflow(over, 32_000)
    first = next(i for i, c in enumerate(over.per_call) if c.tokens_unmanaged > 32_000)
    assert part["calls"] == first
    assert part["unmanaged"] < over.cost["unmanaged"]


def test_split_puts_sessions_whose_unmanaged_run_overflows_apart():
    rows = [{"over_unmanaged": 0, "name": "a"}, {"over_unmanaged": 3, "name": "b"}]
    (_, fits), (_, over) = replay_all.split(rows)
    assert [r["name"] for r in fits] == ["a"] and [r["name"] for r in over] == ["b"]


def test_memory_reference_is_the_fts5_run_of_the_same_questions():
    per = [(1.0, 1.0), (0.0, 1.0), (0.5, 0.5), (1.0, 1.0)]
    ref = [(0.0, 1.0), (0.0, 0.0), (0.5, 0.5), (1.0, 1.0)]
    recall = {
        "turns/default/original": {"overall": {}, "per_question": per},
        "turns/fts5/original": {"overall": {}, "per_question": ref},
    }
    got = memory_retrieval.against_fts5(recall, resamples=200)
    row = got["turns/default/original − fts5"]
    assert row["R@5"] == 25.0 and row["R@10"] == 25.0
    lo, hi = row["R@5 95% CI"]
    assert lo <= row["R@5"] <= hi
    assert "turns/fts5/original − fts5" not in got


# -- the fidelity bench's measures on tiny hand-made contexts ------------------------------
sys.path.insert(0, str(ROOT / "bench"))
import _fidelity_metrics as fm  # noqa: E402
import _fidelity_report as fidelity_report  # noqa: E402
from lossless.messages import Message, Text  # noqa: E402


def _words(text: str) -> int:
    return len(text.split())


def test_handle_tokens_count_every_handle_form_and_nothing_else():
    full = "sha256:" + "ab12" * 16
    text = f"see {full} and #1a2b3c4d, not #12345 nor colour#abcdef nor issue #fix-it"
    assert fm.HANDLE_FORMS.findall(text) == [full, "#1a2b3c4d"]
    assert fm.handle_tokens(text, lambda t: 1) == 2
    assert fm.handle_tokens("no handles here", len) == 0


def test_account_tokens_are_the_markers_and_the_peer_summary_only():
    msgs = [Message(role="user", content=(Text(text="the task in four words"),)),
            Message(role="user", content=(Text(text="[lossless: snipped 4 messages] a b c"),)),
            Message(role="assistant", content=(Text(text="<lossless-summary handle=x> d e"),
                                               Text(text="plain words here"))),
            Message(role="user", content=(Text(text="[condensed] Summary one two"),))]
    assert fm.account_tokens(msgs, _words) == 7 + 4
    assert fm.account_tokens(msgs, _words, ("[condensed]",)) == 4


def _row(policy: str, **kw):
    base = {"policy": policy, "window": 1000, "threshold": 800, "source": {"name": "s", "group": "g"},
            "facts": 10, "facts_end": 5, "facts_oneshot": 4, "facts_avg": 0.5, "fills": [400, 600],
            "prefix_changes": 1, "calls": 10, "handle_share": 0.1, "account_avg": 50.0, "account_max": 70,
            "depth_max": 1, "invalid": 0, "over": 0, "oneshot_invalid": False, "oneshot_over": False,
            "cost": 50.0, "cost_unmanaged": 100.0, "compacting_calls": 2, "stages": {"snip": 2},
            "by_kind": {"head:result": [4, 2], "tail:result": [6, 3]},
            "by_kind_oneshot": {"head:result": [4, 1], "tail:result": [6, 3]}}
    return {**base, **kw}


def test_report_sums_means_and_worst_input_on_two_runs():
    rows = [_row("new"), _row("new", facts=30, facts_end=3, facts_oneshot=30, fills=[1000], handle_share=0.3,
                              account_avg=150.0, account_max=200, cost=90.0, over=2, oneshot_over=True)]
    cells = dict(zip([h for h, _ in fidelity_report.MAIN], fidelity_report.main_line("new", rows)))
    assert cells["live Σ"] == "20.0%"            # (5 + 3) / (10 + 30)
    assert cells["live mean"] == "30.0%"         # (50 % + 10 %) / 2
    assert cells["live worst"] == "10.0%"
    assert cells["1-shot Σ"] == "85.0%" and cells["1-shot worst"] == "40.0%"
    assert cells["fill %thr"] == "83.3%"         # (400 + 600 + 1000) / 3 / 800
    assert cells["fill %win"] == "66.7%" and cells["fill max %win"] == "100.0%"
    assert cells["prefix/100"] == "10.0"
    assert cells["handles"] == "20.0%" and cells["handles worst"] == "30.0%"
    assert cells["account tok"] == "100" and cells["account max"] == "200"
    assert cells["over"] == "2/1" and cells["invalid"] == "0/0"
    assert cells["cost"] == "0.700" and cells["cost worst"] == "0.900"
    head, middle, tail, other = fidelity_report.positions(rows, ["new"]).splitlines()[-1].split("|")[2:6]
    assert (head.strip(), middle.strip(), tail.strip(), other.strip()) == ("50.0% / 25.0%", "– / –", "50.0% / 50.0%", "– / –")
    assert "snip 4 (in 2 of 2 runs)" in fidelity_report.stages(rows, ["new"])
    per_input = fidelity_report.stages_by_input([_row("new", stages={"snip": 3, "microcompact": 5})], ["new", "x"])
    assert per_input.splitlines()[-1].split("|")[2].strip() == "micro 5 · snip 3"


def test_the_time_per_call_pools_every_input_and_shows_the_tail_beside_the_median():
    """Issue 21, point 2: the fidelity bench reports each system's time per call as median, mean,
    p99 and max over every input's calls, so the calls where a stage fires are not hidden by the
    median; the compacting calls' mean and the worst input beside them."""
    quick = [0.1] * 98 + [5.0, 9.0]  # 100 calls: two of them compact
    rows = [_row("new", turn_ms=quick, turn_cpu_ms=[0.05] * 100, turn_compacted=[False] * 98 + [True, True]),
            _row("new", source={"name": "slow", "group": "g"}, turn_ms=[2.0, 4.0], turn_cpu_ms=[1.0, 1.0],
                 turn_compacted=[False, False]),
            _row("peer", turn_ms=[1.0, 3.0], turn_cpu_ms=[1.0, 3.0], turn_compacted=[False, True])]
    lines = fidelity_report.turns(rows, ["new", "peer", "absent"]).splitlines()
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in lines[2:]]
    assert [c[0] for c in cells] == ["new", "peer"]  # a system without timings has no row
    new = dict(zip([h for h, _ in fidelity_report.TURNS], cells[0]))
    assert new["calls"] == "102"
    assert new["median ms"] == "0.10"                                   # the 51st of 102
    assert new["mean ms"] == f"{(9.8 + 14.0 + 6.0) / 102:.2f}"
    assert new["p99 ms"] == "5.00" and new["max ms"] == "9.00"          # nearest rank: the 101st of 102
    assert new["cpu mean ms"] == f"{(5.0 + 2.0) / 102:.2f}"
    assert new["compacting: mean ms"] == "7.00 (2)"
    assert new["worst input: mean ms"] == "slow 3.00"
    assert [fidelity_report._rank(list(range(1, 101)), q) for q in (0.5, 0.99, 1.0)] == [50, 99, 100]
