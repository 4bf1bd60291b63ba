"""``lossless wrap``: the command it runs, the environment it gets, its exit code and
its signals — with real subprocesses (a Python one-liner standing in for the agent)."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.cli import wrap
from lossless.errors import InputError

PY = sys.executable


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lossless")
    wrap.register(parser.add_subparsers())
    return parser.parse_args(["wrap", *argv])


def test_options_before_the_command_are_the_proxys_and_the_rest_is_the_agents():
    args = parse("--window", "64000", "--upstream", "http://127.0.0.1:9", "--verbose", "claude", "-p", "hi",
                 "--verbose", "--window", "5")
    assert (args.window, args.upstream, args.verbose) == (64000, "http://127.0.0.1:9", True)
    assert args.command == ["claude", "-p", "hi", "--verbose", "--window", "5"]
    args = parse("--max-output", "8000", "--", "my-agent", "--flag")
    assert args.max_output == 8000 and args.command[-2:] == ["my-agent", "--flag"]


_word = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=8)


@given(st.lists(_word, min_size=1, max_size=6).filter(lambda c: c[0] != "--"), st.booleans())  # no agent is "--"
def test_everything_from_the_command_on_is_the_agents_untouched(command, verbose):
    """Whatever the agent's arguments look like (``--window``, ``--``, ``-p``), after ``--``
    they reach the agent exactly as given; lossless's own options stay lossless's."""
    args = parse(*(["--verbose"] if verbose else []), "--window", "64000", "--", *command)
    assert wrap.command_of(args) == command and args.window == 64000 and args.verbose is verbose


def test_no_command_is_a_one_line_error():
    with pytest.raises(InputError, match=r"^wrap: no command to run; e\.g\. lossless wrap claude"):
        wrap.run(parse("--window", "64000", "--"))
    with pytest.raises(InputError, match="no command"):
        wrap.run(parse())


def test_a_missing_agent_is_named_with_how_to_install_it(tmp_path):
    empty = {"PATH": str(tmp_path)}
    with pytest.raises(InputError) as info:
        wrap.resolve("claude", empty)
    assert str(info.value) == "claude: not found; install it with npm install -g @anthropic-ai/claude-code"
    with pytest.raises(InputError, match=r"^my-agent: not found; check the name, or add its directory to PATH$"):
        wrap.resolve("my-agent", empty)
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(InputError, match=r"agent\.sh: not executable \(chmod \+x it"):
        wrap.resolve(str(script), empty)
    script.chmod(0o755)
    assert wrap.resolve("agent.sh", empty) == str(script) == wrap.resolve(str(script), {"PATH": ""})


def test_missing_command_is_checked_before_the_proxy_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InputError, match="^claude: not found"):
        wrap.run(parse("--window", "64000", "claude", "-p", "x"))


def test_both_sdk_families_point_at_the_proxy_and_nothing_else_changes():
    env = wrap.wrapped_env("http://127.0.0.1:4242", {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "old", "X": "y"})
    assert env == {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://127.0.0.1:4242",
                   "OPENAI_BASE_URL": "http://127.0.0.1:4242/v1", "X": "y"}


@pytest.mark.parametrize(("code", "expected"), [("", 0), ("raise SystemExit(7)", 7),
                                                ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", 143)])
def test_the_agents_exit_code_is_returned(code, expected):
    assert wrap.supervise([PY, "-c", code or "pass"], os.environ) == expected


def test_the_agent_gets_the_environment_and_the_terminal(capfd):
    code = "import os, sys; print(os.environ['OPENAI_BASE_URL']); print('err', file=sys.stderr)"
    assert wrap.supervise([PY, "-c", code], wrap.wrapped_env("http://h:1", os.environ)) == 0
    out, err = capfd.readouterr()
    assert out == "http://h:1/v1\n" and err == "err\n"


AGENT = textwrap.dedent("""
    import signal, sys, time
    got = []
    signal.signal(signal.SIGINT, lambda n, f: got.append(n))
    signal.signal(signal.SIGTERM, lambda n, f: got.append(n))
    print("ready", flush=True)
    deadline = time.monotonic() + 20
    while len(got) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    print("agent got", sorted(got), flush=True)
    sys.exit(3)
