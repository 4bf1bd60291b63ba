"""lossless is typed for its users: ``py.typed`` ships in the wheel and mypy runs clean.

mypy reads ``[tool.mypy]`` in pyproject.toml: the package and ``tests/typecheck/usage.py``,
the calls README.md and docs/ show, as a user writes them, so a public signature that breaks them fails here.
That file also holds wrong calls under ``# type: ignore[code]``; with ``warn_unused_ignores``
an ignore that is no longer needed is an error, so a public name that decays to ``Any`` (a
lazy export the checker cannot see through) fails too.  The cache stays in ``.mypy_cache``:
a cold run takes ~40 s, a warm one a few.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import tomllib

import pytest

from conftest import ROOT

PACKAGE = ROOT / "src" / "lossless"


def test_mypy_runs_clean_over_the_package_and_the_readme_calls():
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed: pip install -e '.[dev]'")
    run = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"mypy found problems:\n{run.stdout}{run.stderr}"
    assert "Success: no issues found" in run.stdout


def test_mypy_config_checks_the_usage_file_and_warns_of_unneeded_ignores():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["mypy"]
    assert set(config["files"]) == {"src/lossless", "tests/typecheck"}
    assert config["warn_unused_ignores"] is True and config["disallow_untyped_defs"] is True
    usage = (ROOT / "tests" / "typecheck" / "usage.py").read_text("utf-8")
    assert usage.count("# type: ignore[") >= 3  # the wrong calls that must stay errors


def test_the_wheel_carries_py_typed():
    assert (PACKAGE / "py.typed").is_file()
    if importlib.util.find_spec("hatchling") is None:
        pytest.skip("hatchling (the build backend) is not installed: pip install -e '.[dev]'")
    from hatchling.builders.wheel import WheelBuilder

    files = {f.distribution_path for f in WheelBuilder(str(ROOT)).recurse_included_files()}
    assert "lossless/py.typed" in files
    assert "lossless/__init__.py" in files and not any(f.startswith("tests/") for f in files)


@pytest.mark.parametrize("module", ["__init__.py", "proxy/__init__.py"])
def test_lazy_exports_are_visible_to_the_type_checker(module):
    """Each name ``__getattr__`` loads lazily is imported under ``TYPE_CHECKING`` too, from the
    module ``_EXPORTS`` names — else a checker sees ``Any`` and checks none of its calls."""
    tree = ast.parse((PACKAGE / module).read_text("utf-8"))
    exports = next(ast.literal_eval(node.value) for node in tree.body
                   if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "_EXPORTS")
    guarded = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    seen = {alias.asname or alias.name: (node.module or "").lstrip(".") or alias.name
            for node in guarded.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert seen == {name: module for name, module in exports.items()}


def test_adapter_keywords_are_exactly_the_managers_arguments():
    """``ManagerOptions`` (the adapters' ``**kwargs``) names every ``ContextManager`` argument
    and nothing else; mypy checks each one's type against the signature itself."""
    import inspect

    from lossless import ContextManager
    from lossless.adapters._options import ManagerOptions

    params = [p for p in inspect.signature(ContextManager).parameters.values()]
    assert list(ManagerOptions.__annotations__) == [p.name for p in params]
    assert not ManagerOptions.__required_keys__
