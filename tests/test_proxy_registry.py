"""The conversation registry is bounded in bytes: beyond ``max_held_bytes`` the least recently
used conversation is parked in the store, and a later continuation is restored from there —
forwarding exactly what it would have forwarded had it stayed (the cached prefix survives)."""

from __future__ import annotations

import json

import pytest

from proxy_kit import BASH, output, proxied, sdk_client

anthropic = pytest.importorskip("anthropic")


def _dump(message):
    return [b.model_dump(mode="json", exclude_none=True, exclude={"parsed_output"}) for b in message.content]


def _turn(srv, client, history, name, turn, chars):
    tool_id = f"toolu_{name}_{turn:03d}"
    srv.enqueue([{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": f"cat {name}{turn}"}}])
    answer = client.messages.create(model="m", max_tokens=1_000, messages=history, tools=[BASH], system="Be brief.")
    return [*history, {"role": "assistant", "content": _dump(answer)},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id,
                                          "content": output(turn, chars)}]}]


def _run(tmp_path, held, api="anthropic", after=3):
    """Conversation A for 8 turns, B for 3 (which parks A when ``held`` is small), A for ``after``
    more: what A's last requests forwarded, and the proxy's counters."""
    turn_of = _turn if api == "anthropic" else _openai_turn
    with proxied(tmp_path, max_held_bytes=held) as (srv, proxy):
        client = sdk_client(proxy, api)
        a = [{"role": "user", "content": "Task A: survey the repository."}]
        for turn in range(8):
            a = turn_of(srv, client, a, "a", turn, 60_000 if turn == 3 else 4_000)
        b = [{"role": "user", "content": "Task B: something else entirely."}]
        for turn in range(3):
            b = turn_of(srv, client, b, "b", turn, 4_000)
        held_during = len(proxy.conversations)
        start = len(srv.requests)
        for turn in range(8, 8 + after):
            a = turn_of(srv, client, a, "a", turn, 4_000)
        sent = [json.dumps(r.body, sort_keys=True) for r in srv.requests[start:]]
        counts = proxy.conversations.parked, proxy.conversations.restored, held_during
        calls = [c["calls"] for c in proxy.stats()["conversations"]]
    return sent, counts, calls


def test_a_parked_conversation_is_restored_and_forwards_the_same_bytes(tmp_path):
    """Before: the registry was bounded by count only (ten idle 4 MB conversations kept 393 MB)."""
    kept, (parked0, _, _), _ = _run(tmp_path / "kept", held=1 << 30)
    sent, (parked, restored, held_during), calls = _run(tmp_path / "parked", held=60_000)
    assert parked0 == 0
    assert parked >= 1 and restored >= 1 and held_during == 1  # A was out of memory while B ran
    assert sent == kept  # the same requests upstream: the cached prefix survives
    assert 3 in calls  # A went on as one conversation after its restoration (O(new): 3 calls, not rebuilt)


def _openai_turn(srv, client, history, name, turn, chars):
    from proxy_kit import BASH_FN

    tool_id = f"call_{name}_{turn:03d}"
    srv.enqueue([{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": f"cat {name}{turn}"}}])
    answer = client.chat.completions.create(model="m", max_tokens=1_000, tools=[BASH_FN],
                                            messages=[{"role": "system", "content": "Be brief."}, *history])
    message = answer.choices[0].message
    said = {"role": "assistant", "content": message.content,
            "tool_calls": [c.model_dump(mode="json", exclude_none=True) for c in message.tool_calls or []]}
    return [*history, said, {"role": "tool", "tool_call_id": tool_id, "content": output(turn, chars)}]


def test_a_parked_chat_completions_conversation_forwards_the_same_bytes(tmp_path):
    """The same on the Chat Completions route, past a compaction after the restore (so the
    restored calibration decides what is forwarded).  Before: the calibration was parked only
    when the manager's observed view had as many messages as the wire view — never on Chat
    Completions, where one neutral message holds several tool messages — so the restored
    conversation estimated raw and snipped on its first request where the kept one did not."""
    kept, _, _ = _run(tmp_path / "kept", held=1 << 30, api="openai", after=6)
    sent, (parked, restored, _), _ = _run(tmp_path / "parked", held=60_000, api="openai", after=6)
    assert parked >= 1 and restored >= 1
    assert sent == kept
