"""``lossless sessions`` and what ``inspect``/``replay``/``compact`` take: a session id, a
unique start of one, or ``latest``, found under a fake ``~/.claude/projects`` and
``~/.codex/sessions`` (``HOME`` pointed at a temp dir), with the window from the model."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from lossless.cli import main
from lossless.sessions import Usage, find_sessions, locate
from sessions_kit import CC_ID, CX_ID, DATA, claude_session, codex_rollout, fake_home, write_claude, write_codex



@pytest.fixture
def home(tmp_path, monkeypatch):
    home = fake_home(tmp_path, monkeypatch)
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / ".lossless"))
    return home


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _claude_usage(lines: list[str]) -> tuple[int, Usage]:
    """Calls and usage of Claude Code lines, counted the plain way: the last line of each message id."""
    last: dict[str, dict] = {}
    for line in lines:
        e = json.loads(line)
        if e.get("type") == "assistant":
            last[e["message"]["id"]] = e["message"]["usage"]
    u = [Usage(input=x["input_tokens"], output=x["output_tokens"], cache_read=x["cache_read_input_tokens"],
               cache_write=x["cache_creation_input_tokens"]) for x in last.values()]
    return len(u), sum(u, Usage())


def _codex_usage(lines: list[str]) -> tuple[int, Usage]:
    """Calls and usage of a rollout, from its distinct last_token_usage events."""
    seen, total = set(), Usage()
    for line in lines:
        e = json.loads(line)
        if e["type"] == "event_msg" and e["payload"]["type"] == "token_count":
            key = json.dumps(e["payload"]["info"]["total_token_usage"], sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            x = e["payload"]["info"]["last_token_usage"]
            total = total + Usage(input=x["input_tokens"] - x["cached_input_tokens"], output=x["output_tokens"],
                                  cache_read=x["cached_input_tokens"])
    return len(seen), total


def test_sessions_lists_both_agents_with_what_each_spent(home, capsys):
    cc = claude_session(rounds=5)
    sub = claude_session(rounds=2, sid="a9e0b0c1-0000-4000-8000-0000000000bb", model="claude-haiku-4-5")
    path = write_claude(home, cc, CC_ID)
    (path.parent / CC_ID / "subagents").mkdir(parents=True)
    (path.parent / CC_ID / "subagents" / "agent-1.jsonl").write_text("\n".join(sub) + "\n")
    cx = codex_rollout(CX_ID, calls=4)
    write_codex(home, cx, CX_ID)

    code, out, err = _run(capsys, "sessions", "--json")
    assert code == 0, err
    listed = {s["id"]: s for s in json.loads(out)}
    assert set(listed) == {CC_ID, CX_ID}
    calls, usage = _claude_usage(cc)
    sub_calls, sub_usage = _claude_usage(sub)
    c = listed[CC_ID]
    assert c["agent"] == "claude-code" and c["project"] == "/work/app" and c["calls"] == calls + sub_calls
    assert c["tokens"] == {"input": (usage + sub_usage).input, "output": (usage + sub_usage).output,
                           "cache_read": (usage + sub_usage).cache_read,
                           "cache_write": (usage + sub_usage).cache_write}
    assert c["model"] == "claude-sonnet-4-5-20250929"  # the conversation's model, not its subagent's
    x = listed[CX_ID]
    calls, usage = _codex_usage(cx)
    assert x["agent"] == "codex" and x["project"] == "/work/acme" and x["calls"] == calls == 4
    assert x["tokens"] == {"input": usage.input, "output": usage.output, "cache_read": usage.cache_read,
                           "cache_write": 0}
    assert c["cost_usd"] > 0 and x["cost_usd"] > 0
    # the most recent first, and the table says the same
    assert [s["id"] for s in json.loads(out)] == [CX_ID, CC_ID]
    code, out, err = _run(capsys, "sessions")
    assert code == 0 and CC_ID[:8] in out and CX_ID[:8] in out and "$" in out


def test_the_real_sessions_count_each_response_once(home, capsys):
    if not DATA.is_dir():
        pytest.skip("../shared/data is absent (a fresh clone)")
    folder = home / ".claude" / "projects" / "-home-marco-projects-spotter"
    folder.mkdir(parents=True)
    for f in sorted(DATA.glob("*.jsonl")):
        shutil.copy(f, folder / f.name)
    code, out, err = _run(capsys, "sessions", "--json", "--all", "--agent", "claude-code")
    assert code == 0, err
    listed = {s["id"]: s for s in json.loads(out)}
    assert set(listed) == {f.stem for f in DATA.glob("*.jsonl")}
    for f in DATA.glob("*.jsonl"):
        entries = [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
        ids = {e["message"]["id"] for e in entries if e.get("type") == "assistant"
               and e["message"].get("model") != "<synthetic>"}
        assert listed[f.stem]["calls"] == len(ids), f.name
        assert listed[f.stem]["compactions"] == sum(e.get("subtype") == "compact_boundary" for e in entries)


def test_an_id_a_prefix_or_latest_names_a_session_and_the_window_comes_from_its_model(home, capsys):
    old = write_claude(home, claude_session(rounds=3, model="claude-opus-4-6"), CC_ID)
    new = write_codex(home, codex_rollout(CX_ID, calls=3, window=258_400), CX_ID)
    os.utime(old, (1_700_000_000, 1_700_000_000))
    assert locate("latest") == new and locate(CC_ID) == old and locate(CC_ID[:6]) == old
    assert locate(str(old)) == old

    code, out, err = _run(capsys, "replay", "latest", "--json")
    assert code == 0, err
    assert json.loads(out)["window"] == 258_400  # what Codex recorded for the model
    code, out, err = _run(capsys, "inspect", CC_ID[:8], "--json")
    assert code == 0, err
    assert json.loads(out)["window"] == 200_000  # Claude Code runs Opus 4.6 at 200k unless the 1M beta is on
    code, out, err = _run(capsys, "replay", CC_ID[:8], "--window", "30000", "--json")
    assert code == 0 and json.loads(out)["window"] == 30_000
    code, out, err = _run(capsys, "inspect", CC_ID[:8])
    assert code == 0 and "claude-opus-4-6 as Claude Code runs it" in out


def test_a_prompt_over_200k_shows_the_1m_window_was_on(home, capsys):
    write_claude(home, claude_session(rounds=9, result_chars=90_000, model="claude-opus-4-6"), CC_ID)
    code, out, err = _run(capsys, "inspect", "latest", "--json")
    assert code == 0, err
    assert json.loads(out)["window"] == 1_000_000


def test_unknown_and_ambiguous_ids_are_one_line_errors(home, capsys):
    write_claude(home, claude_session(rounds=1), CC_ID)
    write_claude(home, claude_session(rounds=1, sid=CC_ID[:-1] + "b"), CC_ID[:-1] + "b")
    code, out, err = _run(capsys, "inspect", "nope")
    assert code == 2 and err.count("\n") == 1 and "'nope'" in err and "lossless sessions" in err
    code, out, err = _run(capsys, "replay", CC_ID[:8])
    assert code == 2 and err.count("\n") == 1 and "2 sessions start with it" in err and CC_ID in err
    code, out, err = _run(capsys, "compact", CC_ID[:-1] + "x", "-o", "out.json")
    assert code == 2 and err.count("\n") == 1 and "no session with this id" in err


def test_a_corrupt_line_is_named_by_file_and_line(home, capsys):
    lines = claude_session(rounds=3)
    lines[4] = lines[4][:-20] + "}garbage"
    path = write_claude(home, lines, CC_ID)
    code, out, err = _run(capsys, "sessions", "--json")
    assert code == 0 and [s["id"] for s in json.loads(out)] == [CC_ID]
    assert f"{path}:5:" in err and err.count("\n") == 1  # listed, with a warning naming the line
    code, out, err = _run(capsys, "inspect", CC_ID)
    assert code == 2 and err.count("\n") == 1 and f"{path}:5:" in err


def test_compact_and_replay_take_a_codex_session(home, capsys, tmp_path):
    write_codex(home, codex_rollout(CX_ID, calls=5), CX_ID)
    out_file = tmp_path / "compacted.json"
    code, out, err = _run(capsys, "compact", CX_ID[:4], "-o", str(out_file), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["dialect"] == "openai" and report["window"] == 272_000
    written = json.loads(out_file.read_text())
    assert [m["role"] for m in written][:2] == ["user", "user"]
    assert any(m.get("tool_calls") for m in written)
    code, out, err = _run(capsys, "replay", CX_ID[:4], "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["calls"] == 5 and r["model"] == "gpt-5-codex" and r["dollars"]["recorded"] > 0


@given(st.lists(st.tuples(st.integers(0, 50_000), st.integers(0, 1), st.integers(0, 5_000), st.booleans()),
                min_size=1, max_size=12))
def test_codex_calls_add_up_to_the_running_total(tmp_path_factory, events):
    """Whatever the calls and however often Codex repeats an event, the calls add up to its last total."""
    home = tmp_path_factory.mktemp("home")
    lines = [json.dumps({"timestamp": "2026-03-03T14:00:00Z", "type": "session_meta",
                         "payload": {"id": CX_ID, "cwd": "/w"}})]
    total = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0}
    for prompt, cached_share, output, repeat in events:
        last = {"input_tokens": prompt, "cached_input_tokens": prompt * cached_share // 2, "output_tokens": output}
        total = {k: total[k] + last[k] for k in total}
        line = json.dumps({"timestamp": "2026-03-03T14:00:01Z", "type": "event_msg", "payload": {
            "type": "token_count", "info": {"total_token_usage": total, "last_token_usage": last}}})
        lines += [line] * (2 if repeat else 1)
    write_codex(home, lines, CX_ID)
    (found,) = _found(home)
    u = found.usage
    assert (u.input + u.cache_read, u.cache_read, u.output) == (
        total["input_tokens"], total["cached_input_tokens"], total["output_tokens"])


def _found(home: Path) -> list:
    """The Codex sessions under ``home`` (hypothesis runs many examples in one test: no monkeypatch)."""
    old = os.environ.get("CODEX_HOME")
    os.environ["CODEX_HOME"] = str(home / ".codex")
    try:
        return find_sessions(("codex",))
    finally:
        if old is None:
            del os.environ["CODEX_HOME"]
        else:
            os.environ["CODEX_HOME"] = old


def test_memory_extract_takes_a_session_id_or_latest_as_inspect_does(home, capsys, tmp_path):
    """It took only a path: `memory extract latest` was 'latest: no such file'."""
    write_claude(home, claude_session(rounds=3, model="claude-opus-4-6"), CC_ID)
    for ref in ("latest", CC_ID[:8]):
        code, out, err = _run(capsys, "memory", "extract", ref, "--dry-run", "--provider", "fake",
                              "--dir", str(tmp_path / "mem"))
        assert code == 0, err
        assert out.startswith(str(home)) and CC_ID in out.splitlines()[0]


def test_losslesss_own_transcripts_are_listed_and_open_by_their_id(home, capsys, tmp_path):
    """The proxy's conversations and the chat's sessions live in lossless's store.  Before, ``lossless
    sessions`` listed Claude Code's and Codex's only, so the id ``inspect`` takes was nowhere to see."""
    from lossless import ContextManager

    write_claude(home, claude_session(rounds=2), CC_ID)
    cm = ContextManager(store=str(tmp_path / ".lossless"), session_id="0c1d2e3f4a5b6c7d", window=20_000)
    history = [{"role": "user", "content": "Survey the repository."}]
    for n in range(3):
        history += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "Bash",
                                                       "input": {"command": "ls"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "a b"}]}]
        cm.prepare(history)
    cm.close()

    code, out, err = _run(capsys, "sessions", "--json")
    assert code == 0, err
    listed = {s["id"]: s for s in json.loads(out)}
    assert set(listed) == {CC_ID, "0c1d2e3f4a5b6c7d"}
    own = listed["0c1d2e3f4a5b6c7d"]
    assert own["agent"] == "lossless" and own["messages"] == 4 and own["path"].endswith("transcript.jsonl")
    assert own["project"] == str(tmp_path).replace(str(home), "~", 1) if str(tmp_path).startswith(str(home)) \
        else own["project"] == str(tmp_path)
    code, out, err = _run(capsys, "sessions", "--agent", "lossless")
    assert code == 0 and "0c1d2e3f" in out and CC_ID[:8] not in out and "lossless" in out
    code, out, err = _run(capsys, "inspect", "0c1d2e3f")
    assert code == 0 and "whole history" in out, err
    code, out, err = _run(capsys, "report", "--json")  # the report prices what agents spent: not lossless's views
    assert code == 0 and "0c1d2e3f4a5b6c7d" not in out


def test_a_compacted_copy_counts_its_calls_in_the_original_and_is_replayed_once(home, capsys):
    """`compact --claude-code` writes a copy that carries the original's recorded responses: `sessions`
    marks it and leaves their cost with the original (whichever file is read first), and `report`
    replays the conversation once, not once more for the copy."""
    cc = claude_session(rounds=12, result_chars=6_000)
    write_claude(home, cc, CC_ID)
    code, out, err = _run(capsys, "sessions", "--json")
    before = {s["id"]: s for s in json.loads(out)}[CC_ID]
    code, out, err = _run(capsys, "report", "--json")
    assert code == 0, err
    replayed_before = json.loads(out)
    code, out, err = _run(capsys, "compact", CC_ID, "--claude-code", "--window", "16000")
    assert code == 0, err
    code, out, err = _run(capsys, "sessions", "--json")
    assert code == 0, err
    listed = {s["id"]: s for s in json.loads(out)}
    (copy_id,) = set(listed) - {CC_ID}
    assert listed[copy_id]["copy"] and not listed[CC_ID]["copy"]
    assert listed[CC_ID]["cost_usd"] == before["cost_usd"] and listed[CC_ID]["calls"] == before["calls"]
    assert listed[copy_id]["calls"] == 0
    code, out, err = _run(capsys, "sessions")
    assert "claude-code copy" in out and "count in the original's cost" in out
    code, out, err = _run(capsys, "report", "--json")
    assert code == 0, err
    after = json.loads(out)
    assert (after["total"]["calls"], after["total"]["cost_usd"]) == \
        (replayed_before["total"]["calls"], replayed_before["total"]["cost_usd"])
    replayed = [s["id"] for s in after["sessions"] if s["replay"]]
    assert replayed == [s["id"] for s in replayed_before["sessions"] if s["replay"]] == [CC_ID]
    assert {s["id"]: s["copy"] for s in after["sessions"]} == {CC_ID: False, copy_id: True}
