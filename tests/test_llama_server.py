"""``lossless proxy`` in front of a real OpenAI-compatible server: llama.cpp's ``llama-server``
with SmolLM2-135M at a 2,048-token context (``tests/llama_kit.py`` says where both come from;
the test skips, saying which is missing, when one is).

The promise under test: the call never fails for size, even when the server holds less than
lossless believes — its tokenizer counts more than lossless's estimate (the pasted documents are
dense with identifiers, figures and Russian words, which SmolLM2 cuts about three times finer),
and its context (``-c``) is half the window the proxy was told.  The server refuses prompts the
proxy thought fit (400 ``exceed_context_size_error``); the proxy's reactive retry must compact
under the size the server reported and answer before any error reaches the client, streamed or
not.  (With the window right, lossless now compacts early enough that the server refuses
nothing: the mismatch is what makes the retry run.)
"""

from __future__ import annotations

import json
import random
from typing import Any, Iterator

import pytest

from llama_kit import LlamaServer, why_unavailable
from lossless.errors import ContextTooLong
from lossless.proxy import relay

CTX = 2048
TURNS = 5  # the server refuses on turns 2 (streamed) and 4: each turn is ~6 s of prompt on 2 cores
MAX_TOKENS = 12

# What llama.cpp's server answered, verbatim, to a 2,344-token prompt at -c 2048
# (tools/server: send_error with ERROR_TYPE_EXCEED_CONTEXT_SIZE → HTTP 400).
LLAMA_TOO_LONG = (400, b'{"error":{"code":400,"message":"request (2344 tokens) exceeds the available context size '
                       b'(2048 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":2344,'
                       b'"n_ctx":2048}}')


def test_the_relay_recognises_llama_cpps_too_long_with_its_numbers():
    error = relay.too_long(*LLAMA_TOO_LONG)
    assert isinstance(error, ContextTooLong) and (error.tokens, error.limit) == (2344, 2048)
    # Versions whose message says no number: the body's own fields give them.
    quiet = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                       "type": "exceed_context_size_error", "n_prompt_tokens": 2344, "n_ctx": 2048}}
    error = relay.too_long(400, json.dumps(quiet).encode())
    assert isinstance(error, ContextTooLong) and (error.tokens, error.limit) == (2344, 2048)
    # A prompt llama.cpp cannot split (multimodal) is refused in other words.
    other = {"error": {"code": 400, "message": "input (3000 tokens) is larger than the max context size (2048 tokens). "
                       "skipping", "type": "exceed_context_size_error", "n_prompt_tokens": 3000, "n_ctx": 2048}}
    error = relay.too_long(400, json.dumps(other).encode())
    assert isinstance(error, ContextTooLong) and (error.tokens, error.limit) == (3000, 2048)
    assert relay.too_long(500, LLAMA_TOO_LONG[1]) is None  # a server error is not a size error


WORDS = ("склад", "поставка", "партия", "остаток", "накладная", "получатель", "ячейка", "отгрузка", "счёт",
         "количество", "проверка", "возврат", "упаковка", "маршрут", "заказ", "срок")


def document(rng: random.Random, number: int, lines: int) -> str:
    """A pasted inventory: ids, hashes and figures (SmolLM2 cuts them into many short tokens)."""
    rows = [f"Inventory export #{number} (pasted from the warehouse system)"]
    for _ in range(lines):
        rows.append(f"SKU-{rng.randrange(10**6):06d} | bin {rng.choice('ABCDEFGH')}{rng.randrange(100):02d} | "
                    f"qty {rng.randrange(1000)} | lot {rng.getrandbits(40):010x} | {rng.random() * 1000:.2f} EUR")
    return "\n".join(rows)


def letter(rng: random.Random, number: int, words: int) -> str:
    """A pasted supplier's letter in Russian: SmolLM2's mostly-English vocabulary spends 3-4
    tokens where lossless's estimator expects one, so the server counts far more than the proxy."""
    body = " ".join(rng.choice(WORDS) for _ in range(words))
    return f"Letter #{number} from the supplier (pasted):\n{body}"


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaServer]:
    if (why := why_unavailable()) is not None:
        pytest.skip(why)
    with LlamaServer(ctx=CTX) as running:
        yield running


@pytest.fixture
def refused(monkeypatch) -> list[ContextTooLong]:
    """Every "too long" the server answered the proxy with, as the proxy read it."""
    from lossless.proxy import turn as turn_module

    seen: list[ContextTooLong] = []

    def spied(status: int, body: bytes) -> ContextTooLong | None:
        error = relay.too_long(status, body)
        if error is not None:
            seen.append(error)
        return error

    monkeypatch.setattr(turn_module, "too_long", spied)
    return seen