""")


def test_signals_sent_to_lossless_alone_reach_the_agent_and_lossless_outlives_them():
    """SIGINT and SIGTERM to the supervising process (no terminal: pipes) are passed on;
    the supervisor survives both and exits with the agent's code once it is done."""
    supervisor = ("import os, sys\nfrom lossless.cli.wrap import supervise\n"
                  f"code = supervise([sys.executable, '-c', {AGENT!r}], os.environ)\n"
                  "print('supervisor done', code, flush=True)\nsys.exit(code)\n")
    proc = subprocess.Popen([PY, "-c", supervisor], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 3, err
    assert out == "agent got [2, 15]\nsupervisor done 3\n"


# -- the whole command: proxy up, agent run through it, proxy down ----------------------
LOSSLESS = [PY, "-m", "lossless.cli"]
PROBE = textwrap.dedent("""
    import json, os, sys, urllib.request
    base = os.environ["ANTHROPIC_BASE_URL"]
    print(base, os.environ["OPENAI_BASE_URL"], flush=True)
    body = {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "through the proxy"}]}
    request = urllib.request.Request(base + "/v1/messages", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json", "x-api-key": "k"})
    with urllib.request.urlopen(request, timeout=30) as response:
        print(json.load(response)["content"][0]["text"], flush=True)
    sys.exit(int(sys.argv[1]))
""")


def test_wrap_runs_the_agent_through_the_proxy_and_stops_it_after(tmp_path):
    from lossless.testing import FakeServer

    with FakeServer() as srv:
        proc = subprocess.run([*LOSSLESS, "wrap", "--upstream", srv.base_url, "--window", "64000", "--store",
                               str(tmp_path / "store"), "--", PY, "-c", PROBE, "5"],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
        received = [r for r in srv.requests if r.path == "/v1/messages"]
    assert proc.returncode == 5, proc.stderr
    urls, answer = proc.stdout.splitlines()
    base, openai = urls.split()
    assert base.startswith("http://127.0.0.1:") and openai == base + "/v1"
    assert answer == "Fake reply to: through the proxy" and proc.stderr == ""
    (request,) = received
    assert request.headers["x-api-key"] == "k" and request.body["messages"][-1]["content"] == "through the proxy"
    assert any((tmp_path / "store").rglob("transcript.jsonl"))  # the proxy's store, where --store said
    import socket

    with pytest.raises(OSError):  # the proxy is gone once wrap has returned
        socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=2).close()


@pytest.mark.parametrize(("argv", "says"), [
    (["wrap", "claude"], "lossless: error: claude: not found; install it with npm install -g "
                         "@anthropic-ai/claude-code\n"),
    (["wrap", "--window", "64000", "--"], "lossless: error: wrap: no command to run; e.g. lossless wrap claude, "
                                          "or lossless wrap -- my-agent --flag\n"),
    (["wrap", "--upstream", "ftp://x", "--", PY, "-c", "print('ran')"], "lossless: error: --upstream 'ftp://x' must "
                                                                         "be an http(s) URL"),
])
def test_bad_input_is_one_line_and_exit_2_and_runs_nothing(argv, says, tmp_path):
    env = {**os.environ, "PATH": os.path.dirname(PY)}  # no claude on this PATH
    proc = subprocess.run([*LOSSLESS, *argv], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(says) and proc.stderr.count("\n") == 1


def test_ctrl_c_at_a_terminal_reaches_the_agent_once_and_lossless_waits_for_it(tmp_path):
    """Under a real pseudo-terminal, Ctrl-C signals the whole foreground group: the agent
    must get exactly one SIGINT (a second would mean "exit now" to Claude Code), and
    lossless must outlive it and exit with the agent's code."""
    agent = textwrap.dedent("""
        import signal, sys, time
        got = []
        signal.signal(signal.SIGINT, lambda n, f: got.append(n))
        print("ready", flush=True)
        while not got:
            time.sleep(0.02)
        time.sleep(0.5)  # room for a doubled signal to arrive
        print("agent got", len(got), flush=True)
        sys.exit(3)
    """)
    from lossless.testing import FakeServer

    with FakeServer() as srv:
        wrapped = [*LOSSLESS, "wrap", "--upstream", srv.base_url, "--store", str(tmp_path / "s"), "--",
                   PY, "-c", agent]
        launcher = f"import pty, os, sys\nstatus = pty.spawn({wrapped!r})\nsys.exit(os.waitstatus_to_exitcode(status))"
        proc = subprocess.Popen([PY, "-c", launcher], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            seen = b""
            while b"ready" not in seen:
                chunk = os.read(proc.stdout.fileno(), 1024)
                assert chunk, f"the agent never started: {seen!r} {proc.stderr.read()!r}"
                seen += chunk
            proc.stdin.write(b"\x03")  # what a terminal sends for Ctrl-C
            proc.stdin.flush()
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert b"agent got 1" in seen + out, seen + out
    assert proc.returncode == 3, err


def test_the_agent_keeps_its_own_argv0(capfd):
    sh = wrap.resolve("sh", os.environ)
    assert wrap.supervise(["my-agent", "-c", "echo $0"], os.environ, executable=sh) == 0
    assert capfd.readouterr().out == "my-agent\n"


def test_a_port_in_use_is_one_line_and_the_agent_never_runs(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = subprocess.run([*LOSSLESS, "wrap", "--port", str(port), "--store", str(tmp_path / "s"), "--",
                               PY, "-c", "print('agent ran')"], capture_output=True, text=True, timeout=60,
                              cwd=tmp_path)
    assert proc.returncode == 2 and "agent ran" not in proc.stdout
    assert proc.stderr.startswith("lossless: error: ") and str(port) in proc.stderr and proc.stderr.count("\n") == 1
