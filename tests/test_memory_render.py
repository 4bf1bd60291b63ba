"""A memory written without the YAML emitter or a parse reads back as the emitter and the parser say."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from lossless.memory.frontmatter import _DataDumper, dump_simple, load_frontmatter
from lossless.memory.model import TYPES, Memory, parse_memory, render_memory, render_read_back

# Characters YAML treats specially (indicators, quotes, separators, the letters of yes/no/null/true and
# of numbers and timestamps), so that short texts over them hit every quoting rule.
TRICKY = "abyYnNoO01259eExT:Z-#'\"?.,_()=~!&*%@[]{}|>+ \t\\<"
texts = st.text(alphabet=TRICKY, max_size=12) | st.sampled_from(
    ["yes", "No", "on", "null", "~", "12", "1e3", "0x1F", "12:30", "190:20:30", ".5", "-1", ".inf", "=", "<<",
     "2026-05-09", "2026-05-09T07:35:25Z", "a: b", "a:b", "a #b", "a#b", "a ", "(x)", "it's", "---", "...x"])


def _emitted(meta: dict[str, object]) -> str:
    return yaml.dump(meta, Dumper=_DataDumper, sort_keys=False, allow_unicode=True, default_flow_style=False,
                     width=1 << 20)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(alphabet="abzY_-0:#' ", min_size=1, max_size=6), texts, min_size=1, max_size=4))
def test_dump_simple_writes_what_the_emitter_writes(meta):
    fast = dump_simple(meta)
    if fast is not None:
        assert fast == _emitted(meta)
        assert load_frontmatter(fast) == meta


def test_dump_simple_takes_the_common_memory_and_leaves_the_rest():
    common = {"name": "Use tabs", "description": "", "type": "user", "created": "2026-05-09T07:35:25Z"}
    assert dump_simple(common) == _emitted(common)
    for odd in ({"tags": ["x"]}, {"n": 1}, {"d": "naïve"}, {"d": "two\nlines"}, {"d": "x" * 5000}):
        assert dump_simple(odd) is None


@settings(max_examples=300, deadline=None)
@given(name=texts, description=texts, body=st.text(max_size=40) | texts,
       kind=st.sampled_from(TYPES + ("bogus",)),
       scope=st.sampled_from([None, "", "user", "project:web", "agent:x", "Bad scope"]),
       stamps=st.tuples(st.sampled_from(["", "2026-05-09T07:35:25Z", "yesterday"]),
                        st.sampled_from(["", "2026-05-10T07:35:25Z"])),
       extra=st.dictionaries(st.sampled_from(["zeta", "tags", "context", "name"]), texts, max_size=2))
def test_render_read_back_is_what_a_parse_reads(name, description, body, kind, scope, stamps, extra):
    memory = Memory(id="m-1", name=name, description=description, type=kind, body=body, created=stamps[0],
                    updated=stamps[1], extra=extra, scope=scope)
    text, back = render_read_back(memory)
    assert text == render_memory(memory)
    if back is not None:
        assert back == parse_memory(text, Path("m-1.md"))


def test_render_read_back_answers_for_what_add_writes():
    memory = Memory(id="use-tabs", name="Use tabs", description="The user indents with tabs", type="user",
                    body="Always indent with tabs.\n\nNever spaces.\n", created="2026-05-09T07:35:25Z",
                    updated="2026-05-09T07:35:25Z", scope="project:web")
    text, back = render_read_back(memory)
    assert back is not None and back == parse_memory(text, Path("use-tabs.md"))


@pytest.mark.parametrize("body", ["line\rbreak", "form\x0cfeed", "para\u2029sep"])
def test_a_body_that_splits_otherwise_is_parsed(body):
    memory = Memory(id="m", name="n", description="", type="user", body=body, created="", updated="")
    assert render_read_back(memory)[1] is None


def _refusing_load(text):
    """``load_frontmatter`` as it was before the flat shortcut: every event scanned first."""
    from lossless.memory import frontmatter

    depth = 0
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        depth = frontmatter._refuse(event, depth)
    return frontmatter._text_keys(yaml.load(text, Loader=yaml.CSafeLoader) or {})


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(alphabet="ab:1 -'\"&*!#[]{}?|>\t", max_size=10), min_size=1, max_size=5))
def test_a_flat_frontmatter_reads_as_the_scanned_one(lines):
    from lossless.memory.frontmatter import _FLAT, FrontmatterError

    text = "\n".join(lines)
    if _FLAT.fullmatch(text) is None:
        return
    try:
        want = _refusing_load(text)
    except FrontmatterError:  # a refusal the shortcut would skip
        raise AssertionError(f"a flat frontmatter was refused: {text!r}") from None
    except (yaml.YAMLError, ValueError):
        return  # unreadable either way: the loader's own error path names it
    if isinstance(want, dict):
        assert load_frontmatter(text) == want
