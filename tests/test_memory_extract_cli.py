"""``lossless memory extract SESSION [--dry-run]``: memories from a recorded session, end to end."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import Scripted, data_path
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lossless.cli import main
from lossless.dialects.detect import read_any
from lossless.errors import RateLimited
from lossless.memory import MemoryStore
from lossless.memory.extract import EXTRACT_SYSTEM
from lossless.memory.harvest import chunk_dialogue, extract_session
from lossless.messages import Message, Text, assistant, user
from lossless.testing import FakeProvider, FakeServer
from lossless.testing.structured import memory_operations

SECRET = "sk-abcdefghijklmnopqrstuvwxyz123456"
SESSION = [
    {"role": "user", "content": f"Please keep answers short. I always indent Python with tabs. Please use the key {SECRET} for staging."},
    {"role": "assistant", "content": "Understood, tabs it is."},
    {"role": "user", "content": "Never mock the database in integration tests."},
]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(path: Path, messages) -> Path:
    path.write_text(json.dumps(messages))
    return path


def memory_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.glob("*.md") if p.name != "MEMORY.md") if d.is_dir() else []


def test_dry_run_prints_the_proposals_and_writes_nothing_then_a_run_writes_them_and_undo_reverts(tmp_path, capsys):
    session, mem = write(tmp_path / "s.json", SESSION), tmp_path / "mem"
    code, out, err = run(capsys, "memory", "--dir", str(mem), "extract", str(session), "--provider", "fake", "--dry-run")
    assert code == 0, err
    assert out.count("\nadd ") == 4 and "1 request of" in out and "dry run: nothing written (4 proposed)" in out
    assert "never-mock-the-database-in-integration (feedback, unscoped)" in out
    assert SECRET not in out and "[REDACTED" in out
    assert "never-mock-the-database-in-integration (feedback, unscoped)" in out
    assert memory_files(mem) == [] and not (mem / ".changes.jsonl").exists()

    code, out, err = run(capsys, "memory", "--dir", str(mem), "extract", str(session), "--provider", "fake")
    assert code == 0, err
    run_id = out.split("undo with: lossless memory undo ")[1].split()[0]
    assert len(memory_files(mem)) == 4
    on_disk = "".join(p.read_text() for p in mem.rglob("*") if p.is_file() and p.suffix in (".md", ".jsonl"))
    assert SECRET not in on_disk and "Never mock the database in integration tests." in on_disk

    code, out, _ = run(capsys, "memory", "--dir", str(mem), "extract", str(session), "--provider", "fake",
                       "--dry-run", "--json")
    report = json.loads(out)
    assert code == 0 and [p["op"] for p in report["proposals"]] == ["skip"] * 4
    assert all("duplicates" in p["note"] for p in report["proposals"]) and report["run"] is None

    code, out, _ = run(capsys, "memory", "--dir", str(mem), "undo", run_id)
    assert code == 0 and "reverted 4 changes" in out and memory_files(mem) == []


def test_a_fact_repeated_across_chunks_is_proposed_once(tmp_path):
    filler = "We looked at the build output together and went through the failing steps one by one. " * 20
    messages = [user("I always run the linter before committing."), assistant(filler), user(filler),
                assistant(filler), user("Good morning. I always run the linter before committing.")]
    store = MemoryStore(tmp_path / "mem")
    fake = FakeProvider(script=[lambda r: memory_operations(r.messages[-1].text)] * 10)
    result = extract_session(store, fake, messages, dry_run=True, max_chars=2_000)
    assert result.chunks == len(fake.requests) >= 2
    assert [p.op for p in result.proposals] == ["add", "skip"]
    assert result.proposals[1].note == "add i-always-run-the-linter-before: duplicates i-always-run-the-linter-before"
    assert "i-always-run-the-linter-before" in fake.requests[-1].messages[-1].text  # shown to the last chunk
    assert not store.dir.exists()


def test_a_long_real_claude_code_session_takes_several_requests_each_within_the_chunk(capsys, tmp_path):
    path = next(p for p in sorted(data_path("claude-code").glob("*.jsonl")) if p.stat().st_size > 1_000_000)
    session = read_any(path)
    fake = FakeProvider(script=[lambda r: memory_operations(r.messages[-1].text)] * 100)
    result = extract_session(MemoryStore(tmp_path / "mem"), fake, session.messages, dry_run=True)
    said = sum(len(c.text) for c in chunk_dialogue(session.messages))
    assert result.chunks == len(fake.requests) >= 2 and not result.errors
    for r in fake.requests:
        dialogue = r.messages[-1].text.split("\nDialogue:\n", 1)[1]
        assert len(dialogue) <= 12_000 and r.system == EXTRACT_SYSTEM and r.purpose == "memory-extract"
    assert sum(len(r.messages[-1].text.split("\nDialogue:\n", 1)[1]) for r in fake.requests) == said
    code, out, err = run(capsys, "memory", "--dir", str(tmp_path / "m2"), "extract", str(path), "--provider", "fake",
                         "--json", "--dry-run")
    assert code == 0, err
    assert json.loads(out)["requests"] == result.chunks


def test_a_mini_swe_agent_trajectory_is_read_by_the_same_reader(capsys, tmp_path):
    path = data_path("mini-swe-agent", "psf__requests-1142.traj.json")
    code, out, err = run(capsys, "memory", "--dir", str(tmp_path / "mem"), "extract", str(path), "--provider", "fake",
                         "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["messages"] == len(read_any(path).messages) and report["requests"] >= 1


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_the_real_sdks_against_the_fake_server_never_send_a_secret(api, tmp_path, capsys, monkeypatch):
    pytest.importorskip(api)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")

    def model(api_name, body):
        last = body["messages"][-1]["content"]
        text = last if isinstance(last, str) else "".join(b.get("text", "") for b in last)
        return memory_operations(text) if "Dialogue:" in text else None

    filler = "We compared the two retry strategies in detail and wrote down the trade-offs. " * 30
    messages = SESSION + [{"role": "assistant", "content": filler}, {"role": "user", "content": filler},
                          {"role": "user", "content": "I prefer small commits with clear messages."}]
    session, mem = write(tmp_path / "s.json", messages), tmp_path / "mem"
    with FakeServer(responder=model) as server:
        base = server.base_url if api == "anthropic" else server.openai_base_url
        code, out, err = run(capsys, "memory", "--dir", str(mem), "--project", "acme", "extract", str(session),
                             "--provider", api, "--model", "m", "--base-url", base, "--chunk-chars", "2000")
        bodies = [r.body for r in server.requests]
    assert code == 0, err
    assert len(bodies) >= 2 and SECRET not in json.dumps(bodies)
    store = MemoryStore(mem, project="acme")
    scopes = {m.id: m.scope for m in store.memories()}
    assert scopes["i-prefer-small-commits-with-clear"] == "user" and len(scopes) == 5
    assert "undo with: lossless memory undo extract-" in out


def test_bad_input_is_one_line_naming_the_file_and_exit_2(tmp_path, capsys):
    bad, garbage = tmp_path / "bad.json", tmp_path / "garbage.jsonl"
    bad.write_text('[{"role": "user", "content": "hi"}, {"role": "assistant", "content": 5}]')
    garbage.write_text("not a session\n")
    for argv, expected in ((["/no/such/session.jsonl"], "/no/such/session.jsonl"),
                           ([str(bad)], f"{bad}: message 1: content must be"),
                           ([str(garbage)], f"{garbage}: not a Claude Code JSONL"),
                           ([str(write(tmp_path / "s.json", SESSION))], "needs a model")):
        code, out, err = run(capsys, "memory", "--dir", str(tmp_path / "mem"), "extract", *argv)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and expected in err, err
    with pytest.raises(SystemExit) as exited:  # argparse's own one-line usage error
        main(["memory", "--dir", str(tmp_path / "mem"), "extract", str(tmp_path / "s.json"), "--provider", "fake",
              "--scope", "team"])
    assert exited.value.code == 2 and "scope must be" in capsys.readouterr().err


def test_a_failed_chunk_is_named_and_the_others_still_run(tmp_path):
    filler = "A long stretch of working notes about the migration. " * 50
    messages = [user("I always write the migration before the model change."), assistant(filler), user(filler),
                user("I prefer reviews in the morning.")]
    store = MemoryStore(tmp_path / "mem")
    chunks = chunk_dialogue(messages, 2_000)
    replies = [lambda r: memory_operations(r.messages[-1].text)] * len(chunks)
    replies[1] = RateLimited("slow down", retry_after=1)
    result = extract_session(store, Scripted(*replies), messages, max_chars=2_000, run="r1")
    assert len(result.errors) == 1 and result.errors[0].startswith(f"chunk 2/{len(chunks)} (messages ")
    assert "RateLimited" in result.errors[0]
    assert {m.body for m in store.memories()} == {"I always write the migration before the model change.",
                                                  "I prefer reviews in the morning."}
    assert store.undo("r1") == 2 and store.memories() == ()


def test_a_scope_outside_the_view_is_refused_per_memory_with_exit_1(tmp_path, capsys):
    session = write(tmp_path / "s.json", SESSION)
    code, out, err = run(capsys, "memory", "--dir", str(tmp_path / "mem"), "--agent", "a", "extract", str(session),
                         "--provider", "fake", "--scope", "agent:b")
    assert code == 1 and err.count("outside this store's view") == 4 and "nothing written" in out
    code, out, err = run(capsys, "memory", "--dir", str(tmp_path / "mem"), "--agent", "a", "extract", str(session),
                         "--provider", "fake", "--scope", "agent:a")
    assert code == 0, err
    code, out, _ = run(capsys, "memory", "--dir", str(tmp_path / "mem"), "--agent", "b", "list")
    assert out.strip() == "(no memories)"
    code, out, _ = run(capsys, "memory", "--dir", str(tmp_path / "mem"), "list", "--scope", "agent:a")
    assert code == 0 and len(out.strip().splitlines()) == 4


words = st.lists(st.text("abcdefghij", min_size=1, max_size=30), max_size=40).map(" ".join)


@settings(max_examples=40)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), words), max_size=12), st.integers(100, 600))
def test_chunks_hold_everything_said_in_order_and_never_exceed_their_size(turns, size):
    messages = [Message(role=r, content=(Text(text=t),)) for r, t in turns]
    chunks = chunk_dialogue(messages, size)
    assert all(0 < len(c.text) <= size for c in chunks)
    assert [c.start for c in chunks] == sorted(c.start for c in chunks)
    joined = re.sub(r"(user|assistant)( \(continued\))?: ", "", "".join(c.text for c in chunks))
    assert re.sub("[^a-j]", "", joined) == re.sub("[^a-j]", "", "".join(t for _, t in turns))
    for c in chunks:  # message [n] of a chunk's text is its said[n - 1]: what a cited source resolves to
        parts = c.text.split("\n\n")
        assert len(parts) == len(c.said)
        for n, (part, said) in enumerate(zip(parts, c.said, strict=True), 1):
            assert re.fullmatch(rf"\[{n}\] (user|assistant)( \(continued\))?: ", part[: len(part) - len(said)])
            assert part.endswith(said)


@settings(max_examples=80)
@given(st.lists(st.text("abc \n", max_size=500), max_size=12), st.lists(st.integers(-2, 14), max_size=3))
def test_a_source_context_is_the_cited_messages_and_their_nearest_neighbours_within_its_size(texts, cited):
    from lossless.memory.extract import SOURCE_CONTEXT_CHARS, SOURCE_TURNS, source_context
    from lossless.memory.model import one_line

    said = [f"m{i}x {t}" for i, t in enumerate(texts)]  # each message marked, to see which were kept
    out = source_context(said, cited)
    picked = [int(i) for i in re.findall(r"m(\d+)x", out)]
    valid = sorted({i for i in cited if 0 <= i < len(said)})
    near = [j for j in range(len(said)) if any(abs(j - i) <= SOURCE_TURNS for i in valid)]
    assert len(out) <= SOURCE_CONTEXT_CHARS and picked == sorted(set(picked)) and set(picked) <= set(near)
    size = lambda js: sum(len(one_line(said[j])) + 1 for j in js)  # noqa: E731
    if size(valid) <= SOURCE_CONTEXT_CHARS:
        assert set(valid) <= set(picked)
    if size(near) <= SOURCE_CONTEXT_CHARS:
        assert out == " ".join(one_line(said[j]) for j in near)


def test_a_fact_from_the_end_of_a_long_paste_keeps_the_end_of_it():
    from lossless.memory.extract import SOURCE_CONTEXT_CHARS, source_context

    paste = " ".join(f"log line {i} nothing to see" for i in range(400)) + " deploy keys rotate every ninety days"
    out = source_context(["Here is the log:", paste, "Thanks."], [1], "Deploy keys rotate every ninety days")
    assert len(out) <= SOURCE_CONTEXT_CHARS and out.endswith("deploy keys rotate every ninety days")
    assert "log line 399" in out and "log line 0 " not in out
    assert source_context(["x" * 5_000], [0]).startswith("x")  # no fact given: the start


def test_a_memory_keeps_the_dialogue_around_the_message_it_came_from(tmp_path):
    filler = [user(f"Status update {i}: the {word} job finished.") for i, word in enumerate(
        ["nightly", "backup", "lint", "deploy", "report", "cleanup", "mirror", "archive"])]
    messages = [user("We talked about the staging cluster in Frankfurt."), assistant("The Frankfurt one, noted."),
                user("I always deploy on Tuesdays."), assistant("Tuesdays, understood."),
                user("The release train leaves at noon."), *filler]
    store = MemoryStore(tmp_path / "mem")
    result = extract_session(store, FakeProvider(script=[lambda r: memory_operations(r.messages[-1].text)]),
                             messages, run="r1")
    assert result.written == 1
    (memory,) = store.memories()
    context = memory.extra["context"]
    assert context.startswith("We talked about the staging cluster in Frankfurt. The Frankfurt one, noted.")
    assert "I always deploy on Tuesdays." in context and "release train leaves at noon" in context
    assert "Status update" not in context  # three messages on: not its source's neighbourhood
    found = [m.id for m, _ in store.search("Frankfurt staging", 3)]
    assert found == [memory.id]  # found by the words of the conversation it came from


phrase = st.sampled_from(["use tabs", "Use  tabs", "run the linter", "small commits", "", "USE TABS"])
add_op = st.fixed_dictionaries({"op": st.just("add"), "name": phrase, "description": phrase, "body": phrase,
                                "type": st.sampled_from(["user", "feedback", "project", "bogus"])})
other_op = st.fixed_dictionaries({"op": st.sampled_from(["update", "delete", "merge"]),
                                  "id": st.sampled_from(["use-tabs", "stored", "nope"]), "body": phrase})


@settings(max_examples=60)
@given(st.lists(st.one_of(add_op, other_op), max_size=10))
@example([  # two memories come to share a body, one changes it: the other still holds it
    {"op": "add", "name": "use tabs", "description": "use tabs", "body": "use tabs", "type": "user"},
    {"op": "update", "id": "stored", "body": "use tabs"},
    {"op": "update", "id": "stored", "body": "run the linter"},
    {"op": "add", "name": "run the linter", "description": "run the linter", "body": "use tabs", "type": "user"}])
def test_a_plan_never_adds_a_duplicate_nor_touches_an_unknown_memory(ops):
    from lossless.memory import plan_operations
    from lossless.memory.model import Memory

    stored = Memory(id="stored", name="stored", description="small commits", type="user", body="b", created="",
                    updated="")
    plan = plan_operations({"stored": stored}, ops)
    live: dict[str, tuple[str, str]] = {"stored": ("small commits", "b")}

    def norm(text):
        return " ".join(text.split()).lower()

    for p in plan:
        if p.op == "add":
            d, b = norm(p.memory.description), norm(p.memory.body)
            assert p.id not in live
            assert not any((d and d == d2) or (b and b == b2) for d2, b2 in live.values())
            live[p.id] = (d, b)
        elif p.op == "update":
            assert p.id in live
            live[p.id] = (norm(p.memory.description), norm(p.memory.body))
        elif p.op == "delete":
            del live[p.id]
        else:
            assert p.op == "skip" and p.note
