"""Every code block and every link of README.md and docs/*.md, checked as a reader would use them.

- ``python`` blocks run, page by page in order in one namespace, offline: the SDKs' base URLs point
  at lossless's ``FakeServer``, the store is a temporary directory.  Blocks that import an adapter
  (``lossless.adapters.*``) run with their framework in tests/test_adapter_readme.py instead.
- ``console`` blocks (``$ `` lines are commands, the rest output), ``bash`` and ``sh`` blocks (every
  line a command): each ``lossless …`` command is parsed by the real argument parser, each
  ``pip install 'lossless[…]'`` names extras pyproject.toml defines, and the memory commands run for
  real in a temporary store.  The proxy's banner, wherever a page shows it, is what the proxy prints.
- ``json`` blocks parse, and an MCP client configuration's command is parsed like a shell line.
- ``text`` blocks are illustrations another test holds true; each is listed in ``TEXT_BLOCKS``.
- Every relative link resolves to a file of the repository, and every ``#anchor`` to a heading of
  its page (GitHub's rule for heading ids).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT, let_go

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = {"python", "console", "bash", "sh", "json", "text"}
TEXT_BLOCKS = {("docs/how-it-works.md", "[lossless: snipped"): "tests/test_accounts.py"}
"""(page, how the block begins) → the test that holds that illustration true."""
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    return [Block(page, text.count("\n", 0, m.start()) + 1, m.group(1).strip(), m.group(2))
            for m in FENCE.finditer(text)]


ALL = [b for page in PAGES for b in blocks(page)]


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_every_block_names_a_language_this_test_checks():
    unknown = [f"{b.where}: ```{b.language}" for b in ALL if b.language not in LANGUAGES]
    assert not unknown, f"a block this test cannot check (use one of {sorted(LANGUAGES)}): {unknown}"


def test_the_readme_is_short_and_begins_with_what_ci_runs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text) <= 12_000, len(text)
    assert "lossless demo" in text and "lossless wrap claude" in text and "lossless proxy" in text
    first = blocks(ROOT / "README.md")[0]
    assert first.language == "bash" and len([line for line in first.code.splitlines() if line.strip()]) == 2


# -- python ------------------------------------------------------------------------------------
def _is_adapter(block: Block) -> bool:
    return bool(re.search(r"lossless\.adapters\.\w+", block.code))


PYTHON = {page: [b for b in blocks(page) if b.language == "python" and not _is_adapter(b)] for page in PAGES}


def test_adapter_blocks_are_the_ones_test_adapter_readme_runs():
    from test_adapter_readme import snippets

    adapters = [b.code for b in ALL if b.language == "python" and _is_adapter(b)]
    assert sorted(adapters) == sorted(snippets().values())


@pytest.mark.parametrize("page", [p for p in PAGES if PYTHON[p]], ids=_id)
def test_python_blocks_run_offline(page, tmp_path, monkeypatch, capsys):
    pytest.importorskip("anthropic")
    pytest.importorskip("openai")
    from lossless.testing import FakeServer

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOSSLESS_STORE", raising=False)
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / ".lossless"))
    with FakeServer() as server:
        for name, value in (("ANTHROPIC_BASE_URL", server.base_url), ("OPENAI_BASE_URL", server.openai_base_url),
                            ("ANTHROPIC_API_KEY", "sk-test"), ("OPENAI_API_KEY", "sk-test")):
            monkeypatch.setenv(name, value)
        namespace: dict = {"__name__": "__docs__"}
        for block in PYTHON[page]:
            try:
                exec(compile(block.code, block.where, "exec"), namespace)  # noqa: S102
            except Exception as e:  # the block's own line numbers, in the page's terms
                raise AssertionError(f"{block.where}: the block raised {type(e).__name__}: {e}") from e
        assert server.errors == [], server.errors
        let_go(namespace)
    assert capsys.readouterr().out  # each page's blocks show the reader something


# -- shell -------------------------------------------------------------------------------------
def commands(block: Block) -> list[list[str]]:
    """The simple commands of a shell block, each as its argv."""
    if block.language == "console":
        lines = [line[2:] for line in block.code.splitlines() if line.startswith("$ ")]
    else:
        lines = [line for line in block.code.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    found = []
    for line in lines:
        words = shlex.split(line, comments=True)
        current: list[str] = []
        for word in [*words, "&&"]:
            if word in ("&&", "||", ";", "|"):
                if current:
                    found.append(current)
                current = []
            else:
                current.append(word)
    return found


def lossless_argv(argv: list[str]) -> list[str] | None:
    """The arguments given to lossless, if the command runs it (directly or as ``claude mcp add``'s server)."""
    if Path(argv[0]).name == "lossless":
        return argv[1:]
    if argv[:3] == ["claude", "mcp", "add"] and "--" in argv:
        return lossless_argv(argv[argv.index("--") + 1:])
    return None


SHELL = [b for b in ALL if b.language in ("console", "bash", "sh")]
EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"])


def _parse(argv: list[str]) -> None:
    from lossless.cli import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as e:
        assert e.code == 0, f"lossless {shlex.join(argv)}: {err.getvalue().strip()}"


@pytest.mark.parametrize("block", SHELL, ids=lambda b: b.where)
def test_shell_commands_parse(block):
    argvs = commands(block)
    assert argvs, f"{block.where}: a shell block with no command"
    for argv in argvs:
        args = lossless_argv(argv)
        if args is not None:
            _parse(args)
        if Path(argv[0]).name == "pip" and "install" in argv:
            for word in argv:
                for extras in re.findall(r"^(?:lossless|\.)\[([^\]]+)\]$", word):
                    assert set(extras.split(",")) <= EXTRAS, f"{block.where}: {word} names an extra that does not exist"


def test_the_memory_commands_run(tmp_path, monkeypatch, capsys):
    """The pages' ``lossless memory`` commands, in order, against one temporary store (those that
    need a model, and so a key, are only parsed)."""
    from lossless.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOSSLESS_STORE", raising=False)
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / ".lossless"))
    ran = []
    for block in SHELL:
        for argv in commands(block):
            args = lossless_argv(argv)
            if args and args[0] == "memory" and "--provider" not in args and "--help" not in args:
                code = main(args)
                assert code == 0, f"{block.where}: lossless {shlex.join(args)} exited {code}: {capsys.readouterr()}"
                ran.append(args[1])
    assert {"add", "list", "search"} <= set(ran), ran


