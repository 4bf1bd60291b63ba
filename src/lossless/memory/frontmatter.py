"""Frontmatter is data, never a program: the YAML reader and writer of memory files.

Use::

    meta = load_frontmatter(yaml_text)     # a dict, or FrontmatterError(line, message)
    text = dump_frontmatter(meta)          # ordered, no anchors, no tags

A memory file is written by a person, by a model (through the memory tool) or by
anything else that can drop a file in the directory, so its frontmatter is
untrusted.  ``load_frontmatter`` refuses what makes YAML more than data:

* anchors and aliases (``&a`` / ``*a``): nested a few levels deep they expand
  ~10x per level, so a 600-byte file would cost gigabytes and minutes;
* tags other than the plain ones (``!!str``, ``!!int`` …): no custom types;
* more than ``MAX_FRONTMATTER`` bytes or ``MAX_DEPTH`` levels of nesting.

Each refusal is checked on the event stream *before* a node is built, so a
hostile file costs time and memory proportional to its size.  The result holds
only ``str``/``int``/``float``/``bool``/``None``/dates, lists and dicts with text keys
(a ``2026:`` key is read as ``"2026"``).
``dump_frontmatter`` never writes an anchor, so what lossless writes it can read.

Where PyYAML was built with libyaml (``yaml.CSafeLoader``), the C parser reads
the text: the refusals above are checked on its event stream first, then the C
loader builds the value — the same result, several times faster than the pure-Python
``SafeLoader``, which remains the fallback.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import yaml
from yaml.nodes import ScalarNode

MAX_FRONTMATTER = 32 * 1024
"""Bytes of YAML between the two ``---`` lines."""
MAX_DEPTH = 16
"""Nesting levels of lists and mappings."""
PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map", "timestamp")
)


class FrontmatterError(ValueError):
    """Frontmatter that is not plain data; ``line`` counts from the first YAML line (1)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


_CLoader: type[yaml.CSafeLoader] | None = getattr(yaml, "CSafeLoader", None)


def _refuse(event: Any, depth: int) -> int:
    """The nesting depth after ``event``; ``FrontmatterError`` for what makes YAML more than data."""
    line = event.start_mark.line + 1
    if isinstance(event, yaml.AliasEvent):
        raise FrontmatterError(line, f"alias *{event.anchor} is not allowed (write the value out)")
    if getattr(event, "anchor", None) is not None:
        raise FrontmatterError(line, f"anchor &{event.anchor} is not allowed (frontmatter is plain data)")
    tag = getattr(event, "tag", None)
    if tag is not None and tag != "!" and tag not in PLAIN_TAGS:
        raise FrontmatterError(line, f"tag {tag!r} is not allowed (frontmatter is plain data)")
    if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
        depth += 1
        if depth > MAX_DEPTH:
            raise FrontmatterError(line, f"nested more than {MAX_DEPTH} levels deep")
    elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
        depth -= 1
    return depth


_FLAT = re.compile(r"(?:[^\s\-?:#&*!\[\]{}|>%@`'\"][^\n&*!\[\]{}]*)?(?:\n(?:[^\s\-?:#&*!\[\]{}|>%@`'\"][^\n&*!\[\]{}]*)?)*")
"""A frontmatter of lines that each start at the margin with a plain character and hold no ``&``, ``*``,
``!``, bracket or brace: no anchor, alias or tag can be in it, and nothing nests (a nested value needs an
indented line, a line that starts with ``-`` or ``?``, or a flow bracket).  The refusals then have nothing
to find, and its event stream is not scanned first."""


def _load_c(text: str, loader: type[yaml.CSafeLoader]) -> Any:
    depth = 0
    try:
        if _FLAT.fullmatch(text) is None:
            for event in yaml.parse(text, Loader=loader):
                depth = _refuse(event, depth)
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError:  # rare: let the pure-Python reader name the problem, as it always has
        return _load_py(text)


