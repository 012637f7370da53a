"""Lazy package exports (PEP 562): a package lists each public name once, in
``_EXPORTS``, with its module; :func:`render_stub` writes the ``__init__.pyi`` type
checkers read from the same table."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from typing import Any

PACKAGES = (
    "hexeract_lite",
    "hexeract_lite.cli",
    "hexeract_lite.store",
    "hexeract_lite.store.sqlite",
    "hexeract_lite.store.postgres",
    "hexeract_lite.store.mysql",
)


def lazy_exports(
    package: str,
    namespace: dict[str, Any],
    modules: Mapping[str, Iterable[str]],
    computed: Mapping[str, Callable[[], object]] | None = None,
    *,
    optional: Iterable[str] = (),
) -> tuple[Callable[[str], object], Callable[[], list[str]], dict[str, str]]:
    """``(__getattr__, __dir__, name -> module)`` for ``package`` whose globals are
    ``namespace``: ``modules`` maps a relative module path to the names it defines,
    ``computed`` a name to a function giving its value. A package's ``__all__`` is every
    name but the ``optional`` ones (an optional extra's)."""
    where = {name: module for module, names in modules.items() for name in names}
    made = dict(computed or {})
    left_out = set(optional)
    if "__path__" in namespace:  # a package: its table is its public names
        namespace.setdefault("__all__", [n for n in [*where, *made] if n not in left_out])

    def __getattr__(name: str) -> object:
        if name in made:
            value = made[name]()
        elif name in where:
            value = getattr(import_module(where[name], package), name)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where, *made})

    return __getattr__, __dir__, where


def render_stub(package: str) -> str:
    """The ``__init__.pyi`` of ``package``: its exports as type checkers see them."""
    module = import_module(package)
    exports: Mapping[str, Iterable[str]] = module._EXPORTS
    computed: Mapping[str, str] = module.__dict__.get("_COMPUTED_TYPES", {})
    public = list(module.__all__)
    lines = [f"# Generated from {package}._EXPORTS by hexeract_lite._lazy.write_stubs().", ""]
    for where, names in sorted(exports.items()):
        lines.extend(f"from {where} import {name} as {name}" for name in names)
    lines.append("")
    lines.extend(f"{name}: {kind}" for name, kind in computed.items())
    lines.append("__all__ = [")
    lines.extend(f'    "{name}",' for name in public)
    lines.append("]")
    return "\n".join(lines) + "\n"


def stub_path(package: str) -> str:
    file = import_module(package).__file__ or ""
    return file[: -len(".py")] + ".pyi"


def write_stubs() -> None:
    for name in PACKAGES:
        with open(stub_path(name), "w", encoding="utf-8") as out:
            out.write(render_stub(name))
