"""The fake HTTP server itself, spoken to with urllib (no SDK), and its CLI."""

from __future__ import annotations

import email.utils
import http.client
import json
import queue
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.testing import SECTIONS, FakeServer, Faults
from lossless.testing.structured import instance

ASK = {"role": "user", "content": "Please produce <summary> of the above."}


def post(url: str, body: Any, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json",
                                                                             "X-Test": "yes"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), error.read()


def anthropic_body(*messages: dict, **kw: Any) -> dict:
    return {"model": "m", "max_tokens": 100, "messages": list(messages), **kw}


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as srv:
        yield srv


def test_binds_loopback_only(server):
    assert server.base_url.startswith("http://127.0.0.1:")
    assert server.openai_base_url == server.base_url + "/v1"


def test_records_bodies_and_headers(server):
    status, _, raw = post(server.base_url + "/v1/messages", anthropic_body({"role": "user", "content": "hi"}))
    assert status == 200 and json.loads(raw)["content"][0]["text"] == "Fake reply to: hi"
    (recorded,) = server.requests
    assert recorded.path == "/v1/messages" and recorded.method == "POST"
    assert recorded.body["messages"] == [{"role": "user", "content": "hi"}]
    assert recorded.headers["x-test"] == "yes"
    server.clear()
    assert server.requests == []


