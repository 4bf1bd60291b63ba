"""The package's public face: exports, lazy imports, the README's two commands."""

from __future__ import annotations

import re
import subprocess
import sys

import lossless
from conftest import ROOT


def test_all_is_sorted_and_every_name_resolves():
    assert lossless.__all__ == sorted(lossless.__all__)
    for name in lossless.__all__:
        assert getattr(lossless, name) is not None


def test_importing_lossless_loads_no_sdk_or_optional_dependency():
    code = ("import sys, lossless, lossless.cli, lossless.providers, lossless.memory; "
            "from lossless import ContextManager; "
            "print(sorted(m for m in ('anthropic', 'openai', 'rich', 'tiktoken', 'httpx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_readme_begins_with_exactly_two_commands_that_ci_runs():
    text = (ROOT / "README.md").read_text()
    first_block = re.search(r"```bash\n(.*?)```", text, re.S)
    # What it is, then the two commands: the first code block, on the first screen, before any section.
    assert first_block and text.index("```") == first_block.start() < text.index("\n## ")
    assert text.count("\n", 0, first_block.start()) < 12
    commands = [line for line in first_block.group(1).splitlines() if line.strip()]
    assert len(commands) == 2
    assert "lossless demo" in commands[0] and "pip install" in commands[0]
    assert "pytest" in commands[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "README.md" in ci and "bash -euo pipefail -c" in ci


def test_the_code_passes_ruff():
    """Unused imports, undefined names, shadowed definitions: caught here, not in review."""
    import shutil
    from pathlib import Path

    beside = Path(sys.executable).parent / "ruff"  # the dev extra's ruff, in this interpreter's venv
    ruff = str(beside) if beside.exists() else shutil.which("ruff")
    if ruff is None:
        import pytest

        pytest.skip("ruff is not installed (it comes with the dev extra)")
    proc = subprocess.run([ruff, "check", "src", "tests", "bench"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
