"""Accounts: every removal leaves a map of what left, and every handle is one recall from an original.

Property tests over generated histories compacted once and again (the second pass
compacts an already-compacted history), through the whole default pipeline:

- every removed tool call is named in context: a line with its tool and the handle of
  its output — or, when the budget folded it, a range handle in context whose archive
  holds it;
- every removed user message is in context verbatim, or one recall away;
- every handle in context recalls, in ONE step, to content that was in the input (a
  tool output, the user's words, or a JSON list of input messages) — never to another
  account (no nesting: accounts merge);
- at most one account stands in context, however many removals happened.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lossless import account, markers
from lossless.config import ContextConfig
from lossless.dialects.anthropic import from_anthropic
from lossless.messages import Message, Text, ToolResult, ToolUse, block_text, result_text
from lossless.pipeline import DEFAULT_STAGES, run
from lossless.rounds import validate
from lossless.stages.persist import original_text
from lossless.stages.base import StageContext
from lossless.store import ArtifactStore
from lossless.tokens import default_counter

from strategies import histories

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.function_scoped_fixture])


def _ctx(store: ArtifactStore, window: int, trigger: str) -> StageContext:
    return StageContext(config=ContextConfig(window=window), counter=default_counter(), store=store, trigger=trigger)


def _compact(messages: list[Message], store: ArtifactStore, window: int, trigger: str) -> list[Message]:
    ctx = _ctx(store, window, trigger)
    out, _ = run(messages, ctx, ctx.count(messages), DEFAULT_STAGES)
    validate(out)
    return out


def _texts(messages: list[Message]) -> str:
    return "\n".join(block_text(b) for m in messages for b in m.content)


def _user_words(m: Message) -> list[str]:
    """The user's own words in a message, as an account quotes them."""
    own = [b.text for b in m.content if isinstance(b, Text) and b.text.strip() and not markers.is_marker(b.text)]
    if m.role != "user" or not own:
        return []
    return own if m.tool_results else ["\n".join(own)]


def _resolve(m: Message, store: ArtifactStore) -> Message:
    """An archived message with persisted outputs read back (their handle is shown too)."""
    blocks = []
    for b in m.content:
        if isinstance(b, ToolResult) and original_text(b).startswith(markers.PERSISTED_OPEN):
            from lossless.stages.persist import with_text

            b = with_text(b, store.get(markers.handles_in(original_text(b))[0]))
        blocks.append(b)
    return m.with_content(blocks)


def _renamed(messages: list[Message]) -> list[Message]:
    """The same history with its tool ids prefixed, so it can follow another one."""
    from dataclasses import replace

    def block(b: object) -> object:
        if isinstance(b, ToolUse):
            return replace(b, id="more-" + b.id)
        if isinstance(b, ToolResult):
            return replace(b, tool_use_id="more-" + b.tool_use_id)
        return b
    return [m.with_content([block(b) for b in m.content]) for m in messages]


GROUP = re.compile(r"\[\d+ outputs of .*, oldest first\]\n--- output 1 of \d+ ---\n")
GROUP_PART = re.compile(r"(?:^|\n)--- output \d+ of \d+ ---\n")


def _check(inputs: list[Message], out: list[Message], store: ArtifactStore) -> None:
    context = _texts(out)
    outputs = {f(r) for m in inputs for r in m.tool_results for f in (result_text, original_text)}
    words = {w.strip() for m in inputs for w in _user_words(m)}
    archived_ids: dict[str, set[str]] = {}
    for handle in set(markers.handles_in(context)):
        text = store.get(handle)  # one recall
        assert markers.SNIPPED_PREFIX not in text and markers.SUMMARY_OPEN not in text, f"{handle} nests an account"
        if text in outputs or text.strip() in words:
            continue
        if any(text in w for w in words):  # the head and tail of a long task: its whole text
            continue
        if GROUP.match(text):  # a call repeated: each output whole, oldest first
            parts = GROUP_PART.split(text)[1:]
            assert parts and all(part in outputs for part in parts), f"{handle}: a group holds what was not output"
            continue
        try:
            data = json.loads(text)
        except ValueError:
            raise AssertionError(f"{handle} recalls to something not in the input: {text[:200]!r}") from None
        assert isinstance(data, list)
        if all(isinstance(x, str) for x in data):  # user messages the budget trimmed
            assert {x.strip() for x in data} <= words
            continue
        restored = [_resolve(m, store) for m in from_anthropic([d for d in data if d.get("role") != "system"])]
        for m in restored:
            assert any(m.content == i.content for i in inputs), f"{handle} holds a message that was not in the input"
        archived_ids[handle] = {u.id for m in restored for u in m.tool_uses}
    # Every removed call is named: its own output's handle on a line with its tool, or a range holding it.
    kept = {u.id for m in out for u in m.tool_uses}
    names = {u.id: u.name for m in inputs for u in m.tool_uses}
    for m in inputs:
        for r in m.tool_results:
            if r.tool_use_id in kept:
                continue
            text = original_text(r)
            if markers.is_marker(text):
                continue
            handle = "sha256:" + __import__("hashlib").sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]
            # (Identical outputs share a handle: a line may name another call with the same output.)
            if not any(handle in ln and names[r.tool_use_id] in ln for ln in context.splitlines()):
                assert any(r.tool_use_id in ids for ids in archived_ids.values()), f"call {r.tool_use_id} is unnamed"
    # Every removed user message is verbatim in context or one recall away.
    for w in words:
        if w in context:
            continue
        assert any(w in store.get(h) or json.dumps(w, ensure_ascii=False)[1:-1] in store.get(h)
                   for h in set(markers.handles_in(context))), f"user message {w[:40]!r} is lost"
    assert sum(1 for m in out if account.is_account(m)) <= 1


