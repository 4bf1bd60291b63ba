"""The proxy against hostile clients and broken upstreams: whatever comes in, the answer is
in the API's own shape (a JSON error, or an ``error`` event on a stream), never a traceback
and never a plain-text 500; the upstream is never the client's to choose; a client that hangs
up stops the upstream request; a body too large is a 413; a lone surrogate is a 400."""

from __future__ import annotations

import json
from dataclasses import replace
import socket
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy_kit import KEY, proxied
from proxy_raw import RawUpstream, http, sse_head
from lossless.proxy import ProxyServer, ProxySettings

PATHS = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions", "responses": "/v1/responses"}
HELLO = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
HELLOS = {"anthropic": HELLO, "openai": HELLO, "responses": {"model": "m", "max_output_tokens": 100, "input": "hi"}}


def _raw(port: int, target: str, body: bytes = b"", headers: str = "", method: str = "POST") -> tuple[int, bytes]:
    """Status and body of one request sent as raw bytes (any request target, any method)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(f"{method} {target} HTTP/1.1\r\nhost: x\r\nx-api-key: {KEY}\r\ncontent-type: application/json\r\n"
                  f"content-length: {len(body)}\r\nconnection: close\r\n{headers}\r\n".encode() + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), rest


def in_shape(route: str, status: int, body: bytes) -> dict:
    """The body of an error answer, checked to be that API's error shape."""
    value = json.loads(body)
    if route == "anthropic":
        assert value["type"] == "error" and set(value["error"]) >= {"type", "message"}, value
    else:
        assert set(value["error"]) >= {"message", "type"}, value
    return value


def test_a_target_that_is_not_a_path_is_a_400_and_reaches_no_other_host(tmp_path):
    """Before: ``POST @127.0.0.1:PORT/v1/messages`` became URL userinfo and the request, API key
    and all, went to PORT; an absolute URL or a bad one was a plain-text 500."""
    thief = socket.create_server(("127.0.0.1", 0))
    thief.settimeout(0.5)
    port = thief.getsockname()[1]
    with thief, proxied(tmp_path) as (srv, proxy):
        for target in (f"@127.0.0.1:{port}/v1/messages", f"http://127.0.0.1:{port}/v1/messages",
                       "http://[bad/v1/messages", f"@127.0.0.1:{port}/v1/models"):
            status, body = _raw(proxy.port, target, json.dumps(HELLO).encode(), "anthropic-version: 2023-06-01\r\n")
            assert status == 400
            assert "origin-form" in in_shape("anthropic", status, body)["error"]["message"]
        with pytest.raises(socket.timeout):
            thief.accept()
        status, _ = _raw(proxy.port, "/v1/messages?beta=true", json.dumps(HELLO).encode())
        assert status == 200 and srv.requests[-1].path == "/v1/messages"


@pytest.mark.parametrize(("case", "route"), [(case, route) for case in ("system", "tools", "deep", "surrogate", "not-json")
                                             for route in ("anthropic", "openai")
                                             if (case, route) != ("deep", "openai")])  # its tool input is a string
