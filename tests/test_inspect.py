"""inspect as /context: the window by category, the live context beside the whole
history, the overhead the file does not show — and inspect, replay and compact
agreeing on the same real sessions (two with an auto-compaction, one a /compact)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.cli import main
from lossless.cli.compact import compact_file
from lossless.dialects.detect import read_any
from lossless.inspect import CATEGORIES, category, inspect_session
from lossless.messages import Message, Text
from lossless.replay import replay
from lossless.session import Boundary, Call, Session
from lossless.tokens import default_counter
from conftest import data_path
from strategies import histories

COMPACTED = (
    "4d5611e5-241a-462a-8d15-5122611a9569.jsonl",  # auto-compaction
    "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",  # auto-compaction
    "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl",  # a manual /compact
)
WINDOW = 200_000


@given(histories(max_rounds=12), st.integers(0, 30_000), st.sampled_from([8_000, 32_000, 200_000]))
def test_categories_add_up_to_the_tokens_in_use_and_the_window(messages, unseen, window):
    session = Session(path=None, format="anthropic", messages=tuple(messages), system="Be brief.")
    r = inspect_session(session, window=window, unseen_tokens=unseen)
    in_use = [c for c in r["categories"] if c["name"] in CATEGORIES]
    assert sum(c["tokens"] for c in in_use) == r["tokens"]
    assert all(c["tokens"] > 0 for c in in_use)
    rest = {c["name"]: c["tokens"] for c in r["categories"] if c["name"] not in CATEGORIES}
    assert set(rest) == {"free", "auto-compact buffer", "reserved for the answer"}
    if r["tokens"] <= r["threshold"]:  # the bar is the window, exactly
        assert r["tokens"] + sum(rest.values()) == window
    else:
        assert rest["free"] == 0
    assert r["percent_left"] == round(100 * (window - r["tokens"]) / window, 1)


def test_the_live_context_starts_at_the_last_boundary():
    msgs = [Message(role="user", content=(Text(text=f"message {i} " * 50),)) if i % 2 == 0 else
            Message(role="assistant", content=(Text(text=f"answer {i}"),)) for i in range(10)]
    summary = Message(role="user", content=(Text(text="summary of before"),), meta={"is_compact_summary": True})
    msgs = msgs[:6] + [summary] + msgs[6:]
    session = Session(path=None, format="claude-code", messages=tuple(msgs),
                      boundaries=(Boundary(index=6, trigger="auto", pre_tokens=9, post_tokens=None),),
                      calls=(Call(index=9, usage={"input_tokens": 5_000}, message_id="m", model=None),))
    r = inspect_session(session, window=32_000)
    counter = default_counter()
    assert r["messages"] == 5 and r["live_start"] == 6 and r["history"]["messages"] == 11
    assert [b["message"] for b in r["history"]["boundaries"]] == [6]
    # The overhead is what the first recorded call carried beyond what the file shows of it.
    shown = sum(counter.count_message(m) for m in msgs[6:9])
    assert r["unseen_tokens"] == 5_000 - shown and r["unseen_inferred"]
    assert r["last_recorded"] == {"message": 9, "tokens": 5_000, "estimate": 5_000}
    # In use: the provider's count of the last request plus the estimate of what followed.
    after = counter.count_message(msgs[9]) + counter.count_message(msgs[10])
    assert r["calibrated"] and r["tokens"] == 5_000 + after
    assert sum(c["tokens"] for c in r["categories"] if c["name"] in CATEGORIES) == r["tokens"]
    plain = inspect_session(session, window=32_000, unseen_tokens=r["unseen_tokens"])
    assert plain["estimate"] == r["estimate"]


def test_memory_blocks_and_the_memory_index_are_their_own_category(tmp_path):
    from lossless.memory import MemoryStore, system_index

    m = Message(role="user", content=(Text(text="fix it"), Text(text='<memory id="m1" type="user">tabs</memory>')))
    assert [category(m, b) for b in m.content] == ["user messages", "memory"]
    store = MemoryStore(tmp_path / "memory")
    store.add(name="tabs", description="the user indents with tabs", type="user", body="Always tabs.")
    system = "You fix tests.\n\n" + system_index(store)
    r = inspect_session(Session(path=None, format="anthropic", messages=(m,), system=system), unseen_tokens=0)
    by = {c["name"]: c["tokens"] for c in r["categories"]}
    counter = default_counter()
    assert by["system prompt"] == counter.count_system("You fix tests.\n\n")
    assert by["memory"] == counter.count_system(system) - by["system prompt"] + counter.count_block(m.content[1])
    assert sum(by[c] for c in CATEGORIES if c in by) == r["tokens"]


def test_inspect_cli_shows_the_bar_and_the_boundary(capsys):
    f = data_path("claude-code", COMPACTED[0])
    assert main(["inspect", str(f), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "after its compaction boundary (message 124)" in out and "the whole history bridges it" in out
    assert "inferred from the first recorded usage" in out and "last recorded call" in out
    assert "by the provider's count of the last recorded request" in out
    bar = next(line for line in out.splitlines() if line.startswith("["))
    assert len(bar) == 62 and "·" in bar and "=" in bar


@pytest.fixture(scope="module", params=COMPACTED)
def three_views(request, tmp_path_factory):
    path = data_path("claude-code", request.param)
    session = read_any(path)
    tmp = tmp_path_factory.mktemp("agree")
    compacted = compact_file(path, tmp / "out.json", window=WINDOW, store=tmp / "store", unseen_tokens=None)
    return session, inspect_session(session, window=WINDOW), replay(session, WINDOW, unseen_tokens=None), compacted


def test_inspect_replay_and_compact_agree_on_the_live_context(three_views):
    session, inspected, replayed, compacted = three_views
    assert len(session.boundaries) == 1
    # One overhead, inferred the same way by all three.
    assert inspected["unseen_tokens"] == replayed.unseen_tokens == compacted["unseen_tokens"] > 10_000
    # inspect's live context is exactly what compact works on.
    assert inspected["live_start"] == session.boundaries[-1].index
    assert inspected["messages"] == compacted["messages_before"] < inspected["history"]["messages"]
    assert inspected["tokens"] == compacted["tokens_before"]
    # Both anchored to the provider's count of the live context's last request, which the
    # plain estimate undershoots on these sessions (Claude's tokenizer counts code denser).
    assert inspected["calibrated"] and compacted["calibrated"]
    assert inspected["tokens"] > inspected["estimate"]
    assert compacted["tokens_after"] <= compacted["threshold"]
    # Same budget lines for the same window.
    assert inspected["threshold"] == replayed.threshold == compacted["threshold"]
    # replay's first call is counted as inspect counts (nothing observed yet to calibrate on);
    # until a stage fires, managed and unmanaged are the same request and the same figure; its
    # last call is the file's last recorded call.
    first = session.calls[0]
    counter = default_counter()
    assert replayed.per_call[0].tokens_unmanaged == inspected["overhead"] + sum(
        counter.count_message(m) for m in session.messages[:first.index])
    untouched = next((i for i, c in enumerate(replayed.per_call) if c.stages), len(replayed.per_call))
    assert untouched > 5
    assert all(c.tokens_unmanaged == c.tokens_managed for c in replayed.per_call[:untouched])
    assert replayed.per_call[-1].recorded_tokens == inspected["last_recorded"]["tokens"]


def test_the_three_commands_agree_in_json(tmp_path, capsys):
    f = data_path("claude-code", COMPACTED[1])
    assert main(["inspect", str(f), "--json"]) == 0
    inspected = json.loads(capsys.readouterr().out)
    assert main(["replay", str(f), "--window", str(WINDOW), "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert main(["compact", str(f), "--window", str(WINDOW), "-o", str(tmp_path / "o.json"), "--store",
                 str(tmp_path / "s"), "--json"]) == 0
    compacted = json.loads(capsys.readouterr().out)
    assert inspected["unseen_tokens"] == replayed["unseen_tokens"] == compacted["unseen_tokens"]
    assert inspected["unseen_inferred"] and replayed["unseen_inferred"] and compacted["unseen_inferred"]
    assert inspected["tokens"] == compacted["tokens_before"] and inspected["messages"] == compacted["messages_before"]


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
def test_a_request_body_s_tool_schemas_are_counted_and_kept_by_inspect_and_compact(tmp_path, capsys, dialect):
    tools = [{"name": "run", "description": "Run a shell command and return its output.",
              "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]
    if dialect == "openai":
        tools = [{"type": "function", "function": {"name": "run", "description": "Run a command.",
                                                   "parameters": tools[0]["input_schema"]}}]
    body = {"system": "You are terse.", "tools": tools,
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    f = tmp_path / "body.json"
    f.write_text(json.dumps(body))
    assert main(["inspect", str(f), "--window", "8000", "--json"]) == 0
    inspected = json.loads(capsys.readouterr().out)
    schemas = {c["name"]: c["tokens"] for c in inspected["categories"]}["tool schemas"]
    assert schemas == default_counter().count_tools(tools) > 0
    assert main(["compact", str(f), "--window", "8000", "-o", str(tmp_path / "o.json"), "--json"]) == 0
    compacted = json.loads(capsys.readouterr().out)
    assert compacted["tokens_before"] == inspected["tokens"]
    assert json.loads((tmp_path / "o.json").read_text())["tools"] == tools  # compact kept them


def test_replay_says_it_runs_across_the_file_s_own_compaction(capsys):
    f = data_path("claude-code", COMPACTED[2])
    assert main(["replay", str(f), "--window", str(WINDOW)]) == 0
    out = capsys.readouterr().out
    boundary = read_any(f).boundaries[0].index
    assert f"the file records 1 compaction of its own (message {boundary})" in out


def test_a_lossless_transcript_is_named_as_the_whole_history_not_the_context_sent(tmp_path, capsys):
    """lossless's own transcript holds every message that entered; inspect says so, names no model's
    window as Claude Code's, and says 'over it by' rather than a negative share left."""
    from lossless.transcript import Transcript

    words = " ".join(f"w{i}" for i in range(30_000))
    with Transcript("s1", root=tmp_path / ".lossless") as log:
        log.append([Message(role="user", content=(Text(text="summarise the log"),)),
                    Message(role="assistant", content=(Text(text="Reading it."),)),
                    Message(role="user", content=(Text(text=words),))])
    path = tmp_path / ".lossless" / "sessions" / "s1" / "transcript.jsonl"
    assert main(["inspect", str(path), "--window", "8000"]) == 0
    out = capsys.readouterr().out
    assert "a lossless transcript" in out and f"lossless replay {path} --window N" in out
    assert "% left" not in out.splitlines()[2] and "over it by" in out
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "as Claude Code runs it" not in out and "record no model" in out