def test_a_long_conversation_at_a_2048_token_context_never_fails_for_size(server, tmp_path, refused):
    import openai

    from lossless.proxy import ProxyServer, ProxySettings

    rng = random.Random(7)
    # The proxy believes the model's window is twice what the server runs (a model's published
    # window beside a local server started with a smaller -c): the server refuses prompts the proxy
    # thought fit, and the reactive retry must fit the limit the server reported.
    settings = ProxySettings(upstream=server.base_url, window=2 * CTX, store=tmp_path / "store")
    with ProxyServer(settings) as proxy, openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="sk-local",
                                                      max_retries=0, timeout=120) as client:
        history: list[dict[str, Any]] = [{"role": "system", "content": "You are a concise stock clerk."}]
        sent_after_refusal: list[tuple[ContextTooLong, int]] = []
        for turn in range(TURNS):
            pasted = letter(rng, turn, 110) if turn % 3 == 1 else document(rng, turn, 12 if turn % 2 else 20)
            history.append({"role": "user", "content": pasted + "\n\nWhat does it ask of us? One line."})
            before = len(refused)
            if turn % 3 == 2:  # some streamed: the retry happens before the stream starts
                stream = client.chat.completions.create(model="smollm2", messages=history, max_tokens=MAX_TOKENS,
                                                        stream=True, stream_options={"include_usage": True})
                chunks = list(stream)
                text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
                usage = next(c.usage for c in chunks if c.usage is not None)
            else:
                answer = client.chat.completions.create(model="smollm2", messages=history, max_tokens=MAX_TOKENS)
                text, usage = answer.choices[0].message.content or "", answer.usage
            assert usage.prompt_tokens < CTX
            sent_after_refusal += [(error, usage.prompt_tokens) for error in refused[before:]]
            history.append({"role": "assistant", "content": text})
        stats = proxy.stats()

    assert refused, "the server never refused a prompt: the test no longer exercises the reactive retry"
    totals = stats["totals"]
    assert totals["too_long_retries"] == len(refused) and totals["stages"].get("reactive") == len(refused)
    for error, prompt_tokens in sent_after_refusal:
        # What the server counted and what it takes, and the retry well under both.
        assert error.tokens is not None and error.limit == CTX and error.tokens >= CTX
        assert prompt_tokens <= 0.8 * error.limit, (error.tokens, prompt_tokens)


def test_the_responses_api_through_the_proxy_never_fails_for_size_either(server, tmp_path, refused):
    """The same conversation on llama.cpp's ``POST /v1/responses`` (what Codex CLI and the Agents
    SDK speak): the server refuses prompts the proxy thought fit, and the Responses door's
    reactive retry answers before any error reaches the client, streamed or not.  (llama.cpp's
    stream has no ``output_index`` or ``sequence_number``; the SDK's raw events read it, and the
    proxy relays it as it came.)"""
    import openai

    from lossless.proxy import ProxyServer, ProxySettings

    rng = random.Random(7)
    settings = ProxySettings(upstream=server.base_url, window=2 * CTX, store=tmp_path / "store")
    with ProxyServer(settings) as proxy, openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="sk-local",
                                                      max_retries=0, timeout=120) as client:
        items: list[Any] = []
        prompts: list[int] = []
        for turn in range(TURNS):
            pasted = letter(rng, turn, 110) if turn % 3 == 1 else document(rng, turn, 12 if turn % 2 else 20)
            items.append({"role": "user", "content": pasted + "\n\nWhat does it ask of us? One line."})
            kwargs: dict[str, Any] = dict(model="smollm2", instructions="You are a concise stock clerk.", input=items,
                                          max_output_tokens=MAX_TOKENS)
            if turn % 3 == 2:
                events = list(client.responses.create(stream=True, **kwargs))
                answer = next(e.response for e in events if e.type == "response.completed")
            else:
                answer = client.responses.create(**kwargs)
            assert answer.status == "completed" and answer.output and answer.usage is not None
            prompts.append(answer.usage.input_tokens)
            items += [o.model_dump(mode="json", exclude_none=True) for o in answer.output]
        (conv,) = proxy.stats()["conversations"]
    assert refused, "the server never refused a prompt: the test no longer exercises the reactive retry"
    assert conv["dialect"] == "responses" and conv["too_long_retries"] == len(refused)
    assert max(prompts) < CTX and all(e.limit == CTX and e.tokens is not None and e.tokens >= CTX for e in refused)