def test_hostile_bodies_get_a_400_in_the_apis_shape_and_nothing_is_forwarded(tmp_path, capfd, route, case):
    """Before: ``"system": 5``, ``"tools": 5`` and a tool input nested 980 deep were a plain-text
    500 and a traceback; a lone surrogate went upstream as the bytes ED A0 80."""
    body = dict(HELLO)
    if case == "system":
        body["system"] = 5
        if route == "openai":
            body["messages"] = [{"role": "system", "content": 5}, *body["messages"]]
    elif case == "tools":
        body["tools"] = 5
    elif case == "deep":
        body["messages"] = [*body["messages"], {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": "DEEP"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}]
    raw = json.dumps(body).encode().replace(b'"DEEP"', b'{"a":' * 980 + b"1" + b"}" * 980)
    if case == "surrogate":
        raw = json.dumps({**HELLO, "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                                {"role": "user", "content": "c \ud800 d"}]}).encode()
        assert b"\\ud800" in raw
    elif case == "not-json":
        raw = b"{" * 5000
    with proxied(tmp_path) as (srv, proxy):
        with httpx.Client(base_url=proxy.base_url, timeout=30) as client:
            r = client.post(PATHS[route], content=raw, headers={"x-api-key": KEY, "content-type": "application/json"})
        forwarded = [q for q in srv.requests if q.path == PATHS[route]]
    err = capfd.readouterr().err
    assert "Traceback" not in err
    if case == "system" and route == "openai":
        assert r.status_code in (200, 400)  # a system message's content is the upstream's to judge
        return
    assert r.status_code == 400, r.text
    message = in_shape(route, r.status_code, r.content)["error"]["message"]
    assert not forwarded
    if case == "surrogate":
        assert "message 2" in message and "surrogate" in message


def test_no_invalid_utf8_leaves_the_proxy_even_from_the_upstream(tmp_path):
    """An upstream answer holding a lone surrogate is relayed as its escape, valid UTF-8."""
    answer = b'{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"x \\ud800 y"}],' \
             b'"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":1}}'
    with RawUpstream(lambda _: http(200, answer)) as up, \
            ProxyServer(ProxySettings(upstream=up.base_url, window=20_000, store=tmp_path / "s"), log=lambda _: None) as p:
        r = httpx.post(p.base_url + "/v1/messages", json=HELLO, headers={"x-api-key": KEY}, timeout=30)
    assert r.status_code == 200
    r.content.decode("utf-8")  # strict
    assert json.loads(r.content)["content"][0]["text"] == "x \ud800 y"


@pytest.mark.parametrize("route", ["anthropic", "openai", "responses"])
def test_an_upstream_200_that_is_not_its_apis_answer_is_a_502_in_shape(tmp_path, route):
    """Before: an HTML body with status 200 was a plain-text 500 and a traceback."""
    for body in (b"<html>gateway</html>", b"[1, 2]", b'{"content": 5, "choices": 5}'):
        with RawUpstream(lambda _: http(200, body, "text/html")) as up, \
                ProxyServer(ProxySettings(upstream=up.base_url, window=20_000, store=tmp_path / "s"),
                            log=lambda _: None) as p:
            r = httpx.post(p.base_url + PATHS[route], json=HELLOS[route], headers={"x-api-key": KEY}, timeout=30)
        assert r.status_code == 502, (body, r.text)
        in_shape(route, r.status_code, r.content)


def test_a_malformed_event_does_not_cut_the_stream(tmp_path):
    """Before: a ``message_delta`` whose ``delta`` is 5 cut the client's stream there."""
    events = [
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [],
                                              "usage": {"input_tokens": 5, "output_tokens": 0}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hello"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": 5, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]
    stream = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    with RawUpstream(lambda _: sse_head() + stream) as up, \
            ProxyServer(ProxySettings(upstream=up.base_url, window=20_000, store=tmp_path / "s"), log=lambda _: None) as p:
        r = httpx.post(p.base_url + "/v1/messages", json={**HELLO, "stream": True}, headers={"x-api-key": KEY},
                       timeout=30)
    assert r.status_code == 200
    assert r.text.count("event: ") == len(events) and "message_stop" in r.text


def test_a_body_larger_than_the_limit_is_a_413_in_shape(tmp_path):
    """Before: a 210 MB body was read whole (1.6 GB peak)."""
    with proxied(tmp_path, max_body=1_000_000) as (srv, proxy):
        big = json.dumps({**HELLO, "messages": [{"role": "user", "content": "x" * 1_200_000}]}).encode()
        status, body = _raw(proxy.port, "/v1/messages", big)
        assert status == 413 and in_shape("anthropic", status, body)["error"]["type"] == "request_too_large"
        small = json.dumps({**HELLO, "messages": [{"role": "user", "content": "x" * 800_000}]}).encode()
        assert _raw(proxy.port, "/v1/messages", small)[0] == 200
        assert len([r for r in srv.requests if r.path == "/v1/messages"]) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_client_that_hangs_up_cancels_the_upstream_request_at_once(tmp_path, stream):
    """Before: the proxy read the upstream's stream to its end (10 s) after the client left at 1 s."""
    start = {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [],
                                                  "usage": {"input_tokens": 5, "output_tokens": 0}}}
    head = sse_head() + f"event: message_start\ndata: {json.dumps(start)}\n\n".encode()
    ping = b"event: ping\ndata: {\"type\": \"ping\"}\n\n"

    def answer(_: bytes):
        if stream:
            return [(0.0, head), *[(0.1, ping) for _ in range(100)]]
        return [(10.0, http(200, b"{}"))]

    with RawUpstream(answer) as up, \
            ProxyServer(ProxySettings(upstream=up.base_url, window=20_000, store=tmp_path / "s"), log=lambda _: None) as p:
        with socket.create_connection(("127.0.0.1", p.port)) as s:
            body = json.dumps({**HELLO, "stream": stream}).encode()
            s.sendall(f"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: {KEY}\r\ncontent-type: application/json"
                      f"\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body)
            time.sleep(1.0)
            left = time.monotonic()
        deadline = time.monotonic() + 8
        while not up.closed_at and time.monotonic() < deadline:
            time.sleep(0.02)
    assert up.closed_at and up.closed_at[0] - left < 1.0, (up.closed_at, left)


# -- the property: whatever comes in, whatever comes back ---------------------------------------
JSONS = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=20)
MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "tool", 5]),
                                 "content": JSONS | st.text(max_size=30)})
