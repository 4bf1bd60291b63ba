from __future__ import annotations

import copy
import json

from hypothesis import given, settings

from lossless.config import ContextConfig
from lossless.dialects.anthropic import from_anthropic
from lossless.memory.session import SessionNotes
from lossless.rounds import validate
from lossless.stages.base import StageContext
from lossless.stages.session_memory import SessionMemoryCompactor
from lossless.store import ArtifactStore
from lossless.tokens import default_counter
from strategies import histories

NOTES = "# Task\nFix the flaky test in tests/test_api.py.\n# Decisions and constraints\n- never mock the database\n" * 20


def ctx_for(root, window=16_000, trigger="auto"):
    return StageContext(config=ContextConfig(window=window), counter=default_counter(),
                        store=ArtifactStore(root), trigger=trigger)


@settings(max_examples=30)
@given(histories(min_rounds=8, max_rounds=30))
def test_notes_stand_for_the_history_validly(tmp_path_factory, history):
    root = tmp_path_factory.mktemp("s")
    notes = SessionNotes("s1", root=root)
    notes.write(NOTES)
    stage = SessionMemoryCompactor(notes)
    ctx = ctx_for(root)
    tokens = ctx.count(history)
    frozen = copy.deepcopy(history)
    out, res = stage(history, ctx, tokens)
    assert history == frozen
    if not res.fired:
        return
    validate(out)
    assert "never mock the database" in out[0].text
    assert res.tokens_after < res.tokens_before
    replaced = res.boundary["covered"]
    assert out[1:] == history[replaced:]
    assert from_anthropic(json.loads(ArtifactStore(root).get(res.handles[0]))) == history[:replaced]


def test_no_notes_or_thin_history_means_no_firing(tmp_path):
    notes = SessionNotes("s2", root=tmp_path)
    stage = SessionMemoryCompactor(notes)
    ctx = ctx_for(tmp_path, trigger="manual")
    history = from_anthropic([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    out, res = stage(history, ctx, 20_000)
    assert out is history and not res.fired and "no session notes" in res.detail
    notes.write(NOTES)
    out, res = stage(history, ctx, 500)  # under 10,000 tokens of history: not substantial
    assert out is history and not res.fired and "not substantial" in res.detail
