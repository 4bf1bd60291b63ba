"""read_any: every supported format is recognised, everything else is a one-line error."""

from __future__ import annotations

import json

import pytest

import lossless.dialects as dialects
from conftest import data_path
from lossless.dialects import read_any
from lossless.dialects.detect import looks_openai
from lossless.errors import FormatError


def write(tmp_path, name: str, value) -> object:
    path = tmp_path / name
    path.write_text(value if isinstance(value, str) else json.dumps(value, indent=1))
    return path


def test_public_names():
    assert dialects.__all__ == sorted(dialects.__all__)
    assert set(dialects.__all__) == {"read_any", "from_anthropic", "to_anthropic", "from_openai", "to_openai"}


def test_missing_file(tmp_path):
    with pytest.raises(FormatError, match=rf"^{tmp_path}/nope.jsonl: no such file$"):
        read_any(tmp_path / "nope.jsonl")


def test_directory(tmp_path):
    with pytest.raises(FormatError, match=rf"^{tmp_path}: is a directory, not a session file \(pass one of the session files in it\)$"):
        read_any(tmp_path)


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_file(tmp_path, content):
    with pytest.raises(FormatError, match=r": empty file$"):
        read_any(write(tmp_path, "e.json", content))


@pytest.mark.parametrize(
    ("content", "head"),
    [
        ("hello world\nmore", "'hello world'"),
        ('{"foo": 1}', "'{\"foo\": 1}'"),
        ("[1, 2]", "'[1, 2]'"),
    ],
)
def test_unrecognised(tmp_path, content, head):
    path = write(tmp_path, "x.txt", content)
    with pytest.raises(FormatError) as info:
        read_any(path)
    msg = str(info.value)
    assert msg == (f"{path}: not a Claude Code JSONL, mini-swe-agent .traj.json, or a JSON list of "
                   f"Anthropic/OpenAI messages (first line starts with {head})")
    assert "\n" not in msg


def test_broken_json_names_the_line(tmp_path):
    path = write(tmp_path, "x.json", '[\n {"role": "user",\n oops]')
    with pytest.raises(FormatError, match=rf"^{path}:3: not JSON"):
        read_any(path)


def test_anthropic_list(tmp_path):
    wire = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}]
    s = read_any(write(tmp_path, "a.json", wire))
    assert s.format == "anthropic" and s.dialect == "anthropic" and len(s.messages) == 3 and s.system is None


def test_plain_text_list_reads_as_anthropic(tmp_path):
    s = read_any(write(tmp_path, "a.json", [{"role": "user", "content": "hi"}]))
    assert s.format == "anthropic"


def test_openai_list_moves_leading_system_out(tmp_path):
    wire = [{"role": "system", "content": "be nice"}, {"role": "developer", "content": "be brief"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "ok"}]
    s = read_any(write(tmp_path, "o.json", wire))
    assert s.format == "openai" and s.system == "be nice\n\nbe brief"
    assert [m.role for m in s.messages] == ["user", "assistant", "user"]


def test_anthropic_request_body(tmp_path):
    body = {"model": "claude", "max_tokens": 10, "system": [{"type": "text", "text": "sys"}],
            "messages": [{"role": "user", "content": "hi"}]}
    s = read_any(write(tmp_path, "b.json", body))
    assert s.format == "anthropic" and s.system == "sys"


def test_openai_request_body(tmp_path):
    body = {"model": "gpt", "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]}
    s = read_any(write(tmp_path, "b.json", body))
    assert s.format == "openai" and s.system == "sys" and len(s.messages) == 1


def test_bad_messages_inside_a_list_name_the_file(tmp_path):
    path = write(tmp_path, "a.json", [{"role": "user", "content": [{"text": "no type"}]}])
    with pytest.raises(FormatError, match=rf"^{path}: message 0, block 0: a content block needs a 'type' string, not None$"):
        read_any(path)


def test_claude_code_jsonl(tmp_path):
    entry = {"type": "user", "uuid": "a", "parentUuid": None, "sessionId": "s",
             "message": {"role": "user", "content": "hi"}}
    path = write(tmp_path, "s.jsonl", json.dumps(entry) + "\n")
    s = read_any(path)
    assert s.format == "claude-code" and s.messages[0].text == "hi"


def test_claude_code_jsonl_starting_with_a_summary_line(tmp_path):
    lines = [{"type": "summary", "summary": "Fix the server", "leafUuid": "a"},
             {"type": "user", "uuid": "a", "parentUuid": None, "message": {"role": "user", "content": "hi"}}]
    s = read_any(write(tmp_path, "s.jsonl", "".join(json.dumps(x) + "\n" for x in lines)))
    assert s.format == "claude-code" and len(s.messages) == 1


def test_looks_openai():
    assert looks_openai([{"role": "tool", "tool_call_id": "x", "content": ""}])
    assert looks_openai([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}])
    assert looks_openai([{"role": "assistant", "content": None}])
    assert not looks_openai([{"role": "user", "content": [{"type": "text", "text": "x"}]}])


