"""Key lines: an account quotes lines of each removed output verbatim under its call's line.

- ``key_lines``: every line it gives is a line of the output (blanks made one space, cut at
  ``LINE_CHARS`` with ``…``), none twice, at most ``MOST``, the same for the same text, and the
  lines a rule picks (errors, failures, warnings) rank before the rest;
- an account: every key line under a call is a line of *that* call's output (recalled through
  its handle or the range's archive), the account keeps to its budget, and merging carries key
  lines as they were written, never nested or quoted twice;
- on the shared real runs: after a snip, the account holds the error of a removed failing run and
  the definitions of a removed read, lines the one-line outcome alone had cut.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import data_path
from lossless import account
from lossless.account.keylines import LINE_CHARS, MOST, key_lines
from lossless.config import ContextConfig
from lossless.messages import Message, Text, ToolResult, ToolUse, assistant, user
from lossless.stages.base import StageContext
from lossless.stages.snip import snip
from lossless.store import ArtifactStore
from lossless.tokens import default_counter

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

_LINE_NO = re.compile(r"^\s*\d+→")
_words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=0, max_size=90)
_error = st.sampled_from(["ValueError: bad value 3", "FAILED tests/test_x.py::test_y - assert 1 == 2",
                          "error: could not open config.yaml", "warning: unused variable 'total'"])


def _flat(line: str) -> str:
    return " ".join(_LINE_NO.sub("", line, count=1).split())


@pytest.fixture
def store(tmp_path):
    return ArtifactStore(tmp_path / "store")


@SETTINGS
@given(st.lists(st.one_of(_words, _error), max_size=80))
def test_key_lines_are_lines_of_the_output_ranked_by_rule(lines):
    text = "\n".join(lines)
    got = key_lines(text)
    assert got == key_lines(text)  # deterministic
    assert len(got) <= MOST
    shown = [line for _, line in got]
    assert len(set(shown)) == len(shown)
    flat = [_flat(line) for line in text.splitlines()]
    for at, line in got:
        assert len(line) <= LINE_CHARS
        whole = line[:-1] if line.endswith("…") and len(line) == LINE_CHARS else line
        assert any(f == line or (whole != line and f.startswith(whole)) for f in flat), line
        assert at >= 0
    errors = [i for i, line in enumerate(shown) if line in {" ".join(e.split()) for e in
                                                            ("ValueError: bad value 3",
                                                             "FAILED tests/test_x.py::test_y - assert 1 == 2",
                                                             "error: could not open config.yaml",
                                                             "warning: unused variable 'total'")}]
    if errors:  # the rule's lines come first
        assert errors == list(range(len(errors)))


def test_a_short_or_punctuation_line_is_never_a_key_line():
    text = "}\n----------------------------------------\n......F.....\nreturn x\nok\n"
    assert key_lines(text) == ()


def _ctx(store: ArtifactStore, window: int) -> StageContext:
    return StageContext(config=ContextConfig(window=window), counter=default_counter(), store=store, trigger="auto")


def _session(n: int, seed: int = 0) -> list[Message]:
    """A task, then ``n`` rounds: a read of a file that defines a few names, and a failing test run."""
    msgs = [user("Fix the parser so that nested brackets round-trip; keep the public API.")]
    for i in range(n):
        k = seed * 1_000 + i
        if i % 2:
            use = ToolUse(id=f"t{k}", name="Bash", input={"command": f"pytest -x tests/test_parse.py -k case{k}"})
            out = (f"<returncode>1</returncode>\n<output>\ncollected 12 items\n\n"
                   f"tests/test_parse.py ....F\n{'=' * 40}\n"
                   f"E   AssertionError: parse('[[{k}]]') returned {k + 1} nested levels\n"
                   f"FAILED tests/test_parse.py::test_case{k} - AssertionError\n1 failed, 11 passed in 0.3{k % 10}s\n</output>")
        else:
            use = ToolUse(id=f"t{k}", name="Read", input={"file_path": f"src/parse_{k}.py"})
            body = [f"def parse_level_{k}_{j}(source: str, depth: int = {j}) -> Node:" if j % 5 == 0 else
                    f"    value_{j} = helper_{k}(source[{j}:], strict=True)" for j in range(60)]
            out = "\n".join(f"{j + 1:6}→{line}" for j, line in enumerate(body))
        msgs += [assistant(f"Looking at step {k}.", use),
                 Message(role="user", content=(ToolResult(tool_use_id=use.id, content=out),))]
    msgs.append(user("Go on."))
    return msgs


def _account(out: list[Message]) -> str:
    return next(m for m in out if account.is_account(m)).text


def _key_lines_by_call(text: str) -> list[tuple[str, list[str]]]:
    """(call line, its key lines) in the account's tool-call section, in order."""
    section = text.split(account.H_CALLS, 1)[1].split("\n## ", 1)[0]
    out: list[tuple[str, list[str]]] = []
    for line in section.splitlines():
        if line.startswith(account.KEY_PREFIX) and out:
            out[-1][1].append(line[len(account.KEY_PREFIX):])
        elif line.startswith("- "):
            out.append((line, []))
    return out


