"""RetryPolicy and with_retries, driven by FakeProvider (no network, no waiting)."""

from __future__ import annotations

import pytest

from lossless.errors import (
    ConfigError,
    ContextTooLong,
    Overloaded,
    ProviderConnectionError,
    ProviderHTTPError,
    RateLimited,
)
from lossless.messages import user
from lossless.providers import Request, RetryPolicy, is_retryable, with_retries
from lossless.testing import FakeProvider

REQUEST = Request(messages=(user("hi"),))


def policy(sleeps: list[float], **kw) -> RetryPolicy:
    return RetryPolicy(sleep=sleeps.append, jitter=0, **kw)


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (RateLimited("x", status=429), True),
        (Overloaded("x", status=529), True),
        (ProviderConnectionError("x"), True),
        (ProviderHTTPError("x", status=500), True),
        (ProviderHTTPError("x", status=502), True),
        (ProviderHTTPError("x", status=408), True),
        (ProviderHTTPError("x", status=400), False),
        (ProviderHTTPError("x", status=401), False),
        (ProviderHTTPError("x", status=None), False),
        (ContextTooLong("x", tokens=5, limit=4), False),
        (ValueError("a bug"), False),
    ],
)
def test_what_is_retried(error, retryable):
    assert is_retryable(error) is retryable


def test_backoff_doubles_and_is_capped():
    p = RetryPolicy(base_delay=0.5, max_delay=3.0, jitter=0)
    assert [p.delay(n, ProviderConnectionError("x")) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_jitter_only_shortens():
    p = RetryPolicy(base_delay=1.0, jitter=0.25, random=lambda: 0.999)
    assert 0.75 <= p.delay(1, ProviderConnectionError("x")) <= 1.0


def test_retry_after_is_honoured_and_capped():
    p = RetryPolicy(max_retry_after=10.0, jitter=0)
    assert p.delay(1, RateLimited("x", retry_after=3.0)) == 3.0
    assert p.delay(1, RateLimited("x", retry_after=3600.0)) == 10.0
    assert p.delay(1, Overloaded("x", retry_after=0.0)) == 0.0


@pytest.mark.parametrize("error", [RateLimited("slow", status=429, retry_after=3600.0),
                                   Overloaded("busy", status=529, retry_after=90.5)])
def test_a_retry_after_over_the_maximum_fails_fast_carrying_the_servers_value(error):
    sleeps: list[float] = []
    fake = FakeProvider([error, "unreachable"])
    with pytest.raises(type(error)) as info:
        with_retries(fake, policy(sleeps, max_retry_after=60.0)).complete(REQUEST)
    assert info.value.retry_after == error.retry_after and info.value.status == error.status
    assert info.value.__cause__ is error
    wanted = "3600" if error.retry_after == 3600.0 else "90.5"
    assert str(info.value).startswith(f"provider asked to retry after {wanted} s, over the 60 s maximum wait; ")
    assert sleeps == [] and len(fake.requests) == 1


def test_a_request_may_lower_the_policys_attempts_but_not_raise_them():
    for asked, sent in ((1, 1), (2, 2), (9, 3), (None, 3), (0, 1)):
        sleeps: list[float] = []
        fake = FakeProvider([RateLimited("a", retry_after=0.0)] * 9)
        with pytest.raises(RateLimited):
            with_retries(fake, policy(sleeps, max_attempts=3)).complete(Request(messages=(user("hi"),),
                                                                                max_attempts=asked))
        assert len(fake.requests) == sent, asked


def test_invalid_policies_are_refused():
    with pytest.raises(ConfigError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ConfigError, match="jitter"):
        RetryPolicy(jitter=2)


def test_retries_until_success_with_the_recorded_schedule():
    sleeps: list[float] = []
    fake = FakeProvider([RateLimited("429", retry_after=2.0), Overloaded("529"), ProviderHTTPError("500", status=500),
                         "finally"])
    response = with_retries(fake, policy(sleeps, max_attempts=4, base_delay=0.5)).complete(REQUEST)
    assert response.text == "finally"
    assert sleeps == [2.0, 1.0, 2.0]  # retry-after, then 0.5 * 2**1, 0.5 * 2**2
    assert len(fake.requests) == 4


def test_exhausted_retries_raise_the_last_error():
    sleeps: list[float] = []
    fake = FakeProvider([RateLimited("a", retry_after=1.0)] * 5)
    with pytest.raises(RateLimited):
        with_retries(fake, policy(sleeps, max_attempts=3)).complete(REQUEST)
    assert len(fake.requests) == 3 and sleeps == [1.0, 1.0]


@pytest.mark.parametrize("error", [ContextTooLong("too long", tokens=9, limit=8), ProviderHTTPError("bad", status=400)])
def test_never_retried(error):
    sleeps: list[float] = []
    fake = FakeProvider([error, "unreachable"])
    with pytest.raises(type(error)):
        with_retries(fake, policy(sleeps)).complete(REQUEST)
    assert len(fake.requests) == 1 and sleeps == []


def test_stream_is_retried_before_its_first_delta():
    sleeps: list[float] = []
    fake = FakeProvider([Overloaded("busy", retry_after=0.5), "one two three"])
    gen = with_retries(fake, policy(sleeps)).stream(REQUEST)
    deltas = []
    with pytest.raises(StopIteration) as stop:
        while True:
            deltas.append(next(gen))
    assert "".join(deltas) == "one two three"
    assert stop.value.value.text == "one two three"  # the generator returns the Response
    assert sleeps == [0.5]


def test_stream_failing_after_text_is_not_retried():
    class Breaks(FakeProvider):
        def stream(self, request):
            self.requests.append(request)
            yield "partial "
            raise ProviderConnectionError("cut")

    sleeps: list[float] = []
    fake = Breaks()
    got = []
    with pytest.raises(ProviderConnectionError):
        for delta in with_retries(fake, policy(sleeps)).stream(REQUEST):
            got.append(delta)
    assert got == ["partial "] and len(fake.requests) == 1 and sleeps == []


def test_missing_capabilities_say_so():
    class Minimal:
        def complete(self, request):
            raise AssertionError

    wrapped = with_retries(Minimal())
    with pytest.raises(NotImplementedError, match="token-count"):
        wrapped.count_tokens(REQUEST)
    with pytest.raises(NotImplementedError, match="stream"):
        next(wrapped.stream(REQUEST))


def test_count_tokens_is_retried():
    sleeps: list[float] = []

    class Flaky(FakeProvider):
        calls = 0

        def count_tokens(self, request):
            self.calls += 1
            if self.calls == 1:
                raise ProviderConnectionError("reset")
            return 42

    assert with_retries(Flaky(), policy(sleeps)).count_tokens(REQUEST) == 42
    assert sleeps == [0.5]