@pytest.fixture
def store(tmp_path_factory) -> ArtifactStore:
    return ArtifactStore(tmp_path_factory.mktemp("accounts"))


@SETTINGS
@given(histories(min_rounds=6, max_rounds=40), st.integers(300, 6_000))
def test_an_account_writes_the_originals_its_text_names_and_no_other(tmp_path_factory, messages, budget):
    """At first sight of a long range most call lines fold into one counted line; their per-item
    originals are not written (the range's archive holds every output), and every handle the text
    shows is."""
    store = ArtifactStore(tmp_path_factory.mktemp("commit"))
    acc = account.collect(messages, ContextConfig(window=32_000), store)
    body = acc.render(budget)
    written = acc.commit(store, body)
    named = {markers.short(h) for h in markers.handles_in(body)}
    assert {markers.short(h) for h in written} == named & {markers.short(h) for h in acc.blobs}
    for handle in markers.handles_in(body):
        assert store.get(handle)  # one recall, whether this commit wrote it or an earlier one did
    archive = account.flat_archive(messages, store)
    for m in messages:  # a folded call's output is one recall away: in the range's archive
        for r in m.tool_results:
            assert json.dumps(original_text(r), ensure_ascii=False)[1:-1] in archive


@SETTINGS
@given(histories(min_rounds=6, max_rounds=40), st.lists(st.integers(300, 8_000), min_size=1, max_size=3))
def test_an_outcome_analysed_only_when_its_line_is_reached_renders_the_same(tmp_path_factory, messages, budgets):
    """A call's outcome is analysed when a render's budget reaches its line; the account renders
    exactly as one whose every line was analysed first, at each budget in turn."""
    store = ArtifactStore(tmp_path_factory.mktemp("lazy"))
    config = ContextConfig(window=32_000)
    lazy, eager = account.collect(messages, config, store), account.collect(messages, config, store)
    eager.lines()
    assert not eager.later
    for budget in budgets:
        assert lazy.render(budget) == eager.render(budget)
    assert lazy.lines() == eager.calls


@SETTINGS
@given(histories(min_rounds=4, max_rounds=24), histories(min_rounds=2, max_rounds=12),
       st.sampled_from([16_000, 32_000]), st.sampled_from(["auto", "manual"]))
def test_accounts_name_everything_and_handles_are_flat(store, first, more, window, trigger):
    more = _renamed(more)
    once = _compact(first, store, window, trigger)
    _check(first, once, store)
    # Compacting an already-compacted history: accounts merge, handles stay flat.
    grown = once + more[1:] if once[-1].role == "assistant" or not more[1:] else once + [
        Message(role="assistant", content=(Text(text="noted"),)), *more]
    if grown[-1].role == "assistant":
        grown = grown + [Message(role="user", content=(Text(text="go on"),))]
    twice = _compact(grown, store, window, "manual")
    inputs = first + [m for m in grown if not any(m is o for o in once)]
    _check(inputs, twice, store)


def test_a_snip_account_reads_at_a_glance(store):
    from lossless.messages import ToolUse, assistant, user

    msgs = [user("Fix the flaky test in tests/test_io.py; do not change the public API.")]
    for i in range(30):
        use = ToolUse(id=f"t{i}", name="Bash" if i % 2 else "Read",
                      input={"command": f"pytest -x tests/test_io.py -k case{i}"} if i % 2 else
                      {"file_path": f"src/mod{i}.py"})
        out = (f"<returncode>1</returncode>\n<output>\ncollected 1 item\n"
               f"FAILED tests/test_io.py::case{i} - AssertionError: 41 != 42\n</output>") if i % 2 else f"{i}: line\n" * 300
        msgs += [assistant(f"Checking case {i}.", use), Message(role="user", content=(ToolResult(tool_use_id=use.id,
                                                                                               content=out),))]
    msgs.append(user("Now also check the Windows path handling."))
    from lossless.stages.snip import snip

    ctx = _ctx(store, 16_000, "auto")
    out, result = snip(msgs, ctx, ctx.count(msgs))
    assert result.fired
    acc = next(m for m in out if account.is_account(m)).text
    assert "## Tool calls" in acc and "## Files" in acc
    # cases 0 and 1 are the pinned first rounds of work; case 3 is the first failing run the snip removed
    assert "- Bash `pytest -x tests/test_io.py -k case3` → exit 1 — FAILED tests/test_io.py::case3" in acc
    assert "- Read src/mod2.py → ok" in acc  # mod0 was read in the pinned first rounds
    assert "Fix the flaky test in tests/test_io.py" in _texts(out)