BODIES = JSONS | st.fixed_dictionaries(
    {"model": st.just("m"), "messages": st.lists(MESSAGE | JSONS, max_size=5)},
    optional={"system": JSONS, "tools": JSONS, "stream": st.booleans(), "max_tokens": JSONS,
              "tool_choice": JSONS})
ITEM = st.fixed_dictionaries({"type": st.sampled_from(["message", "function_call", "function_call_output",
                                                     "reasoning", "custom_tool_call", "item_reference", 5])},
                             optional={"role": st.sampled_from(["user", "assistant", "developer", "tool"]),
                                       "content": JSONS | st.text(max_size=30), "call_id": st.sampled_from(["c1", "c2", 3]),
                                       "name": JSONS, "arguments": JSONS | st.just("{}"), "output": JSONS})
RESPONSES_BODIES = JSONS | st.fixed_dictionaries(
    {"model": st.just("m"), "input": st.text(max_size=30) | st.lists(ITEM | MESSAGE | JSONS, max_size=5)},
    optional={"instructions": JSONS, "tools": JSONS, "stream": st.booleans(), "max_output_tokens": JSONS,
              "previous_response_id": st.none() | st.just("resp_1")})
UPSTREAM_JSON = JSONS | st.fixed_dictionaries({}, optional={
    "content": JSONS, "choices": JSONS, "usage": JSONS, "stop_reason": JSONS, "type": st.just("message"),
    "output": JSONS, "object": st.just("response"), "status": JSONS})
ANSWERS = st.one_of(
    st.tuples(st.sampled_from([200, 400, 429, 500, 529]), UPSTREAM_JSON.map(lambda v: json.dumps(v).encode())),
    st.tuples(st.sampled_from([200, 500]), st.binary(max_size=40)),
    st.tuples(st.just(-1), st.lists(st.tuples(st.sampled_from(["message_start", "content_block_start",
                                                               "content_block_delta", "message_delta", None,
                                                               "response.output_item.added", "response.completed"]),
                                              UPSTREAM_JSON), max_size=5)),
)


def _upstream_bytes(answer) -> bytes:
    status, payload = answer
    if status != -1:
        return http(status, payload)
    events = b"".join((f"event: {name}\n" if name else "").encode() + b"data: " + json.dumps(data).encode() + b"\n\n"
                      for name, data in payload)
    return sse_head() + events


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    current = {"answer": http(200, b"{}")}
    with RawUpstream(lambda _: current["answer"]) as up, \
            ProxyServer(ProxySettings(upstream=up.base_url, window=20_000, store=tmp_path_factory.mktemp("s")),
                        log=lambda _: None) as p, httpx.Client(base_url=p.base_url, timeout=30) as client:
        yield current, client


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(route=st.sampled_from(["anthropic", "openai", "responses"]), data=st.data(), answer=ANSWERS)
def test_any_body_and_any_upstream_answer_get_an_answer_in_the_apis_shape(fuzzed, capfd, route, data, answer):
    current, client = fuzzed
    body = data.draw(RESPONSES_BODIES if route == "responses" else BODIES)
    upstream = _upstream_bytes(answer)
    current["answer"] = upstream
    r = client.post(PATHS[route], content=json.dumps(body).encode(), headers={"x-api-key": KEY,
                                                                            "content-type": "application/json"})
    assert "Traceback" not in capfd.readouterr().err
    if r.content == upstream.partition(b"\r\n\r\n")[2]:
        return  # the upstream's own answer (an error, or a request lossless does not manage), as it came
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        assert r.status_code == 200
        return
    r.content.decode("utf-8")
    if r.status_code == 200:
        assert isinstance(json.loads(r.content), dict)
        return
    in_shape(route, r.status_code, r.content)