def _load_py(text: str) -> Any:
    loader = _DataLoader(text)  # the reader refuses control characters already here
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


class _DataLoader(yaml.SafeLoader):
    """A SafeLoader that refuses anchors, aliases, non-plain tags and deep nesting while composing."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        depth = self._depth
        self._depth = _refuse(self.peek_event(), depth)  # the same refusals as the C path's event scan
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth = depth


class _DataDumper(yaml.SafeDumper):
    """A SafeDumper that writes a value shared by two keys twice instead of an anchor."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def load_frontmatter(text: str) -> dict[str, Any]:
    """The mapping ``text`` holds (``{}`` when empty); ``FrontmatterError`` otherwise."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_FRONTMATTER:
        raise FrontmatterError(1, f"frontmatter is {size} bytes, over the {MAX_FRONTMATTER}-byte limit "
                                  "(move long text into the body)")
    try:
        meta = _load_c(text, _CLoader) if _CLoader is not None else _load_py(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0] or "invalid YAML"
        raise FrontmatterError(line, f"bad frontmatter: {problem}") from None
    except (ValueError, OverflowError) as exc:  # e.g. a timestamp with month 13
        if isinstance(exc, FrontmatterError):
            raise
        raise FrontmatterError(1, f"bad frontmatter: {exc}") from None
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise FrontmatterError(1, "frontmatter must be a mapping of keys to values")
    return _text_keys(meta)


def _text_keys(value: Any) -> Any:
    """``value`` with every mapping key as text (``2026: x`` -> ``"2026"``), so keys can be redacted."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): _text_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_text_keys(v) for v in value]
    return value


def dump_frontmatter(meta: dict[str, Any]) -> str:
    """YAML for ``meta`` in its own key order, one line per scalar, never an anchor."""
    return dump_simple(meta) or yaml.dump(meta, Dumper=_DataDumper, sort_keys=False, allow_unicode=True,
                                           default_flow_style=False, width=1 << 20)


_SIMPLE = re.compile(r"[A-Za-z0-9_(][ -~]{0,4000}")
"""A one-line printable ASCII text that does not start with a YAML indicator (``-``, ``?``, ``:``,
``#``, quotes, brackets, ``&``, ``*``, ``!``, ``|``, ``>``, ``%``, ``@``, a backquote, a space, a dot)."""
_NOT_PLAIN = re.compile(r": |:$|\s#| $")
"""What makes such a text need quotes in a block mapping: ``: ``, a closing ``:``, `` #``, a closing space."""
_RESOLVER = yaml.resolver.Resolver()  # the dumper's (SafeDumper resolves with it)
_STR = "tag:yaml.org,2002:str"


def dump_simple(meta: dict[str, Any]) -> str | None:
    """``yaml.dump``'s text for a mapping of short one-line ASCII texts, written without the emitter
    (the common memory: name, description, type, stamps); None for anything else.  A text the
    resolver would read as another type (``yes``, ``12``, a timestamp) or that holds an indicator is
    single-quoted, as the emitter quotes it (``tests/test_memory_store.py`` checks they agree)."""
    out = []
    for key, value in meta.items():
        if not (isinstance(key, str) and isinstance(value, str)):
            return None
        if not _plain(key):
            return None
        if value == "":
            out.append(f"{key}: ''\n")
        elif _SIMPLE.fullmatch(value) is None:
            return None
        elif _plain(value):
            out.append(f"{key}: {value}\n")
        else:
            quoted = value.replace("'", "''")
            out.append(f"{key}: '{quoted}'\n")
    return "".join(out)


@lru_cache(maxsize=4096)  # the keys and types of every memory, and its stamps while they last
def _plain(text: str) -> bool:
    """Whether the emitter writes ``text`` (a ``_SIMPLE`` text) unquoted."""
    return (_SIMPLE.fullmatch(text) is not None and _NOT_PLAIN.search(text) is None
            and _RESOLVER.resolve(ScalarNode, text, (True, False)) == _STR)

