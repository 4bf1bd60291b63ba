"""`lossless chat`'s parts without a terminal: the tools' safety, the model limits, resume's
rebuild, and memory across sessions (two ``-p`` runs against the fake server)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from chat_kit import chat_command, is_main, texts
from lossless.chat.agent import Chat, Settings
from lossless.chat.models import model_limits, model_price
from lossless.chat.resume import rebuild, write_pending
from lossless.chat.terminal import Confirmation, Terminal
from lossless.chat.tools import Toolbox, ToolFailure, Workspace
from lossless.errors import ConfigError
from lossless.messages import Message, Text, ToolUse
from lossless.providers.base import Response
from lossless.testing import FakeProvider, FakeServer


def box(root: Path, *, allow: tuple[Path, ...] = (), confirm=lambda kind, what: True, timeout: float = 120.0):
    return Toolbox(Workspace(root.resolve(), tuple(a.resolve() for a in allow)), confirm, shell_timeout=timeout)


def test_paths_are_confined_to_the_working_directory_symlinks_resolved(tmp_path):
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret\n")
    (work / "link").symlink_to(outside)
    tools = box(work)
    for path in ("../outside/secret.txt", str(outside / "secret.txt"), "link/secret.txt"):
        text, is_error = tools.run("read_file", {"path": path})
        assert is_error and "outside the working directory" in text and "s3cret" not in text
    text, is_error = tools.run("write_file", {"path": "link/new.txt", "content": "x"})
    assert is_error and not (outside / "new.txt").exists()
    assert tools.run("grep", {"pattern": "s3cret"}) == ("no matches", False)
    allowed = box(work, allow=(outside,))
    assert allowed.run("read_file", {"path": "link/secret.txt"}) == ("s3cret\n", False)


def test_read_returns_the_file_exactly_or_a_named_range(tmp_path):
    (tmp_path / "f.py").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    tools = box(tmp_path)
    assert tools.run("read_file", {"path": "f.py"}) == ((tmp_path / "f.py").read_text(), False)
    text, is_error = tools.run("read_file", {"path": "f.py", "offset": 3, "limit": 2})
    assert not is_error and text == "[f.py: lines 3–4 of 10]\nline 3\nline 4\n"
    text, is_error = tools.run("read_file", {"path": "f.py", "offset": 40})
    assert is_error and "past the end" in text
    assert tools.run("read_file", {"path": "nope.py"})[1]


def test_edit_refuses_no_match_and_several_saying_how_many_and_where(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("x = 1\ny = 2\nx = 1\n")
    tools = box(tmp_path)
    text, is_error = tools.run("edit_file", {"path": "a.py", "old_string": "x = 1", "new_string": "x = 3"})
    assert is_error and "occurs 2 times" in text and "lines 1, 3" in text
    text, is_error = tools.run("edit_file", {"path": "a.py", "old_string": "z = 9", "new_string": ""})
    assert is_error and "not found" in text
    assert f.read_text() == "x = 1\ny = 2\nx = 1\n"
    text, is_error = tools.run("edit_file", {"path": "a.py", "old_string": "y = 2\nx = 1", "new_string": "y = 5"})
    assert not is_error and "line 2" in text and f.read_text() == "x = 1\ny = 5\n"


def test_refused_confirmation_changes_nothing_and_says_so(tmp_path):
    tools = box(tmp_path, confirm=lambda kind, what: False)
    text, is_error = tools.run("write_file", {"path": "n.txt", "content": "hi"})
    assert is_error and "refused by the user" in text and not (tmp_path / "n.txt").exists()
    text, is_error = tools.run("bash", {"command": "touch made"})
    assert is_error and "refused by the user" in text and not (tmp_path / "made").exists()
    asked = Confirmation(Terminal(interactive=False), interactive=False)
    with pytest.raises(ToolFailure, match="--yes"):
        asked("shell", "ls")


def test_a_shell_timeout_kills_the_whole_process_group(tmp_path):
    marker = f"chat-unit-{time.time_ns()}"
    tools = box(tmp_path, timeout=1)
    text, is_error = tools.run("bash", {"command": f"(sleep 30; echo {marker}) & sleep 30; echo {marker}"})
    assert is_error and text.startswith("error: timed out after 1 s")
    time.sleep(0.2)
    alive = [p for p in Path("/proc").glob("[0-9]*/cmdline") if _reads(p, marker)]
    assert not alive
    assert tools.run("bash", {"command": "echo hi; exit 3"}) == ("error: exit status 3\nhi\n", True)


def _reads(path: Path, marker: str) -> bool:
    try:
        return marker.encode() in path.read_bytes()
    except OSError:
        return False


def test_model_limits_known_families_overrides_and_unknown_models():
    assert model_limits("claude-sonnet-4-5-20250929").window == 200_000
    assert model_limits("gpt-4o-mini").window == 128_000
    small = model_limits("claude-sonnet-4-5", window=16_000)
    assert small.window == 16_000 and small.max_output == 4_000
    assert model_limits("qwen3:8b", window=32_768, max_output=2_000).max_output == 2_000
    said: list[str] = []  # an unknown model: the default window, said once (lossless.modelinfo)
    assert model_limits("qwen3:8b-chat-test", warn=said.append).window == 128_000 and "--window" in said[0]
    with pytest.raises(ConfigError, match="below the window"):
        model_limits("claude-sonnet-4-5", window=8_000, max_output=9_000)
    assert model_price("claude-sonnet-4-5").input == 3.0 and model_price("my-model") is None


def _settings(tmp_path: Path, **kw) -> Settings:
    return Settings(workdir=tmp_path, store=tmp_path / ".lossless", provider="fake", model=None, window=32_000,
                    max_output=4_000, memory=False, yes=True, interactive=False, **kw)


def test_resume_rebuilds_the_answer_the_transcript_lacks_and_ignores_a_stale_journal(tmp_path):
    (tmp_path / "a.py").write_text("print('a')\n")
    use = ToolUse(id="toolu_1", name="read_file", input={"path": "a.py"})
    fake = FakeProvider([Response(content=(Text(text="reading"), use), stop_reason="tool_use"), "It prints a."])
    chat = Chat(_settings(tmp_path), fake, Terminal(interactive=False))
    assert chat.turn("what does a.py print?") == "It prints a."
    sid, store = chat.session_id, tmp_path / ".lossless"
    chat.close()
    history, notes = rebuild(store, sid)
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"] and not notes
    assert history[-1].text == "It prints a." and history[2].tool_results[0].content == "print('a')\n"

    # Killed while a tool ran: the journal holds the call, the rebuilt history answers it.
    call = Message(role="assistant", content=(ToolUse(id="toolu_2", name="bash", input={"command": "sleep 9"}),))
    write_pending(store, sid, chat.cm.transcript.last_uuid, [*history[-1:], Message(role="user", content=(
        Text(text="again"),)), call])
    again, notes = rebuild(store, sid)
    assert again[-1].tool_results[0].tool_use_id == "toolu_2" and again[-1].tool_results[0].is_error
    assert notes and "interrupted" in notes[0]

    # A journal written before the transcript's last entry is stale: not replayed twice.
    write_pending(store, sid, "some-older-entry", [call])
    stale, _ = rebuild(store, sid)
    assert [m.role for m in stale] == ["user", "assistant", "user"]


def test_memory_proposed_at_the_end_of_a_turn_is_recalled_in_the_next_session(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    extraction = {"operations": [{"op": "add", "name": "indent with tabs", "type": "user",
                                  "description": "The user indents Python with tabs, never spaces",
                                  "body": "Indent Python code with tabs, never spaces."}]}

    def responder(api, body):
        system = body.get("system") or ""
        if isinstance(system, str) and system.startswith("You maintain an agent's long-term memory"):
            return json.dumps(extraction) if "tabs" in json.dumps(body) else '{"operations": []}'
        if is_main(body):
            return "Understood."
        return None

    with FakeServer(responder=responder) as server:
        exe, argv, env = chat_command(server.base_url, str(work), "--window", "16000")
        first = subprocess.run([exe, *argv, "-p", "From now on: I always indent Python with tabs, never spaces."],
                               env=env, capture_output=True, text=True, timeout=60)
        assert first.returncode == 0, first.stderr
        assert "memory: saved indent-with-tabs" in first.stderr
        n = len(server.requests)
        second = subprocess.run([exe, *argv, "-p", "How should I indent this Python module: tabs or spaces?"],
                                env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 0, second.stderr
        asked = [r.body for r in server.requests[n:] if is_main(r.body)][0]
        assert "indents Python with tabs" in json.dumps(asked["system"])  # the index, in the system prompt
        assert any("Indent Python code with tabs" in t for t in texts(asked["messages"][-1]))  # the memory itself
        n = len(server.requests)
        off = subprocess.run([exe, *argv, "--no-memory", "-p", "Tabs or spaces?"], env=env,
                             capture_output=True, text=True, timeout=60)
        assert off.returncode == 0, off.stderr
        bodies = [r.body for r in server.requests[n:]]
        assert len(bodies) == 1 and "tabs" not in json.dumps(bodies[0]["system"])
    assert (work / ".lossless" / "memory" / "indent-with-tabs.md").exists()


def test_an_openai_compatible_server_through_the_openai_sdk(tmp_path):
    pytest.importorskip("openai")
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.py").write_text("A = 1\n")

    def responder(api, body):
        assert api == "openai"
        last = body["messages"][-1]
        if last["role"] == "tool":
            return f"Found: {last['content']}"
        if last["role"] == "user" and "list" in str(last["content"]):
            return [{"type": "tool_use", "id": "call_1", "name": "glob", "input": {"pattern": "*.py"}}]
        return None

    with FakeServer(responder=responder) as server:
        exe, argv, env = chat_command(server.base_url, str(work), "--window", "16000", "--no-memory")
        argv[argv.index("--provider") + 1] = "openai"
        argv[argv.index("--base-url") + 1] = server.openai_base_url
        argv[argv.index("--model") + 1] = "qwen3:8b"
        done = subprocess.run([exe, *argv, "-p", "list the Python files"], env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "Found: a.py"
        assert all(s == 200 for s in server.statuses)


def test_a_large_shell_output_is_persisted_by_the_pipeline_and_recallable(tmp_path):
    from lossless.markers import PERSISTED_OPEN
    from lossless.messages import result_text

    use = ToolUse(id="toolu_big", name="bash", input={"command": "seq 1 20000"})
    fake = FakeProvider([Response(content=(use,), stop_reason="tool_use")], default="20000 lines.")
    chat = Chat(_settings(tmp_path), fake, Terminal(interactive=False))
    assert chat.turn("count to 20000") == "20000 lines."
    sent = fake.requests[-1].messages[-1].tool_results[0]
    text = result_text(sent)
    assert text.startswith(PERSISTED_OPEN) and len(text) < 5_000
    handle = text.split('handle="')[1].split('"')[0]
    assert chat.cm.store.get(handle) == "".join(f"{i}\n" for i in range(1, 20001))
    chat.close()


def test_slash_commands_over_a_terminal_on_plain_streams(tmp_path):
    import io

    from lossless.chat.app import App

    settings = Settings(workdir=tmp_path, store=tmp_path / ".lossless", provider="fake", model=None,
                        window=32_000, max_output=4_000, memory=True, yes=False, interactive=True)
    first = App(settings, FakeProvider(), Terminal(interactive=True, out=io.StringIO(),
                                                   inp=io.StringIO("hello there\n/exit\n")))
    assert first.run() == 0
    old = first.chat.session_id
    lines = ("/help", "/memory", "/memory search tabs", "/memory forget nope", "/recall", "/recall sha256:" + "0" * 24,
             "/context", "/cost", "/nonsense", "/clear", "/resume", f"/resume {old}", "/resume ../x", "/exit")
    out = io.StringIO()
    app = App(settings, FakeProvider(), Terminal(interactive=True, out=out, inp=io.StringIO("\n".join(lines) + "\n")))
    assert app.run() == 0
    screen = out.getvalue()
    for expected in ("/compact [instructions]", "no memories in", "no memory matches", "/memory: no memory 'nope'",
                     "usage: /recall HANDLE", "error: no artifact", "tokens of a 32,000-token window in use",
                     "model calls", "unknown command /nonsense", "new conversation", old,
                     f"resumed {old} as", "2 messages", "is not a session id"):
        assert expected in screen, expected
    assert app.chat.history[0].text == "hello there" and app.chat.session_id != old


def test_a_chat_request_marks_its_tools_system_and_newest_message_for_the_prompt_cache(tmp_path):
    """The chat places its prompt-cache marks with the library's ``with_breakpoints``: the last tool
    definition, the system prompt and the newest message, never more than the API's four."""
    work = tmp_path / "w"
    work.mkdir()
    with FakeServer(responder=lambda api, body: "Hello." if is_main(body) else None) as server:
        exe, argv, env = chat_command(server.base_url, str(work), "--window", "16000", "--no-memory")
        done = subprocess.run([exe, *argv, "-p", "Say hello."], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        body = next(r.body for r in server.requests if is_main(r.body))
    marked = [t for t in body["tools"] if "cache_control" in t]
    assert marked == [body["tools"][-1]]
    assert [b for b in body["system"] if "cache_control" in b] == [body["system"][-1]]
    newest = body["messages"][-1]["content"]
    assert isinstance(newest, list) and "cache_control" in newest[-1]
    total = len(marked) + sum("cache_control" in b for b in body["system"]) + sum(
        "cache_control" in b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"])
    assert total <= 4


def test_resume_skips_a_session_that_never_got_a_message(tmp_path):
    """A run refused before its first message (`-p ""`) leaves a session folder with no transcript;
    `--resume` continues the latest session that has something, not that one, and resuming that one
    by id says why in one line (it was the library's 'the request has no messages')."""
    from lossless.chat.resume import latest_session, write_info

    chat = Chat(_settings(tmp_path), FakeProvider(["It prints a."]), Terminal(interactive=False))
    assert chat.turn("what does a.py print?") == "It prints a."
    real, store = chat.session_id, tmp_path / ".lossless"
    chat.close()
    time.sleep(0.01)
    write_info(store, "empty-one", {"workdir": str(tmp_path), "provider": "fake", "model": "m"})
    assert latest_session(store, tmp_path) == real
    import sys

    proc = subprocess.run([sys.executable, "-m", "lossless.cli", "chat", "--provider", "fake", "--resume", "empty-one",
                           "-p", "go on"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "session empty-one has no messages yet" in proc.stderr
    assert proc.stderr.count("\n") == 1