def test_the_docs_show_an_account_as_lossless_writes_it(store):
    """docs/how-it-works.md's account example uses the real headers and the real line shape."""
    from pathlib import Path
    import re

    page = (Path(__file__).resolve().parents[1] / "docs" / "how-it-works.md").read_text()
    block = page.split("## Accounts", 1)[1].split("```text\n[lossless: snipped", 1)[1].split("```", 1)[0]
    headers = [ln for ln in block.splitlines() if ln.startswith("## ")]
    assert headers and all(h in account.HEADERS for h in headers)
    line = re.compile(r"- \w+ .+ → (exit -?\d+|ok|error|timed out|interrupted)\b.*(?: · sha256:[0-9a-f]{4})?")
    shown = [ln for ln in block.splitlines() if ln.startswith("- ") and " → " in ln]
    assert shown and all(line.match(ln) for ln in shown)
    assert any(ln.startswith(account.KEY_PREFIX) for ln in block.splitlines())  # key lines, as written
    # ...and the lines lossless writes have that same shape.
    from lossless.messages import ToolUse, assistant, user
    from lossless.stages.snip import snip

    msgs = [user("task")]
    for i in range(30):
        use = ToolUse(id=f"r{i}", name="Bash", input={"command": f"make test{i}"})
        msgs += [assistant(f"Run {i}.", use), Message(role="user", content=(ToolResult(
            tool_use_id=use.id, content=f"<returncode>{i % 2}</returncode>\n<output>\n" + "x\n" * 900 + "</output>"),))]
    ctx = _ctx(store, 16_000, "auto")
    out, result = snip(msgs, ctx, ctx.count(msgs))
    written = [ln for ln in next(m for m in out if account.is_account(m)).text.splitlines()
               if ln.startswith("- ") and " → " in ln]
    assert result.fired and written and all(line.match(ln) for ln in written)


