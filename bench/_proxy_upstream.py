"""The bench's upstream: reads the request and answers a short canned Messages stream at
once, parsing nothing, so what it adds does not depend on the body.  Prints its URL.

    python bench/_proxy_upstream.py [answers.json] [--responses]

With ``--responses`` the streams are the Responses API's typed events and the answers are
output items (``{"turn": [items]}``).

With ``answers.json`` (``{"turn": [content blocks]}``), a request carrying ``x-bench-turn: K``
is answered with turn K's blocks as a stream, built at start: the assistant message the client's
next request will carry, as an agent's model would have said it (the proxy continues a
conversation only when the client echoes the answer it was given)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EVENTS = [
    {"type": "message_start", "message": {"id": "msg_bench", "type": "message", "role": "assistant",
                                          "model": "claude-bench", "content": [], "stop_reason": None,
                                          "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
     "usage": {"output_tokens": 2}},
    {"type": "message_stop"},
]
STREAM = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in EVENTS).encode()
ANSWERS: dict[str, bytes] = {}


def stream(blocks: list[dict]) -> bytes:
    """A Messages stream that says ``blocks`` (text and tool_use; thinking is left out)."""
    events = [EVENTS[0]]
    said = [b for b in blocks if b.get("type") in ("text", "tool_use")] or [{"type": "text", "text": "Done."}]
    for i, b in enumerate(said):
        if b["type"] == "text":
            events += [{"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                       {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b["text"]}}]
        else:
            events += [{"type": "content_block_start", "index": i, "content_block": {
                           "type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}},
                       {"type": "content_block_delta", "index": i, "delta": {
                           "type": "input_json_delta", "partial_json": json.dumps(b.get("input", {}))}}]
        events.append({"type": "content_block_stop", "index": i})
    stop = "tool_use" if any(b["type"] == "tool_use" for b in said) else "end_turn"
    events += [{**EVENTS[-2], "delta": {"stop_reason": stop, "stop_sequence": None}}, EVENTS[-1]]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def responses_stream(items: list[dict]) -> bytes:
    """A Responses stream whose output is ``items`` (as the next request echoes them)."""
    said = items or [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}]
    answer = {"id": "resp_bench", "object": "response", "status": "completed", "output": said,
              "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}
    events: list[dict] = [{"type": "response.created", "response": {**answer, "status": "in_progress", "output": []}}]
    for i, item in enumerate(said):
        events += [{"type": "response.output_item.added", "output_index": i, "item": item},
                   {"type": "response.output_item.done", "output_index": i, "item": item}]
    events.append({"type": "response.completed", "response": answer})
    return "".join(f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n"
                   for n, e in enumerate(events)).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body leave at once, no delayed-ACK stall

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        answer = ANSWERS.get(self.headers.get("x-bench-turn") or "", STREAM)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


if __name__ == "__main__":
    import sys

    responses = "--responses" in sys.argv
    files = [a for a in sys.argv[1:] if a != "--responses"]
    if responses:
        STREAM = responses_stream([])
    if files:
        with open(files[0], encoding="utf-8") as f:
            ANSWERS.update({k: (responses_stream if responses else stream)(v) for k, v in json.load(f).items()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()