def test_a_proxy_conversation_or_chat_session_is_found_by_its_id(tmp_path, monkeypatch, capsys):
    """``inspect ID`` finds lossless's own transcripts in the store too (after Claude Code's and
    Codex's, which come first), and ``latest`` falls back to them when those agents have none."""
    import os

    from lossless.transcript import Transcript

    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / ".lossless"))
    for sid, words in (("conv-7f3a21", 10), ("conv-9b0c44", 20)):
        with Transcript(sid, root=tmp_path / ".lossless") as log:
            log.append([Message(role="user", content=(Text(text=" ".join(["word"] * words)),))])
    older = tmp_path / ".lossless" / "sessions" / "conv-7f3a21" / "transcript.jsonl"
    os.utime(older, (1_000_000, 1_000_000))
    assert main(["inspect", "conv-7f"]) == 0
    assert capsys.readouterr().out.startswith(f"{older}: 1 message, no compaction boundary")
    assert main(["inspect", "latest"]) == 0
    assert "conv-9b0c44" in capsys.readouterr().out.splitlines()[0]
    assert main(["inspect", "conv-"]) == 2
    assert "2 sessions start with it" in capsys.readouterr().err


def test_usage_of_requests_made_smaller_on_the_way_does_not_anchor_inspect(tmp_path, capsys):
    """A session run through lossless proxy records the usage of what the proxy sent, a fraction of
    what the file shows.  Before: inspect took that figure as the context's size (13,680 of a
    68,383-token history, for a Codex run) and gave shares of 491 %."""
    import re

    from sessions_kit import claude_session

    lines = [json.loads(line) for line in claude_session(rounds=8, result_chars=40_000)]
    for entry in lines:  # every response's usage as a proxy that compacted would have had it reported
        if entry["type"] == "assistant":
            entry["message"]["usage"] = {"input_tokens": 3, "cache_creation_input_tokens": 0,
                                         "cache_read_input_tokens": 9_000, "output_tokens": 60}
    path = tmp_path / "proxied.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))

    assert main(["inspect", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["usage_distrusted"]["reported"] == 9_003 and report["usage_distrusted"]["counted"] > 2 * 9_003
    assert not report["calibrated"] and report["tokens"] == report["estimate"] > 80_000
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "by lossless's own count" in out and "made smaller on their way" in out
    shares = [float(s) for s in re.findall(r"│ ([\d.]+)% *│", out.split("live context by role")[1])]
    assert shares and max(shares) <= 100.0
