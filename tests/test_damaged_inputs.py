"""What a person's hand edit, a damaged file or a stray client line gets: one line naming the file and
what to do, exit 2, and nothing on disk that the store's own log does not account for.

Found by trying malformed inputs on every command: a change log or a suggestions file edited by hand
(a number where a text goes, bytes that are not UTF-8), ``MEMORY.md`` or the change log replaced by a
directory, frontmatter whose name is a list, ``--store`` naming a file, a directory named like a
session, a proxy's ``/stats`` of another shape, a bad ``--url``, a reader that stops reading
(``| head``), and lines that are not JSON-RPC sent to ``lossless mcp``."""

from __future__ import annotations

import http.server
import json
import os
import select
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lossless.cli import main as cli_main
from lossless.memory import MemoryStore

LOSSLESS = Path(sys.executable).parent / "lossless"


def _store(tmp_path: Path) -> MemoryStore:
    store = MemoryStore(tmp_path / "mem")
    store.add(name="Note one", description="d", type="user", body="the body")
    return store


def _one_line_error(capsys, *names: str) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and err.startswith("lossless"), err
    for name in names:
        assert name in err, err
    return err


@pytest.mark.parametrize("line", [
    {"sid": "s-1"},  # no op, no ids
    {"sid": "s-1", "op": "merge", "ids": 5},
    {"sid": "s-1", "op": "merge", "ids": ["note-one"], "changes": 7},
    {"sid": "s-1", "op": "merge", "ids": ["note-one"], "changes": [{"id": "note-one", "before": 5}]},
    {"sid": "s-1", "op": "merge", "ids": ["note-one"], "changes": [["x"]]},
])
def test_a_suggestion_edited_by_hand_is_passed_over_with_a_warning(tmp_path, capsys, line):
    store = _store(tmp_path)
    (store.dir / ".suggestions.jsonl").write_text(json.dumps(line) + "\n")
    assert cli_main(["memory", "--dir", str(store.dir), "suggestions"]) == 0
    out = capsys.readouterr()
    assert "(no pending suggestions)" in out.out
    assert ".suggestions.jsonl: passed over 1 line that is not a suggestion" in out.err
    assert cli_main(["memory", "--dir", str(store.dir), "suggestions", "--accept", "s-1"]) == 2
    _one_line_error(capsys, "no pending suggestion 's-1'")


def test_a_suggestion_whose_text_is_not_a_memory_is_refused_naming_the_suggestions(tmp_path, capsys):
    store = _store(tmp_path)
    before = store.text_of("note-one")
    line = {"sid": "s-2", "op": "merge", "ids": ["note-one"],
            "changes": [{"id": "note-one", "before": before, "after": "not a memory"}]}
    (store.dir / ".suggestions.jsonl").write_text(json.dumps(line) + "\n")
    assert cli_main(["memory", "--dir", str(store.dir), "suggestions", "--accept", "s-2"]) == 2
    _one_line_error(capsys, "cannot accept s-2", ".suggestions.jsonl", "'after'")
    assert store.text_of("note-one") == before


def test_undo_never_writes_back_a_text_that_is_not_a_memory(tmp_path, capsys):
    store = _store(tmp_path)
    current = store.text_of("note-one")
    with open(store.dir / ".changes.jsonl", "a") as log:
        for run, before in (("r1", 5), ("r3", "not a memory")):
            log.write(json.dumps({"time": "x", "op": "update", "id": "note-one", "run": run, "before": before,
                                  "after": current}) + "\n")
    assert cli_main(["memory", "--dir", str(store.dir), "undo", "r1"]) == 2  # its line is not a change: none
    _one_line_error(capsys, "no changes logged for run 'r1'")
    assert cli_main(["memory", "--dir", str(store.dir), "undo", "r3"]) == 2
    _one_line_error(capsys, "cannot undo 'r3'", ".changes.jsonl", "nothing was changed")
    assert store.text_of("note-one") == current


def test_a_change_log_of_random_bytes_reads_as_no_changes(tmp_path, capsys):
    store = _store(tmp_path)
    (store.dir / ".changes.jsonl").write_bytes(bytes(range(256)) * 2)
    assert cli_main(["memory", "--dir", str(store.dir), "undo", "anything"]) == 2
    _one_line_error(capsys, "no changes logged for run 'anything'")


