"""The memory store: format, index caps, confinement, atomicity, concurrency, secrets."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.errors import MemoryError_
from lossless.memory import MemoryStore, redact, render_index, slugify
from lossless.memory.index import MAX_BYTES, MAX_LINES
from lossless.memory.model import Memory, check_id, now_iso, parse_memory, render_memory


def add(store, name, body="body", **kw):
    return store.add(name=name, description=kw.pop("description", f"about {name}"), type=kw.pop("type", "project"),
                     body=body, **kw)


def test_round_trip_keeps_order_and_unknown_keys(store_dir):
    store = MemoryStore()
    assert store.dir == store_dir / "memory"
    m = add(store, "Use Tabs", extra={"zeta": 1, "alpha": ["x"]})
    text = store.path_for(m.id).read_text()
    keys = [ln.split(":")[0] for ln in text.split("---")[1].strip().splitlines() if not ln.startswith("-")]
    assert keys == ["name", "description", "type", "created", "updated", "zeta", "alpha"]
    again = store.get("use-tabs")
    assert again.extra == {"zeta": 1, "alpha": ["x"]} and again.name == "Use Tabs" and again.body == "body"
    assert "- [Use Tabs](use-tabs.md) — about Use Tabs" in store.index_text()


def test_bad_frontmatter_is_reported_with_line_and_does_not_hide_others(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    add(store, "good")
    (store.dir / "broken.md").write_text("---\nname: x\ntype: [unclosed\n---\nbody\n")
    (store.dir / "badtype.md").write_text("---\nname: x\ndescription: d\ntype: opinion\n---\n")
    (store.dir / "nofront.md").write_text("just text\n")
    scan = store.scan()
    assert [m.id for m in scan.memories] == ["good"]
    issues = {i.path.name: i for i in scan.issues}
    assert issues["badtype.md"].line == 4 and "type must be one of" in issues["badtype.md"].message
    assert issues["broken.md"].line >= 3 and issues["nofront.md"].line == 1
    with pytest.raises(MemoryError_, match=r"badtype.md:4"):
        store.get("badtype")


@pytest.mark.parametrize("bad", ["../x", "..", "a/b", "/etc/passwd", "x.md", "", "A", "-x", "a\x00b"])
def test_ids_are_confined(tmp_path, bad):
    store = MemoryStore(tmp_path / "mem")
    with pytest.raises(MemoryError_, match="invalid memory id"):
        store.path_for(bad)
    with pytest.raises(MemoryError_):
        store.delete(bad)


@given(st.text(min_size=1, max_size=80))
def test_slug_is_always_confined(name):
    try:
        slug = slugify(name)
    except MemoryError_:
        return
    assert check_id(slug) == slug
    assert "/" not in slug and ".." not in slug and not slug.startswith("-")


def test_duplicate_add_is_an_error_and_delete_goes_to_trash(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    add(store, "x")
    with pytest.raises(MemoryError_, match="already exists"):
        add(store, "X")
    dest = store.delete("x")
    assert dest.exists() and ".trash" in dest.parts and not store.exists("x")
    assert [e["op"] for e in store.changes()] == ["add", "delete"]


def _mem(i: int, t: float, used: float = 0.0) -> Memory:
    return Memory(id=f"m{i}", name=f"m{i}", description="d" * 100, type="user", body="",
                  created=now_iso(t), updated=now_iso(t))


def test_index_over_cap_drops_least_recently_used_and_says_so():
    ms = [_mem(i, 1_000_000 + i * 10) for i in range(300)]
    used = {"m0": 2_000_000.0}  # the oldest memory was used recently
    text = render_index(ms, used)
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES and len(text.encode()) <= MAX_BYTES
    assert "not listed" in lines[-1] and "lossless memory list" in lines[-1]
    assert "(m299.md)" in text and "(m0.md)" in text and "(m1.md)" not in text
    assert int(lines[-1].split()[2]) == 300 - (len(lines) - 1)


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 400)), min_size=1, max_size=260),
       st.integers(3, 60), st.integers(300, 8000))
def test_index_never_drops_a_newer_memory_than_one_it_lists(spec, max_lines, max_bytes):
    ms = [Memory(id=f"m{i}", name=f"m{i}", description="x" * n, type="user", body="", created=now_iso(t),
                 updated=now_iso(t)) for i, (t, n) in enumerate(spec)]
    text = render_index(ms, max_lines=max_lines, max_bytes=max_bytes)
    assert len(text.splitlines()) <= max_lines and len(text.encode()) <= max_bytes
    listed = {m.id for m in ms if f"({m.id}.md)" in text}
    if len(listed) < len(ms):
        assert "not listed" in text
        oldest_listed = min((m.updated for m in ms if m.id in listed), default=None)
        newest_dropped = max(m.updated for m in ms if m.id not in listed)
        assert oldest_listed is None or oldest_listed >= newest_dropped


def test_secrets_never_reach_disk(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    key = "sk-ant-api03-" + "A" * 40
    m = store.add(name="deploy", description=f"token ghp_{'b' * 36}", type="reference",
                  body=f"use {key} and postgres://admin:hunter2secret@db:5432/app", extra={"k": f"AKIA{'X' * 16}"})
    raw = b"".join(p.read_bytes() for p in store.dir.rglob("*") if p.is_file())
    for secret in (key, "ghp_" + "b" * 36, "hunter2secret", "AKIA" + "X" * 16):
        assert secret.encode() not in raw
    assert "postgres://admin:[REDACTED:password]@db" in store.get(m.id).body


SECRETS = st.sampled_from([
    "sk-ant-api03-" + "Zx9" * 10, "sk-proj-" + "a1B2" * 8, "ghp_" + "c" * 36, "AKIA" + "ABCDEFGHIJKLMNOP",
    "xoxb-1234567890-abcdefghij", "AIza" + "k" * 35, "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
])


@given(st.text(max_size=60), SECRETS, st.text(max_size=60))
def test_redaction_removes_planted_secrets_and_is_idempotent(before, secret, after):
    text = f"{before} {secret} {after}"
    out = redact(text)
    assert secret not in out
    assert redact(out) == out


@given(st.text(max_size=80), st.text(alphabet="abcdefXYZ0123456789", min_size=8, max_size=20))
def test_redaction_of_url_passwords_and_assignments(prefix, pw):
    for text in (f"{prefix} https://bob:{pw}@example.com/x", f"{prefix} password={pw}", f"api_key: '{pw}'"):
        out = redact(text)
        assert f":{pw}@" not in out and f"={pw}" not in out and f"'{pw}'" not in out
        assert redact(out) == out


def test_redaction_leaves_ordinary_prose():
    text = "Use tabs. max_tokens: 200000. See https://example.com/docs and the token budget."
    assert redact(text) == text


def test_crash_in_the_middle_of_a_write_keeps_the_old_file(tmp_path, monkeypatch):
    store = MemoryStore(tmp_path / "mem")
    add(store, "x", body="old body")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        store.update("x", body="new body")
    monkeypatch.undo()
    assert store.get("x").body == "old body"
    assert not list(store.dir.glob("*.tmp")) and not list(store.dir.glob(".*.tmp"))
    assert store.scan().issues == ()


WRITER = textwrap.dedent("""
    import sys
    from lossless.memory import MemoryStore
    store = MemoryStore(sys.argv[1])
    for i in range(int(sys.argv[3])):
        store.add(name=f"{sys.argv[2]}-{i}", description=f"fact {i} from {sys.argv[2]}", type="project",
                  body=("line\\n" * 2000) if sys.argv[2] == "big" else f"body {i}")
