"""The lazy packages (``console.lazy.lazy_exports``) name each export twice: in the table that loads it on
first use, and under ``TYPE_CHECKING`` for a type checker, which cannot see through a module
``__getattr__`` (mypy read ``console.config.Station`` as "not valid as a type"). The two must say the same."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import console

PACKAGES = ("console.config", "console.remote.cmdlines")


def _both(package: str) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(module, name) pairs of the lazy table and of the TYPE_CHECKING imports, from the package's source."""
    path = Path(console.__file__).parent.joinpath(*package.split(".")[1:], "__init__.py")
    tree = ast.parse(path.read_text())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "lazy_exports")
    table = ast.literal_eval(call.args[1])
    lazy = {(m if "." in m else f"{package}.{m}", n) for m, names in table.items() for n in names}
    guard = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    typed = {(imp.module, a.name) for imp in guard.body if isinstance(imp, ast.ImportFrom) for a in imp.names}
    return lazy, typed


@pytest.mark.parametrize("package", PACKAGES)
def test_the_type_checkers_names_are_the_lazy_tables_names(package):
    lazy, typed = _both(package)
    assert typed == lazy, f"only lazy: {sorted(lazy - typed)}; only typed: {sorted(typed - lazy)}"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_typed_name_is_what_the_package_gives_at_run_time(package):
    pkg = importlib.import_module(package)
    for module, name in _both(package)[1]:
        assert getattr(pkg, name) is getattr(importlib.import_module(module), name)
