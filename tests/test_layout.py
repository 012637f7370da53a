"""The package's shape: one module per concept, no module over 700 lines, and no import
cycle between modules, counting every import statement."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from hexeract_lite._lazy import PACKAGES, render_stub, stub_path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "hexeract_lite"
MAX_LINES = 700


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def test_no_module_is_over_700_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for path in _modules().values()
        if (lines := path.read_text(encoding="utf-8").count("\n")) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by concept): {long}"


def _source(node: ast.ImportFrom, package: str) -> str:
    """The module an ``import from`` statement written in ``package`` imports from."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _reexports(package: str, modules: dict[str, Path]) -> dict[str, str]:
    """The names a package's ``__init__`` takes from other modules of the package (by an
    import statement, or lazily through its ``_MODULE_OF`` map), with each one's module:
    importing such a name from the package imports that module."""
    path = modules[package]
    if path.name != "__init__.py":
        return {}
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            source = _source(node, package)
            if source in modules and source != package:
                found.update((a.asname or a.name, source) for a in node.names)
    lazy = getattr(importlib.import_module(package), "_MODULE_OF", {})
    for name, module in lazy.items():
        found[name] = importlib.util.resolve_name(module, package)
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports, counting every import statement: at module
    level, inside functions and under ``if TYPE_CHECKING:``. A name a package re-exports
    from one of its submodules counts as an import of that submodule."""
    package = _package_of(name, path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            source = _source(node, package)
            if source not in modules:
                continue
            reexported = _reexports(source, modules)
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:
                    found.add(f"{source}.{alias.name}")
                else:
                    found.add(reexported.get(alias.name, source))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
    found.discard(name)
    return found


def test_the_import_graph_counts_every_import_statement(tmp_path: Path) -> None:
    """An import inside a function or under ``TYPE_CHECKING`` is an edge of the graph."""
    module = tmp_path / "probe.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from hexeract_lite.clock import Clock\n"
        "def f():\n"
        "    from .memory import InMemoryScheduleStore\n"
        "    import hexeract_lite.errors\n"
        "    from hexeract_lite import store\n",
        encoding="utf-8",
    )
    found = _imports("hexeract_lite.store.probe", module, _modules())
    assert found == {
        "hexeract_lite.clock",
        "hexeract_lite.store.memory",
        "hexeract_lite.errors",
        "hexeract_lite.store",
    }


def test_a_name_a_package_re_exports_is_an_import_of_its_submodule(tmp_path: Path) -> None:
    """``from hexeract_lite.store import X`` imports the submodule that defines X: a
    cycle through a package's ``__init__`` is still a cycle."""
    modules = _modules()
    reexported = _reexports("hexeract_lite.store", modules)
    assert reexported, "hexeract_lite.store re-exports names of its submodules"
    name, source = sorted(reexported.items())[0]
    module = tmp_path / "probe.py"
    module.write_text(f"def f():\n    from hexeract_lite.store import {name}\n", encoding="utf-8")
    assert _imports("hexeract_lite.probe", module, modules) == {source}


def test_no_import_cycle_between_modules() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # a package imports its own submodules to re-export them: that is not a cycle
    for name in graph:
        graph[name] = {t for t in graph[name] if not (name.startswith(t + ".") and t in graph)}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_test_file_is_named_after_a_review_round() -> None:
    """A test file is named after the behaviour it tests, so a reader finds it."""
    named = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "tests").rglob("test_*.py"))
        if re.search(r"review_round|round\d", path.name)
    ]
    assert named == []


@pytest.mark.parametrize("package", PACKAGES)
def test_each_public_name_is_listed_once_and_resolves(package: str) -> None:
    """``_EXPORTS`` is the one list: ``__all__`` and the lazy exports come from it, each
    name resolves to what its module defines, and the stub type checkers read is
    what the list renders."""
    import importlib

    module = importlib.import_module(package)
    names = [name for names in module._EXPORTS.values() for name in names]
    assert len(set(names)) == len(names), "a name listed twice"
    computed = list(module.__dict__.get("_COMPUTED_TYPES", {}))
    assert module.__all__ == [n for n in [*names, *computed] if n in module.__all__]
    for name in names:
        assert name in dir(module)
        value = getattr(module, name)
        if name in module._MODULE_OF:
            defining = importlib.import_module(module._MODULE_OF[name], package)
            assert value is getattr(defining, name), name
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018
    assert Path(stub_path(package)).read_text(encoding="utf-8") == render_stub(package), (
        "the stub is stale: python -c 'from hexeract_lite._lazy import write_stubs; write_stubs()'"
    )
