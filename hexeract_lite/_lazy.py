"""Lazy package exports (PEP 562), shared by the packages whose names load on first use.

A package lists each public name with the module that defines it; :func:`lazy_exports`
gives it the module-level ``__getattr__`` and ``__dir__`` that import that module when the
name is first read (and keep the value, so later reads are plain globals). The package
still spells ``__all__`` and its ``TYPE_CHECKING`` imports out for type checkers;
``tests/test_layout.py`` checks the three lists agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(
    package: str,
    namespace: dict[str, Any],
    modules: Mapping[str, Iterable[str]],
    computed: Mapping[str, Callable[[], object]] | None = None,
) -> tuple[Callable[[str], object], Callable[[], list[str]], dict[str, str]]:
    """``(__getattr__, __dir__, name -> module)`` for ``package`` (its ``__name__``)
    whose globals are ``namespace``: ``modules`` maps a module path relative to the
    package (``".errors"``, ``"..errors"``) to the names it defines; ``computed`` maps a
    name to a function giving its value (``__version__``)."""
    where = {name: module for module, names in modules.items() for name in names}
    made = dict(computed or {})

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
        return sorted({*namespace, *namespace.get("__all__", ()), *where, *made})

    return __getattr__, __dir__, where