def _outputs(messages: list[Message]) -> dict[str, str]:
    uses = {u.id: u for m in messages for u in m.tool_uses}
    return {r.tool_use_id: r.content for m in messages for r in m.tool_results if r.tool_use_id in uses
            and isinstance(r.content, str)}


def test_every_key_line_is_a_line_of_its_own_calls_output(store):
    msgs = _session(40)
    ctx = _ctx(store, 32_000)
    out, result = snip(msgs, ctx, ctx.count(msgs))
    assert result.fired
    text = _account(out)
    calls = _key_lines_by_call(text)
    quoted = [k for _, keys in calls for k in keys]
    assert quoted, "a range of reads and failing runs leaves key lines"
    assert len(set(quoted)) == len(quoted)
    by_target = {}
    for m in msgs:
        for u in m.tool_uses:
            by_target[u.input.get("command") or u.input.get("file_path")] = u.id
    outputs = _outputs(msgs)
    for line, keys in calls:
        if not keys:
            continue
        target = max((t for t in by_target if t in line), key=len)
        lines = {_flat(x) for x in outputs[by_target[target]].splitlines()}
        for k in keys:
            assert k in lines, (line, k)
    # the account keeps to its budget (the renderer's allowance is about the budget: a tenth over at most)
    budget = 3 * ctx.config.account_tokens(sum(ctx.counter.count_message(m) for m in msgs))
    assert len(text.split("\n", 2)[2]) <= budget * 1.1


def test_merging_carries_key_lines_as_written(store):
    ctx = _ctx(store, 32_000)
    first = _session(40)
    once, r1 = snip(first, ctx, ctx.count(first))
    assert r1.fired
    before = _key_lines_by_call(_account(once))
    grown = once[:-1] + [Message(role="user", content=(Text(text="Go on."),))] + _session(40, seed=1)[1:]
    twice, r2 = snip(grown, ctx, ctx.count(grown))
    assert r2.fired
    after = _account(twice)
    assert after.count("[lossless: snipped") == 1  # one account, merged, never nested
    carried = dict(_key_lines_by_call(after))
    # what the merged account lists of the first range keeps its key lines as they were written
    # (the budget goes to the newest first, so the oldest may have lost some lines, never gained any)
    for line, keys in before:
        if line in carried:
            assert set(carried[line]) <= set(keys), line
    quoted = [k for keys in carried.values() for k in keys]
    assert len(set(quoted)) == len(quoted)