@pytest.fixture(scope="module")
def proxy_banner(tmp_path_factory):
    """What ``lossless proxy`` prints when it starts, its port written as the default 8787's."""
    pytest.importorskip("uvicorn")
    proc = subprocess.Popen([sys.executable, "-m", "lossless.cli", "proxy", "--port", "0"], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path_factory.mktemp("proxy"))
    try:
        lines = []
        while len(lines) < 3:
            line = proc.stdout.readline()
            assert line, f"lossless proxy stopped: {proc.communicate(timeout=10)}"
            lines.append(line.rstrip("\n"))
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    port = re.search(r"127\.0\.0\.1:(\d+)", lines[0]).group(1)
    return [line.replace(f":{port}", ":8787") for line in lines]


def test_the_proxy_banner_is_what_the_proxy_prints(proxy_banner):
    shown = [b for b in SHELL if b.language == "console" and "lossless proxy listening" in b.code]
    assert len(shown) >= 2  # the README's and the proxy page's
    for block in shown:
        output = [line for line in block.code.splitlines() if line and not line.startswith("$ ")]
        assert output == proxy_banner, block.where


# -- json and text -----------------------------------------------------------------------------
@pytest.mark.parametrize("block", [b for b in ALL if b.language == "json"], ids=lambda b: b.where)
def test_json_blocks_parse_and_their_commands_run_lossless(block):
    import json

    data = json.loads(block.code)
    for server in data.get("mcpServers", {}).values():
        args = lossless_argv([server["command"], *server["args"]])
        assert args is not None, block.where
        _parse(args)


def test_each_text_block_is_held_true_by_a_named_test():
    for block in (b for b in ALL if b.language == "text"):
        key = (str(block.page.relative_to(ROOT)), block.code.split("\n", 1)[0][:len("[lossless: snipped")])
        checker = TEXT_BLOCKS.get(key)
        assert checker, f"{block.where}: a text block no test checks (add the check and list it in TEXT_BLOCKS)"
        assert block.page.name in (ROOT / checker).read_text(encoding="utf-8"), (block.where, checker)


# -- links -------------------------------------------------------------------------------------
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def outside_code(text: str) -> str:
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(page: Path) -> set[str]:
    """The ids GitHub gives the page's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated id suffixed -1, -2…"""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M):
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def test_anchor_ids_follow_githubs_rule():
    assert "9-what-lossless-proxy-adds-to-a-request-issue-9" in anchors(ROOT / "bench" / "RESULTS.md")
    assert "8-long-term-memory-at-1000--10000--100000-memories-issue-10" in anchors(ROOT / "bench" / "RESULTS.md")


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for target in LINK.findall(outside_code(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with that id in {resolved.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_every_docs_page_is_linked_from_the_readme_or_another_page():
    linked = set()
    for page in PAGES:
        for target in LINK.findall(outside_code(page.read_text(encoding="utf-8"))):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and target.partition("#")[0]:
                linked.add((page.parent / target.partition("#")[0]).resolve())
    orphans = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not orphans, f"docs pages nothing links to: {orphans}"


def test_the_pages_name_only_current_models():
    anthropic = pytest.importorskip("anthropic")
    from anthropic.resources.messages.messages import DEPRECATED_MODELS

    del anthropic
    names = {n for page in PAGES for n in re.findall(r'"(claude-[a-z0-9.-]+)"', page.read_text(encoding="utf-8"))}
    assert names and not names & set(DEPRECATED_MODELS), names & set(DEPRECATED_MODELS)


def test_a_python_block_may_not_reach_the_network():
    """The blocks run offline because the environment points the SDKs at the fake server: a block
    that names a public endpoint would reach past it."""
    for block in (b for b in ALL if b.language == "python"):
        assert "api.anthropic.com" not in block.code and "api.openai.com" not in block.code, block.where
