"""The suite's order (conftest.FIRST) names tests that exist: a renamed test would silently drop
out of the head of the queue and leave a worker alone with it at the end of ``-n auto``."""

from __future__ import annotations

import ast

from conftest import FIRST, ROOT


def test_every_test_the_suite_runs_first_exists():
    defined = set()
    for path in (ROOT / "tests").glob("test_*.py"):
        defined |= {node.name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")}
    missing = [name for name in FIRST if name not in defined]
    assert not missing, f"conftest.FIRST names tests that no file defines (renamed?): {missing}"
