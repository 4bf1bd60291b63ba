"""No secret reaches the memory directory, by any write path, in any disguise.

Each shape is written through every path that puts text under the memory
directory, then every file's bytes (and every file name) are searched for it:
plain, and split by each invisible character a paste can carry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.cli import main as cli_main
from lossless.memory import MemoryStore, MemoryTool, redact

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"[:40]
AZURE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
# (name, text as it would be pasted, the secret in it)
SHAPES = [
    ("aws-secret-after-key-id", "AKIAIOSFODNN7EXAMPLE {s}", AWS_SECRET),
    ("aws-secret-in-context", "the AWS secret access key is {s} (rotate monthly)", AWS_SECRET),
    ("aws-secret-csv", "Access key ID,Secret access key\nAKIAI44QH8DHBEXAMPLE,{s}", AWS_SECRET),
    ("slack-webhook", "alerts go to {s}", "https://hooks.slack.com/services/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"),
    ("sendgrid", "SENDGRID {s}", "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"),
    ("netrc", "machine api.github.com\n  login octocat\n  password {s}\n", "Gh0stRider-77-quartz"),
    ("netrc-one-line", "machine pypi.org login alice password {s}", "tr0ub4dor-and-3"),
    ("azure", "DefaultEndpointsProtocol=https;AccountName=prod;AccountKey={s};EndpointSuffix=core.windows.net",
     AZURE_KEY),
    ("anthropic", "key {s}", "sk-ant-api03-" + "Qm7xZ2pL" * 5),
    ("github", "token {s}", "ghp_" + "R8dk2LmQ9zXw" * 3),
    ("assignment", "db_password = {s}", "c0rrect-h0rse-battery"),
]
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]


def disguised(secret: str, mark: str) -> str:
    """``secret`` with ``mark`` inside it (after its first third)."""
    k = max(4, len(secret) // 3)
    return secret[:k] + mark + secret[k:]


def fragments(secret: str) -> list[bytes]:
    """Pieces of ``secret`` that must not survive anywhere (both sides of any split)."""
    k = max(4, len(secret) // 3)
    pieces = [secret, secret[k:]] + ([secret[:k]] if k >= 10 else [])
    return [p.encode() for p in pieces if len(p) >= 8]


def write_everywhere(store: MemoryStore, text: str, tmp_path) -> None:
    """``text`` through every path that writes under the memory directory."""
    tool = MemoryTool(store)
    store.add(name=f"note {text}", description="by name", type="reference", body="b")
    store.add(name="body", description=f"by description {text}", type="project", body=f"by body: {text}",
              extra={"note": text, text: "as a key", "nested": {"list": [text], text: 1}})
    store.update("body", body=f"updated: {text}")
    store.add(name="edit", description="d", type="user", body="b")
    store.write_text("edit", f"---\nname: edit\ndescription: raw\ntype: user\nraw: {json.dumps(text, ensure_ascii=False)}\n---\nraw {text}\n")
    store.add(name="renamed", description="d", type="user", body="b")
    store.rename("renamed", "moved")
    store.delete("moved", reason=f"because {text}")
    assert tool.run({"command": "create", "path": "/memories/tooled.md",
                     "file_text": f"---\nname: tooled\ndescription: d\ntype: user\nkey: {json.dumps(text, ensure_ascii=False)}\n---\n{text}\n"}
                    ).startswith("Created")
    assert tool.run({"command": "create", "path": "/memories/plain.md", "file_text": f"{text}\n"}
                    ).startswith("Created")
    assert tool.run({"command": "insert", "path": "/memories/plain.md",
                     "insert_line": len(store.text_of("plain").splitlines()),
                     "insert_text": f"again {text}"}).startswith("Inserted")
    assert tool.run({"command": "str_replace", "path": "/memories/tooled.md", "old_str": "name: tooled",
                     "new_str": f"name: tooled\nsecret_note: {json.dumps(text, ensure_ascii=False)}"}).startswith("Edited"), "str_replace"
    source = tmp_path / "incoming.md"
    source.write_text(f"---\nname: from cli\ndescription: {json.dumps(text, ensure_ascii=False)}\ntype: user\n---\n{text}\n")
    assert cli_main(["memory", "--dir", str(store.dir), "add", str(source)]) == 0
    # a person edits a file by hand: the next store writes (log, index, trash) must not copy it
    (store.dir / "hand.md").write_text(f"---\nname: hand\ndescription: {json.dumps(text, ensure_ascii=False)}\ntype: user\n---\n{text}\n")
    store.rebuild_index()
    store.update("hand", body="cleaned")
    store.add(name="hand-2", description="d", type="user", body="b")
    (store.dir / "hand-2.md").write_text(f"---\nname: hand 2\ndescription: d\ntype: user\n---\n{text}\n")
    store.delete("hand-2")
    store.touch(["body"])


def leaks(store: MemoryStore, secret: str) -> list[str]:
    found = []
    for path in store.dir.rglob("*"):
        data = path.read_bytes() if path.is_file() else b""
        name = path.name.encode()
        for piece in fragments(secret):
            if piece in data or piece.lower() in name.lower():
                found.append(f"{path.relative_to(store.dir)} holds {piece.decode()!r}")
    return found


@pytest.mark.parametrize("shape", SHAPES, ids=[s[0] for s in SHAPES])
def test_no_secret_reaches_any_file_by_any_path(tmp_path, capsys, shape):
    """The shape as pasted and split by an invisible character (one per shape, in turn:
    the redactor itself is tested with every character on every shape below)."""
    _, template, secret = shape
    mark = INVISIBLE[SHAPES.index(shape) % len(INVISIBLE)]
    text = template.format(s=secret) + "\n" + template.format(s=disguised(secret, mark))
    store = MemoryStore(tmp_path / "mem")
    write_everywhere(store, text, tmp_path)
    capsys.readouterr()
    assert leaks(store, secret) == []
    assert len(store.memories()) >= 6 and store.scan().issues == ()


@pytest.mark.parametrize("secret", ["sk-ant-api03-" + "q7m2xz" * 6, "xoxb-1234567890-abcdefghijklmn",
                                    "glpat-abcdefghij0123456789xyz"])
def test_a_secret_shaped_id_is_never_a_file_name(tmp_path, secret):
    store = MemoryStore(tmp_path / "mem")
    store.add(name="x", description="d", type="user", body="b")
    renamed = store.rename("x", secret)
    store.delete(renamed.id)  # each path below lands on the same redacted id
    created = store.add(name="y", description="d", type="user", body="b", id=secret.replace("api03", "api04"))
    store.delete(created.id)
    tool = MemoryTool(store)
    assert tool.run({"command": "create", "path": f"/memories/{secret[:-1]}.md", "file_text": "z\n"}
                    ).startswith("Created")
    assert secret not in renamed.id and "redacted" in renamed.id and "redacted" in created.id
    assert leaks(store, secret) == [] and leaks(store, secret[:-1]) == []


@pytest.mark.parametrize("shape", SHAPES, ids=[s[0] for s in SHAPES])
def test_each_shape_is_redacted_and_redaction_is_idempotent(shape):
    _, template, secret = shape
    for mark in ["", *INVISIBLE]:
        out = redact(template.format(s=disguised(secret, mark) if mark else secret))
        assert "[REDACTED:" in out and not any(p.decode() in out for p in fragments(secret)), out
        assert redact(out) == out


def test_full_width_letters_are_normalised_before_matching():
    key = "sk-ant-api03-" + "Qm7xZ2pL" * 5
    wide = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in key)
    assert "REDACTED" in redact(f"use {wide}")


@given(st.text(max_size=80))
def test_text_without_a_secret_is_left_exactly_as_written(text):
    """Normalisation is only for matching: superscripts, emoji joiners, accents stay."""
    out = redact(text)
    assert out == text or "[REDACTED:" in out
    for kept in ("m² and x₂", "👩\u200d💻 dev", "café ﬁle", "naïve\u00adly"):
        assert redact(f"{text} {kept}").endswith(kept) or "[REDACTED:" in redact(f"{text} {kept}")


def test_aws_shaped_strings_without_aws_context_are_kept():
    sha = "0123456789abcdef0123456789abcdef01234567"  # a git commit: lowercase hex, no AWS near
    assert redact(f"fixed in {sha}") == f"fixed in {sha}"
    assert redact(f"aws deploy at commit {sha}") == f"aws deploy at commit {sha}"


@given(st.text(max_size=40), st.sampled_from(SHAPES), st.sampled_from(["", *INVISIBLE]), st.text(max_size=40))
def test_a_planted_shape_never_survives_any_surroundings(before, shape, mark, after):
    _, template, secret = shape
    out = redact(f"{before} {template.format(s=disguised(secret, mark) if mark else secret)} {after}")
    assert not any(p.decode() in out for p in fragments(secret)), out
    assert redact(out) == out


HOSTILE_UNITS = ["a-", "eyJ-", "a://", "sk-a", "password=", "default login ", "Ab1+", "x.token: ", "\u200ba"]
REDACT_ALL = """
import sys
from lossless.memory import redact
for unit in sys.argv[1:]:
    text = unit * (100_000 // len(unit))
    assert redact(redact(text)) == redact(text)
print("done")
"""


def test_hostile_texts_cost_linear_time_not_a_hang():
    """A 100 KB memory made of one short unit repeated ("a-a-a-…") once made a pattern
    rescan to its end from every position (hours); now each is one pass.  The timeout
    is a hang guard, far above the second it takes, not a measurement."""
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    done = subprocess.run([sys.executable, "-c", REDACT_ALL, *HOSTILE_UNITS], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": os.path.abspath(src)})
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr


TRIGGER_TEXT = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/ ", max_size=40)


@given(st.lists(TRIGGER_TEXT | st.sampled_from(["SK-", "Bearer", "GHR_", "k_LIVE_", "hooks.SLACK", "eyJ", ":/",
                                                "AccountKEY", "pYpI-", "gh_"]), max_size=5))
def test_the_quick_trigger_check_agrees_with_the_pattern(parts):
    from lossless.memory.redact import _TRIGGER, _triggered

    text = "".join(parts)
    assert _triggered(text) == bool(_TRIGGER.search(text))