def test_an_upstream_that_under_reports_usage_does_not_switch_compaction_off(tmp_path):
    """Before: an upstream answering ``input_tokens: 10`` every time had 49,145 tokens forwarded
    into a 40,000-token window."""
    from lossless.dialects.anthropic import from_anthropic
    from lossless.tokens import default_counter

    answer = {"id": "m", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "Noted."}],
              "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 2}}
    with RawUpstream(lambda _: http(200, json.dumps(answer).encode())) as up, \
            ProxyServer(ProxySettings(upstream=up.base_url, window=40_000, store=tmp_path / "s"),
                        log=lambda _: None) as p, httpx.Client(base_url=p.base_url, timeout=30) as client:
        history: list = []
        for turn in range(40):
            history.append({"role": "user", "content": f"Part {turn}: " + "lorem ipsum dolor sit amet " * 200})
            r = client.post("/v1/messages", json={"model": "m", "max_tokens": 1_000, "messages": history},
                            headers={"x-api-key": KEY})
            assert r.status_code == 200
            history.append({"role": "assistant", "content": r.json()["content"]})
        stats = p.stats()["totals"]
    counter = default_counter()
    for raw in up.requests:
        body = json.loads(raw.partition(b"\r\n\r\n")[2])
        size = sum(counter.count_message(m) for m in from_anthropic(body["messages"]))
        assert size + 1_000 <= 40_000, size
    assert stats["usage_distrusted"] > 0


@pytest.mark.parametrize("route", ["anthropic", "openai", "responses"])
def test_a_body_that_stalls_is_a_408_in_shape_and_frees_its_connection(tmp_path, capfd, route):
    """Before: a client that sent half its body and then nothing held its connection (and the
    proxy's buffer) for as long as it liked — a slow-loris client, one socket per request."""
    with proxied(tmp_path, body_idle_seconds=0.5, verbose=True) as (srv, proxy):
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
            s.sendall(f"POST {PATHS[route]} HTTP/1.1\r\nhost: x\r\nx-api-key: {KEY}\r\n"
                      "content-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"model\": ".encode())
            asked = time.monotonic()
            data = b""
            while chunk := s.recv(65536):
                data += chunk
            waited = time.monotonic() - asked
        head, _, body = data.partition(b"\r\n\r\n")
        metrics = httpx.get(proxy.base_url + "/metrics", timeout=30).text
    assert head.split()[1] == b"408" and waited < 5  # answered, and the connection closed behind it
    assert "0.5 s" in str(in_shape(route, 408, body))
    assert 'kind="body_stalled"' in metrics and not srv.requests
    assert "Traceback" not in capfd.readouterr().err


def test_a_client_that_hangs_up_mid_body_leaves_no_traceback(tmp_path, capfd):
    with proxied(tmp_path) as (srv, proxy):
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", proxy.port)) as s:
                s.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                          b"content-length: 100000\r\n\r\n{\"messages\": [")
                time.sleep(0.2)
        time.sleep(0.5)
        assert httpx.post(proxy.base_url + "/v1/messages", json=HELLO, headers={"x-api-key": KEY},
                          timeout=30).status_code == 200
    assert "Traceback" not in capfd.readouterr().err and not [r for r in srv.requests if r.body == "{\"messages\": ["]


def test_a_connection_that_is_not_http_is_named_in_the_proxys_own_words(tmp_path, capfd):
    """A TLS handshake sent to the plain-HTTP port (a base URL of https://…) is answered 400 and
    closed, and the proxy says so on its own log in one line: not the HTTP server's 'WARNING:'."""
    with proxied(tmp_path) as (_, proxy):
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
            s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(32)) + b"\r\n\r\n")
            answer = s.recv(65536)
        code, _ = _raw(proxy.port, "/v1/messages", json.dumps(HELLO).encode())  # and it goes on serving
        time.sleep(0.2)
        lines = list(proxy.log_lines)
    assert answer.startswith(b"HTTP/1.1 400") and code == 200
    said = [line for line in lines if "not HTTP" in line]
    assert len(said) == 1 and said[0].startswith("lossless proxy: ") and "http://" in said[0]
    _, err = capfd.readouterr()
    assert "WARNING" not in err and "Invalid HTTP request" not in err


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
def test_a_compressed_request_body_is_decoded_or_named(tmp_path, coding):
    """A body sent with content-encoding gzip or deflate is read as the JSON it holds (and goes on
    plain); one the proxy cannot decode is a 415 in the API's shape; a decoded bomb is a 413."""
    import zlib

    raw = json.dumps(HELLO).encode()
    body = zlib.compress(raw) if coding == "deflate" else __import__("gzip").compress(raw) if coding == "gzip" else raw
    with proxied(tmp_path, max_body=200_000) as (srv, proxy):
        code, answer = _raw(proxy.port, "/v1/messages", body, f"content-encoding: {coding}\r\n")
        if coding == "br":
            assert code == 415 and "'br' is not supported" in in_shape("anthropic", code, answer)["error"]["message"]
            return
        assert code == 200, answer
        assert srv.requests[-1].body["messages"] == HELLO["messages"]
        assert "content-encoding" not in srv.requests[-1].headers
        bomb = __import__("gzip").compress(b" " * 5_000_000)
        code, answer = _raw(proxy.port, "/v1/messages", bomb, "content-encoding: gzip\r\n")
        assert code == 413 and "decoded" in in_shape("anthropic", code, answer)["error"]["message"]
        code, answer = _raw(proxy.port, "/v1/messages", b"not gzip at all", "content-encoding: gzip\r\n")
        assert code == 400 and "not valid gzip" in in_shape("anthropic", code, answer)["error"]["message"]


