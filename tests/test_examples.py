"""examples/agent_loop.py and the loops of README.md and docs/library.md, run as a user would,
against the fake server over real HTTP."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

import lossless
from lossless import ContextManager
from lossless.dialects.anthropic import from_anthropic
from lossless.rounds import validate
from lossless.testing import FakeServer, Faults

from conftest import let_go, quiet_collect
from lossless.tokens import default_counter

pytest.importorskip("anthropic")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "agent_loop.py"
WINDOW = 16_000


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("agent_loop_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.fixture(scope="module")
def run(example, tmp_path_factory):
    """One offline session, exactly as main() runs it, with the server and store kept for inspection."""
    store = tmp_path_factory.mktemp("store")
    workdir = Path(lossless.__file__).resolve().parent
    lines: list[str] = []
    with FakeServer(Faults(max_prompt_tokens=WINDOW)) as server, \
            ContextManager(window=WINDOW, max_output=WINDOW // 4, store=str(store)) as cm:
        calls = example.offline(server, cm, workdir, out=lines.append)
        requests = [r for r in server.requests if r.path == "/v1/messages"]
    return {"calls": calls, "requests": requests, "lines": lines, "cm": cm}


def _results(body):
    """tool_use_id → content of every tool_result in a request."""
    return {b["tool_use_id"]: b.get("content") for m in body["messages"] if isinstance(m["content"], list)
            for b in m["content"] if b["type"] == "tool_result"}


def test_main_exits_zero_offline(example, tmp_path, capsys):
    assert example.main(["--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "turn  1:" in out and "Done:" in out
    assert any(f"└ {stage}:" in out for stage in ("persist", "snip", "microcompact", "summary"))


def test_every_request_is_valid_and_fits(run):
    counter = default_counter()
    budget = run["cm"].budget
    assert len(run["requests"]) >= 10
    for r in run["requests"]:
        messages = from_anthropic(r.body["messages"])
        validate(messages)  # the server checked it too: a 400 would have raised in the SDK
        estimate = (counter.count_system(r.body["system"]) + counter.count_tools(r.body["tools"])
                    + sum(counter.count_message(m) for m in messages))
        assert estimate <= budget.effective < WINDOW  # room left for max_tokens
        assert r.body["max_tokens"] == WINDOW // 4


def test_stages_fired_and_their_markers_were_sent(run):
    fired = {line.split("└ ")[1].split(":")[0] for line in run["lines"] if "└ " in line}
    assert {"persist", "snip"} <= fired  # the oldest rounds leave as a batch; the recent ones stay verbatim
    sent = json.dumps([r.body["messages"] for r in run["requests"]])
    assert "<persisted-output handle=" in sent and "[lossless: snipped" in sent


def test_recall_returns_exactly_what_was_stored(run):
    store = run["cm"].store
    recalls = [c for c in run["calls"] if c["name"] == "recall"]
    assert len(recalls) == 1
    call = recalls[0]
    stored = store.get(call["input"]["handle"])
    limit = call["input"]["limit"]
    if len(stored) <= limit:
        assert call["output"] == stored
    else:  # a page: a header naming the range, then exactly the first characters
        header, page = call["output"].split("\n", 1)
        assert page == stored[:limit] and f"of {len(stored):,}" in header
    # What was stored is a tool's original output, byte for byte, or the exact messages of a
    # snipped range, whose tool results are the outputs: nothing was lost.
    outputs = [c["output"] for c in run["calls"] if c["name"] != "recall"]
    if stored.startswith("[{"):
        results = [b["content"] for m in json.loads(stored) if isinstance(m["content"], list)
                   for b in m["content"] if b.get("type") == "tool_result"]
        assert results and all(r in outputs for r in results)
    else:
        assert stored in outputs
    # The model saw the handle in a marker before calling recall, and got the answer in the next request.
    index = next(i for i, r in enumerate(run["requests"]) if call["id"] in _results(r.body))
    assert call["input"]["handle"] in json.dumps(run["requests"][index - 1].body["messages"])
    sent = _results(run["requests"][index].body)[call["id"]]
    if sent.startswith("<persisted-output"):  # too large for this window: moved, its handle gives it back
        from lossless.markers import handles_in

        sent = store.get(handles_in(sent)[0])
    assert sent == call["output"]  # what recall answered, as the model got it


def test_main_against_an_endpoint_url(example, tmp_path, monkeypatch, capsys):
    """The --base-url path (a real endpoint's) with the fake standing in: one text answer ends the loop."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    with FakeServer() as server:
        assert example.main(["--base-url", server.base_url, "--model", "m", "--store", str(tmp_path)]) == 0
        (request,) = server.requests
    assert "test-key" in (request.headers.get("x-api-key", "") + request.headers.get("authorization", ""))
    assert request.body["model"] == "m"
    assert "Fake reply to:" in capsys.readouterr().out


# -- the loops of README.md and docs/library.md, run as a reader would follow them ----------
# (tests/test_docs.py runs every Python block of every page; these check what the loops did.)
ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
README_LOOP = next(b for b in FENCE.findall((ROOT / "README.md").read_text(encoding="utf-8")) if "while " in b)
LIBRARY = FENCE.findall((ROOT / "docs" / "library.md").read_text(encoding="utf-8"))
BASH_CALL = {"type": "tool_use", "name": "bash", "input": {"command": "echo 3 passed"}}


def test_the_readme_loop_runs_as_pasted(tmp_path, monkeypatch, capsys):
    """The README's loop, with nothing defined before it: a bash round, then the answer it prints."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / ".lossless"))
    with FakeServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        server.enqueue([{**BASH_CALL, "id": "toolu_1"}])
        namespace: dict = {}
        exec(compile(README_LOOP, "README.md loop", "exec"), namespace)  # noqa: S102
        requests = [r.body for r in server.requests]
    history = namespace["history"]
    let_go(namespace)
    assert len(requests) == 2 and requests[1]["tools"][0]["name"] == "bash"
    assert _results(requests[1]) == {"toolu_1": "3 passed"}  # the tool really ran
    validate(from_anthropic(history))
    assert history[-1]["role"] == "assistant" and "Fake reply to:" in capsys.readouterr().out


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """docs/library.md's blocks, in one namespace, against the fake server; before each loop, the
    model first asks for one bash call, then answers."""
    home = tmp_path_factory.mktemp("library")
    with pytest.MonkeyPatch.context() as mp, FakeServer() as server:
        mp.chdir(home)
        mp.setenv("LOSSLESS_HOME", str(home / ".lossless"))
        mp.setenv("ANTHROPIC_BASE_URL", server.base_url)
        mp.setenv("ANTHROPIC_API_KEY", "test-key")
        mp.setenv("OPENAI_BASE_URL", server.openai_base_url)
        mp.setenv("OPENAI_API_KEY", "test-key")
        namespace: dict = {}
        states = []
        for i, block in enumerate(LIBRARY):
            loop = "while True:" in block
            if loop:
                if "history" in namespace:  # the reader's next request, after the previous loop's answer
                    namespace["history"] = [*namespace["history"], {"role": "user", "content": "Now the next one."}]
                server.enqueue([{**BASH_CALL, "id": f"toolu_{i}"}])
            before = len(server.requests)
            exec(compile(block, f"docs/library.md python block {i + 1}", "exec"), namespace)  # noqa: S102
            if loop:
                states.append({"history": list(namespace["history"]), "requests": server.requests[before:]})
        quiet_collect()  # the client the page rebound from one SDK to the other
        yield namespace, states
        let_go(namespace)


def test_the_library_page_has_both_loops():
    loops = [b for b in LIBRARY if "while True:" in b]
    assert len(loops) == 2 and "cm.prepare(" in loops[0] and "cm.call(" in loops[1]


def test_every_library_loop_runs_and_ends(library):
    namespace, states = library
    for state in states:
        validate(from_anthropic(state["history"]))  # what goes into the next call is a valid history
        assert any(r.body.get("messages") and _results(r.body) for r in state["requests"])  # the tool round went out
    loop = states[0]["history"]  # the first loop: a tool round, then the answer
    assert [b["type"] for b in loop[2]["content"]] == ["tool_result"] and loop[-1]["role"] == "assistant"


def test_with_a_model_returns_losslesss_response_and_compacts_with_instructions(library):
    from lossless.providers import Response

    namespace, states = library
    assert isinstance(namespace["response"], Response) and namespace["response"].text
    sent = json.dumps([r.body for r in states[-1]["requests"]])
    assert "keep the API decisions" in sent  # cm.compact(..., instructions=...) reached the model
