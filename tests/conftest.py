"""Shared fixtures. Real data lives in ../shared/data beside the checkout; tests that
need it skip cleanly where it is absent (a user's fresh clone)."""

from __future__ import annotations

import gc
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("default")


def let_go(namespace: dict) -> None:
    """Let go of what a page's code made in ``namespace`` (its SDK clients), here: a reader's script
    ends with its process (and a page may rebind ``client`` from one SDK to the other), a test's
    namespace does not, and a client collected later would warn of its socket in whichever test
    runs then."""
    namespace.clear()
    quiet_collect()


def quiet_collect() -> None:
    """Collect now what a page's code let go of unclosed (a client it rebound), its socket
    warnings silenced: the code under test made none of them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


@pytest.fixture(autouse=True)
def _no_inherited_terminal_size(monkeypatch):
    """A test sees the terminal its own code sets up, not the runner's: pytest-xdist's workers
    inherit ``COLUMNS=80`` and ``LINES=24``, and the CLI honours ``COLUMNS`` (a table then folds
    its ids), where a captured run with no terminal takes the width its content needs."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


FIRST = (
    "test_mypy_runs_clean_over_the_package_and_the_readme_calls",  # ~70 s with a cold cache
    "test_a_long_conversation_at_a_2048_token_context_never_fails_for_size",  # llama.cpp, ~40 s
    "test_the_responses_api_through_the_proxy_never_fails_for_size_either",  # llama.cpp, ~30 s
    "test_two_replicas_100_conversations_4_tenants_and_a_faulty_upstream",
    "test_kill_9_loop_loses_nothing_that_returned",
    "test_summary_properties",
    "test_a_compaction_lands_in_its_band_in_the_providers_tokens",
    "test_huge_tool_output_is_persisted_not_fatal",
    "test_snip_beside_a_large_system_prompt_and_tools",
)
"""The suite's longest tests, run before the rest: with ``-n auto`` each worker starts on some of
them, and no worker is left alone with a minute-long test at the end (mypy, alphabetically late,
made one worker run 2 minutes after the other had finished)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(getattr(item, "originalname", item.name), len(FIRST)))  # stable


def data_path(*parts: str) -> Path:
    """A path under ../shared/data, or a skip when it is not there."""
    path = DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not present: {path}")
    return path


@pytest.fixture
def store_dir(tmp_path, monkeypatch):
    """A fresh .lossless store for the test, also set as LOSSLESS_HOME."""
    home = tmp_path / ".lossless"
    monkeypatch.setenv("LOSSLESS_HOME", str(home))
    return home


class Scripted:
    """A provider that answers from a script: strings are replies, exceptions are raised,
    callables get the request.  Runs out loudly (IndexError), unlike FakeProvider's default."""

    def __init__(self, *replies):
        self.replies, self.requests = list(replies), []

    def complete(self, request):
        from lossless.messages import Text
        from lossless.providers.base import Response

        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            reply = reply(request)
        return Response(content=(Text(text=reply),))


@pytest.fixture(scope="session")
def pg_server():
    """One throwaway PostgreSQL server for the session (tests/pg_kit.py), or a skip saying why not."""
    from pg_kit import PgServer, why_unavailable

    reason = why_unavailable()
    if reason:
        pytest.skip(reason)
    server = PgServer.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pgvector_server():
    """A throwaway PostgreSQL server with the pgvector extension (the binaries of the ``pgserver``
    wheel, in dev), or a skip saying why not."""
    from pg_kit import PgServer, pgvector_bindir, why_unavailable

    reason = why_unavailable()
    if reason:
        pytest.skip(reason)
    bin_ = pgvector_bindir()
    if bin_ is None:
        pytest.skip("no PostgreSQL with pgvector here (pip install pgserver: the dev extra has it)")
    server = PgServer.start(bin=bin_)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pgvector_url(pgvector_server):
    """The URL of a fresh database on a server that has pgvector."""
    return pgvector_server.create_db()


@pytest.fixture
def pg_url(pg_server):
    """The URL of a fresh, empty database on the session's server."""
    return pg_server.create_db()
