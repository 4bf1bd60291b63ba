"""ProviderHealth and the MeteredProvider's gating of side calls, driven by FakeProvider
with a hand-moved clock (no network, no waiting)."""

from __future__ import annotations

import pytest

from lossless.errors import (
    ContextTooLong,
    Overloaded,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderUnavailable,
    RateLimited,
)
from lossless.messages import user
from lossless.providers import Request, RetryPolicy, with_retries
from lossless.providers.health import ProviderHealth
from lossless.providers.metered import MeteredProvider
from lossless.testing import FakeProvider
from lossless.tokens import default_counter

SIDE = Request(messages=(user("notes please"),), purpose="session-notes")
MAIN = Request(messages=(user("hi"),))


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def metered(script, *, attempts: int | None = 3,
            sleeps: list[float] | None = None) -> tuple[MeteredProvider, FakeProvider, Clock]:
    fake = FakeProvider(script)
    clock = Clock()
    provider = fake if attempts is None else with_retries(
        fake, RetryPolicy(max_attempts=attempts, jitter=0, sleep=(sleeps if sleeps is not None else []).append))
    return MeteredProvider(provider, default_counter(), health=ProviderHealth(clock=clock)), fake, clock


@pytest.mark.parametrize("error", [RateLimited("429", status=429), Overloaded("529", status=529),
                                   ProviderHTTPError("500", status=500), ProviderConnectionError("refused")])
def test_a_transient_failure_pauses_side_calls_until_a_success(error):
    m, fake, clock = metered([error] * 3 + ["fine", "notes"])
    with pytest.raises(type(error)):
        m.complete(SIDE)  # outside a turn: the policy's three tries
    assert len(fake.requests) == 3 and not m.available
    with pytest.raises(ProviderUnavailable, match="session-notes call skipped: the provider failed 0 s ago"):
        m.complete(SIDE)
    assert len(fake.requests) == 3 and m.skipped == 1 and m.calls == 1  # a skip is not a call
    assert m.send(MAIN).text == "fine"  # the agent's request is never skipped; its success ends the pause
    assert m.available and m.complete(SIDE).text == "notes"


def test_the_pause_ends_after_the_cool_down_or_the_servers_longer_retry_after():
    m, fake, clock = metered([RateLimited("429", status=429, retry_after=5.0)], attempts=None)
    with pytest.raises(RateLimited):
        m.complete(SIDE)
    clock.t += 59
    assert not m.available
    clock.t += 1
    assert m.available and m.complete(SIDE).text == "OK."
    m, fake, clock = metered([RateLimited("429", status=429, retry_after=600.0)], attempts=None)
    with pytest.raises(RateLimited):
        m.complete(SIDE)
    clock.t += 599
    assert not m.available
    clock.t += 1
    assert m.available


@pytest.mark.parametrize("error", [ProviderHTTPError("400", status=400), ContextTooLong("too long", tokens=9, limit=8),
                                   ValueError("an adapter bug")])
def test_an_answer_that_is_not_transient_says_nothing_about_health(error):
    m, fake, _ = metered([error], attempts=None)
    with pytest.raises(type(error)):
        m.complete(SIDE)
    assert m.available and m.failures == 1


def test_in_a_turn_a_side_call_is_one_try_and_the_agent_gets_the_tries_left_after_the_delay():
    sleeps: list[float] = []
    m, fake, _ = metered([RateLimited("429", status=429, retry_after=2.0)] * 9, sleeps=sleeps)
    with m.turn():
        with pytest.raises(RateLimited):
            m.complete(SIDE)
        with pytest.raises(ProviderUnavailable):
            m.complete(SIDE)
        with pytest.raises(RateLimited):
            m.send(MAIN)
    assert len(fake.requests) == 3 and [r.max_attempts for r in fake.requests] == [1, 2, 2]
    assert sleeps == [2.0, 2.0]  # before the agent's first try (the side call's failure), then between its two
    clock_free = MeteredProvider(with_retries(FakeProvider(["fine"]), RetryPolicy(sleep=sleeps.append)),
                                 default_counter())
    with clock_free.turn():
        assert clock_free.send(MAIN).text == "fine"  # nothing failed before: the policy's own tries
    assert clock_free.provider.provider.requests[0].max_attempts is None


def test_in_a_turn_a_side_calls_long_retry_after_fails_the_agents_request_without_sending_it():
    m, fake, _ = metered([RateLimited("429", status=429, retry_after=3600.0), "unreachable"])
    with m.turn():
        with pytest.raises(RateLimited):
            m.complete(SIDE)
        with pytest.raises(RateLimited, match="asked to retry after 3600 s, over the 60 s maximum wait") as info:
            m.send(MAIN)
    assert info.value.retry_after == 3600.0 and len(fake.requests) == 1


def test_with_one_attempt_a_failed_side_call_was_the_turns_only_try():
    m, fake, _ = metered([Overloaded("529", status=529), "unreachable"], attempts=1)
    with m.turn():
        with pytest.raises(Overloaded):
            m.complete(SIDE)
        with pytest.raises(Overloaded):
            m.send(MAIN)
    assert len(fake.requests) == 1


def test_a_provider_without_a_policy_never_retries_and_always_tries_the_agents_request():
    m, fake, _ = metered([ProviderHTTPError("500", status=500), "fine"], attempts=None)
    with m.turn():
        with pytest.raises(ProviderHTTPError):
            m.complete(SIDE)
        assert m.send(MAIN).text == "fine"
    assert len(fake.requests) == 2 and m.policy is None