@given(st.text(min_size=1, max_size=300), st.integers(10, 120))
def test_a_shortened_call_line_keeps_its_tool_its_file_name_and_its_handle(target, limit):
    from lossless.account.text import middle, short

    path = "/home/user/projects/some/deep/tree/of/folders/src/module_name.py"
    line = f"- Read {path} → ok — lines 1–80 · sha256:{'a' * 24}"
    cut = short(line)
    assert cut.startswith("- Read ") and "module_name.py" in cut and cut.endswith("sha256:" + "a" * 24)
    flat = middle(target, limit)
    assert len(flat) <= max(limit, len(" ".join(target.split()))) and "\n" not in flat
    if len(" ".join(target.split())) > limit:
        assert len(flat) == limit and flat.endswith(" ".join(target.split())[-(limit - limit // 3 - 1):])


@given(st.lists(st.integers(1, 40), min_size=1, max_size=30))
def test_folding_ranges_keeps_few_lines_each_one_recall_from_the_messages_in_order(tmp_path_factory, counts):
    """Earlier ranges beyond KEEP_RANGES are joined neighbour to neighbour: at most that many lines
    stay, and their archives, read in order, are exactly the original ranges' messages in order."""
    store = ArtifactStore(tmp_path_factory.mktemp("fold"))
    originals, lines = [], []
    for r, n in enumerate(counts):
        msgs = [{"role": "user", "content": f"range {r} message {i}"} for i in range(n)]
        originals += msgs
        lines.append(f"- {store.put(json.dumps(msgs))} ({n} messages)")
    acc = account.Account(ranges=lines)
    acc.fold(store)
    assert len(acc.ranges) <= account.KEEP_RANGES
    back = []
    for line in acc.ranges:
        handle = markers.handles_in(line)[0]
        part = json.loads(store.get(handle))
        assert line.endswith(f"({len(part)} messages)")
        back += part
    assert back == originals


def test_merging_an_account_gives_back_every_occurrence_of_a_reminder_quoted_once(store):
    """A harness reminder repeated with different numbers is quoted once with its variants behind
    a handle; when that account is merged into the next, the variants come back as the user's own
    messages (not as the rendered note), so the next account's handles still reach them in one step."""
    from lossless.messages import user

    def reminder(n: int) -> str:
        return f"Please always provide EXACTLY ONE action in triple backticks, found {n} actions.\n" + "See the example. " * 12

    said = [reminder(2), reminder(5), reminder(3)]
    first = account.collect([user("the task"), *[user(t) for t in said]], ContextConfig(window=32_000), store)
    body = first.render(6_000)
    first.commit(store)
    assert "differing only in numbers" in body
    merged = Message(role="user", content=(Text(text=markers.snipped(handle="sha256:" + "0" * 24, messages=4, rounds=4,
                                                                     tokens=100, account=body)),))
    again = account.collect([merged, user("next ask")], ContextConfig(window=32_000), store)
    assert [u.strip() for u in again.users] == ["the task", *[t.strip() for t in said], "next ask"]


@SETTINGS
@given(st.integers(8, 40), st.integers(2_400, 9_000))
def test_the_assistants_conclusions_take_at_most_their_share_and_give_way_to_key_lines(tmp_path_factory, rounds, budget):
    """An account whose every removed turn concluded something at length: the conclusions listed
    (newest first) take at most ``account_conclusions_fraction`` of the room, their reasoning label dropped, and
    the outputs' key lines — what the model cannot say again — have the rest beside the calls."""
    store = ArtifactStore(tmp_path_factory.mktemp("conclusions"))
    messages = [Message(role="user", content=(Text(text="fix the parser"),))]
    for i in range(rounds):
        thought = f"THOUGHT: step {i}: the parser in `src/parse_{i}.py` drops the last token when the input ends in a comma, so I check it."
        messages += [Message(role="assistant", content=(Text(text=thought),
                                                        ToolUse(id=f"t{i}", name="bash", input={"command": f"grep -n tok src/parse_{i}.py"}))),
                     Message(role="user", content=(ToolResult(tool_use_id=f"t{i}", content="\n".join(
                         f"src/parse_{i}.py:{n}: token_{i}_{n} = read_token(stream, {n * 7 + i})" for n in range(12))),))]
    body = account.collect(messages, ContextConfig(window=32_000), store).render(budget)
    section = body.split(account.H_CONCLUSIONS, 1)[1].split("\n## ", 1)[0] if account.H_CONCLUSIONS in body else ""
    conclusions = [line for line in section.splitlines() if line.startswith("- ")]
    keys = [line for line in body.splitlines() if line.startswith(account.KEY_PREFIX)]
    assert conclusions and not any("THOUGHT" in c for c in conclusions)
    assert sum(len(c) + 1 for c in conclusions) <= max(200, ContextConfig().account_conclusions_fraction * budget)
    assert conclusions[-1].endswith(f"step {rounds - 1}: " + conclusions[-1].split(f"step {rounds - 1}: ", 1)[-1])  # the newest
    assert keys  # the room the conclusions leave holds the outputs' own lines


def test_a_codex_session_names_its_commands_and_the_files_its_patches_change(store):
    """Codex's ``shell`` takes an argument list (``["bash", "-lc", script]``) and its ``apply_patch`` an
    envelope: the account shows the script as the command and lists the envelope's files as modified."""
    from lossless.messages import ToolUse, assistant, user
    from lossless.stages.snip import snip

    msgs = [user("Make the parser reject trailing commas.")]
    for i in range(30):
        if i % 3 == 2:
            use = ToolUse(id=f"c{i}", name="apply_patch", input={"input": (
                f"*** Begin Patch\n*** Update File: src/parse_{i}.py\n@@\n-    return items\n+    return check(items)\n"
                "*** End Patch")})
            out = f"Success. Updated the following files:\nM src/parse_{i}.py"
        else:
            use = ToolUse(id=f"c{i}", name="shell", input={"command": ["bash", "-lc", f"sed -i 's/a/b/' src/m{i}.py && "
                                                                                     f"pytest -q -k case{i}"]})
            out = f"{i} passed in 0.1s\n" + "x = 1\n" * 400
        msgs += [assistant(f"Step {i}.", use), Message(role="user", content=(ToolResult(tool_use_id=use.id, content=out),))]
    msgs.append(user("Now the same for trailing semicolons."))
    ctx = _ctx(store, 16_000, "auto")
    out, result = snip(msgs, ctx, ctx.count(msgs))
    assert result.fired
    acc = next(m for m in out if account.is_account(m)).text
    assert "shell `sed -i 's/a/b/' src/m3.py && pytest -q -k case3`" in acc  # the script, not "bash -lc sed …"
    assert "apply_patch src/parse_5.py" in acc
    files = acc.split("## Files", 1)[1]
    assert "src/parse_5.py" in files and "src/m3.py" in files
