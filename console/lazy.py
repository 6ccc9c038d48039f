"""A module imported on its first attribute use, not at start-up.

asyncssh (~90 ms with its agent and crypto) and httpx (~60 ms, ~50 ms more for httpcore when its first
client is made) are needed only once a station is connected or the API polled, never for the first
frame: the modules that use them name them through ``lazy_module`` so the console paints before they
load. Every attribute is looked up on the real module each time (nothing is cached here), so a test
that patches ``asyncssh.connect`` is seen, as with a plain import.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType


class LazyModule:
    """Stands for module ``name``: the first attribute read imports it."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def _module(self) -> ModuleType:
        return sys.modules.get(self._name) or importlib.import_module(self._name)

    def __getattr__(self, attr: str) -> object:
        return getattr(self._module(), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}{' (loaded)' if self._name in sys.modules else ''}>"


def lazy_module(name: str) -> ModuleType:
    """``name`` loaded on first use (typed as the module: callers write ``asyncssh.connect`` as before)."""
    return LazyModule(name)  # type: ignore[return-value]


def lazy_exports(package: str, table: dict[str, tuple[str, ...]],
                 submodules: tuple[str, ...] = ()) -> tuple[Callable[[str], object], list[str]]:
    """A package's re-exports loaded on first use (PEP 562): ``table`` maps each submodule (or, dotted, any
    module) to the names it gives the package, ``submodules`` are reached as attributes (``rc.copy``). Why: a package whose
    ``__init__`` imports every submodule makes each ``from package.x import y`` pay for all of them, and
    the simulator's commands start a fresh interpreter each time (the config package was ~40 ms of a
    ~100 ms shim). Returns the module's ``__getattr__`` and its ``__all__``; a name read once is kept on
    the package, as a plain import would have bound it."""
    where = {name: module for module, names in table.items() for name in names}

    def __getattr__(name: str) -> object:
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module if "." in module else f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__, sorted(where)
