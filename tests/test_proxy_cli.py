"""``lossless proxy`` as a user runs it: a subprocess that prints its URL, survives
SIGKILL without losing a transcript, stops on SIGTERM with exit 0, refuses bad options;
and the proxy's transcripts read by ``lossless inspect`` and ``lossless replay``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Iterator

import pytest

from conftest import ROOT
from proxy_kit import BASH, KEY, check_requests, output, proxied, sdk_client
from lossless.cli import main
from lossless.testing import FakeServer

anthropic = pytest.importorskip("anthropic")


@contextlib.contextmanager
def _spawn(*args: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """``lossless proxy`` in a subprocess, its URL read from what it prints."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with subprocess.Popen([sys.executable, "-m", "lossless.cli", "proxy", "--port", "0", *args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as p:
        try:
            line = p.stdout.readline()
            assert line.startswith("lossless proxy listening on http://127.0.0.1:"), line + p.stderr.read()
            exports = [p.stdout.readline().strip(), p.stdout.readline().strip()]
            url = line.split()[4]
            assert exports == [f"export ANTHROPIC_BASE_URL={url}", f"export OPENAI_BASE_URL={url}/v1"]
            yield p, url
        finally:
            if p.poll() is None:
                p.kill()
            p.communicate(timeout=20)


def _turns(client, n, start=0):
    history = [{"role": "user", "content": "Look around."}]
    for turn in range(start, start + n):
        answer = client.messages.create(model="m", max_tokens=1_000, messages=history, tools=[BASH])
        history += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.content]},
                    {"role": "user", "content": f"Now part {turn}: " + output(turn, 2_000)}]
    return history


def test_sigkill_mid_session_loses_no_transcript(tmp_path):
    store = tmp_path / "store"
    with FakeServer() as srv, contextlib.ExitStack() as stack:
        with _spawn("--upstream", srv.base_url, "--window", "20000", "--store", str(store)) as (p, url):
            client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
            stack.callback(client.close)
            history = _turns(client, 8)
            srv.set_faults(slow=5)  # the next answer is slow: the proxy dies while it waits
            failed = []
            t = threading.Thread(target=lambda: failed.append(_ask_or_error(client, history)), daemon=True)
            t.start()
            deadline = time.monotonic() + 10
            while len(srv.requests) < 9 and time.monotonic() < deadline:
                time.sleep(0.02)
            p.send_signal(signal.SIGKILL)
            t.join(10)
    assert failed and isinstance(failed[0], anthropic.APIConnectionError)
    transcripts = sorted(store.glob("sessions/*/transcript.jsonl"))
    assert transcripts
    for path in transcripts:
        assert main(["inspect", str(path)]) == 0
    assert "Now part 7" in transcripts[0].read_text()  # the last turn the proxy received is on disk


def _ask_or_error(client, history):
    try:
        return client.messages.create(model="m", max_tokens=1_000, messages=history)
    except anthropic.APIError as exc:
        return exc


def test_sigterm_stops_it_with_exit_0_and_bad_options_are_one_line_exit_2(tmp_path):
    with _spawn("--store", str(tmp_path)) as (p, url):
        port = url.rsplit(":", 1)[1]
        busy = subprocess.run([sys.executable, "-m", "lossless.cli", "proxy", "--port", port], capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=60)
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0
    assert busy.returncode == 2 and busy.stderr.strip().count("\n") == 0 and "in use" in busy.stderr
    for argv in (["--window", "10"], ["--upstream", "not-a-url"], ["--max-output", "300000"],
                 ["--tenant-header", "x-team"],
                 ["--summarizer", "llm"]):
        assert main(["proxy", *argv]) == 2


def test_the_proxys_transcripts_are_read_by_inspect_and_replay(tmp_path, capsys):
    with proxied(tmp_path) as (srv, proxy):
        _turns(sdk_client(proxy, "anthropic"), 14)
    assert check_requests(srv, "anthropic", 20_000) == 14
    (path,) = (tmp_path / "store").glob("sessions/*/transcript.jsonl")
    capsys.readouterr()
    assert main(["inspect", str(path)]) == 0
    assert "tokens" in capsys.readouterr().out
    assert main(["replay", str(path), "--window", "20000", "--json"]) == 0
    assert '"calls"' in capsys.readouterr().out


def test_a_public_bind_says_so_warns_and_needs_a_token(tmp_path):
    """Before: ``--host 0.0.0.0`` bound every interface, printed ``listening on http://127.0.0.1:PORT``,
    warned of nothing and had no way to require a token."""
    import httpx

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("LOSSLESS_PROXY_TOKEN", None)
    base = [sys.executable, "-m", "lossless.cli", "proxy", "--port", "0", "--host", "0.0.0.0", "--store", str(tmp_path)]
    refused = subprocess.run(base, capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 2 and "--auth-token" in refused.stderr and refused.stderr.count("\n") == 1
    with FakeServer() as srv, subprocess.Popen([*base, "--upstream", srv.base_url], stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True,
                                               env={**env, "LOSSLESS_PROXY_TOKEN": "s3cret"}) as p:
        try:
            line = p.stdout.readline()
            assert line.startswith("lossless proxy listening on http://0.0.0.0:") and "every interface" in line, line
            warning = p.stderr.readline()
            assert "warning" in warning and "0.0.0.0" in warning and "x-lossless-token" in warning
            url = p.stdout.readline().strip().split("=", 1)[1]  # the export: a local address that works
            body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
            denied = httpx.post(url + "/v1/messages", json=body, headers={"x-api-key": KEY}, timeout=30)
            assert denied.status_code == 401 and denied.json()["error"]["type"] == "authentication_error"
            allowed = httpx.post(url + "/v1/messages", json=body, headers={"x-api-key": KEY,
                                                                           "x-lossless-token": "s3cret"}, timeout=30)
            assert allowed.status_code == 200
            assert "s3cret" not in str(srv.requests[-1].headers)
        finally:
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=20)
    insecure = subprocess.Popen([*base, "--insecure"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
    try:
        assert insecure.stdout.readline().startswith("lossless proxy listening on http://0.0.0.0:")
        assert "WITHOUT a token" in insecure.stderr.readline()
    finally:
        insecure.send_signal(signal.SIGTERM)
        insecure.communicate(timeout=20)


def test_it_says_which_store_it_writes_from_a_project_subfolder(tmp_path):
    """Run from a project's subfolder, the proxy writes to the project's store and says so on
    stderr (its stdout banner is unchanged)."""
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    (project / ".lossless").mkdir()
    (project / "src" / "deep").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("LOSSLESS_HOME", "LOSSLESS_STORE")}
    env["PYTHONPATH"] = str(ROOT / "src")
    with subprocess.Popen([sys.executable, "-m", "lossless.cli", "proxy", "--port", "0"], cwd=project / "src" / "deep",
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as p:
        try:
            assert p.stdout.readline().startswith("lossless proxy listening on http://127.0.0.1:")
            said = p.stderr.readline()
        finally:
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=20)
    assert said == f"lossless proxy: transcripts and the originals behind handles go to {project / '.lossless'}\n"
    assert not (project / "src" / "deep" / ".lossless").exists()