@pytest.mark.parametrize("route", ["anthropic", "openai", "responses"])
def test_a_streamed_request_answered_200_without_a_stream_is_a_502_in_shape(tmp_path, route):
    """Before: a captive portal's 200 HTML reached a streaming client as 200 text/html: the
    Anthropic SDK raised a bare AssertionError, the OpenAI SDK yielded nothing."""
    for body, kind in ((b"<html>captive portal</html>", "text/html"), (b'{"id": "x"}', "application/json")):
        with RawUpstream(lambda _: http(200, body, kind)) as up, \
                ProxyServer(ProxySettings(upstream=up.base_url, window=20_000, store=tmp_path / "s"),
                            log=lambda _: None) as p:
            r = httpx.post(p.base_url + PATHS[route], json={**HELLOS[route], "stream": True}, headers={"x-api-key": KEY},
                           timeout=30)
        assert r.status_code == 502, (body, r.text)
        assert "not an event stream" in str(in_shape(route, r.status_code, r.content))


def test_keep_alive_comments_reach_an_openai_client_as_they_come(tmp_path):
    """Before: every event that was not a JSON object (a gateway's ': keep-alive') was held back
    with [DONE] until the stream ended, so an idle client could time out before its first token."""
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": None}]}
    done = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    pieces = [(0.0, sse_head())] + [(0.4, b": keep-alive\n\n") for _ in range(3)] + \
        [(0.0, f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())]
    with RawUpstream(lambda _: pieces) as up, \
            ProxyServer(ProxySettings(upstream=up.base_url, window=20_000, store=tmp_path / "s"), log=lambda _: None) as p:
        seen, t0 = [], time.monotonic()
        with httpx.stream("POST", p.base_url + "/v1/chat/completions", json={**HELLO, "stream": True},
                          headers={"authorization": f"Bearer {KEY}"}, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith(":") or line.startswith("data:"):
                    seen.append((line, time.monotonic() - t0))
    comments = [t for line, t in seen if line.startswith(":")]
    data = [line for line, _ in seen if line.startswith("data:")]
    assert len(comments) == 3 and comments[0] < comments[-1] - 0.5  # each as it came, not all at the end
    assert data[-1] == "data: [DONE]" and '"hi"' in data[0]


@pytest.mark.parametrize("target", ["/../../admin/secret", "/v1/../../internal/metrics", "/v1/%2e%2e/admin",
                                    "/./v1/messages"])
def test_a_dot_segment_cannot_climb_out_of_the_upstreams_base_path(tmp_path, target):
    """Before: with an upstream of http://gw/anthropic, ``/../../admin/secret`` reached the
    gateway's ``/admin/secret`` (httpx resolved the dot segments)."""
    answer = b'{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],' \
             b'"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":1}}'
    with RawUpstream(lambda _: http(200, answer)) as up, \
            ProxyServer(ProxySettings(upstream=up.base_url + "/gateway/anthropic", window=20_000,
                                      store=tmp_path / "s"), log=lambda _: None) as p:
        for method in ("GET", "POST"):
            code, body = _raw(p.port, target, method=method)
            assert code == 400 and "no . or .. segment" in body.decode(), (method, target, body)
        assert not up.requests
        code, _ = _raw(p.port, "//v1/messages", json.dumps(HELLO).encode())
        assert code == 200 and b"POST /gateway/anthropic/v1/messages " in up.requests[-1]



def test_upstream_credentials_never_reach_a_client_or_the_banner(tmp_path):
    """Before: ``--upstream http://user:pass@host`` was echoed in every 502 and in the banner."""
    settings = ProxySettings(upstream="http://gwuser:GW-SECRET@127.0.0.1:1", window=20_000, store=tmp_path / "s")
    assert settings.upstream_shown() == "http://***@127.0.0.1:1"
    lines: list[str] = []
    with ProxyServer(replace(settings, verbose=True), log=lines.append) as p:
        r = httpx.post(p.base_url + "/v1/messages", json=HELLO, headers={"x-api-key": KEY}, timeout=30)
    assert r.status_code == 502 and "GW-SECRET" not in r.text and "gwuser" not in r.text
    assert any("unreachable" in line for line in lines) and not any("GW-SECRET" in line for line in lines)


@pytest.mark.parametrize("upstream", ["http://127.0.0.1:99999", "http://[::1", "http://exa mple.com", "ftp://x"])
def test_an_upstream_that_is_not_a_url_is_refused_at_start(upstream):
    from lossless.errors import ConfigError

    with pytest.raises(ConfigError, match="must be an http\\(s\\) URL"):
        ProxySettings(upstream=upstream)


def test_nan_is_refused_and_connection_named_headers_stay_here(tmp_path):
    """Before: ``"temperature": NaN`` went upstream as it came (not JSON to any API); a header the
    client's ``connection`` header named was forwarded; an answer carried two server and two date headers."""
    with proxied(tmp_path) as (srv, proxy):
        for constant in ("NaN", "Infinity", "-Infinity"):
            body = json.dumps(HELLO)[:-1] + f', "temperature": {constant}}}'
            code, answer = _raw(proxy.port, "/v1/messages", body.encode())
            assert code == 400 and f"{constant} is not a JSON value" in in_shape("anthropic", code, answer)["error"]["message"]
        r = httpx.post(proxy.base_url + "/v1/messages", json=HELLO, timeout=30,
                       headers={"x-api-key": KEY, "connection": "keep-alive, x-hop", "x-hop": "secret-ish", "x-kept": "1"})
        assert r.status_code == 200
        sent = srv.requests[-1].headers
        assert "x-hop" not in sent and sent.get("x-kept") == "1"
        assert len(r.headers.get_list("date")) == 1 and len(r.headers.get_list("server")) <= 1


@pytest.mark.parametrize("route", ["anthropic", "openai", "responses"])
def test_a_200_of_another_shape_is_a_502_not_a_made_up_answer(tmp_path, route):
    """Before: ``{"foo": "bar"}`` reached the client as ``{"foo": "bar", "content": []}``."""
    for body in (b'{"foo": "bar"}', {"anthropic": b'{"content": null}', "openai": b'{"choices": null}', "responses": b'{"output": null}'}[route]):
        with RawUpstream(lambda _: http(200, body)) as up, \
                ProxyServer(ProxySettings(upstream=up.base_url, window=20_000, store=tmp_path / "s"),
                            log=lambda _: None) as p:
            r = httpx.post(p.base_url + PATHS[route], json=HELLOS[route], headers={"x-api-key": KEY}, timeout=30)
        assert r.status_code == 502, (body, r.text)
        assert "list" in str(in_shape(route, r.status_code, r.content))


@pytest.mark.parametrize("route", ["anthropic", "openai", "responses"])
def test_an_error_event_inside_a_200_stream_is_counted_and_logged_as_one(tmp_path, route):
    """Before: an upstream that began a stream and then sent an ``error`` event (Anthropic's
    ``overloaded_error`` mid-answer) was a success in /stats, /metrics and the log: status 200."""
    error = {"anthropic": ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
             "openai": (None, {"error": {"message": "Overloaded", "type": "overloaded_error", "code": None}}),
             "responses": ("error", {"type": "error", "code": "overloaded_error", "message": "Overloaded",
                                     "sequence_number": 1})}[route]
    start = {"anthropic": ("message_start", {"type": "message_start", "message": {
                 "id": "m", "type": "message", "role": "assistant", "content": [],
                 "usage": {"input_tokens": 5, "output_tokens": 0}}}),
             "openai": (None, {"id": "c", "object": "chat.completion.chunk",
                               "choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
             "responses": ("response.created", {"type": "response.created", "sequence_number": 0,
                                                "response": {"id": "r", "object": "response", "output": []}})}[route]
    raw = b"".join((f"event: {name}\n" if name else "").encode() + b"data: " + json.dumps(data).encode() + b"\n\n"
                   for name, data in (start, error))
    lines: list[str] = []
    with RawUpstream(lambda _: sse_head() + raw) as up, \
            ProxyServer(ProxySettings(upstream=up.base_url, window=20_000, store=tmp_path / "s", verbose=True),
                        log=lines.append) as p:
        r = httpx.post(p.base_url + PATHS[route], json={**HELLOS[route], "stream": True}, headers={"x-api-key": KEY},
                       timeout=30)
        deadline = time.monotonic() + 10  # the request's record follows its answer's last byte: wait for it
        while 'kind="upstream_stream_error"' not in (metrics := httpx.get(p.base_url + "/metrics", timeout=30).text) \
                and time.monotonic() < deadline:
            time.sleep(0.02)
    (conv,) = p.stats()["conversations"]  # read once the proxy has stopped, as the log lines are
    assert r.status_code == 200 and b"Overloaded" in r.content  # the client reads the error as it came
    assert conv["upstream_errors"] == 1
    assert 'kind="upstream_stream_error"' in metrics
    assert any("the stream ended in an error event: overloaded_error" in line for line in lines), lines


@pytest.mark.parametrize("route", ["anthropic", "openai", "responses"])
def test_an_upstream_that_drops_a_connection_without_answering_is_asked_once_more(tmp_path, route):
    """A kept-alive connection the upstream closes as it idles out, just as a request goes on it:
    ``Server disconnected without sending a response``.  Before: a 502 to the client (seen once
    against llama.cpp's server on a loaded machine); the SDKs retry that themselves, a client
    behind the proxy cannot.  A second drop is the 502 it was."""
    answers = {"anthropic": b'{"id": "m", "type": "message", "role": "assistant", "content": [{"type": "text", '
                            b'"text": "hi"}], "stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 1}}',
               "openai": b'{"id": "c", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": '
                         b'"assistant", "content": "hi"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 5}}',
               "responses": b'{"id": "r", "object": "response", "status": "completed", "output": [{"type": "message", '
                            b'"role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}]}'}
    for drops, status in ((1, 200), (2, 502)):
        seen: list[int] = []

        def answer(_: bytes) -> bytes:
            seen.append(1)
            return b"" if len(seen) <= drops else http(200, answers[route])

        with RawUpstream(answer) as up, \
                ProxyServer(ProxySettings(upstream=up.base_url, window=20_000, store=tmp_path / f"s{drops}"),
                            log=lambda _: None) as p:
            r = httpx.post(p.base_url + PATHS[route], json=HELLOS[route], headers={"x-api-key": KEY}, timeout=30)
        assert r.status_code == status, (drops, r.text)
        assert len(up.requests) == min(drops + 1, 2)


# -- found by fuzzing the proxy with malformed requests and upstreams ------------------------------


def _exchange(port: int, data: bytes, timeout: float = 20) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got


def test_a_header_value_that_is_not_ascii_goes_on_as_the_client_sent_it(tmp_path):
    """Before: httpx re-encoded the values as ASCII and every route answered 500 (an OpenRouter-style
    ``x-title: Café``, a key pasted with a Cyrillic letter)."""
    ok = json.dumps({"id": "m1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "x"}],
                     "usage": {"input_tokens": 3, "output_tokens": 1}}).encode()
    with RawUpstream(lambda _: http(200, ok)) as up:
        with ProxyServer(ProxySettings(upstream=up.base_url, window=20_000, store=tmp_path / "s")) as proxy:
            body = json.dumps(HELLO).encode()
            got = _exchange(proxy.port, b"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: k\r\n"
                            + "x-title: Café\r\n".encode() + b"content-type: application/json; charset=utf-8\r\n"
                            + b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body)
            time.sleep(0.2)
    assert got.startswith(b"HTTP/1.1 200")
    head = up.requests[-1].partition(b"\r\n\r\n")[0].lower()
    assert "x-title: café".encode() in head
    assert b"content-type: application/json\r\n" in head + b"\r\n"  # the proxy's own body: its own type


@pytest.mark.parametrize("body, said", [
    ({"messages": [{"role": "system", "content": 5}, {"role": "user", "content": "hi"}]},
     "message 0 (a system message): its content must be a string or a list of text blocks"),
    ({"messages": [{"role": "system", "content": [{"type": "text", "text": 5}]}, {"role": "user", "content": "hi"}]},
     "block 0's 'text' must be a string"),
    ({"system": [5], "messages": [{"role": "user", "content": "hi"}]}, "'system': block 0 must be an object"),
    ({"system": [{"type": "text", "text": None}], "messages": [{"role": "user", "content": "hi"}]},
     "'system': block 0's 'text' must be a string"),
])
def test_a_system_prompt_that_is_not_text_is_a_400_naming_it(tmp_path, body, said):
    """Before: each was a 500 (a TypeError where the system prompt is counted or folded)."""
    with proxied(tmp_path) as (srv, proxy):
        code, raw = _raw(proxy.port, "/v1/messages", json.dumps({"model": "m", "max_tokens": 9, **body}).encode())
    assert code == 400 and said in in_shape("anthropic", code, raw)["error"]["message"]
    assert not srv.requests


def test_an_openai_tool_whose_function_is_not_an_object_is_left_for_the_upstream(tmp_path):
    with proxied(tmp_path) as (srv, proxy):
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": 5}]}
        code, _ = _raw(proxy.port, "/v1/chat/completions", json.dumps(body).encode())
    assert code == 200 and srv.requests  # before: a 500 (AttributeError) from the proxy's own look at it


@pytest.mark.parametrize("answer, status, said", [
    (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\ncontent-length: 4\r\n"
     b"connection: close\r\n\r\nnope", 502, "does not decode as its content-encoding says"),
    (http(500, b"<html>Internal Server Error</html>", "text/html"), 500, "answered 500 with <html>Internal"),
    (http(503, b""), 503, "answered 503 with an empty body"),
])
def test_an_upstream_answer_the_client_could_not_read_is_put_in_the_apis_shape(tmp_path, answer, status, said):
    with RawUpstream(lambda _: answer) as up:
        with ProxyServer(ProxySettings(upstream=up.base_url, window=20_000, store=tmp_path / "s")) as proxy:
            code, raw = _raw(proxy.port, "/v1/messages", json.dumps(HELLO).encode())
    assert code == status and said in in_shape("anthropic", code, raw)["error"]["message"]


def test_a_declared_length_over_the_limit_is_a_413_at_once(tmp_path):
    """Before: the proxy waited for the body, and after the idle time answered 408.  (A length up to
    eight times the limit is read and dropped, so that the client reads its 413 rather than a reset.)"""
    with proxied(tmp_path, max_body=1_000, body_idle_seconds=30) as (srv, proxy):
        asked = time.monotonic()
        got = _exchange(proxy.port, b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 52428800\r\n\r\n{")
        waited = time.monotonic() - asked
    assert got.startswith(b"HTTP/1.1 413") and waited < 5
    in_shape("anthropic", 413, got.partition(b"\r\n\r\n")[2])


def test_a_request_http_cannot_frame_gets_a_json_400(tmp_path):
    with proxied(tmp_path) as (_, proxy):
        got = _exchange(proxy.port, b"POST /v1/messages HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}")  # no Host
    assert got.startswith(b"HTTP/1.1 400") and b"content-type: application/json" in got.lower()
    assert "not HTTP/1.1" in json.loads(got.partition(b"\r\n\r\n")[2])["error"]["message"]


def test_a_connection_that_never_finishes_its_headers_is_closed(tmp_path):
    """Before: half a header held a connection (and its file descriptor) for ever; a few hundred
    such connections and the proxy accepted nothing."""
    with proxied(tmp_path, head_seconds=0.5) as (_, proxy):
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:
            s.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n")
            asked = time.monotonic()
            assert s.recv(100) == b""  # closed by the proxy
            waited = time.monotonic() - asked
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as s:  # a byte now and then
            closed = None
            for _ in range(20):
                try:
                    s.sendall(b"x")
                except OSError:
                    closed = True
                    break
                time.sleep(0.2)
        code, _ = _raw(proxy.port, "/v1/messages", json.dumps(HELLO).encode())  # and it serves on
    assert 0.3 < waited < 5 and closed and code == 200


def test_the_head_deadline_does_not_cut_a_slow_answer(tmp_path):
    slow = [(1.5, http(200, json.dumps({"id": "m1", "type": "message", "role": "assistant", "content": [
        {"type": "text", "text": "late"}], "usage": {"input_tokens": 3, "output_tokens": 1}}).encode()))]
    with RawUpstream(lambda _: slow) as up:
        with ProxyServer(ProxySettings(upstream=up.base_url, window=20_000, store=tmp_path / "s",
                                       head_seconds=0.5)) as proxy:
            code, raw = _raw(proxy.port, "/v1/messages", json.dumps(HELLO).encode())
    assert code == 200 and json.loads(raw)["content"][0]["text"] == "late"


def test_a_body_dripped_a_byte_at_a_time_is_a_408(tmp_path):
    """Each byte came within the idle time, so before, nothing ever ended it."""
    with proxied(tmp_path, body_idle_seconds=0.5) as (srv, proxy):
        body = json.dumps(HELLO).encode()
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=20) as s:
            s.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n" % len(body))
            asked = time.monotonic()
            got = b""
            for i in range(len(body)):
                try:
                    s.sendall(body[i:i + 1])
                except OSError:
                    break
                s.settimeout(0.3)
                try:
                    got += s.recv(65536)
                except (TimeoutError, socket.timeout):
                    continue
                if got:
                    break
            waited = time.monotonic() - asked
    assert got.startswith(b"HTTP/1.1 408") and waited < 6, (got[:80], waited)
    assert not srv.requests
