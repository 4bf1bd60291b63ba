"""`lossless chat` driven through a real pseudo-terminal (pexpect), against the fake
Anthropic server with a scripted model doing the seeds' "try it" on a copy of this
repository's ``src/``: read every Python file until the manager compacts on its own, then
``/compact keep the list of files read``, recall a moved file, get killed mid-tool and
``--resume``.  Every request goes through the official SDK and the server's validation."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from chat_kit import SeedsModel, bodies, chat_command, copy_sources, dump, texts
from lossless.testing import FakeServer, Faults

pexpect = pytest.importorskip("pexpect")
pytest.importorskip("anthropic")

WINDOW = 16_000


def spawn(server: FakeServer, *args: str, log: list[str] | None = None, sigint_ignored: bool = False):
    """``lossless chat`` on a pseudo-terminal.  ``sigint_ignored`` starts it with SIGINT ignored,
    as a background job of a script would (an ignored signal survives exec)."""
    exe, argv, env = chat_command(server.base_url, *args)
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    child = pexpect.spawn(exe, argv, env=env, encoding="utf-8", timeout=60, dimensions=(50, 200),
                          preexec_fn=ignore)
    if log is not None:
        class Sink:
            def write(self, s: str) -> None:
                log.append(s)

            def flush(self) -> None:
                pass

        child.logfile_read = Sink()
    return child


def wait_for(predicate, what: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_the_seeds_try_it_compacts_recalls_and_resumes_after_a_kill(tmp_path):
    work = copy_sources(tmp_path)
    model = SeedsModel(work)
    screen: list[str] = []
    with FakeServer(Faults(max_prompt_tokens=WINDOW), responder=model) as server:
        child = spawn(server, str(work), "--window", str(WINDOW), "--no-memory", log=screen)
        child.expect("> ")
        child.sendline("Read every Python file in this directory, one by one.")
        child.expect(r"Read \d+ files; the context was compacted after \d+\.")
        child.expect("> ")
        reading = "".join(screen)

        child.sendline("/compact keep the list of files read")
        child.expect("> ")
        child.sendline("recall the first file you read")
        child.expect(r"Done \(ok\)")
        child.expect("> ")
        before_kill = len(bodies(server))

        child.sendline("run something slow")
        child.expect(r"for this session\? ")
        child.sendline("y")
        wait_for(lambda: len(bodies(server)) > before_kill, "the request that asks for the slow command")
        time.sleep(0.3)  # the command is running
        child.kill(signal.SIGKILL)
        child.expect(pexpect.EOF)
        child.close()
        assert child.signalstatus == signal.SIGKILL
        last_before = bodies(server)[-1]

        resumed = spawn(server, str(work), "--window", str(WINDOW), "--no-memory", "--resume", log=screen)
        resumed.expect(r"resumed \S+ as \S+: \d+ messages")
        resumed.expect("> ")
        resumed.sendline("continue where we were")
        resumed.expect("Noted: continue where we were")
        resumed.expect("> ")
        resumed.sendline("/exit")
        resumed.expect(pexpect.EOF)
        resumed.close()
        assert resumed.exitstatus == 0
        requests = list(server.requests)
        statuses = list(server.statuses)
        assert not server.errors

    # Every request the server got (the loop's, the summaries') was valid and under the window.
    assert requests and all(s == 200 for s in statuses), [s for s in statuses if s != 200]
    assert all(r.body.get("max_tokens", 0) < WINDOW for r in requests)

    # The state in view: the warning state was shown before the first auto-compaction fired.
    first_compaction = reading.index("↳ snip:")
    assert "· warning]" in reading[:first_compaction]
    assert model.compacted_at is not None and model.compacted_at < len(model.read)

    # /compact with instructions: the summary request carried them and named every file read.
    summary_requests = [r.body for r in requests if any(
        "keep the list of files read" in t for t in texts(r.body["messages"][-1]))]
    assert len(summary_requests) == 1
    asked = dump(summary_requests[0])
    missing = [p for p in model.read if p not in asked]
    assert not missing, f"the /compact summary request does not name {missing}"
    after_compact = next(b for b in bodies(server) if any("recall the first file" in t for m in b["messages"]
                                                          for t in texts(m)))
    summary = texts(after_compact["messages"][0])[0]
    assert summary.startswith("<lossless-summary")
    assert all(p in dump(after_compact) for p in model.read), [p for p in model.read if p not in dump(after_compact)]

    # recall brought back the file's original text, byte for byte.
    path, handle = model.recalled
    answered = next(b for b in bodies(server) if any(
        r.get("type") == "tool_result" for r in b["messages"][-1]["content"] if isinstance(r, dict))
        and handle in dump(b["messages"][-2]))
    result = answered["messages"][-1]["content"][0]
    assert result["content"] == (work / path).read_text()

    # --resume after SIGKILL: the same history, then the killed call's "interrupted" result.
    after = next(b for b in bodies(server) if any("continue where we were" in t for t in texts(b["messages"][-1])))
    n = len(last_before["messages"])
    assert unmarked(after["messages"][:n]) == unmarked(last_before["messages"])  # the breakpoint moves on
    assert after["system"] == last_before["system"] and after["tools"] == last_before["tools"]
    call = after["messages"][n]["content"][-1]
    assert call["type"] == "tool_use" and call["name"] == "bash"
    reply = after["messages"][n + 1]["content"][0]
    assert reply["tool_use_id"] == call["id"] and reply.get("is_error") and "interrupted" in str(reply["content"])


def test_confirmation_refused_and_ctrl_c_on_a_tool_a_model_call_and_the_prompt(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    model = SeedsModel(work)
    with FakeServer(responder=model) as server:
        # Started with SIGINT ignored, as a background job of a script would be: Ctrl-C must work
        # all the same (the chat restores it; seen failing when the suite ran in the background).
        child = spawn(server, str(work), "--window", str(WINDOW), "--no-memory", sigint_ignored=True)
        child.expect("> ")
        # n → the model is told the user refused, and nothing is written.
        child.sendline("write a note")
        child.expect(r"allow: write notes.txt .*for this session\? ")
        child.sendline("n")
        child.expect(r"Done \(error\): error: refused by the user")
        child.expect("> ")
        assert not (work / "notes.txt").exists()

        # Ctrl-C while a tool runs: its process group is killed, the call gets "interrupted".
        marker = f"chat-test-{time.time_ns()}"
        model.slow_command = f"sleep 30; echo {marker}"
        child.sendline("run something slow")
        child.expect(r"for this session\? ")
        child.sendline("a")
        wait_for(lambda: _running(marker), "the slow command to start")
        time.sleep(0.3)  # settle: the chat is waiting on the command, past starting it
        child.sendcontrol("c")
        child.expect("interrupted: the tool was stopped")
        child.expect("> ")
        wait_for(lambda: not _running(marker), "the slow command's processes to go", timeout=10)

        # Ctrl-C while the model is thinking: the call is abandoned, the session goes on.
        server.set_faults(slow=30)
        n = len(server.requests)
        child.sendline("this one will be interrupted")
        wait_for(lambda: len(server.requests) > n, "the slow request")
        child.sendcontrol("c")
        child.expect("interrupted: the model call was abandoned")
        child.expect("> ")
        server.set_faults()
        child.sendline("and this one answered")
        child.expect("Noted: and this one answered")
        child.expect("> ")

        # At the prompt: a first Ctrl-C explains, a second leaves with 130.
        child.sendcontrol("c")
        child.expect("Ctrl-C again to leave")
        child.sendcontrol("c")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 130

    last = bodies(server)[-1]["messages"]
    interrupted = [b for m in last if isinstance(m["content"], list) for b in m["content"]
                   if b.get("type") == "tool_result" and "interrupted by the user" in str(b.get("content"))]
    assert len(interrupted) == 1 and interrupted[0]["is_error"]
    # The abandoned request's question stays in the history, then the next one.
    said = [t for m in last if m["role"] == "user" for t in texts(m)]
    assert said.index("this one will be interrupted") < said.index("and this one answered")


def unmarked(messages: list) -> list:
    """The messages without their prompt-cache breakpoints (each request marks its last message)."""
    return [{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
            if isinstance(m["content"], list) else m for m in messages]


def _running(marker: str) -> bool:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                return True
        except OSError:
            continue
    return False


def test_print_mode_answers_once_and_refuses_what_needs_confirmation(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    with FakeServer(responder=SeedsModel(work)) as server:
        exe, argv, env = chat_command(server.base_url, str(work), "--window", str(WINDOW), "--no-memory")
        done = subprocess.run([exe, *argv, "-p", "say hello"], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "Noted: say hello"
        assert "context" in done.stderr  # the status line goes to stderr, stdout is the answer alone

        refused = subprocess.run([exe, *argv, "-p", "write a note"], env=env, capture_output=True, text=True,
                                 timeout=60, stdin=subprocess.DEVNULL)
        assert refused.returncode == 0, refused.stderr
        assert re.search(r"Done \(error\): error: not run: this change needs the user's confirmation", refused.stdout)
        assert not (work / "notes.txt").exists()

        unknown = subprocess.run([exe, *argv[:-4], "--model", "some-local-model", "-p", "x"], env=env,
                                 capture_output=True, text=True, timeout=60)
        warning = [line for line in unknown.stderr.splitlines() if "pass --window" in line]
        assert unknown.returncode == 0 and len(warning) == 1 and warning[0].startswith("lossless: warning:")


def test_the_committed_recording_matches_a_fresh_scripted_run():
    import importlib.util

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location("make_chat_recording", ROOT / "docs" / "make_chat_recording.py")
    assert spec is not None and spec.loader is not None
    recording = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recording)
    text = recording.record()
    stale = "out of date: run `python docs/make_chat_recording.py` and commit docs/chat.txt and docs/chat.svg"
    assert (ROOT / "docs" / "chat.txt").read_text() == text, stale
    assert (ROOT / "docs" / "chat.svg").read_text() == recording.svg(text), stale
    assert "· warning]" in text and "↳ snip:" in text and "Recalled from its handle, byte for byte" in text
    # What the scripted model says is true of the session it played: the file it recalls is the
    # one asked about, and it says it compacted when a stage did.
    asked = text.split("> What did inventory/family_03.py say, exactly?", 1)[1].split("\n> ", 1)[0]
    assert '"""Family 3: the steps that take family-3 parts out of stock."""' in asked
    assert ("compacted it" in text) == ("↳ snip:" in text.split("## What `inventory` does", 1)[0])