def test_a_real_failing_run_keeps_its_error_and_a_read_its_definitions(store):
    """django-13297 at 32k, compacted once: the removed runs' InterfaceError and the removed reads'
    ``def`` lines are in the account verbatim (their outcome lines alone cut both)."""
    from lossless.dialects.mini_swe import read_trajectory

    session = read_trajectory(data_path("mini-swe-agent", "django__django-13297.traj.json"))
    msgs = list(session.messages)
    ctx = _ctx(store, 32_000)
    out, result = snip(msgs, ctx, ctx.count(msgs))
    assert result.fired
    text = _account(out)
    keys = [k for _, ks in _key_lines_by_call(text) for k in ks]
    assert any(k.startswith("def ") for k in keys)
    # the error the removed runs ended on is in front of the model: quoted, or still in a result that stays
    rest = "\n".join(r.content if isinstance(r.content, str) else "" for m in out if not account.is_account(m)
                     for r in m.tool_results)
    assert any("InterfaceError: Error binding parameter 0" in k for k in keys) or \
        "InterfaceError: Error binding parameter 0" in rest
    # and no key line repeats a line of a result that stays
    kept = {" ".join(_LINE_NO.sub("", line, count=1).split()) for line in rest.splitlines()}
    assert not [k for k in keys if k in kept]
    # each quoted line is in the range's archive, verbatim (blanks made one space)
    archive = json.loads(store.get(re.search(r"handle=(sha256:[0-9a-f]+)", text).group(1)))
    flat = " ".join(json.dumps(archive, ensure_ascii=False).replace("\\n", "\n").split())
    for k in keys:
        assert k.rstrip("…").replace('"', '\\"') in flat or k.rstrip("…") in flat, k


def _rule_naive(line: str) -> int:
    from lossless.account.outcome import _DEF, _ERROR, _EXCEPTION_NAME, _NOTICE, _RAISED, _names_ident

    if _ERROR.search(line) or _NOTICE.search(line):
        return 0
    if _RAISED.match(line) and _EXCEPTION_NAME.search(line.split(":", 1)[0]):
        return 0
    if _DEF.match(line) or _names_ident(line):
        return 1
    return 2


@SETTINGS
@given(st.lists(st.one_of(_words, _error, st.sampled_from([
    "class Parser(Base):", "def run(self) -> None:", "KeyError: 'name'", "see src/lossless/config.py",
    "version 1.2.3 installed", "commit 3f2a9c1b7e", "[WARN] disk almost full", "Warning: deprecated"])), max_size=40))
def test_the_rules_found_by_literals_are_the_rules_line_by_line(lines):
    """``_rules`` finds its candidates by literals in the joined text: the same ranks as each line's patterns."""
    from lossless.account.keylines import _rules

    flat = [" ".join(line.split()) for line in lines]
    got = _rules(flat)
    assert {i: got.get(i, 2) for i in range(len(flat))} == {i: _rule_naive(line) for i, line in enumerate(flat)}


_hostile = st.one_of(
    _words.map(lambda t: " ".join(t.split())).filter(lambda t: len(t) >= 1),
    st.sampled_from(["## Tool calls", "- Bash `rm -rf /` → exit 0", "  | nested", "</user-message>",
                     "<user-message>", "</earlier-summary>", "## Files", "- modified: a.py",
                     "[lossless: snipped 3 earlier messages]", "(12 older calls not listed one by one)"]))


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 999), st.lists(_hostile, max_size=4)), min_size=1, max_size=12))
def test_rendered_key_lines_read_back_as_written_whatever_they_say(calls):
    """An account's key lines, whatever an output held (headings, call lines, tags), read back under the
    call they stood under and nowhere else: merging never makes a call, a heading or a user message of them."""
    acc = account.Account()
    for n, keys in calls:
        acc.calls.append(f"- Bash `step {n}` → exit 0 — done")
        acc.keys.append(tuple(dict.fromkeys(keys)))
    text = acc.render(budget_chars=1_000_000)
    back = account.Account()
    account.parse_into(back, text)
    assert back.calls == acc.calls
    assert back.users == [] and back.read == [] and back.modified == []
    # each call keeps its lines in order, but for one quoted already: one line for each call in turn,
    # newest first, each line once
    quoted = set(acc.calls)
    taken: list[list[str]] = [[] for _ in acc.calls]
    for rank in range(max(len(k) for k in acc.keys)):
        for i in reversed(range(len(acc.calls))):
            if rank < len(acc.keys[i]):
                k = acc.keys[i][rank]
                if k not in quoted and k not in acc.calls[i]:
                    quoted.add(k)
                    taken[i].append(k)
    expected = [tuple(k for k in keys if k in mine) for keys, mine in zip(acc.keys, taken)]
    assert [tuple(k) for k in back.keys] == expected
