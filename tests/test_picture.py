"""The picture of a replay: the self-contained page, the terminal chart and the per-call
table, on a generated session (no shared data needed) and on the real ones."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from lossless.cli import main
from lossless.dialects.detect import read_any
from lossless.replay import CallReport, ReplayReport, replay
from lossless.report import per_call_rows, render_html, terminal_chart
from conftest import data_path

WINDOW = 16_000


def write_session(path, n_rounds=30, size=4_000):
    """A tool-heavy session that outgrows a 16k window, so stages fire along the way."""
    msgs = [{"role": "user", "content": "Find why the nightly build fails and fix it."}]
    for i in range(n_rounds):
        tid = f"toolu_{i:04d}"
        msgs.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Looking at step {i}."},
            {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": f"make step{i}"}}]})
        msgs.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tid, "content": f"step {i}: log line\n" * (size // 18)}]})
    msgs.append({"role": "assistant", "content": "The build is fixed."})
    path.write_text(json.dumps(msgs))
    return path


def replayed(tmp_path):
    return replay(read_any(write_session(tmp_path / "s.json")), WINDOW)


def test_page_is_self_contained_and_marks_every_fired_stage(tmp_path):
    report = replayed(tmp_path)
    fired = [c for c in report.per_call if c.stages]
    assert fired, "the session must outgrow the window for this test to mean anything"
    page = render_html(report)
    # No network: nothing is fetched (the SVG namespace is an identifier, not a request).
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page)
    assert "url(" not in page and "@import" not in page
    assert page.count('<g class="marker"') == len(fired)
    for c in fired:  # hover text: what the stage did, in its own words
        assert f'data-call="{c.call + 1}"' in page
        assert all(d.split("&")[0][:40].replace("'", "&#x27;") in page for d in c.details if d)
    assert page.count('class="series"') == 4 + any(c.recorded_tokens for c in report.per_call)
    assert "base-input-token units" in page and "cache-read ratio" in page
    assert f"window {WINDOW:,}" in page and f"auto-compact threshold {report.threshold:,}" in page
    assert f"warning {report.warning:,}" in page


def test_page_escapes_what_the_file_holds(tmp_path):
    report = replayed(tmp_path)
    report.file = "</script><script>alert(1)</script>.json"
    page = render_html(report)
    assert "<script>alert(1)" not in page and page.count("<script") == 2


def test_cli_writes_the_page_and_prints_the_chart_and_the_table(tmp_path, capsys):
    f = write_session(tmp_path / "s.json")
    out_html = tmp_path / "page" / "replay.html"
    code = main(["replay", str(f), "--window", str(WINDOW), "--html", str(out_html), "--per-call"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out_html.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert "tokens per call (█ managed" in out and "▲" in out
    assert "per call (cumulative cost in base-input-token units)" in out
    report = replay(read_any(f), WINDOW)
    for c in report.per_call:  # every call is a row of the table
        assert re.search(rf"\b{c.call + 1}\b.*{c.tokens_managed:,}", out)


def test_per_call_without_json_is_not_ignored(tmp_path, capsys):
    f = write_session(tmp_path / "s.json", n_rounds=3)
    main(["replay", str(f), "--window", str(WINDOW)])
    plain = capsys.readouterr().out
    main(["replay", str(f), "--window", str(WINDOW), "--per-call"])
    assert "per call (cumulative" not in plain and "per call (cumulative" in capsys.readouterr().out


def test_html_into_a_directory_is_refused_before_any_work(tmp_path, capsys):
    f = write_session(tmp_path / "s.json", n_rounds=2)
    code = main(["replay", str(f), "--window", str(WINDOW), "--html", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--html" in err and ".tmp" not in err


def _call(i, m, u, stages):
    return CallReport(i, 1, u, m, stages, True, 0, 0, details=[f"{s} did it" for s in stages])


@given(st.lists(st.tuples(st.integers(0, 400_000), st.integers(0, 400_000), st.booleans()), min_size=1,
                max_size=150), st.integers(1_024, 300_000), st.integers(5, 80))
def test_terminal_chart_shape(calls, window, width):
    per_call = [_call(i, min(a, b), max(a, b), ["snip"] if f else []) for i, (a, b, f) in enumerate(calls)]
    report = ReplayReport(file="x", window=window, threshold=window * 3 // 4, per_call=per_call)
    lines = terminal_chart(report, width=width, height=6)
    columns = min(len(calls), width)
    grid = [line.split("┤", 1)[1] for line in lines if "┤" in line]
    assert len(grid) == 6 and all(len(row) == columns for row in grid)
    axis = next(line for line in lines if "└" in line).split("└", 1)[1]
    assert len(axis) == columns and axis.count("▲") <= sum(f for *_, f in calls)
    assert ("▲" in axis) == any(f for *_, f in calls)
    # A column is never drawn managed above the unmanaged history it was cut from.
    for col in range(columns):
        stack = [row[col] for row in grid]
        assert "█" not in stack or "░" not in stack[stack.index("█"):]


def test_per_call_rows_one_per_call():
    report = ReplayReport(file="x", window=2_000, per_call=[_call(i, 10 * i, 20 * i, []) for i in range(7)])
    headers, rows = per_call_rows(report)
    assert len(rows) == 7 and all(len(r) == len(headers) for r in rows)
    assert [r[0] for r in rows] == [str(i + 1) for i in range(7)]


def test_real_session_page_marks_the_stages_and_the_recorded_size(tmp_path):
    path = data_path("claude-code", "4d5611e5-241a-462a-8d15-5122611a9569.jsonl")
    report = replay(read_any(path), 200_000, unseen_tokens=None)
    page = render_html(report)
    assert report.unseen_inferred and report.unseen_tokens > 10_000
    assert 'data-series="recorded"' in page  # Claude Code's own sizes, for comparison
    assert page.count('<g class="marker"') == sum(1 for c in report.per_call if c.stages) > 0
    assert report.per_call[-1].cost_managed < report.per_call[-1].cost_unmanaged
