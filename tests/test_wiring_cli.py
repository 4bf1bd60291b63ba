"""The CLI's model paths: ``--summarizer llm --provider …`` on replay and compact, their
misuse, a provider that cannot be reached, and ``memory consolidate --provider fake``."""

from __future__ import annotations

import json
import time

import pytest

from lossless.cli import main
from lossless.dialects.anthropic import from_anthropic
from lossless.rounds import validate


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write_chat(path, turns=6, size=400):
    """A few long answers (each just under half the threshold of a 16k window, over which an answer
    is stored on first sight): snip alone cannot bring it under the window, a summary must."""
    msgs = [{"role": "user", "content": "Port the parser to Rust. Keep the public API."}]
    for i in range(turns):
        msgs.append({"role": "assistant", "content": f"Part {i}: I ported module m{i}.py. " * size})
        msgs.append({"role": "user", "content": f"Good. Now part {i + 1}, and keep the API."})
    path.write_text(json.dumps(msgs))


@pytest.fixture
def chat(tmp_path, monkeypatch):
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "home"))
    f = tmp_path / "chat.json"
    write_chat(f)
    return f


def test_replay_with_the_fake_summarizer_reports_its_calls_and_their_cost(chat, capsys):
    code, out, _ = run(capsys, "replay", str(chat), "--window", "16000", "--json")
    base = json.loads(out)
    code, out, err = run(capsys, "replay", str(chat), "--window", "16000", "--summarizer", "llm", "--provider",
                         "fake", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["summary_calls"] > 0 and base["summary_calls"] == 0
    assert r["over_window_calls"] == 0 and r["invalid_requests"] == 0
    assert "snip" in r["stages"]  # the model summarises each range snip removes (summary_calls above)
    assert r["cost"]["unmanaged"] == base["cost"]["unmanaged"]
    assert r["cost"]["managed"] > 0 and r["summary_failures"] == 0


def test_compact_with_the_fake_summarizer(chat, tmp_path, capsys):
    out_file = tmp_path / "out.json"
    code, out, err = run(capsys, "compact", str(chat), "--window", "16000", "-o", str(out_file), "--summarizer", "llm",
                         "--provider", "fake", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["tokens_after"] < r["threshold"] and r["summary_calls"] > 0
    assert "snip" in r["stages"] and "fallback_summary" not in r["stages"]
    assert r["summary_failures"] == 0
    sent = json.loads(out_file.read_text())
    validate(from_anthropic(sent))
    assert "<earlier-summary>" in json.dumps(sent)  # the model's summary of the range, in its account


def test_compact_with_a_model_summarises_once_and_refreshes_no_session_notes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "home"))
    msgs = [{"role": "user", "content": "Fix the failing test."}]
    for i in range(40):
        tid = f"toolu_{i:04d}"
        msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": f"pytest -k t{i}"}}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": f"FAILED t{i}\n" * 300}]})
    f = tmp_path / "tools.json"
    f.write_text(json.dumps(msgs))
    code, out, err = run(capsys, "compact", str(f), "--window", "16000", "-o", str(tmp_path / "o.json"),
                         "--summarizer", "llm", "--provider", "fake", "--json")
    r = json.loads(out)
    # the recent rounds stay verbatim: snip removes what is older and the model summarises it,
    # once, into its account (old outputs are not cleared first: micro-compact only helps when
    # removing rounds cannot)
    assert code == 0 and r["stages"] == ["snip"]
    assert r["summary_calls"] == 1  # that summary, and no session-notes refresh for a one-shot compaction...
    assert not (tmp_path / "home" / "sessions").exists()  # ...and no notes file left behind


@pytest.mark.parametrize("argv, needle", [
    (("--summarizer", "llm"), "needs --provider"),
    (("--provider", "fake"), "--provider is for --summarizer llm"),
    (("--summarizer", "llm", "--provider", "anthropic"), "needs --model"),
])
@pytest.mark.parametrize("command", ["replay", "compact"])
def test_misused_model_options_are_one_line_and_exit_2(chat, tmp_path, capsys, command, argv, needle):
    extra = ("-o", str(tmp_path / "o.json")) if command == "compact" else ()
    code, out, err = run(capsys, command, str(chat), "--window", "16000", *extra, *argv)
    assert code == 2 and out == "" and needle in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("command, api, key, real_waits", [
    ("compact", "anthropic", True, True),  # the real retry schedule: bounded, seconds not minutes
    ("replay", "anthropic", True, False),
    ("replay", "anthropic", False, False),  # no key: the SDK's own error, still one line
    ("replay", "openai", True, False),
    ("compact", "openai", False, False),
])
def test_a_provider_nobody_answers_is_one_line_and_exit_2_quickly(chat, tmp_path, capsys, monkeypatch, command, api,
                                                                key, real_waits):
    from lossless.cli import _providers as factory
    from lossless.providers.retry import RetryPolicy

    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    if key:
        monkeypatch.setenv(f"{api.upper()}_API_KEY", "k")
    if not real_waits:
        make = factory.make_provider

        def no_waits(*args, **kwargs):
            provider = make(*args, **kwargs)
            provider.retry = RetryPolicy(max_attempts=provider.retry.max_attempts, sleep=lambda s: None)
            return provider

        monkeypatch.setattr(factory, "make_provider", no_waits)
    out_file = tmp_path / "o.json"
    extra = ("-o", str(out_file)) if command == "compact" else ()
    start = time.monotonic()
    code, out, err = run(capsys, command, str(chat), "--window", "16000", *extra, "--summarizer", "llm",
                         "--provider", api, "--model", "m", "--base-url", "http://127.0.0.1:9")
    assert time.monotonic() - start < 8
    assert code == 2 and out == "" and not out_file.exists()
    assert err.startswith("lossless: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert "every model call failed" in err and ("127.0.0.1:9" in err or "authentication" in err), err


def test_memory_consolidate_with_the_fake_provider(tmp_path, capsys):
    mem = tmp_path / "memory"
    for name, desc in (("tabs", "the user wants tabs"), ("tabs2", "the user wants tabs for indentation")):
        code, _, err = run(capsys, "memory", "--dir", str(mem), "add", "--name", name, "--description", desc,
                           "--type", "user", "--body", "Indent with tabs.")
        assert code == 0, err
    before = sorted(p.name for p in mem.glob("*.md"))
    code, out, err = run(capsys, "memory", "--dir", str(mem), "consolidate", "--provider", "fake", "--dry-run",
                         "--json")
    assert code == 0, err
    assert json.loads(out)["status"] and sorted(p.name for p in mem.glob("*.md")) == before
    code, out, err = run(capsys, "memory", "--dir", str(mem), "consolidate", "--provider", "fake", "--json")
    assert code == 0, err
    assert json.loads(out)["status"]
    code, out, err = run(capsys, "memory", "--dir", str(mem), "consolidate")
    assert code == 2 and "needs a model" in err and err.count("\n") == 1


def test_a_missing_api_key_is_named(monkeypatch, capsys, tmp_path):
    from lossless.cli import main

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    f = tmp_path / "s.json"
    f.write_text('[{"role": "user", "content": "hi"}]')
    code = main(["compact", str(f), "--window", "16000", "-o", str(tmp_path / "o.json"),
                 "--summarizer", "llm", "--provider", "anthropic", "--model", "m"])
    err = capsys.readouterr().err
    assert code == 2 and "ANTHROPIC_API_KEY" in err and err.count("\n") == 1
