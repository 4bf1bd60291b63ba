"""The real Codex CLI (npm ``@openai/codex``, ``codex exec``) through ``lossless proxy`` to lossless's
fake Responses endpoint: a run whose tool outputs are several times its window completes, every
request it made reached the server valid and within the window, and compaction never fires on
two requests running.

What Codex 0.171 sends (seen against the fake): ``POST /v1/responses``, always streamed, with
``store: false``, ``include: ["reasoning.encrypted_content"]``, ``reasoning``,
``prompt_cache_key``, no ``instructions`` (its ~9k-token guide is the first ``developer``
item of ``input``), no ``max_output_tokens``, and its tools: ``exec_command``, ``write_stdin``
and others as functions, a ``namespace`` and ``web_search``.  It reads its provider from
``-c model_providers.…`` (not ``OPENAI_BASE_URL``), tries a WebSocket first only for OpenAI's
own provider, and runs what the model asks under ``--dangerously-bypass-approvals-and-sandbox``
without a sandbox (this machine has no bubblewrap).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from claude_code_kit import cache_dir, install_npm
from lossless.dialects.responses import problems_responses
from lossless.proxy import ProxyServer, ProxySettings
from lossless.testing.responses import ResponsesServer, problem
from lossless.testing.wire import estimate

PACKAGE = "@openai/codex@0.171"
WINDOW = 32_000
TURNS = 12


@pytest.fixture(scope="session")
def codex() -> Path:
    binary, why = install_npm(cache_dir().parent / "codex", PACKAGE, "codex", "the Codex CLI")
    if binary is None:
        pytest.skip(f"Codex CLI unavailable: {why}")
    return binary


def run_codex(binary: Path, base_url: str, work: Path, home: Path, prompt: str,
              resume: str | None = None) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    provider = f'{{name="lossless", base_url="{base_url}", env_key="OPENAI_API_KEY", wire_api="responses"}}'
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env.update({"CODEX_HOME": str(home), "HOME": str(home), "OPENAI_API_KEY": "sk-test-codex", "NO_COLOR": "1"})
    return subprocess.run([str(binary), "exec", "--skip-git-repo-check", "-m", "gpt-5",
                           "--dangerously-bypass-approvals-and-sandbox", "-c", 'model_provider="lossless"',
                           "-c", f"model_providers.lossless={provider}", *(["resume", resume] if resume else []), prompt],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def test_codex_runs_through_the_proxy_and_every_request_fits(codex, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    lines: list[str] = []
    with ResponsesServer() as srv, \
            ProxyServer(ProxySettings(upstream=srv.openai_base_url.removesuffix("/v1"), window=WINDOW,
                                      store=tmp_path / "store", verbose=True), log=lines.append) as proxy:
        for n in range(TURNS):  # each listing is ~5,800 tokens: twelve of them are twice the window
            srv.enqueue([{"type": "text", "text": f"Step {n}."},
                         {"type": "tool_use", "id": f"call_{n}", "name": "exec_command",
                          "input": {"cmd": f"seq {n}00000 {n}02000"}}])
        srv.enqueue("All the ranges are listed. DONE")
        run = run_codex(codex, proxy.base_url + "/v1", work, tmp_path / "home", "List the ranges.")
        (conv,) = proxy.stats()["conversations"]
        bodies = [r.body for r in srv.requests if r.path == "/v1/responses"]
    assert run.returncode == 0, run.stderr[-3000:]
    assert "All the ranges are listed. DONE" in run.stdout
    assert len(bodies) == TURNS + 1 and conv["calls"] == TURNS + 1 and conv["dialect"] == "responses"
    outputs = [i["output"] for i in bodies[-1]["input"] if i.get("type") == "function_call_output"]
    assert outputs and f"{TURNS - 1}02000" in outputs[-1]  # Codex ran the last command; its output went back
    for body in bodies:
        assert problem(body) is None and problems_responses(body["input"]) == []
        assert body["input"][0]["role"] == "developer" == bodies[0]["input"][0]["role"]
        assert body["input"][0] == bodies[0]["input"][0]  # Codex's guide stays first, as it sent it
        assert estimate({k: body.get(k) for k in ("instructions", "tools", "input")}) < WINDOW
    assert conv["tokens"]["before"] > 2 * WINDOW > WINDOW > conv["tokens"]["after"]
    fired = [" stages - " not in line for line in lines if " responses messages " in line]
    assert len(fired) == TURNS + 1 and sum(fired) >= 3
    assert not any(a and b for a, b in zip(fired, fired[1:])), lines  # never two compactions running
    names = [[t.get("name") for t in b["tools"]] for b in bodies]
    assert "recall" not in names[0] and "recall" in names[-1]
    json.dumps(bodies)  # what reached the server is plain JSON


def test_lossless_wrap_codex_points_codex_at_the_proxy(codex, tmp_path):
    """``lossless wrap codex`` as a user types it: Codex ignores ``OPENAI_BASE_URL``, so without the
    provider settings wrap adds it would go to api.openai.com around the proxy."""
    import sys

    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "codex").symlink_to(codex)  # on PATH as a user's install puts it
    with ResponsesServer() as srv:
        for n in range(TURNS):
            srv.enqueue([{"type": "tool_use", "id": f"call_{n}", "name": "exec_command",
                          "input": {"cmd": f"seq {n}00000 {n}02000"}}])
        srv.enqueue("Listed through the wrap. DONE")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
        env.update({"CODEX_HOME": str(home), "HOME": str(home), "OPENAI_API_KEY": "sk-test-codex", "NO_COLOR": "1",
                    "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"})
        run = subprocess.run([sys.executable, "-m", "lossless.cli", "wrap", "--upstream", srv.openai_base_url.removesuffix("/v1"),
                              "--window", str(WINDOW), "--store", str(tmp_path / "store"), "codex", "exec",
                              "--skip-git-repo-check", "-m", "gpt-5", "--dangerously-bypass-approvals-and-sandbox",
                              "List the ranges."], cwd=work, env=env, capture_output=True, text=True, timeout=300,
                             stdin=subprocess.DEVNULL)
        bodies = [r.body for r in srv.requests if r.path == "/v1/responses"]
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Listed through the wrap. DONE" in run.stdout and len(bodies) == TURNS + 1
    for body in bodies:
        assert problem(body) is None
        assert estimate({k: body.get(k) for k in ("instructions", "tools", "input")}) < WINDOW
    kept = [i for i in bodies[-1]["input"] if i.get("type") == "function_call_output"]
    assert len(kept) < TURNS and "recall" in [t.get("name") for t in bodies[-1]["tools"]]  # fitted by the proxy


def test_wrap_codex_without_an_api_key_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    """A Codex user signed in with ChatGPT has no OPENAI_API_KEY: Codex would fail on its own terms
    after the proxy started; wrap says what is needed before starting anything."""
    from lossless.cli import main

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "codex"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = main(["wrap", "codex"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "OPENAI_API_KEY" in err[0] and "chatgpt.com" in err[0]


def test_codex_resumes_the_session_compact_wrote(codex, tmp_path):
    """A run whose history is over the window, compacted by ``lossless compact ROLLOUT --codex``,
    carries on under ``codex exec resume <new id>``: what Codex sends is the compacted conversation
    (the user's prompt, the account with its handles, the newest round verbatim) within the window,
    every call answered, its own context once, and a handle reads back what moved."""
    import sys

    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    with ResponsesServer() as srv:
        for n in range(TURNS):
            srv.enqueue([{"type": "tool_use", "id": f"call_{n}", "name": "exec_command",
                          "input": {"cmd": f"seq {n}00000 {n}02000"}}])
        srv.enqueue("All the ranges are listed. DONE")
        first = run_codex(codex, srv.openai_base_url, work, home, "List the ranges.")
        assert first.returncode == 0, first.stderr[-3000:]
        (rollout,) = (home / "sessions").rglob("rollout-*.jsonl")
        env = {**os.environ, "CODEX_HOME": str(home)}
        compact = subprocess.run([sys.executable, "-m", "lossless.cli", "compact", str(rollout), "--codex", "--window",
                                  str(WINDOW), "--store", str(tmp_path / "store"), "--json"],
                                 env=env, capture_output=True, text=True, timeout=300)
        assert compact.returncode == 0, compact.stderr
        report = json.loads(compact.stdout)
        assert report["tokens_before"] > WINDOW > report["tokens_after"] and report["stages"]
        new_id = report["resume"].split("codex resume ")[1]
        assert Path(report["output"]).parent.parent.parent.parent == home / "sessions"
        srv.enqueue("Carried on from the compacted session. DONE")
        again = run_codex(codex, srv.openai_base_url, work, home, "Say where you got to.", resume=new_id)
        body = [r.body for r in srv.requests if r.path == "/v1/responses"][-1]
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Carried on from the compacted session. DONE" in again.stdout
    items = body["input"]
    texts = [json.dumps(i) for i in items]
    assert problem(body) is None and problems_responses(items) == []
    assert estimate({k: body.get(k) for k in ("instructions", "tools", "input")}) < WINDOW
    assert any("List the ranges." in t for t in texts) and "Say where you got to." in texts[-1]
    assert sum("<environment_context>" in t for t in texts) == 1  # Codex's own, sent again on resume
    outputs = [i["output"] for i in items if i.get("type") == "function_call_output"]
    assert f"{TURNS - 1}02000" in outputs[-1] and len(outputs) < TURNS  # the newest round verbatim, older ones moved
    account = next(t for t in texts if "[lossless:" in t)
    handle = account.split("handle=")[1].split(" ")[0].rstrip("\\]")
    recalled = subprocess.run([sys.executable, "-m", "lossless.cli", "recall", handle, "--store", str(tmp_path / "store")],
                              capture_output=True, text=True, timeout=60)
    assert recalled.returncode == 0 and "100001" in recalled.stdout  # the second listing, back as Codex kept it
