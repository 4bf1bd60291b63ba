"""The package's layering, read from the source: front doors (``cli``, ``proxy``, ``mcp``, ``chat``)
sit on the library and nothing in the library reaches up into them, nor into ``testing``;
``manager`` and ``model_ops`` do not import each other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import lossless

ROOT = Path(lossless.__file__).resolve().parent
FRONT_DOORS = ("cli", "proxy", "mcp", "chat")  # chat: the terminal agent (its demo plays a scripted model)


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["lossless", *parts])


def _imports(path: Path) -> set[str]:
    """Every lossless module ``path`` imports, anywhere in it (lazy imports too)."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.update(f"{target}.{a.name}" for a in node.names)
            found.add(target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {t for t in found if t == "lossless" or t.startswith("lossless.")}


GRAPH = {_module(p): _imports(p) for p in ROOT.rglob("*.py")}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_graph_was_read():
    assert "lossless.manager" in GRAPH and "lossless.cli" in GRAPH
    assert "lossless.model_ops" in GRAPH["lossless.manager"]


def test_the_library_never_reaches_up_into_a_front_door_or_testing():
    offenders = []
    for module, targets in GRAPH.items():
        if _layer(module) in (*FRONT_DOORS, "testing"):
            continue
        for target in targets:
            if _layer(target) in (*FRONT_DOORS, "testing"):
                offenders.append(f"{module} → {target}")
    assert not offenders, offenders


def test_front_doors_do_not_import_each_other_except_the_cli():
    # The CLI starts the others; the proxy and the MCP server stand on the library alone.
    offenders = [f"{m} → {t}" for m, ts in GRAPH.items() for t in ts
                 if _layer(m) in ("proxy", "mcp") and _layer(t) in FRONT_DOORS and _layer(t) != _layer(m)]
    assert not offenders, offenders


def test_manager_and_model_ops_are_not_a_circle():
    assert not any(t.startswith("lossless.manager") for t in GRAPH["lossless.model_ops"])


def test_the_map_sits_below_the_stages_that_use_it():
    """The account (building, merging, rendering the map of what left) is imported by the
    stages and never imports one: no circle between what removes and what maps."""
    account = {m: t for m, t in GRAPH.items() if m == "lossless.account" or m.startswith("lossless.account.")}
    assert "lossless.account.outcome" in account and "lossless.account.archive" in account
    reaching = sorted((m, t) for m, targets in account.items() for t in targets
                      if t.startswith(("lossless.stages", "lossless.compaction", "lossless.manager")))
    assert not reaching, reaching
    assert "lossless.account" in GRAPH["lossless.stages.snip"]
