"""examples/agent_loop.py and every Python block of the README, run as a user would, against the
fake server over real HTTP."""

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


# -- the README's Python blocks, run in order as a reader would follow them ----------------
README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
FRAMEWORKS = "## In your framework"
"""The adapters' section: its blocks run in tests/test_adapter_readme.py, each with its framework."""


def _outside_frameworks(text: str) -> str:
    if FRAMEWORKS not in text:
        return text
    head, rest = text.split(FRAMEWORKS, 1)
    tail = rest[rest.index("\n## "):] if "\n## " in rest else ""
    return head + tail


BLOCKS = FENCE.findall(_outside_frameworks(README.read_text(encoding="utf-8")))
TOOLS = [{"name": "run", "description": "Run a shell command.",
          "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}]


def run_tools(response):
    """The reader's own tool runner the README leaves to them: works on the SDK's response
    and on lossless's ``Response`` alike (both have ``tool_use`` blocks with id and input)."""
    results = [{"type": "tool_result", "tool_use_id": b.id, "content": f"ran {b.input['cmd']}: 3 passed"}
               for b in response.content if b.type == "tool_use"]
    return [{"role": "user", "content": results}] if results else []


@pytest.fixture(scope="module")
def readme(tmp_path_factory):
    """Every Python block of the README, in one namespace, against the fake server; each
    block's model first asks for one tool, then answers."""
    home = tmp_path_factory.mktemp("readme")
    with pytest.MonkeyPatch.context() as mp, FakeServer() as server:
        mp.chdir(home)
        mp.setenv("LOSSLESS_HOME", str(home / ".lossless"))
        mp.setenv("ANTHROPIC_BASE_URL", server.base_url)
        mp.setenv("ANTHROPIC_API_KEY", "test-key")
        namespace = {"SYSTEM": "You fix tests.", "TOOLS": TOOLS, "MODEL": "claude-sonnet-4-6", "run_tools": run_tools}
        states = []
        for i, block in enumerate(BLOCKS):
            if "history" in namespace:  # the reader's next request, after the previous block's answer
                namespace["history"] = [*namespace["history"], {"role": "user", "content": "Now the next one."}]
            server.enqueue([{"type": "tool_use", "id": f"toolu_{i}", "name": "run", "input": {"cmd": "pytest"}}])
            exec(compile(block, f"README.md python block {i + 1}", "exec"), namespace)  # noqa: S102
            states.append({"history": list(namespace["history"]), "requests": server.requests})
        yield namespace, states


def test_the_readme_has_the_blocks_this_test_runs():
    assert len(BLOCKS) >= 2 and any("cm.call(" in b for b in BLOCKS)
    # No block goes unrun: each is run here, or (the adapters' section) by test_adapter_readme.py.
    every = FENCE.findall(README.read_text(encoding="utf-8"))
    others = [b for b in every if b not in BLOCKS]
    assert all(re.search(r"lossless\.adapters\.\w+", b) for b in others), others
    assert (Path(__file__).parent / "test_adapter_readme.py").exists() or not others


def test_every_readme_block_runs_and_its_loop_ends(readme):
    namespace, states = readme
    for state in states:
        history = state["history"]
        validate(from_anthropic(history))  # what goes into the next call is a valid history
    loop = states[0]["history"]  # the first block: a tool round, then the answer
    assert [b["type"] for b in loop[2]["content"]] == ["tool_result"] and loop[-1]["role"] == "assistant"


def test_with_a_model_returns_losslesss_response_and_compacts_with_instructions(readme):
    from lossless.providers import Response

    namespace, states = readme
    assert isinstance(namespace["response"], Response) and namespace["response"].text
    requests = [r for r in states[-1]["requests"] if r not in states[0]["requests"]]
    assert any(b.get("type") == "tool_result" for r in requests for m in r.body.get("messages", [])
               if isinstance(m["content"], list) for b in m["content"])  # the tool round went out
    sent = json.dumps([r.body for r in requests])
    assert "keep the API decisions" in sent  # cm.compact(..., instructions=...) reached the model


def test_the_readme_names_a_current_model():
    from anthropic.resources.messages.messages import DEPRECATED_MODELS

    names = set(re.findall(r'"(claude-[a-z0-9.-]+)"', README.read_text(encoding="utf-8")))
    assert names and not names & set(DEPRECATED_MODELS), names & set(DEPRECATED_MODELS)

