"""The provider-error recognisers: pure functions, tested on real wordings and by property."""

from __future__ import annotations

import email.utils

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.errors import ContextTooLong, Overloaded, ProviderHTTPError, RateLimited
from lossless.providers.errors import (
    error_fields,
    error_from_status,
    parse_retry_after,
    recognize_context_too_long,
)

# (status, message, code) -> (tokens, limit), from the providers' and servers' own wordings.
TOO_LONG = [
    (400, "prompt is too long: 210000 tokens > 200000 maximum", None, (210000, 200000)),
    (400, "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length "
          "or `max_tokens` and try again", None, (209573, 200000)),
    (400, "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. "
          "Please reduce the length of the messages.", "context_length_exceeded", (130512, 128000)),
    (400, "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 300001 tokens. "
          "Please reduce the length of the messages.", "context_length_exceeded", (300001, 272000)),
    (400, "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the "
          "messages, 1000 in the completion). Please reduce the length of the messages or completion.", None,
     (5000, 4096)),
    (400, "'max_tokens' or 'max_completion_tokens' is too large: 1000. This model's maximum context length is 4096 "
          "tokens and your request has 3500 input tokens (1000 > 4096 - 3500).", None, (4500, 4096)),
    (400, "request (5000 tokens) exceeds the available context size (4096 tokens), try increasing it", None,
     (5000, 4096)),
    (400, "the request exceeds the available context size, try increasing it", "exceed_context_size_error",
     (None, None)),
    (400, "prompt too long; exceeded max context length by 12 tokens", None, (None, None)),
    (500, "input length exceeds the context length", None, (None, None)),
    (400, "whatever the wording", "context_length_exceeded", (None, None)),
    (413, "Request exceeds the maximum allowed number of bytes.", "request_too_large", (None, None)),
    (400, "prompt is too long: 1,234,567 tokens > 1,000,000 maximum", None, (1234567, 1000000)),
]

NOT_TOO_LONG = [
    (400, "max_tokens: Field required", None),
    (401, "invalid x-api-key", "authentication_error"),
    (429, "This model's maximum context length is 10 tokens", "rate_limit_exceeded"),
    (429, "Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 50000.", None),
    (400, "Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 50000.", None),
    (400, "messages.1.content.0.tool_result: unexpected `tool_use_id` found", "invalid_request_error"),
    (400, "max_tokens must be less than the context window of 8192", None),
    (500, "Internal server error", "api_error"),
    (400, "", None),
]


@pytest.mark.parametrize(("status", "message", "code", "numbers"), TOO_LONG)
def test_recognises_every_known_wording_with_its_numbers(status, message, code, numbers):
    error = recognize_context_too_long(status, message, code)
    assert isinstance(error, ContextTooLong)
    assert (error.tokens, error.limit) == numbers
    assert error.status == status
    assert str(error)  # says something, even for a code-only error


@pytest.mark.parametrize(("status", "message", "code"), NOT_TOO_LONG)
def test_other_errors_are_not_size_errors(status, message, code):
    assert recognize_context_too_long(status, message, code) is None


@given(st.integers(0, 10**9), st.integers(0, 10**9))
def test_anthropic_numbers_are_read_back_exactly(tokens, limit):
    error = recognize_context_too_long(400, f"prompt is too long: {tokens} tokens > {limit} maximum")
    assert error is not None and (error.tokens, error.limit) == (tokens, limit)


@given(st.integers(1, 10**7), st.integers(1, 10**7), st.sampled_from(["context_length_exceeded", None]))
def test_openai_numbers_are_read_back_exactly(tokens, limit, code):
    message = (f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
               f"{tokens} tokens. Please reduce the length of the messages.")
    error = recognize_context_too_long(400, message, code)
    assert error is not None and (error.tokens, error.limit) == (tokens, limit)


@given(st.text(max_size=300), st.one_of(st.none(), st.integers(100, 599)), st.one_of(st.none(), st.text(max_size=30)))
def test_never_raises_and_never_calls_a_rate_limit_too_long(message, status, code):
    error = recognize_context_too_long(status, message, code)
    assert error is None or isinstance(error, ContextTooLong)
    if status == 429:
        assert error is None


# Ordinary error vocabulary, "limit", "length", "tokens" and numbers included — but
# none of the phrases that mean "does not fit".
_VOCABULARY = ["the", "request", "failed", "invalid", "api", "key", "tool_use", "id", "not", "found", "model",
               "field", "required", "messages", "content", "must", "be", "a", "string", "tokens", "limit", "length",
               "of", "is", "window", "4096", "max_tokens", "parameter", "unexpected", ":", "."]


@given(st.lists(st.sampled_from(_VOCABULARY), max_size=40).map(" ".join), st.sampled_from([400, 404, 422, 500]))
def test_ordinary_errors_are_not_size_errors(message, status):
    assert recognize_context_too_long(status, message, None) is None


# -- retry-after -------------------------------------------------------------
NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the precise one wins
        ({"retry-after-ms": "junk", "retry-after": "9"}, 9.0),
        ({"retry-after": email.utils.formatdate(NOW + 30, usegmt=True)}, 30.0),
        ({"retry-after": email.utils.formatdate(NOW - 30, usegmt=True)}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-3"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_retry_after_headers(headers, expected):
    assert parse_retry_after(headers, now=NOW) == expected


# -- the mapping ---------------------------------------------------------------
def test_status_mapping():
    assert isinstance(error_from_status(429, "slow down", headers={"retry-after": "3"}), RateLimited)
    assert error_from_status(429, "slow down", headers={"retry-after": "3"}).retry_after == 3.0
    for status in (529, 503):
        error = error_from_status(status, "Overloaded", headers={"retry-after-ms": "1500"})
        assert isinstance(error, Overloaded) and error.retry_after == 1.5 and error.status == status
    # An error event inside an SSE stream arrives with status 200: its type decides.
    assert isinstance(error_from_status(200, "Overloaded", code="overloaded_error"), Overloaded)
    assert isinstance(error_from_status(200, "x", code="rate_limit_error"), RateLimited)
    other = error_from_status(404, "model not found")
    assert type(other) is ProviderHTTPError and other.status == 404 and "404" in str(other)
    too_long = error_from_status(400, "prompt is too long: 5 tokens > 4 maximum")
    assert isinstance(too_long, ContextTooLong) and too_long.limit == 4


def test_llama_cpp_numbers_come_from_the_body():
    body = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                      "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}
    message, code = error_fields(body)
    error = error_from_status(400, message, code=code, body=body)
    assert isinstance(error, ContextTooLong) and (error.tokens, error.limit) == (5000, 4096)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"type": "error", "error": {"type": "invalid_request_error", "message": "m"}}, ("m", "invalid_request_error")),
        ({"error": {"message": "m", "type": "invalid_request_error", "code": "context_length_exceeded"}},
         ("m", "context_length_exceeded")),
        ({"error": {"code": 400, "message": "m", "type": "exceed_context_size_error"}},
         ("m", "exceed_context_size_error")),
        ({"object": "error", "message": "m", "type": "BadRequestError", "code": 400}, ("m", "BadRequestError")),
        ({"error": "prompt too long"}, ("prompt too long", None)),
        ({"message": "m", "code": "c"}, ("m", "c")),
        ("plain text", ("plain text", None)),
        (None, ("", None)),
    ],
)
def test_error_fields_reads_every_body_shape(body, expected):
    assert error_fields(body) == expected
