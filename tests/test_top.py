"""``lossless top`` against a real proxy in front of the fake server, fed by the official
anthropic SDK: in a real pseudo-terminal (pexpect) it shows each conversation and its figures
as requests go through; piped or with ``--once`` it prints them as plain text."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time

import pytest

from lossless.cli import main
from proxy_kit import BASH, KEY, output, proxied, sdk_client

pexpect = pytest.importorskip("pexpect")

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def ask(client, history):
    return client.messages.create(model="claude-test", max_tokens=2_000, messages=history, tools=[BASH],
                                  system="You are a careful agent.")


def dump(message):
    return [b.model_dump(mode="json", exclude_none=True, exclude={"parsed_output"}) for b in message.content]


def agent(srv, client, turns):
    """Tool rounds; turn 4's output (60,000 characters) is moved out on the next request."""
    history = [{"role": "user", "content": "Survey the repository and report."}]
    for turn in range(turns):
        srv.enqueue([{"type": "text", "text": f"Looking at part {turn}."},
                     {"type": "tool_use", "id": f"toolu_{turn:03d}", "name": "Bash",
                      "input": {"command": f"cat part{turn}"}}])
        answer = ask(client, history)
        history += [{"role": "assistant", "content": dump(answer)},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{turn:03d}",
                                                  "content": output(turn, 60_000 if turn == 4 else 3_000)}]}]
    return history


def row(conv):
    """What a conversation's row must say, from the proxy's own figures."""
    tokens, stages = conv["tokens"], conv["stages"]
    assert stages, "the conversation was meant to fire a stage"
    fired = r",\s*".join(f"{re.escape(s)} ×{n}" for s, n in stages.items())
    return re.compile(rf"{conv['id']}\s+anthropic\s+{conv['calls']}\s+[█·]+\s+{tokens['after']:,}\s+"
                      rf"{tokens['after'] / conv['window']:.0%}\s+{tokens['before']:,}\s+{fired}\s+"
                      rf"{conv['recall_round_trips']}\s+"
                      rf"{conv['cost']['saved'] / conv['cost']['unmanaged']:.0%}")


class Screen:
    """What the child has drawn, escape sequences dropped."""

    def __init__(self, child):
        self.child, self.text = child, ""

    def wait_for(self, pattern, timeout=20.0):
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.text):
            assert time.monotonic() < deadline, f"not on the screen: {pattern}\n{self.text[-3000:]}"
            try:
                self.text += ANSI.sub("", self.child.read_nonblocking(65536, timeout=0.2))
            except pexpect.TIMEOUT:
                pass
        return re.search(pattern, self.text)


def test_top_in_a_terminal_shows_each_conversation_as_requests_go_through(tmp_path):
    with proxied(tmp_path) as (srv, proxy):
        client = sdk_client(proxy, "anthropic")
        history = agent(srv, client, 6)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TERM": "xterm-256color", "ANTHROPIC_API_KEY": KEY}
        child = pexpect.spawn(sys.executable, ["-m", "lossless.cli", "top", "--url", proxy.base_url,
                                               "--interval", "0.2"], env=env, encoding="utf-8", dimensions=(40, 220))
        screen = Screen(child)
        (first,) = proxy.stats()["conversations"]
        screen.wait_for(row(first))
        screen.wait_for(r"lossless top — http://127\.0\.0\.1:\d+: 1 conversation, 6 requests")

        # while top watches: the model recalls what the proxy moved out, and a second client starts
        history.append({"role": "user", "content": "What did part 4 say?"})
        answer = ask(client, history)
        handle = re.findall(r"sha256:[0-9a-f]+", str(srv.requests[-1].body["messages"]))[0]
        srv.enqueue([{"type": "text", "text": "Let me read it."},
                     {"type": "tool_use", "id": "toolu_recall_1", "name": "recall", "input": {"handle": handle}}],
                    "Part 4 lists module_4.")
        history += [{"role": "assistant", "content": dump(answer)}, {"role": "user", "content": "Please check."}]
        ask(client, history)
        sdk_client(proxy, "anthropic").messages.create(model="claude-test", max_tokens=100,
                                                       messages=[{"role": "user", "content": "hello"}])
        stats = proxy.stats()["conversations"]
        grown = next(c for c in stats if c["id"] == first["id"])
        assert grown["recall_round_trips"] == 1
        screen.wait_for(row(grown))
        screen.wait_for(rf"{first['id']}  call {grown['calls']}: [^\n]*1 recall")
        screen.wait_for(r"\d\d:\d\d:\d\d  [0-9a-f]{16}  new conversation, call 1: no stage")
        screen.wait_for(r"2 conversations, 9 requests")
        child.sendintr()
        child.expect(pexpect.EOF, timeout=10)
        child.close()
    assert child.exitstatus == 0


def test_once_and_a_pipe_print_plain_text(tmp_path, capsys):
    with proxied(tmp_path) as (srv, proxy):
        agent(srv, sdk_client(proxy, "anthropic"), 6)
        (conv,) = proxy.stats()["conversations"]
        assert main(["top", "--url", proxy.base_url, "--once", "--api-key", KEY]) == 0
        once = capsys.readouterr().out
        piped = subprocess.run([sys.executable, "-m", "lossless.cli", "top", "--url", proxy.base_url],
                               env={"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": KEY}, capture_output=True,
                               text=True, timeout=30)
        assert main(["top", "--url", proxy.base_url, "--once", "--api-key", "sk-another-tenant"]) == 0
        other = capsys.readouterr().out
    assert piped.returncode == 0 and piped.stdout == once
    assert "\x1b" not in once and row(conv).search(once)
    assert once.splitlines()[0].endswith(": 1 conversation, 6 requests; input cost "
                                         f"{conv['cost']['saved'] / conv['cost']['unmanaged']:.0%} lower")
    assert conv["id"] not in other and "no conversation yet" in other  # another key's conversations stay apart


def test_top_follows_the_proxys_token_rules(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("LOSSLESS_PROXY_TOKEN", raising=False)
    with proxied(tmp_path, auth_token="t0ken") as (srv, proxy):
        sdk_client(proxy, "anthropic", default_headers={"x-lossless-token": "t0ken"}).messages.create(
            model="claude-test", max_tokens=100, messages=[{"role": "user", "content": "hello"}])
        (conv,) = proxy.stats()["conversations"]
        url = proxy.base_url
        assert main(["top", "--url", url, "--once", "--api-key", KEY]) == 2
        refused = capsys.readouterr().err
        assert main(["top", "--url", proxy.base_url, "--once", "--api-key", KEY, "--auth-token", "wrong"]) == 2
        wrong = capsys.readouterr().err
        monkeypatch.setenv("LOSSLESS_PROXY_TOKEN", "t0ken")
        assert main(["top", "--url", proxy.base_url, "--once", "--api-key", KEY]) == 0
        shown = capsys.readouterr().out
    assert refused == wrong == (f"lossless: error: the proxy at {url} wants its token: pass --auth-token "
                                "TOKEN or set LOSSLESS_PROXY_TOKEN\n")
    assert conv["id"] in shown


def test_no_proxy_is_one_line(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: nothing listens there
    assert main(["top", "--url", f"http://127.0.0.1:{port}", "--once"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"lossless: error: no proxy at http://127.0.0.1:{port} (") and err.count("\n") == 1
    with pytest.raises(SystemExit) as stop:
        main(["top", "--interval", "0"])
    assert stop.value.code == 2 and "expected seconds between 0.05 and 3600, not '0'" in capsys.readouterr().err