@pytest.mark.parametrize("name", ["MEMORY.md", ".changes.jsonl"])
def test_an_add_is_refused_before_it_writes_when_what_follows_it_cannot_be_written(tmp_path, capsys, name):
    store = _store(tmp_path)
    target = store.dir / name
    target.unlink()
    target.mkdir()
    assert cli_main(["memory", "--dir", str(store.dir), "add", "--name", "second", "--description", "d2",
                     "--type", "user", "--body", "b2"]) == 2
    _one_line_error(capsys, str(target), "not a regular file")
    assert not (store.dir / "second.md").exists()


def test_a_name_that_is_a_list_is_refused_at_its_line(tmp_path, capsys):
    src = tmp_path / "in.md"
    src.write_text("---\nname: [a]\ndescription: {k: 1}\ntype: user\n---\nbody\n")
    assert cli_main(["memory", "--dir", str(tmp_path / "mem"), "add", str(src)]) == 2
    _one_line_error(capsys, f"{src}:2: name must be text, not a list")


def test_a_store_that_is_a_file_is_refused_not_read_as_empty(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for command in (["memory", "--store", str(afile), "list"], ["memory", "--store", str(afile), "search", "x"]):
        assert cli_main(command) == 2
        _one_line_error(capsys, f"the store {afile} is not a directory")


def test_a_directory_named_like_a_session_is_passed_over(tmp_path, monkeypatch, capsys):
    from conftest import data_path

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "lossless-home"))
    project = tmp_path / ".claude" / "projects" / "-p"
    (project / "x.jsonl").mkdir(parents=True)
    (project / "short.jsonl").write_bytes(data_path("claude-code", "short.jsonl").read_bytes())
    assert cli_main(["sessions"]) == 0
    assert "short" in capsys.readouterr().out


class _Stats(http.server.BaseHTTPRequestHandler):
    body = b"{}"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("body", ['{"conversations": [{}]}', '{"conversations": [1]}',
                                  '{"conversations": [], "totals": "x"}'])
def test_top_of_figures_of_another_shape_is_one_line(capsys, body):
    handler = type("Stats", (_Stats,), {"body": body.encode()})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert cli_main(["top", "--once", "--url", f"http://127.0.0.1:{server.server_port}"]) == 2
    finally:
        server.shutdown()
        server.server_close()
    _one_line_error(capsys, "did not answer a lossless proxy's figures")


@pytest.mark.parametrize("url", ["notaurl", "http://[::1", "http://127.0.0.1:abc", "ftp://x"])
def test_top_with_a_url_that_is_not_one_says_so(capsys, url):
    assert cli_main(["top", "--once", "--url", url]) == 2
    _one_line_error(capsys, f"--url {url!r}")


@pytest.mark.skipif(not LOSSLESS.exists(), reason="the lossless entry point beside this interpreter")
def test_a_table_read_by_head_ends_with_status_0(tmp_path):
    from conftest import data_path

    env = dict(os.environ, LOSSLESS_HOME=str(tmp_path), COLUMNS="120")
    run = subprocess.run(f"'{LOSSLESS}' inspect '{data_path('claude-code', 'tool_heavy.jsonl')}' | head -1",
                         shell=True, executable="/bin/bash", env=env, capture_output=True, text=True, timeout=120)
    assert run.stdout.strip() and not run.stderr, run.stderr
    status = subprocess.run(f"'{LOSSLESS}' inspect '{data_path('claude-code', 'tool_heavy.jsonl')}' | head -1 "
                            ">/dev/null; echo ${PIPESTATUS[0]}", shell=True, executable="/bin/bash", env=env,
                            capture_output=True, text=True, timeout=120)
    assert status.stdout.strip() == "0", status