""")
LOOPER = textwrap.dedent("""
    import sys
    from lossless.memory import MemoryStore
    store = MemoryStore(sys.argv[1])
    i = 0
    while True:
        i += 1
        store.update("victim", body=(f"version {i}\\n" * 5000))
""")


def _env():
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    return {**os.environ, "PYTHONPATH": os.path.abspath(src)}


def test_a_killed_writer_leaves_no_torn_file(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    add(store, "victim", body="v0")
    proc = subprocess.Popen([sys.executable, "-c", LOOPER, str(store.dir)], env=_env())
    deadline = time.time() + 10
    while time.time() < deadline and "version" not in store.get("victim").body:
        time.sleep(0.02)
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    scan = store.scan()
    assert scan.issues == () and [m.id for m in scan.memories] == ["victim"]
    body = store.get("victim").body.splitlines()
    assert len(body) == 5000 and len(set(body)) == 1
    parse_memory(render_memory(store.get("victim")), store.path_for("victim"))


def test_concurrent_processes_lose_nothing(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(store.dir), f"w{k}", "12"], env=_env())
             for k in range(4)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    ids = {m.id for m in store.memories()}
    assert ids == {f"w{k}-{i}" for k in range(4) for i in range(12)}
    index = store.index_text()
    assert all(f"({i}.md)" in index for i in ids)
    assert len(store.changes()) == 48


# -- review fixes: each of these failed before its fix ---------------------------------


def test_a_secret_in_a_name_never_becomes_a_file_name(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    token = "ghp_" + "Ab1" * 12
    m = store.add(name=f"deploy with {token}", description="d", type="reference", body="b")
    assert "ab1ab1" not in m.id and m.id.startswith("deploy-with-redacted")
    for p in store.dir.rglob("*"):
        assert "ab1ab1" not in p.name.lower() and token.encode() not in (p.read_bytes() if p.is_file() else b"")


def test_a_secret_in_a_logged_reason_is_redacted(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    add(store, "x")
    key = "sk-ant-api03-" + "R" * 30
    store.delete("x", reason=f"rotated {key}\nsecond line")
    log = (store.dir / ".changes.jsonl").read_text()
    assert key not in log and store.changes()[-1]["reason"].startswith("rotated [REDACTED")


def test_deleting_the_same_id_twice_in_one_second_keeps_both_copies(tmp_path):
    store = MemoryStore(tmp_path / "mem", clock=lambda: 1_000_000.0)
    add(store, "x", body="first")
    store.delete("x")
    add(store, "x", body="second")
    store.delete("x")
    kept = sorted(p.read_text() for p in store.dir.glob(".trash/*/*.md"))
    assert len(kept) == 2 and "first" in kept[0] + kept[1] and "second" in kept[0] + kept[1]


def test_undo_refuses_to_overwrite_a_later_edit_and_logs_what_it_reverts(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    add(store, "x", body="v1")
    store.update("x", body="v2", run="r1")
    store.update("x", body="v3 by the user")
    with pytest.raises(MemoryError_, match=r"cannot undo run 'r1': x changed since"):
        store.undo("r1")
    assert store.get("x").body == "v3 by the user"
    store.update("x", body="v2")  # back to what r1 left: now r1 can be undone
    store.add(name="y", description="d", type="user", body="made by r2", run="r2")
    assert store.undo("r2") == 1 and not store.exists("y")
    assert list(store.dir.glob(".trash/*/y.md"))  # an undone add goes to the trash, not away
    undo = [e for e in store.changes() if e["op"] == "undo"]
    assert undo[-1]["id"] == "y" and "made by r2" in undo[-1]["before"] and undo[-1]["after"] is None


def test_a_torn_change_log_line_does_not_break_reading_it(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    add(store, "x")
    with open(store.dir / ".changes.jsonl", "a") as f:
        f.write('{"time": "2026-01-01T00:00:00Z", "op": "upd')  # a crash mid-append
    add(store, "y")
    assert [e["id"] for e in store.changes()] == ["x", "y"]


def test_a_symlink_pointing_outside_is_an_issue_and_never_read(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    add(store, "good")
    outside = tmp_path / "outside.md"
    outside.write_text("---\nname: stolen\ndescription: private\ntype: user\n---\nsecret plans\n")
    (store.dir / "evil.md").symlink_to(outside)
    scan = store.scan()
    assert [m.id for m in scan.memories] == ["good"]
    assert len(scan.issues) == 1 and "outside the memory directory" in str(scan.issues[0])
    assert str(scan.issues[0]).startswith(str(store.dir / "evil.md") + ":1:")
    with pytest.raises(MemoryError_, match="resolves outside"):
        store.get("evil")
    with pytest.raises(MemoryError_, match="resolves outside"):
        store.update("evil", body="x")
    assert "secret plans" in outside.read_text()


def test_unreadable_bytes_and_a_byte_order_mark(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    (tmp_path / "mem").mkdir()
    (store.dir / "latin.md").write_bytes(b"---\nname: caf\xe9\ntype: user\n---\n")
    with pytest.raises(MemoryError_, match=r"latin\.md:2: not UTF-8"):
        store.get("latin")
    (store.dir / "bom.md").write_text("\ufeff---\nname: b\ndescription: d\ntype: user\n---\nbody\n")
    assert store.get("bom").body == "body"


def test_the_name_memory_never_becomes_the_index_file(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    m = store.add(name="Memory", description="about memory", type="project", body="b")
    assert m.id == "memory-note"
    with pytest.raises(MemoryError_, match="reserved"):
        store.add(name="x", description="d", type="user", body="b", id="memory")


def test_recent_orders_by_time_not_by_string(tmp_path):
    store = MemoryStore(tmp_path / "mem")
    store.dir.mkdir(parents=True)
    (store.dir / "a.md").write_text("---\nname: a\ntype: user\nupdated: '2026-05-01T10:00:00+02:00'\n---\n")
    (store.dir / "b.md").write_text("---\nname: b\ntype: user\nupdated: '2026-05-01T09:00:00Z'\n---\n")
    assert [m.id for m in store.recent()] == ["b", "a"]  # 09:00Z is after 08:00Z


def test_redaction_covers_passwordless_users_and_package_tokens():
    npm = "npm_" + "a1B2c3D4e5" * 3 + "f6G7h8"
    pypi = "pypi-AgEIcHlwaS5vcmc" + "x9Y8" * 14
    for text, secret in (("REDIS_URL=redis://:s3cretpass@cache:6379/0", "s3cretpass"),
                         (f"publish with {npm}", npm), (f"twine upload -p {pypi}", pypi)):
        out = redact(text)
        assert secret not in out and redact(out) == out, out
    assert redact("see https://example.com:8080/path and ssh://git@host") == \
        "see https://example.com:8080/path and ssh://git@host"


@pytest.mark.parametrize("name", ["ключ развёртывания", "用户偏好", "Προτιμήσεις", "ユーザー設定"])
def test_a_name_in_a_script_with_no_ascii_form_gets_a_stable_id(tmp_path, name):
    """Before, such a name was "cannot make a file name …: use letters or digits" — a memory the
    user (or the extractor, from a conversation in that language) could not write at all."""
    from lossless.memory.model import MemoryExists

    store = MemoryStore(tmp_path / "mem")
    memory = store.add(name=name, description="d", type="user", body="b")
    assert re.fullmatch(r"note-[0-9a-f]{8}", memory.id) and store.get(memory.id).name == name
    with pytest.raises(MemoryExists):  # the same name, the same id
        store.add(name=name, description="again", type="user", body="b")
    with pytest.raises(MemoryError_, match="use letters or digits"):
        store.add(name="!!! ---", description="d", type="user", body="b")
