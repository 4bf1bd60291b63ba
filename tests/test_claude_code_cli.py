"""The real Claude Code CLI (npm ``@anthropic-ai/claude-code``) against lossless's fake
server: directly, through the proxy that compacts its context, through ``lossless
wrap`` (headless and at a pseudo-terminal), and through ``lossless proxy`` by hand.

The package is installed once per test session into a cache directory
(``$LOSSLESS_TEST_CACHE`` or ``~/.cache/lossless-tests``); the tests skip, saying
why, only when that install fails (no node/npm, no registry).  The fake plays the
model through its responder, so tool ids and file paths can be per run
(``claude_code_kit`` has the helpers).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Mapping

import pytest

from claude_code_kit import (FLAGS, PACKAGE, Script, Terminal, claude_env, install_claude_code, last_result_ids,
                             run_claude, thinking, tool_results, tool_use)
from claude_code_kit import cache_dir as _cache_dir  # the name tests/test_mcp_claude_code.py reaches for
from lossless.dialects.anthropic import from_anthropic
from lossless.dialects.claude_code import read_session
from lossless.rounds import validate
from lossless.testing import FakeServer, Faults, wire


@pytest.fixture(scope="session")
def claude() -> Path:
    binary, why = install_claude_code(_cache_dir())
    if binary is None:
        pytest.skip(f"Claude Code CLI unavailable: {why}")
    return binary


# -- Claude Code against the fake, directly -------------------------------------------------
@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("".join(f"note {i}: the quick brown fox\n" for i in range(1, 301)))
    return root


def test_claude_code_reads_and_runs_what_the_fake_asks_and_finishes(claude, project, tmp_path):
    notes = project / "notes.txt"
    script = Script(
        lambda body: [thinking("Look at the notes first."), {"type": "text", "text": "Reading the notes."},
                      tool_use(1, "Read", file_path=str(notes))],
        lambda body: [thinking("Count them with the shell."),
                      tool_use(2, "Bash", command=f"wc -l {notes.name}", description="Count lines")],
        lambda body: [{"type": "text", "text": "The notes have 300 lines. FINAL"}],
    )
    with FakeServer(responder=script) as srv:
        run = run_claude(claude, srv.base_url, project, tmp_path / "home", "How long are the notes?",
                         "--model", "claude-sonnet-4-5")
        requests, statuses, errors = srv.requests, srv.statuses, srv.errors
    assert errors == []
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    assert run.result["result"] == "The notes have 300 lines. FINAL" and run.result["num_turns"] == 3
    assert all(status == 200 for status in statuses), list(zip([r.path for r in requests], statuses))
    posts = [r for r in requests if r.method == "POST"]
    assert {r.path for r in posts} == {"/v1/messages"} and {r.query for r in posts} == {"beta=true"}
    assert all(r.headers["x-api-key"] == "test" and "claude-code" in r.headers["anthropic-beta"] for r in posts)
    first, *_, last = [r for r in posts if r.body.get("tools")]
    assert {t["name"] for t in first.body["tools"]} == {"Read", "Bash"}
    assert first.body["stream"] is True and first.body["thinking"]["type"] in ("enabled", "adaptive")
    results = tool_results(last.body)
    assert "note 300: the quick brown fox" in results["toolu_01_read"]
    assert results["toolu_02_bash"].strip().startswith("300")
    validate(from_anthropic(last.body["messages"]))
    sent_back = [b for m in last.body["messages"] if m["role"] == "assistant" for b in m["content"]]
    assert [b["type"] for b in sent_back if b["type"] == "thinking"] == ["thinking", "thinking"]
    (log,) = run.transcripts()  # Claude Code's own session log reads back as a valid conversation
    messages = read_session(log).messages
    validate(messages)
    assert any(getattr(b, "name", None) == "Bash" for m in messages for b in m.content)


# -- Claude Code → the proxy → the fake: compaction and recall inside the proxy ---------------
HANDLE = re.compile(r"sha256:[0-9a-f]{8,24}")
FILES = 8
WINDOW = 30_000
MAX_OUTPUT = 4_096  # Claude Code asks for 32k by default; a small window needs room for the prompt


def _file_text(n: int) -> str:
    """A module-sized file whose every line names it, so any page of it is recognisable."""
    return "".join(f"# file{n}.py line {i}: value_{n}_{i} = compute({i}, {n})  # padding padding padding\n"
                   for i in range(1, 181))


class Session:
    """Plays a model that reads ``FILES`` files and runs a command on each, then answers.

    The step is read from the last tool_result's id (``toolu_<step>_<tool>``): the tail
    of a request is verbatim however the proxy compacted what came before.  Once a
    request carries a handle and offers ``recall`` (after step ``RECALL_FROM``), one
    answer is a ``recall`` of that handle instead; the proxy must answer it and call
    again, with the same step still to play.  With ``pause_at`` the model stops there
    with a text answer, and the user's next message (no tool result) resumes it."""

    RECALL_FROM = 6

    def __init__(self, project: Path, *, pause_at: int | None = None, recall: bool = True) -> None:
        self.project = project
        self.pause_at = pause_at
        self.resume = 0
        self.recall: dict[str, Any] = {} if recall else {"off": True}
        self.lock = threading.Lock()

    def step(self, n: int) -> list[dict[str, Any]]:
        if n >= 2 * FILES:
            return [{"type": "text", "text": "Read all the files and counted their lines. FINAL"}]
        if n == self.pause_at and self.resume != n:
            self.resume = n
            return [thinking("Half way."), {"type": "text", "text": "Half of the files are read. PAUSE"}]
        k = n // 2 + 1
        if n % 2 == 0:
            return [thinking(f"Read file {k}."), tool_use(n, "Read", file_path=str(self.project / f"file{k}.py"))]
        return [thinking(f"Count file {k}."), {"type": "text", "text": f"Counting file{k}.py."},
                tool_use(n, "Bash", command=f"cat file{k}.py | grep -c value_", description="Count values")]

    def __call__(self, api: str, body: dict[str, Any]) -> list[dict[str, Any]] | None:
        if not any(t.get("name") == "Read" for t in body.get("tools") or []):
            return None  # a side call: the default answer
        ids = last_result_ids(body)
        step = int(ids[-1].split("_")[1]) + (0 if ids[-1].endswith("_recall") else 1) if ids else self.resume
        with self.lock:
            offers_recall = any(t.get("name") == "recall" for t in body.get("tools") or [])
            handles = HANDLE.findall(json.dumps(body["messages"]))
            if not self.recall and step >= self.RECALL_FROM and offers_recall and handles:
                self.recall = {"handle": handles[0], "step": step}
                return [thinking("Look back at what was moved out."), tool_use(step, "recall", handle=handles[0])]
        return self.step(step)


