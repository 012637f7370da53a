"""The package's shape (issue 11): one module per concept, none over ~700 lines without
a reason stated at its top, and no import cycle between modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hexeract_lite._lazy import PACKAGES, render_stub, stub_path

PACKAGE = Path(__file__).resolve().parent.parent / "hexeract_lite"
MAX_LINES = 700
REASON = "(Over 700 lines:"
"""What a long module's docstring says before its reason."""


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


@pytest.mark.parametrize("name", sorted(_modules()))
def test_a_long_module_states_why_at_its_top(name: str) -> None:
    path = _modules()[name]
    text = path.read_text(encoding="utf-8")
    lines = text.count("\n")
    if lines <= MAX_LINES:
        return
    doc = ast.get_docstring(ast.parse(text)) or ""
    assert REASON in doc, (
        f"{path.relative_to(PACKAGE.parent)} has {lines} lines: split it by concept, or say"
        f" why not at its top with {REASON!r}"
    )


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports, counting every import statement (inside
    functions and under ``if TYPE_CHECKING:`` too): each is a dependency between the
    two modules, and a cycle of them is a layering fault even where Python would
    load it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target in modules:
                found.add(target)
            found.update(
                f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules
            )
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
    found.discard(name)
    return found


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
