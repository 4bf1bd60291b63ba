"""Hypothesis strategies for valid histories: parallel tool calls, thinking blocks,
interrupted calls (answered by an "interrupted" error result, as repair() would),
big and small results, mixed prose, code and shell output, and blocks of kinds the neutral
model keeps as they came (``Opaque``: a server tool's call and result, a document, a search
result inside a tool result).

Every history drawn here passes ``validate()``; the property tests check that every
stage keeps it that way.
"""

from __future__ import annotations

import string

from hypothesis import strategies as st

from lossless.messages import Image, Message, Opaque, RedactedThinking, Text, Thinking, ToolResult, ToolUse
from lossless.rounds import INTERRUPTED

TOOLS = ("Bash", "Read", "Grep", "Edit", "TodoWrite", "custom_tool")
WORDS = st.text(alphabet=string.ascii_letters + string.digits + " .,_-/\n", min_size=1, max_size=40)


@st.composite
def prose(draw, min_words: int = 1, max_words: int = 60) -> str:
    n = draw(st.integers(min_words, max_words))
    words = draw(st.lists(st.sampled_from(["the", "file", "error", "fix", "test", "run", "src/app.py", "def", "42",
                                            "ok", "παράδειγμα", "数据", "{\"k\": 1}", "$ ls -la"]),
                          min_size=n, max_size=n))
    text = " ".join(words).strip()
    return text or "ok"


@st.composite
def tool_output(draw) -> str:
    size = draw(st.sampled_from([10, 200, 2_000, 12_000, 40_000, 70_000]))
    line = draw(st.sampled_from(["-rw-r--r-- 1 root root  4096 Nov 22 src/x.py\n", "   12→    return value\n",
                                 "ERROR test_foo.py::test_bar - AssertionError\n", "{\"id\": 7, \"ok\": true}\n"]))
    return (line * (size // len(line) + 1))[:size]


@st.composite
def thinking(draw) -> Thinking | RedactedThinking:
    if draw(st.booleans()):
        return Thinking(thinking=draw(prose(1, 30)), signature="sig-" + draw(st.text(string.hexdigits, min_size=8, max_size=16)))
    return RedactedThinking(data="redacted-" + draw(st.text(string.hexdigits, min_size=8, max_size=16)))


@st.composite
def server_search(draw, n: int) -> list[Opaque]:
    """A server tool's call and its result, as the API returns them in one assistant message."""
    sid = f"srvtoolu_{n:06d}"
    return [Opaque(data={"type": "server_tool_use", "id": sid, "name": "web_search", "input": {"query": draw(prose(1, 5))}}),
            Opaque(data={"type": "web_search_tool_result", "tool_use_id": sid,
                         "content": [{"type": "web_search_result", "url": f"https://example.com/{n}", "title": draw(prose(1, 6)),
                                      "encrypted_content": "E" * draw(st.sampled_from([40, 2_000])), "page_age": None}]})]


def document(text: str) -> Opaque:
    return Opaque(data={"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text},
                        "title": "pasted"})


def search_result(text: str) -> Opaque:
    return Opaque(data={"type": "search_result", "source": "https://example.com/kb", "title": "kb",
                        "content": [{"type": "text", "text": text}]})


@st.composite
def histories(draw, min_rounds: int = 1, max_rounds: int = 30) -> list[Message]:
    """A valid Anthropic-style history that starts with a user message."""
    counter = draw(st.integers(0, 10_000))
    out: list[Message] = [Message(role="user", content=(Text(text=draw(prose())),))]
    n_rounds = draw(st.integers(min_rounds, max_rounds))
    for r in range(n_rounds):
        blocks: list = []
        if draw(st.integers(0, 4)) == 0:
            blocks.append(draw(thinking()))
        if draw(st.booleans()):
            blocks.append(Text(text=draw(prose())))
        if draw(st.integers(0, 7)) == 0:
            counter += 1
            blocks.extend(draw(server_search(counter)))
        n_calls = draw(st.sampled_from([0, 1, 1, 1, 2, 3]))
        uses = []
        for _ in range(n_calls):
            counter += 1
            name = draw(st.sampled_from(TOOLS))
            uses.append(ToolUse(id=f"toolu_{counter:06d}", name=name, input={"arg": draw(WORDS)}))
        blocks.extend(uses)
        if not blocks:
            blocks.append(Text(text=draw(prose())))
        out.append(Message(role="assistant", content=tuple(blocks)))
        if uses:
            results = []
            for u in uses:
                kind = draw(st.integers(0, 9))
                if kind == 0:
                    results.append(ToolResult(tool_use_id=u.id, content=INTERRUPTED, is_error=True))
                elif kind == 1:
                    results.append(ToolResult(tool_use_id=u.id, content=(Text(text=draw(tool_output())),
                                                                        Image(source={"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}))))
                elif kind == 3 and draw(st.booleans()):
                    results.append(ToolResult(tool_use_id=u.id, content=(search_result(draw(prose())),
                                                                        Text(text=draw(tool_output())))))
                else:
                    results.append(ToolResult(tool_use_id=u.id, content=draw(tool_output()), is_error=kind == 2))
            extra = [Text(text=draw(prose()))] if draw(st.integers(0, 6)) == 0 else []
            out.append(Message(role="user", content=tuple(results + extra)))
        elif r < n_rounds - 1 or draw(st.booleans()):
            pasted = (document(draw(tool_output())),) if draw(st.integers(0, 5)) == 0 else ()
            out.append(Message(role="user", content=(*pasted, Text(text=draw(prose())))))
    return out