def upstream_tokens(body: Mapping[str, Any]) -> int:
    """The prompt's size as the upstream counts it (the fake's tokenizer: what it reports
    as usage, which the proxy calibrates against, and what its size limit applies to)."""
    return wire.measure("anthropic", body, set())[0].total


@pytest.fixture
def big_project(tmp_path) -> Path:
    root = tmp_path / "big"
    root.mkdir()
    for n in range(1, FILES + 1):
        (root / f"file{n}.py").write_text(_file_text(n))
    return root


@pytest.mark.parametrize("model_flags", [("--model", "claude-sonnet-4-5"), ()], ids=["sonnet-thinking", "default"])
def test_claude_code_through_the_proxy_compacts_recalls_and_finishes(claude, big_project, tmp_path, model_flags):
    """Sonnet runs with thinking ``enabled`` (its tool loops must keep their thinking);
    the default model with adaptive thinking, effort and the 1M-context beta."""
    from lossless.proxy import ProxyServer, ProxySettings

    model = Session(big_project)
    limit = Faults(max_prompt_tokens=WINDOW - MAX_OUTPUT)  # the upstream refuses what would not fit
    with FakeServer(limit, responder=model) as srv:
        settings = ProxySettings(upstream=srv.base_url, window=WINDOW, store=str(tmp_path / "store"))
        with ProxyServer(settings) as proxy:
            run = run_claude(claude, proxy.base_url, big_project, tmp_path / "home",
                             "Read every file and count its values.", *model_flags,
                             env={"CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(MAX_OUTPUT)})
            stats = proxy.stats()
        requests, statuses, errors = srv.requests, srv.statuses, srv.errors
    assert errors == []
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    assert run.result["result"] == "Read all the files and counted their lines. FINAL"
    # Every request the upstream received was valid and fitted: none was refused.
    posted = [(r, s) for r, s in zip(requests, statuses) if r.method == "POST"]
    assert all(s == 200 for _, s in posted), [(r.path, s) for r, s in posted if s != 200]
    main = [r for r, _ in posted if r.path == "/v1/messages" and any(t["name"] == "Read" for t in r.body["tools"])]
    assert len(main) >= 2 * FILES + 2  # every step, plus the proxy's continuation after the recall
    for r in main:
        validate(from_anthropic(r.body["messages"]))
        assert r.body["max_tokens"] == MAX_OUTPUT and upstream_tokens(r.body) + MAX_OUTPUT <= WINDOW
    # The proxy compacted (what Claude Code sent last would not have fitted): stages fired, handles went out.
    (conversation,) = stats["conversations"]
    assert conversation["tokens"]["before"] > WINDOW > conversation["tokens"]["after"] + MAX_OUTPUT
    assert conversation["stages"] and sum(conversation["stages"].values()) >= 2, conversation
    assert conversation["handles"] > 0 and conversation["tokens"]["after"] < conversation["tokens"]["before"]
    assert any(HANDLE.search(json.dumps(r.body["messages"])) for r in main)
    # A recall round-trip happened inside the proxy: the model's recall was answered with the original …
    assert model.recall, "the model never saw a handle and a recall tool together"
    assert conversation["recall_round_trips"] == 1
    handle, step = model.recall["handle"], model.recall["step"]
    recall_id = f"toolu_{step:02d}_recall"
    (after,) = [r for r in main if recall_id in last_result_ids(r.body)]
    assert after.body["messages"][-2]["content"][-1] == tool_use(step, "recall", handle=handle)
    assert re.search(r"# file\d\.py line \d+: value_\d_\d+ = compute", tool_results(after.body)[recall_id])
    # … and Claude Code never saw a recall tool: not in its answer, not in its own session log.
    assert "recall" not in run.proc.stdout
    logs = run.transcripts()
    assert logs
    for log in logs:
        text = log.read_text()
        assert "toolu_01_bash" in text and "recall" not in text and handle not in text


def test_lossless_wrap_claude_runs_claude_code_through_the_proxy(claude, project, tmp_path):
    """What README.md and docs/claude-code.md tell a user to type, with the fake as the upstream."""
    script = Script(
        lambda body: [thinking("Read it."), tool_use(1, "Read", file_path=str(project / "notes.txt"))],
        lambda body: [thinking("Done."), {"type": "text", "text": "Read through lossless. FINAL"}],
    )
    home = tmp_path / "home"
    home.mkdir()
    env = {**claude_env("http://127.0.0.1:9", home),  # wrap must replace this base URL with its proxy's
           "PATH": f"{claude.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    with FakeServer(responder=script) as srv:
        proc = subprocess.run([sys.executable, "-m", "lossless.cli", "wrap", "--upstream", srv.base_url,
                               "--window", "64000", "--store", str(tmp_path / "store"), "claude", "-p",
                               "Read the notes.", *FLAGS, "--model", "claude-sonnet-4-5"],
                              env=env, cwd=project, capture_output=True, text=True, timeout=90,
                              stdin=subprocess.DEVNULL)
        posted = [r for r in srv.requests if r.method == "POST"]
        statuses = srv.statuses
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["result"] == "Read through lossless. FINAL"
    assert len(posted) == 2 and all(r.headers["user-agent"].startswith("claude-cli/") for r in posted)
    assert all(s == 200 for s in statuses)
    assert "note 300: the quick brown fox" in tool_results(posted[-1].body)["toolu_01_read"]
    assert any((tmp_path / "store").rglob("transcript.jsonl"))


# -- the installer's failure reasons (what the skip says) ------------------------------------
def test_install_failure_is_a_reason_not_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert install_claude_code(tmp_path / "a") == (None, "npm is not installed (Claude Code comes from the npm "
                                                         "registry)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text("#!/bin/sh\necho 'npm error code ENOTFOUND' >&2\nexit 1\n")
    npm.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    binary, why = install_claude_code(tmp_path / "b")
    assert binary is None and why == f"npm install {PACKAGE} failed: npm error code ENOTFOUND"
    assert not (tmp_path / "b").exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith("claude")] == []


# -- interactive: the terminal user interface through `lossless wrap claude` ------------------
def test_interactive_claude_code_under_lossless_wrap(claude, project, tmp_path):
    """A user at a terminal: ``lossless wrap claude``, a question, the answer on screen,
    ``/exit``, exit code 0 — the session title side call answered as the JSON it asks for."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude.json").write_text(json.dumps({  # a user past the first-run dialogs, who trusts this folder
        "hasCompletedOnboarding": True, "theme": "dark", "projects": {str(project): {"hasTrustDialogAccepted": True}},
        "customApiKeyResponses": {"approved": ["test"], "rejected": []}}))
    script = Script(lambda body: [thinking("Greet."), {"type": "text", "text": "Hello from behind lossless."}])
    env = {**claude_env("http://127.0.0.1:9", home), "TERM": "xterm-256color",
           "PATH": f"{claude.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    with FakeServer(responder=script) as srv:
        terminal = Terminal([sys.executable, "-m", "lossless.cli", "wrap", "--upstream", srv.base_url, "--store",
                             str(tmp_path / "store"), "claude", "--tools", "Read,Bash"], env, project)
        try:
            terminal.wait_for("for shortcuts")  # the prompt is ready
            terminal.type("hello there")
            terminal.wait_for("hello there")
            terminal.type("\r")
            terminal.wait_for("Hello from behind lossless.")
            terminal.type("/exit")
            terminal.wait_for("/exit")
            terminal.type("\r")
            code = terminal.close()
        finally:
            terminal.kill()  # a failed wait does not leave Claude Code running
        posted, statuses = [r for r in srv.requests if r.method == "POST"], srv.statuses
    assert code == 0, terminal.screen()[-1500:]
    assert all(s == 200 for s in statuses)
    titles = [r for r in posted if not r.body.get("tools")]
    assert titles and titles[0].body["output_config"]["format"]["type"] == "json_schema"
    assert any(r.body.get("tools") and r.body["messages"][-1]["content"][-1]["text"].endswith("hello there")
               for r in posted)


def test_the_manual_setup_lossless_proxy_then_export(claude, project, tmp_path):
    """docs/claude-code.md's other way: ``lossless proxy`` in one terminal, the printed export in another."""
    import signal

    script = Script(lambda body: [thinking("Answer."), {"type": "text", "text": "Via the exported URL. FINAL"}])
    with FakeServer(responder=script) as srv:
        proxy = subprocess.Popen([sys.executable, "-m", "lossless.cli", "proxy", "--port", "0", "--upstream",
                                  srv.base_url, "--store", str(tmp_path / "store")],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        try:
            exports = {}
            while not {"ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"} <= exports.keys():
                line = proxy.stdout.readline()
                assert line, f"lossless proxy printed no exports (exit {proxy.poll()})"
                if line.startswith("export "):
                    name, _, value = line[len("export "):].strip().partition("=")
                    exports[name] = value
            run = run_claude(claude, exports["ANTHROPIC_BASE_URL"], project, tmp_path / "home", "Hi.",
                             "--model", "claude-sonnet-4-5")
        finally:
            proxy.send_signal(signal.SIGTERM)
            proxy.communicate(timeout=30)  # reads what is left and closes the pipes
            code = proxy.returncode
        posted = [r for r in srv.requests if r.method == "POST"]
    assert run.proc.returncode == 0 and run.result["result"] == "Via the exported URL. FINAL"
    assert code == 0 and exports["OPENAI_BASE_URL"] == exports["ANTHROPIC_BASE_URL"] + "/v1"
    assert len(posted) == 1 and posted[0].headers["user-agent"].startswith("claude-cli/")


def test_claude_code_as_installed_through_the_proxy(claude, project, tmp_path):
    """No flags at all: the default model, every built-in tool, agents and skills — which
    newer models get as a mid-conversation ``role: "system"`` message.  The request
    reaches the model with that listing (forwarded in place, or — while the proxy
    declines the role, with an error Claude Code recognises — as the system-reminder
    Claude Code falls back to), and the session finishes."""
    from lossless.proxy import ProxyServer, ProxySettings

    home = tmp_path / "home"
    home.mkdir()
    with FakeServer() as srv:
        with ProxyServer(ProxySettings(upstream=srv.base_url, store=str(tmp_path / "store"))) as proxy:
            proc = subprocess.run([str(claude), "-p", "hello", "--output-format", "json"],
                                  env=claude_env(proxy.base_url, home), cwd=project, capture_output=True, text=True,
                                  timeout=90, stdin=subprocess.DEVNULL)
        answered = [r for r, s in zip(srv.requests, srv.statuses) if r.method == "POST" and s == 200]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0 and not result["is_error"], result["result"]
    assert result["result"].startswith("Fake reply to:")
    assert len(answered[-1].body["tools"]) > 10 and "Available agent types" in json.dumps(answered[-1].body["messages"])


def test_claude_code_continues_a_session_through_a_proxy_that_never_saw_it(claude, big_project, tmp_path):
    """``claude -c`` after the proxy restarted: the new proxy receives a whole history it
    has never seen, already too big for the window, and must compact it from scratch
    on the first request — valid and within the window — then carry on."""
    from lossless.proxy import ProxyServer, ProxySettings

    model = Session(big_project, pause_at=FILES, recall=False)  # half the files in the first run
    home, store = tmp_path / "home", str(tmp_path / "store")
    env = {"CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(MAX_OUTPUT)}
    with FakeServer(Faults(max_prompt_tokens=WINDOW - MAX_OUTPUT), responder=model) as srv:
        with ProxyServer(ProxySettings(upstream=srv.base_url, window=WINDOW, store=store)) as first:
            paused = run_claude(claude, first.base_url, big_project, home, "Read every file and count its values.",
                                "--model", "claude-sonnet-4-5", env=env)
        seen_by_first = len(srv.requests)
        with ProxyServer(ProxySettings(upstream=srv.base_url, window=WINDOW, store=store)) as second:
            resumed = run_claude(claude, second.base_url, big_project, home, "Go on with the rest.", "-c",
                                 "--model", "claude-sonnet-4-5", env=env)
            stats = second.stats()
        requests, statuses = srv.requests, srv.statuses
    assert paused.result["result"] == "Half of the files are read. PAUSE", paused.proc.stderr[-2000:]
    assert resumed.proc.returncode == 0 and resumed.result["result"] == "Read all the files and counted their lines. " \
                                                                       "FINAL", resumed.proc.stderr[-2000:]
    assert all(s == 200 for s in statuses)
    later = [r for r in requests[seen_by_first:] if r.method == "POST" and r.body.get("tools")]
    for r in later:
        validate(from_anthropic(r.body["messages"]))
        assert upstream_tokens(r.body) + MAX_OUTPUT <= WINDOW
    assert "Go on with the rest." in json.dumps(later[0].body["messages"][-1])
    # The first request the new proxy saw was compacted already (its markers carry handles) …
    assert HANDLE.search(json.dumps(later[0].body["messages"]))
    assert any(c["stages"] for c in stats["conversations"])
    # … from a history that, as Claude Code sent it, did not fit.
    assert max(c["tokens"]["before"] for c in stats["conversations"]) + MAX_OUTPUT > WINDOW
