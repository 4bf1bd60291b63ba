"""``lossless report``: the sessions' cost in dollars per day, session and model, and what a
replay through lossless says each would have cost and how often it would have hit the window."""

from __future__ import annotations

import json
import shutil
import time
from datetime import datetime, timezone

import pytest

from lossless import modelinfo
from lossless.cli import main
from sessions_kit import CC_ID, CX_ID, DATA, claude_session, codex_rollout, fake_home, write_claude, write_codex



@pytest.fixture
def home(tmp_path, monkeypatch):
    home = fake_home(tmp_path, monkeypatch)
    monkeypatch.setenv("TZ", "UTC")  # days are local days: UTC here, so the test knows them
    time.tzset()
    yield home
    monkeypatch.undo()
    time.tzset()


def _report(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["report", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _priced(lines: list[str]) -> dict[str, float]:
    """Dollars per day of Claude Code lines, each response (its last line) at its model's price."""
    last: dict[str, dict] = {}
    for line in lines:
        e = json.loads(line)
        if e.get("type") == "assistant":
            first = last.get(e["message"]["id"], e)
            last[e["message"]["id"]] = {**e, "timestamp": first["timestamp"]}
    days: dict[str, float] = {}
    for e in last.values():
        u = e["message"]["usage"]
        day = datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).astimezone(timezone.utc).date()
        days[day.isoformat()] = days.get(day.isoformat(), 0.0) + modelinfo.cost(
            e["message"]["model"], input=u["input_tokens"], output=u["output_tokens"],
            cache_read=u["cache_read_input_tokens"], cache_write=u["cache_creation_input_tokens"])
    return days


def test_report_prices_days_models_and_sessions_alike(home, capsys):
    a = claude_session(rounds=4, start=datetime(2026, 3, 1, 23, 59, 30, tzinfo=timezone.utc))  # crosses midnight
    b = claude_session(rounds=2, sid="b0b0b0b0-0000-4000-8000-00000000000b", model="claude-haiku-4-5",
                       start=datetime(2026, 3, 4, 10, 0, tzinfo=timezone.utc))
    write_claude(home, a, CC_ID)
    write_claude(home, b, "b0b0b0b0-0000-4000-8000-00000000000b")
    write_codex(home, codex_rollout(CX_ID, calls=3), CX_ID)
    code, out, err = _report(capsys, "--json")
    assert code == 0, err
    r = json.loads(out)
    expected = _priced(a)
    for day, dollars in _priced(b).items():
        expected[day] = expected.get(day, 0.0) + dollars
    claude_days = {d["key"]: d["cost_usd"] for d in r["days"] if d["models"] != ["gpt-5-codex"]}
    assert set(claude_days) == {"2026-03-01", "2026-03-02", "2026-03-04"} == set(expected)
    assert claude_days == pytest.approx(expected, abs=1e-3)
    total = r["total"]["cost_usd"]
    assert sum(d["cost_usd"] for d in r["days"]) == pytest.approx(total, abs=1e-3)
    assert sum(m["cost_usd"] for m in r["models"]) == pytest.approx(total, abs=1e-3)
    assert sum(s["cost_usd"] for s in r["sessions"]) == pytest.approx(total, abs=1e-3)
    assert {m["key"] for m in r["models"]} == {"claude-sonnet-4-5-20250929", "claude-haiku-4-5", "gpt-5-codex"}
    for s in r["sessions"]:  # each replayed under its model's window, priced in dollars
        assert s["replay"]["dollars"]["recorded"] == pytest.approx(s["cost_usd"], abs=1e-3)
        assert s["replay"]["dollars"]["managed"] > 0 and s["replay"]["over_window_calls"] == 0

    code, out, err = _report(capsys)
    assert code == 0 and "2026-03-01" in out and "2026-03-04" in out and "total" in out and "$" in out
    assert "replayed 3 conversations" in out
    code, out, err = _report(capsys, "--by", "model", "--no-replay")
    assert code == 0 and "claude-haiku-4-5" in out and "replayed" not in out.split("cost per model")[0]
    code, out, err = _report(capsys, "--by", "session", "--agent", "codex")
    assert code == 0 and CX_ID[:8] in out and CC_ID[:8] not in out


def test_a_model_without_a_price_is_said_once_and_shows_no_cost(home, capsys):
    write_claude(home, claude_session(rounds=2, model="my-own-model-7b"), CC_ID)
    code, out, err = _report(capsys, "--no-replay", "--json")
    assert code == 0
    (session,) = json.loads(out)["sessions"]
    assert session["cost_usd"] is None
    assert err.count("\n") == 1 and "my-own-model-7b" in err


def test_the_real_sessions_would_not_have_gone_over_the_window(home, capsys):
    if not DATA.is_dir():
        pytest.skip("../shared/data is absent (a fresh clone)")
    folder = home / ".claude" / "projects" / "-home-marco-projects-spotter"
    folder.mkdir(parents=True)
    sid = "8463c716-a2ea-4c14-9efa-87158ebd9f20"  # one real auto-compaction at ~167k tokens of 200k
    shutil.copy(DATA / f"{sid}.jsonl", folder)
    code, out, err = _report(capsys, "--by", "session", "--json")
    assert code == 0, err
    (s,) = json.loads(out)["sessions"]
    replay = s["replay"]
    assert s["compactions"] == replay["recorded_compactions"] == 1
    assert replay["window"] == 200_000
    assert replay["unmanaged_over_window_calls"] > 0 and replay["over_window_calls"] == 0
    assert replay["dollars"]["managed"] < replay["dollars"]["unmanaged"]