@pytest.mark.skipif(not LOSSLESS.exists(), reason="the lossless entry point beside this interpreter")
def test_mcp_answers_every_line_that_is_not_a_message(tmp_path):
    pytest.importorskip("mcp")
    env = dict(os.environ, HOME=str(tmp_path), LOSSLESS_HOME=str(tmp_path / ".lossless"))
    proc = subprocess.Popen([str(LOSSLESS), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True)

    def ask(line: str) -> dict:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, f"no answer to {line!r}"
        return json.loads(proc.stdout.readline())

    try:
        init = ask(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        assert init["id"] == 1 and "result" in init
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        cases = [("not json", None, -32700), ('{"jsonrpc": "2.0", "id": 4}', 4, -32600), ("[]", None, -32600),
                 ("42", None, -32600), ('{"jsonrpc": "1.0", "id": 5, "method": "tools/list"}', 5, -32600),
                 ('{"jsonrpc": "2.0", "id": "seven", "method": "tools/list", "params": 5}', "seven", -32600)]
        for line, request_id, code in cases:
            answer = ask(line)
            assert answer["id"] == request_id and answer["error"]["code"] == code, (line, answer)
        listed = ask(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))  # and it still serves
        assert listed["id"] == 9 and listed["result"]["tools"]
    finally:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.close()
        proc.wait(30)
        err = proc.stderr.read().splitlines()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == 0
    assert sum(line.startswith("lossless mcp: ") for line in err) == 6, err


def test_a_usage_error_is_one_line_that_points_at_help(capsys):
    for argv in (["compact", "x", "--window", "0"], ["inspect"], ["memory", "list", "--limit", "-1"]):
        with pytest.raises(SystemExit) as stopped:
            cli_main(argv)
        err = capsys.readouterr().err.strip()
        assert stopped.value.code == 2 and "\n" not in err and "usage:" not in err, err
        assert err.startswith(f"lossless {argv[0]}") and err.endswith("--help`)"), err


def test_json_errors_read_as_sentences(tmp_path, capsys):
    bad = tmp_path / "s.json"
    bad.write_text('{"messages": [{"role": "user", "content": "unterminated')
    assert cli_main(["inspect", str(bad)]) == 2
    err = _one_line_error(capsys, str(bad))
    assert " at at " not in err and "starting at column" in err, err


def test_a_codex_rollout_whose_content_is_a_number_is_refused_at_its_line(tmp_path, capsys):
    from sessions_kit import codex_rollout

    lines = codex_rollout()
    item = json.loads(lines[3])
    item["payload"]["content"] = 5
    lines[3] = json.dumps(item)
    path = tmp_path / "rollout-2026-03-03T14-00-00-0199a213-81c0-7800-8aa1-bbab2a035a53.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert cli_main(["inspect", str(path)]) == 2
    _one_line_error(capsys, f"{path}:4", "content must be text or a list of parts, not int")


def test_a_memory_that_is_not_utf8_is_named_at_the_line_of_its_bad_byte(tmp_path, capsys):
    store = _store(tmp_path)
    path = store.dir / "note-one.md"
    path.write_bytes(path.read_bytes().rstrip(b"\n") + b"\nsecond\nthird \xff line\n")
    text = path.read_bytes()
    line = text[: text.index(b"\xff")].count(b"\n") + 1
    assert cli_main(["memory", "--dir", str(store.dir), "show", "note-one"]) == 2
    _one_line_error(capsys, f"{path}:{line}: not UTF-8 text")


def test_an_empty_directory_flag_is_refused_and_an_empty_body_is_an_edit(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli_main(["memory", "--dir", "", "add", "--name", "n", "--description", "d", "--type", "user",
                     "--body", "b"]) == 2
    _one_line_error(capsys, "--dir is empty")
    assert not list(tmp_path.iterdir())  # nothing written into the current directory
    store = _store(tmp_path)
    assert cli_main(["memory", "--dir", str(store.dir), "edit", "note-one", "--body", ""]) == 0
    assert store.get("note-one").body == ""


def test_the_fake_provider_answers_odd_limits_and_stream_options():
    """Found through the proxy: the fake's handler crashed on these, so the proxy showed a 502."""
    import httpx

    from lossless.testing import FakeServer

    with FakeServer() as srv:
        odd = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": "x"}
        whole = httpx.post(srv.base_url + "/v1/chat/completions", json=odd, timeout=30)
        streamed = httpx.post(srv.base_url + "/v1/chat/completions", json={**odd, "stream": True, "stream_options": 5},
                              timeout=30)
    assert whole.status_code == 200 and whole.json()["choices"]
    assert streamed.status_code == 200 and "data: [DONE]" in streamed.text
