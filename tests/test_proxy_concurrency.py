"""Fifty conversations at once through one proxy, each with the real SDK in its own thread."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from proxy_kit import check_requests, output, proxied, sdk_client

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
CONVERSATIONS = 50
WINDOW = 20_000


def _history(n: int) -> list[dict]:
    """A conversation that already ran ten tool rounds (its own outputs), so it must compact."""
    out = [{"role": "user", "content": f"Task {n}: survey the code."}]
    for i in range(10):
        out += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{n}_{i}", "name": "Bash",
                                                   "input": {"command": f"cat {n}/{i}"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}_{i}",
                                              "content": output(n * 100 + i, 4_000)}]}]
    return out


def _anthropic(proxy, n: int) -> int:
    client = sdk_client(proxy, "anthropic")
    history = _history(n)
    for turn in range(3):
        if turn:
            history.append({"role": "user", "content": f"conversation {n} turn {turn}"})
        if n % 2:
            answer = client.messages.create(model="m", max_tokens=1_000, messages=history)
            text = answer.content[0].text
        else:
            with client.messages.stream(model="m", max_tokens=1_000, messages=history) as s:
                text = s.get_final_message().content[0].text
        # the fake answers its last user text: on the first turn the task, or the account of the
        # rounds a snip removed (which then comes after the task); after that, this client's turn
        expected = (f"Fake reply to: Task {n}", "Fake reply to: [lossless: snipped") if not turn else (
            f"Fake reply to: conversation {n}",)
        assert text.startswith(expected)
        history.append({"role": "assistant", "content": text})
    return n


def _openai(proxy, n: int) -> int:
    client = sdk_client(proxy, "openai")
    history = [{"role": "user", "content": f"Chat {n}: " + output(n, 30_000)}]
    for turn in range(3):
        r = client.chat.completions.create(model="m", max_completion_tokens=1_000, messages=history)
        history += [{"role": "assistant", "content": r.choices[0].message.content},
                    {"role": "user", "content": f"chat {n} turn {turn}"}]
    return n


def test_fifty_concurrent_conversations_run_without_an_error(tmp_path):
    with proxied(tmp_path) as (srv, proxy):
        with ThreadPoolExecutor(CONVERSATIONS) as pool:
            futures = [pool.submit(_anthropic if n % 5 else _openai, proxy, n) for n in range(CONVERSATIONS)]
            done = sorted(f.result() for f in futures)
        stats = proxy.stats()
    assert done == list(range(CONVERSATIONS))
    assert stats["totals"]["conversations"] == CONVERSATIONS  # each continued its own, none mixed up
    assert all(c["calls"] == 3 and c["upstream_errors"] == 0 for c in stats["conversations"])
    assert check_requests(srv, "anthropic", WINDOW) == 120 and check_requests(srv, "openai", WINDOW) == 30