def test_concurrent_requests_are_all_recorded(server):
    def call(i: int) -> None:
        post(server.base_url + "/v1/chat/completions",
             {"model": "m", "messages": [{"role": "user", "content": f"n{i}"}]})

    threads = [threading.Thread(target=call, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert sorted(r.body["messages"][0]["content"] for r in server.requests) == sorted(f"n{i}" for i in range(12))


def test_summary_request_gets_the_summary_on_both_apis(server):
    history = [{"role": "user", "content": "Refactor lib/core.py"}, {"role": "assistant", "content": "Done."}, ASK]
    _, _, raw = post(server.base_url + "/v1/messages", anthropic_body(*history, max_tokens=4_000))
    a = json.loads(raw)["content"][0]["text"]
    _, _, raw = post(server.base_url + "/v1/chat/completions", {"model": "m", "messages": history})
    o = json.loads(raw)["choices"][0]["message"]["content"]
    assert a == o  # the same deterministic builder
    assert all(f"{i}. {name}:" in a for i, name in enumerate(SECTIONS, 1)) and "lib/core.py" in a


def test_notes_request_gets_the_notes_on_both_apis_when_asked_to(server):
    from lossless.memory.session import NOTES_SYSTEM, looks_like_notes

    excerpt = {"role": "user", "content": "Current notes:\n(none yet)\n\nRecent conversation:\n"
                                          "user: Refactor lib/core.py; keep the API.\n\nassistant: Done."}
    in_conversation = [{"role": "user", "content": "Refactor lib/core.py; keep the API."},
                       {"role": "assistant", "content": "Done."},
                       {"role": "user", "content": f"{NOTES_SYSTEM}\n\nCurrent notes:\n(none yet)"}]

    def ask() -> list[str]:
        _, _, raw = post(server.base_url + "/v1/messages", anthropic_body(excerpt, system=NOTES_SYSTEM))
        a = json.loads(raw)["content"][0]["text"]
        _, _, raw = post(server.base_url + "/v1/chat/completions",
                         {"model": "m", "messages": [{"role": "system", "content": NOTES_SYSTEM}, excerpt]})
        o = json.loads(raw)["choices"][0]["message"]["content"]
        _, _, raw = post(server.base_url + "/v1/messages", anthropic_body(*in_conversation))
        return [a, o, json.loads(raw)["content"][0]["text"]]

    assert all(t.startswith("Fake reply") for t in ask())  # by default answered as any request: not notes
    server.set_faults(notes=True)
    a, o, c = ask()
    assert a == o == c  # the same deterministic builder, whichever shape and API
    assert looks_like_notes(a, sections=6) and a.startswith("# Task\nRefactor lib/core.py") and "lib/core.py" in a


def test_faults_come_in_order_and_set_faults_restarts_them(server):
    server.set_faults(fail_429=1, fail_529=1, fail_500=1, retry_after=1.5)
    url, body = server.base_url + "/v1/messages", anthropic_body({"role": "user", "content": "x"})
    results = [post(url, body) for _ in range(4)]
    assert [status for status, _, _ in results] == [429, 529, 500, 200]
    headers = {k.lower(): v for k, v in results[0][1].items()}
    assert headers["retry-after"] == "2" and headers["retry-after-ms"] == "1500"
    assert json.loads(results[1][2])["error"]["type"] == "overloaded_error"
    server.set_faults(fail_529=1)  # replaces every fault, counters restart
    assert post(server.base_url + "/v1/chat/completions", {"model": "m", "messages": []})[0] == 503
    assert server.faults == Faults(fail_529=1)
    server.set_faults(server.faults, summary="empty")  # keep the rest, change one field
    assert server.faults == Faults(fail_529=1, summary="empty")


def test_prompt_too_long_by_size(server):
    server.set_faults(max_prompt_tokens=50)
    assert post(server.base_url + "/v1/messages", anthropic_body({"role": "user", "content": "hi"}))[0] == 200
    status, _, raw = post(server.base_url + "/v1/messages", anthropic_body({"role": "user", "content": "x " * 500}))
    assert status == 400
    message = json.loads(raw)["error"]["message"]
    assert message.startswith("prompt is too long: ") and message.endswith(" tokens > 50 maximum")


def test_count_tokens_does_not_touch_the_cache(server):
    body = anthropic_body({"role": "user", "content": [{"type": "text", "text": "y " * 300,
                                                        "cache_control": {"type": "ephemeral"}}]})
    _, _, raw = post(server.base_url + "/v1/messages/count_tokens", body)
    counted = json.loads(raw)["input_tokens"]
    usage = json.loads(post(server.base_url + "/v1/messages", body)[2])["usage"]
    assert usage["cache_creation_input_tokens"] > 0 and usage["cache_read_input_tokens"] == 0
    assert counted == usage["input_tokens"] + usage["cache_creation_input_tokens"]


def test_anthropic_sse_stream(server):
    status, headers, raw = post(server.base_url + "/v1/messages",
                                anthropic_body({"role": "user", "content": "hello"}, stream=True))
    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    events = [line.split(": ", 1)[1] for line in raw.decode().splitlines() if line.startswith("event: ")]
    assert events[:2] == ["message_start", "content_block_start"]
    assert events[-3:] == ["content_block_stop", "message_delta", "message_stop"]


def test_openai_stream_ends_with_done_and_usage_on_request(server):
    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}], "stream": True,
            "stream_options": {"include_usage": True}}
    _, _, raw = post(server.base_url + "/v1/chat/completions", body)
    payloads = [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert payloads[-1] == "[DONE]"
    assert json.loads(payloads[-2])["usage"]["prompt_tokens"] > 0
    text = "".join(json.loads(p)["choices"][0]["delta"].get("content") or "" for p in payloads[:-2])
    assert text == "Fake reply to: hello"


def test_broken_stream_drops_the_connection(server):
    server.set_faults(broken_stream=True)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", "/v1/messages", json.dumps(anthropic_body({"role": "user", "content": "a b c d e f"},
                                                                       stream=True)))
        response = conn.getresponse()
        with pytest.raises(http.client.IncompleteRead):
            response.read()
    finally:
        conn.close()


def test_bad_requests(server):
    assert post(server.base_url + "/v1/messages", b"{not json")[0] == 400
    assert post(server.base_url + "/v1/messages", {"model": "m"})[0] == 400
    assert post(server.base_url + "/v1/nothing", {})[0] == 404
    with urllib.request.urlopen(server.base_url + "/health", timeout=10) as r:
        assert json.load(r) == {"status": "ok"}


def test_stop_does_not_wait_for_idle_or_slow_connections():
    srv = FakeServer(Faults(slow=30)).start()
    idle = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    idle.connect()
    errors: list[BaseException] = []

    def slow_call() -> None:
        try:
            post(srv.base_url + "/v1/messages", anthropic_body({"role": "user", "content": "x"}))
        except OSError as error:  # the stopping server hangs up: expected
            errors.append(error)

    caller = threading.Thread(target=slow_call)
    caller.start()
    deadline = time.monotonic() + 10
    while not srv.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert srv.requests, "the slow request never arrived"
    started = time.monotonic()
    srv.stop()
    assert time.monotonic() - started < 5
    caller.join(timeout=10)
    idle.close()
    with pytest.raises(RuntimeError, match="not running"):
        srv.port


