"""``lossless chat`` as a person sees it on a real terminal (pexpect, an xterm in colour): the
answer streams in as Markdown, a spinner counts the seconds of a slow model and a slow tool,
input spans lines, ↑ brings back what was typed, Tab completes a slash command, and
``--provider demo`` runs its whole session offline.  Off a terminal the same streaming is
plain text, through both official SDKs."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from chat_kit import chat_command, texts
from lossless.testing import FakeServer, Faults

pexpect = pytest.importorskip("pexpect")
pytest.importorskip("anthropic")
pytest.importorskip("prompt_toolkit")
pytest.importorskip("rich")

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-Za-z]|\x08")
MODEL = "claude-sonnet-4-6"
MARKDOWN = ("# Plan\n\nThis answer is **bold** and it streams one word at a time, word after word after word, "
            "until the very last word: finished.")


class Screen:
    """What a pty showed, each piece with the time it arrived."""

    def __init__(self) -> None:
        self.pieces: list[tuple[float, str]] = []

    def write(self, s: str) -> None:
        self.pieces.append((time.monotonic(), s))

    def flush(self) -> None:
        pass

    @property
    def raw(self) -> str:
        return "".join(s for _, s in self.pieces)

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw)

    def first(self, needle: str) -> float:
        """When ``needle`` first showed (escape codes aside)."""
        seen = ""
        for when, piece in self.pieces:
            seen += ANSI.sub("", piece)
            if needle in seen:
                return when
        raise AssertionError(f"{needle!r} never showed")


def said(body: dict) -> str:
    last = body["messages"][-1]
    return "\n".join(texts(last)) if last["role"] == "user" else ""


def responder(api: str, body: dict):
    last = body["messages"][-1]
    if isinstance(last["content"], list) and any(b.get("type") == "tool_result" for b in last["content"]):
        return "Slept."
    text = said(body)
    if "markdown" in text:
        return MARKDOWN
    if "slow tool" in text:
        return [{"type": "tool_use", "id": "toolu_slow", "name": "bash", "input": {"command": "sleep 1.2"}}]
    return f"Echo: {text!r}"


def spawn(argv_exe: str, argv: list[str], env: dict[str, str], screen: Screen):
    child = pexpect.spawn(argv_exe, argv, env=env, encoding="utf-8", timeout=30, dimensions=(40, 120))
    child.logfile_read = screen
    return child


def test_streaming_markdown_spinners_multiline_history_and_completion_on_a_terminal(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    screen = Screen()
    with FakeServer(Faults(stream_delay=0.05, slow=1.2), responder=responder) as server:
        exe, argv, env = chat_command(server.base_url, str(work), "--window", "16000", "--no-memory", "--yes",
                                      drawn=True)
        child = spawn(exe, argv, env, screen)
        child.expect("Ctrl-D leaves")

        # A slow model: the spinner counts the seconds; then the answer streams in, as Markdown.
        child.send("show me some markdown\r")
        child.expect(r"thinking · 1s")
        child.expect("auto-compact at")
        server.set_faults(Faults())
        streamed = screen.first("finished.") - screen.first("This answer")
        assert streamed > 0.5, f"the answer showed all at once ({streamed:.2f} s from its first word to its last)"
        answer = screen.text[screen.text.index("show me some markdown"):]
        assert "finished." in answer and "**bold**" not in answer and "# Plan" not in answer
        assert "\x1b[1mbold" in screen.raw  # bold, drawn as bold

        # A slow tool: its own spinner, named, counting.
        child.send("run a slow tool\r")
        child.expect(r"bash · 1s")
        child.expect("Slept.")
        child.expect("auto-compact at")

        # Three lines: Alt-Enter, then a backslash before Enter, then Enter sends.
        child.send("line one\x1b\r")
        child.send("line two\\\r")
        child.send("line three\r")
        child.expect("Echo: 'line one")
        child.expect("auto-compact at")
        time.sleep(0.3)

        # ↑ brings the last input back whole; Enter sends it again.
        child.send("\x1b[A")
        time.sleep(0.3)
        child.send("\r")
        wait_for(lambda: [said(r.body) for r in server.requests].count("line one\nline two\nline three") == 2)
        child.expect("auto-compact at")
        time.sleep(0.3)

        # Tab completes a slash command, Enter runs it.
        child.send("/cont")
        time.sleep(0.3)
        child.send("\t")
        time.sleep(0.3)
        child.send("\r")
        child.expect("tokens of a 16,000-token window in use")
        time.sleep(0.3)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
        sent = [said(r.body) for r in server.requests]

    assert sent.count("line one\nline two\nline three") == 2
    assert not [s for s in sent if s.startswith("/")]  # slash commands never reach the model
    assert "line one" in (work / ".lossless" / "chat-history").read_text()  # ↑ works in the next session too


def wait_for(predicate, timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_the_demo_runs_its_session_to_the_end_offline(tmp_path):
    exe, argv, env = chat_command("http://127.0.0.1:9", drawn=True)  # nothing listens there
    env.pop("ANTHROPIC_API_KEY")
    screen = Screen()
    child = spawn(exe, ["-m", "lossless.cli", "chat", "--provider", "demo"],
                  {**env, "LOSSLESS_DEMO_PACE": "0", "HOME": str(tmp_path)}, screen)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, screen.text[-2000:]
    text = screen.text
    for expected in ("● glob(", "● read_file(", "↳ snip:", "/context",
                     "● recall(handle=\"sha256:", "Recalled from its handle, byte for byte", "↳ compact:",
                     "model calls", "demo over"):
        assert expected in text, expected
    answer = text[text.index("> Read every Python file"):text.index("> /context")]
    assert "What inventory does" in answer and "## What" not in answer  # drawn, not shown raw
    assert "stock levels" in answer and "**stock levels**" not in answer
    assert "\x1b[" in screen.raw  # in colour, on a terminal
    assert not list(Path(tmp_path).iterdir())  # nothing written in the user's home


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_an_answer_streams_through_the_official_sdk_as_plain_text_off_a_terminal(tmp_path, api):
    pytest.importorskip(api)
    from lossless.chat.agent import Chat, Settings
    from lossless.chat.terminal import Terminal

    class Pipe(Screen):
        def isatty(self) -> bool:
            return False

    out = Pipe()
    settings = Settings(workdir=tmp_path, store=tmp_path / ".lossless", provider=api, model=MODEL,
                        window=16_000, max_output=2_000, memory=False, yes=True, interactive=True)
    with FakeServer(Faults(stream_delay=0.05), responder=lambda api, body: MARKDOWN) as server:
        if api == "anthropic":
            from lossless.providers.anthropic import AnthropicProvider

            provider = AnthropicProvider(MODEL, api_key="test", base_url=server.base_url)
        else:
            from lossless.providers.openai import OpenAIProvider

            provider = OpenAIProvider(MODEL, api_key="test", base_url=server.openai_base_url)
        chat = Chat(settings, provider, Terminal(interactive=True, out=out))  # type: ignore[arg-type]
        assert chat.turn("write it in markdown") == MARKDOWN
        chat.close()
        bodies = [r.body for r in server.requests]
    assert bodies and all(b.get("stream") is True for b in bodies)
    assert out.text == out.raw and "\x1b" not in out.raw  # plain text off a terminal
    assert MARKDOWN in out.raw  # as the model wrote it, once
    assert out.raw.count("finished.") == 1
    assert out.first("finished.") - out.first("This answer") > 0.4  # written as it arrived