@pytest.mark.parametrize(
    ("parts", "fmt"),
    [
        (("claude-code", "short.jsonl"), "claude-code"),
        (("claude-code", "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"), "claude-code"),
        (("mini-swe-agent", "psf__requests-1142.traj.json"), "mini-swe-agent"),
    ],
)
def test_real_files(parts, fmt):
    s = read_any(data_path(*parts))
    assert s.format == fmt and s.messages and s.calls


@pytest.mark.parametrize("source", [("claude-code", "tool_heavy.jsonl"), ("mini-swe-agent", "psf__requests-1142.traj.json"),
                                    None], ids=["claude-code", "mini-swe-agent", "messages"])
def test_a_utf8_byte_order_mark_is_read_past(tmp_path, source):
    """Windows editors and PowerShell's `Set-Content -Encoding utf8` put EF BB BF first; the file
    is the same session with or without it (it was 'not a Claude Code JSONL…')."""
    if source is None:
        plain = write(tmp_path, "plain.json", [{"role": "user", "content": "héllo"}, {"role": "assistant", "content": "hi"}])
    else:
        plain = data_path(*source)
    marked = tmp_path / ("marked" + "".join(plain.suffixes))
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    a, b = read_any(plain), read_any(marked)
    assert (a.format, a.messages, a.system) == (b.format, b.messages, b.system) and a.messages


def test_a_list_of_responses_items_reads_as_openai(tmp_path):
    """What ``compact`` writes for a Responses model's run: ``input`` items, read back."""
    from lossless.dialects.detect import read_any

    items = [{"type": "message", "role": "system", "content": "sys"},
             {"role": "user", "content": "task"},
             {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": '{"command": "ls"}'},
             {"type": "function_call_output", "call_id": "c1", "output": "a\nb"}]
    path = tmp_path / "items.json"
    path.write_text(json.dumps(items))
    s = read_any(path)
    assert s.format == "openai" and s.system == "sys"
    assert [m.role for m in s.messages] == ["user", "assistant", "user"]
    assert s.messages[1].tool_uses[0].input == {"command": "ls"}
    path.write_text(json.dumps(items[:2] + [{"type": "function_call", "call_id": 5}]))
    with pytest.raises(FormatError, match=rf"^{path}: item 2"):
        read_any(path)


def test_a_json_lines_file_is_judged_by_its_lines(tmp_path):
    """Read as one document, a JSON Lines file was said to break on line 2 ("Extra data") whichever
    line was at fault: its first line's own error is named, or that its entries are of no known kind."""
    broken = write(tmp_path, "a.jsonl", '{"type": "user"\n{"type": "user", "uuid": "u1"}\n')
    with pytest.raises(FormatError, match=rf"^{broken}:1: not JSON \(Expecting ',' delimiter at column 16\)$"):
        read_any(broken)
    unknown = write(tmp_path, "b.jsonl", '{"type": "user", "text": "hi"}\n{"type": "user"}\n')
    with pytest.raises(FormatError) as info:
        read_any(unknown)
    said = str(info.value)
    assert said.startswith(f"{unknown}: JSON Lines whose first entry (type, text) is neither a Claude Code entry")
    assert "\n" not in said
    whole = write(tmp_path, "c.json", '{"messages": [{"role": "user", "content": "hi"}]}')
    assert [m.text for m in read_any(whole).messages] == ["hi"]