def test_cli_serves_and_prints_its_url_first():
    cmd = [sys.executable, "-m", "lossless.testing", "serve", "--port", "0", "--reply", "from the CLI"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            lines: queue.Queue[str] = queue.Queue()
            threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
            url = lines.get(timeout=30).strip()
            assert url.startswith("http://127.0.0.1:")
            status, _, raw = post(url + "/v1/chat/completions",
                                  {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
            assert status == 200
            assert json.loads(raw)["choices"][0]["message"]["content"] == "from the CLI"
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    assert proc.returncode == 0  # SIGTERM is a clean stop


# -- what the real APIs refuse ------------------------------------------------------------------
USE = {"type": "tool_use", "id": "t1", "name": "Read", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}


@pytest.mark.parametrize(("messages", "says"), [
    ([{"role": "user", "content": "x"}, {"role": "assistant", "content": [USE]}, {"role": "user", "content": "y"}],
     "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: t1"),
    ([{"role": "user", "content": "x"}, {"role": "assistant", "content": [USE]}],
     "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: t1"),
    ([{"role": "user", "content": "x"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": [RESULT]}],
     "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: t1"),
    ([{"role": "user", "content": "x"}, {"role": "assistant", "content": [{**USE, "origin": "proxy"}]},
      {"role": "user", "content": [RESULT]}], "messages.1.content.0.tool_use.origin: Extra inputs are not permitted"),
    ([{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]}],
     "messages.1.content.0.thinking.signature: Field required"),
    ([{"role": "assistant", "content": "x"}], 'messages: first message must use the "user" role'),
])
def test_anthropic_path_refuses_what_the_real_api_refuses(server, messages, says):
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        status, _, raw = post(server.base_url + path, anthropic_body(*messages))
        error = json.loads(raw)["error"]
        assert status == 400 and error["type"] == "invalid_request_error" and error["message"].startswith(says)


def test_anthropic_path_accepts_caller_and_paired_calls(server):
    messages = [{"role": "user", "content": "x"},
                {"role": "assistant", "content": [{**USE, "caller": {"type": "direct"}}]},
                {"role": "user", "content": [RESULT, {"type": "text", "text": "go on"}]}]
    assert post(server.base_url + "/v1/messages", anthropic_body(*messages))[0] == 200


@pytest.mark.parametrize(("messages", "says"), [
    ([{"role": "user", "content": "x"},
      {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                             "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "user", "content": "y"}], "The following tool_call_ids did not have response messages: c1"),
    ([{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "c9", "content": "r"}],
     "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'"),
])
def test_openai_path_refuses_unpaired_tool_messages(server, messages, says):
    status, _, raw = post(server.base_url + "/v1/chat/completions", {"model": "m", "messages": messages})
    assert status == 400 and says in json.loads(raw)["error"]["message"]


def test_an_answer_is_cut_at_max_tokens(server):
    body = anthropic_body({"role": "user", "content": "word " * 200 + " <summary> please"}, max_tokens=20)
    message = json.loads(post(server.base_url + "/v1/messages", body)[2])
    assert message["stop_reason"] == "max_tokens" and len(message["content"][0]["text"]) <= 80
    body = {"model": "m", "messages": body["messages"], "max_tokens": 20}
    choice = json.loads(post(server.base_url + "/v1/chat/completions", body)[2])["choices"][0]
    assert choice["finish_reason"] == "length" and len(choice["message"]["content"]) <= 80


def test_retry_after_can_be_an_http_date(server):
    server.set_faults(fail_429=1, retry_after=5, retry_after_date=True)
    _, headers, _ = post(server.base_url + "/v1/messages", anthropic_body({"role": "user", "content": "x"}))
    headers = {k.lower(): v for k, v in headers.items()}
    assert "retry-after-ms" not in headers
    when = email.utils.parsedate_to_datetime(headers["retry-after"]).timestamp()
    assert 4 <= when - time.time() <= 6.5


# -- the CLI ---------------------------------------------------------------------------------------
def test_every_fault_has_a_cli_flag():
    from lossless.testing.__main__ import _parser, faults_from

    argv = ["serve", "--fail-429", "1", "--fail-529", "2", "--fail-500", "3", "--retry-after", "0.5",
            "--retry-after-date", "--max-prompt-tokens", "99", "--too-long-style", "vllm", "--broken-stream",
            "--slow", "0.25", "--summary", "malformed", "--reply", "hi", "--notes"]
    assert faults_from(_parser().parse_args(argv)) == Faults(
        fail_429=1, fail_529=2, fail_500=3, retry_after=0.5, retry_after_date=True, max_prompt_tokens=99,
        too_long_style="vllm", broken_stream=True, slow=0.25, summary="malformed", reply="hi", notes=True)
    assert faults_from(_parser().parse_args(["serve"])) == Faults()


def test_cli_fault_flags_reach_the_server():
    cmd = [sys.executable, "-m", "lossless.testing", "serve", "--fail-429", "1", "--fail-529", "1",
           "--fail-500", "1", "--retry-after", "2", "--max-prompt-tokens", "60", "--too-long-style", "llamacpp",
           "--summary", "empty", "--slow", "0.05"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            lines: queue.Queue[str] = queue.Queue()
            threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
            url = lines.get(timeout=30).strip()
            chat = url + "/v1/chat/completions"
            small = {"model": "m", "messages": [{"role": "user", "content": "<summary> please"}]}
            statuses = [post(chat, small)[0] for _ in range(3)]
            assert statuses == [429, 503, 500]
            status, _, raw = post(chat, {"model": "m", "messages": [{"role": "user", "content": "x " * 400}]})
            assert status == 400 and json.loads(raw)["error"]["type"] == "exceed_context_size_error"
            assert json.loads(post(chat, small)[2])["choices"][0]["message"]["content"] == ""
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    assert proc.returncode == 0


# -- the responder hook, statuses, HEAD and query strings -----------------------
def _last_user_text(body: dict) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else content[-1].get("text", "")


def test_responder_decides_from_the_request_and_none_falls_back(server):
    seen: list[tuple[str, str]] = []

    def respond(api, body):
        seen.append((api, _last_user_text(body)))
        if "tool" in _last_user_text(body):
            return [{"type": "tool_use", "id": "toolu_9", "name": "Read", "input": {"file_path": "/x"}}]
        return "scripted" if "script" in _last_user_text(body) else None

    server.set_responder(respond)
    url = server.base_url + "/v1/messages"
    used = json.loads(post(url, anthropic_body({"role": "user", "content": "use a tool"}))[2])
    assert used["stop_reason"] == "tool_use" and used["content"][0]["input"] == {"file_path": "/x"}
    assert json.loads(post(url, anthropic_body({"role": "user", "content": "script me"}))[2])["content"][0]["text"] \
        == "scripted"
    assert json.loads(post(url, anthropic_body({"role": "user", "content": "hi"}))[2])["content"][0]["text"] \
        == "Fake reply to: hi"
    chat = json.loads(post(server.openai_base_url + "/chat/completions",
                           {"model": "m", "messages": [{"role": "user", "content": "please script"}]})[2])
    assert chat["choices"][0]["message"]["content"] == "scripted"
    assert seen == [("anthropic", "use a tool"), ("anthropic", "script me"), ("anthropic", "hi"),
                    ("openai", "please script")]


def test_queued_answers_come_before_the_responder_and_count_tokens_skips_it():
    calls = []
    with FakeServer(responder=lambda api, body: calls.append(api) or "from responder") as srv:
        srv.enqueue("queued")
        url = srv.base_url + "/v1/messages"
        body = anthropic_body({"role": "user", "content": "hi"})
        assert post(srv.base_url + "/v1/messages/count_tokens", body)[0] == 200
        texts = [json.loads(post(url, body)[2])["content"][0]["text"] for _ in range(2)]
    assert texts == ["queued", "from responder"] and calls == ["anthropic"]


def test_the_responder_gets_a_copy_and_its_failure_is_a_500_that_is_kept(server):
    def respond(api, body):
        body["messages"].clear()  # must not reach the recorded request
        raise KeyError("no such file")

    server.set_responder(respond)
    status, _, raw = post(server.base_url + "/v1/messages", anthropic_body({"role": "user", "content": "hi"}))
    assert status == 500 and "responder failed on request 1: KeyError" in json.loads(raw)["error"]["message"]
    assert server.errors == ["responder failed on request 1: KeyError: 'no such file'"]
    assert server.requests[0].body["messages"] == [{"role": "user", "content": "hi"}]
    server.set_responder(None)
    assert post(server.base_url + "/v1/messages", anthropic_body({"role": "user", "content": "hi"}))[0] == 200


def test_statuses_follow_requests_including_rejections_and_streams(server):
    url = server.base_url + "/v1/messages"
    post(url, anthropic_body({"role": "user", "content": "hi"}))
    post(url, anthropic_body({"role": "assistant", "content": "x"}))
    post(url + "?beta=true", anthropic_body({"role": "user", "content": "hi"}, stream=True))
    post(server.base_url + "/v1/nothing", {})
    assert server.statuses == [200, 400, 200, 404]
    assert [r.query for r in server.requests] == ["", "", "beta=true", ""]
    assert server.requests[2].path == "/v1/messages"
    server.clear()
    assert server.statuses == [] and server.errors == []


def test_head_is_answered_and_recorded_and_health_is_not_recorded(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        for method in ("HEAD", "GET", "HEAD"):
            connection.request(method, "/" if method == "HEAD" else "/health")
            response = connection.getresponse()
            response.read()
            assert response.status == 200
    finally:
        connection.close()
    assert [(r.method, r.path) for r in server.requests] == [("HEAD", "/"), ("HEAD", "/")]
    assert server.statuses == [200, 200]


def test_with_thinking_enabled_a_tool_loop_must_send_its_thinking_back(server):
    think = {"type": "thinking", "thinking": "t", "signature": "s"}
    url = server.base_url + "/v1/messages"
    enabled = {"thinking": {"type": "enabled", "budget_tokens": 50}}
    stripped = [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "text", "text": "go"}, USE]},
                {"role": "user", "content": [RESULT]}]
    status, _, raw = post(url, anthropic_body(*stripped, **enabled))
    assert status == 400 and json.loads(raw)["error"]["message"].startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`.")
    kept = [stripped[0], {"role": "assistant", "content": [think, USE]}, stripped[2]]
    assert post(url, anthropic_body(*kept, **enabled))[0] == 200
    assert post(url, anthropic_body(*stripped, thinking={"type": "adaptive"}))[0] == 200  # may skip thinking
    assert post(url, anthropic_body(*stripped))[0] == 200  # thinking off: nothing to send back
    new_turn = [*stripped, {"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]
    assert post(url, anthropic_body(*new_turn, **enabled))[0] == 200  # only the loop in progress needs it


def test_with_thinking_enabled_every_answer_starts_with_signed_thinking(server):
    """As a real model's does: a scripted answer without thinking gets it, so a client
    that sends the answer back as it got it is accepted."""
    server.enqueue([USE], "after the tool", [{"type": "thinking", "thinking": "mine", "signature": "s1"}, USE])
    url = server.base_url + "/v1/messages"
    ask = {"role": "user", "content": "x"}
    enabled = {"thinking": {"type": "enabled", "budget_tokens": 50}}
    first = json.loads(post(url, anthropic_body(ask, **enabled))[2])["content"]
    assert [b["type"] for b in first] == ["thinking", "tool_use"] and first[0]["signature"]
    assert post(url, anthropic_body(ask, {"role": "assistant", "content": first},
                                     {"role": "user", "content": [RESULT]}, **enabled))[0] == 200
    kept = json.loads(post(url, anthropic_body(ask, stream=False, **enabled))[2])["content"]
    assert kept[0] == {"type": "thinking", "thinking": "mine", "signature": "s1"} and len(kept) == 2
    assert [b["type"] for b in json.loads(post(url, anthropic_body(ask))[2])["content"]] == ["text"]  # thinking off


def test_structured_output_requests_get_json_matching_their_schema(server):
    title = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"],
             "additionalProperties": False}
    asked = anthropic_body({"role": "user", "content": "name this session"},
                           output_config={"effort": "high", "format": {"type": "json_schema", "schema": title}})
    text = json.loads(post(server.base_url + "/v1/messages", asked)[2])["content"][0]["text"]
    assert json.loads(text) == {"title": "Fake reply to: name this session"}
    nested = {"type": "object", "required": ["kind", "n", "tags", "ok", "why"],
              "properties": {"kind": {"enum": ["bug", "feature"]}, "n": {"type": "integer", "minimum": 1},
                             "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                             "ok": {"type": ["boolean", "null"]}, "why": {"anyOf": [{"type": "string"}]},
                             "skipped": {"type": "string"}}}
    chat = {"model": "m", "messages": [{"role": "user", "content": "classify"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": nested}}}
    content = json.loads(post(server.openai_base_url + "/chat/completions", chat)[2])["choices"][0]["message"]
    assert json.loads(content["content"]) == {"kind": "bug", "n": 1, "tags": ["Fake reply to: classify"] * 2,
                                              "ok": False, "why": "Fake reply to: classify"}
    chat["response_format"] = {"type": "json_object"}
    content = json.loads(post(server.openai_base_url + "/chat/completions", chat)[2])["choices"][0]["message"]
    assert json.loads(content["content"]) == {"reply": "Fake reply to: classify"}
    server.set_faults(reply="fixed")
    assert json.loads(json.loads(post(server.base_url + "/v1/messages", asked)[2])["content"][0]["text"]) == \
        {"title": "fixed"}


def test_a_system_message_among_the_messages_needs_its_beta(server):
    """Claude Code 2.1 sends newer models a mid-conversation ``role: "system"`` message,
    with the beta header that allows it; without the header the API refuses it."""
    body = anthropic_body({"role": "user", "content": "hi"}, {"role": "system", "content": "Agents: claude, Explore"})
    status, _, raw = post(server.base_url + "/v1/messages", body)
    assert status == 400 and json.loads(raw)["error"]["message"].startswith(
        'messages.1: Unexpected role "system". The Messages API accepts a top-level `system` parameter')
    request = urllib.request.Request(server.base_url + "/v1/messages?beta=true", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json",
                                              "anthropic-beta": "claude-code-20250219, mid-conversation-system-2026-04-07"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200 and json.load(response)["content"][0]["text"] == "Fake reply to: hi"


# -- structured output: the instance matches the schema, whatever the schema ------------------
_leaf = st.one_of(
    st.sampled_from([{"type": t} for t in ("string", "integer", "number", "boolean", "null")]),
    st.lists(st.text(max_size=5), min_size=1, max_size=3).map(lambda values: {"enum": values}),
    st.integers(-5, 5).map(lambda n: {"type": "integer", "minimum": n}),
    st.just({"const": "fixed"}),
)
_schemas = st.recursive(_leaf, lambda inner: st.one_of(
    st.dictionaries(st.text("abcxyz", min_size=1, max_size=4), inner, max_size=4).flatmap(
        lambda props: st.builds(lambda req: {"type": "object", "properties": props, "required": req},
                                st.lists(st.sampled_from(sorted(props)), unique=True) if props else st.just([]))),
    st.tuples(inner, st.integers(0, 3)).map(lambda t: {"type": "array", "items": t[0], "minItems": t[1]}),
    st.lists(inner, min_size=1, max_size=3).map(lambda options: {"anyOf": options}),
    inner.map(lambda s: {**s, "type": [s["type"], "null"]} if isinstance(s.get("type"), str) else s),
), max_leaves=12)


def _conforms(value, schema) -> bool:
    if "const" in schema:
        return value == schema["const"]
    if "enum" in schema:
        return value in schema["enum"]
    if "anyOf" in schema:
        return any(_conforms(value, option) for option in schema["anyOf"])
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    checks = {"string": lambda v: isinstance(v, str), "null": lambda v: v is None,
              "boolean": lambda v: isinstance(v, bool),
              "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= schema.get("minimum", v),
              "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
              "array": lambda v: isinstance(v, list) and len(v) >= schema.get("minItems", 0) and all(
                  _conforms(item, schema["items"]) for item in v),
              "object": lambda v: isinstance(v, dict) and set(schema["required"]) <= set(v) and all(
                  _conforms(item, schema["properties"][key]) for key, item in v.items())}
    return any(checks[kind](value) for kind in kinds)


@given(_schemas, st.text(max_size=20))
def test_a_structured_answer_matches_any_schema_and_round_trips_as_json(schema, text):
    value = instance(schema, text)
    assert _conforms(value, schema), (schema, value)
    assert json.loads(json.dumps(value)) == value
