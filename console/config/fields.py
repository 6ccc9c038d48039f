"""A config dataclass is the one description of its TOML table; this module reads it.

From a dataclass's fields and their type hints come the keys its table knows, the TOML kind of each
value (string, integer, number, true/false, table, list), which keys are required (a field without a
default), how checked values become the dataclass (:func:`build`) and how a loaded config is written
back (:func:`to_toml`). A field's metadata, given with :func:`setting`, adds the rule its value must
follow (``check``), that it is written even at its default (``always``), how it is written (``dump``)
or that it is no TOML key at all (``toml=False``). So a new config field is one edit: the dataclass.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field
from typing import Any

from console.config.errors import NUMBER, Kind


def setting(default: Any = MISSING, *, factory: Any = MISSING, check: Callable[[Any], str | None] | None = None,
            always: bool = False, dump: Callable[[Any], Any] | None = None, toml: bool = True) -> Any:
    """A dataclass field with its TOML metadata (see the module)."""
    meta = {"check": check, "always": always, "dump": dump, "toml": toml}
    if factory is not MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _optional(hint: Any) -> Any:
    """``X | None`` -> X (else the hint itself)."""
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def toml_kind(hint: Any) -> Kind:
    """The TOML kind a value of this type hint is written as."""
    hint = _optional(hint)
    if hint is float:
        return NUMBER
    if hint in (str, int, bool):
        return hint
    origin = typing.get_origin(hint) or hint
    if origin in (tuple, list):
        return list
    if origin is dict or dataclasses.is_dataclass(hint) or typing.is_typeddict(hint):
        return dict
    raise TypeError(f"no TOML kind for {hint!r}")


def _is_toml(f: Field) -> bool:
    return f.metadata.get("toml", True)


def _required(f: Field) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


@functools.cache
def table(cls: type) -> dict[str, tuple[Kind, bool]]:
    """``{key: (TOML kind, required)}`` of a dataclass (or a ``TypedDict``), in field order."""
    hints = _hints(cls)
    if typing.is_typeddict(cls):
        return {k: (toml_kind(h), k in cls.__required_keys__) for k, h in hints.items()}
    return {f.name: (toml_kind(hints[f.name]), _required(f)) for f in dataclasses.fields(cls) if _is_toml(f)}


def kinds(cls: type) -> dict[str, Kind]:
    """``{key: TOML kind}`` of a dataclass's table."""
    return {k: kind for k, (kind, _) in table(cls).items()}


@functools.cache
def checks(cls: type) -> dict[str, Callable[[Any], str | None]]:
    """``{key: rule}`` for the fields that carry one (``setting(check=...)``), in field order."""
    return {f.name: f.metadata["check"] for f in dataclasses.fields(cls) if f.metadata.get("check")}


def build(cls: type, raw: Mapping[str, Any], **given: Any) -> Any:
    """The dataclass from checked TOML values, each converted to its field's type (an integer for a
    float field becomes a float, a list a tuple, a table the nested dataclass); ``given`` wins."""
    hints = _hints(cls)
    kw = {f.name: given[f.name] if f.name in given else _convert(hints[f.name], raw[f.name])
          for f in dataclasses.fields(cls) if f.name in given or f.name in raw}
    return cls(**kw)


def _convert(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    hint = _optional(hint)
    if hint in (float, int, bool):
        return hint(value)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v) for v in value)
        return tuple(_convert(a, v) for a, v in zip(args, value, strict=True))
    if dataclasses.is_dataclass(hint):
        return build(hint, value)
    if origin is dict or hint is dict or typing.is_typeddict(hint):
        return dict(value)
    return value


def to_toml(obj: Any) -> dict[str, Any]:
    """A loaded dataclass as its TOML table: required and ``always`` fields, and every other field that
    is set (not None) and not at its default; nested dataclasses as tables (left out when empty).
    Plain values come first, then tables, then arrays of tables, as TOML writes them."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if not _is_toml(f):
            continue
        value = getattr(obj, f.name)
        if f.metadata.get("dump"):
            value = f.metadata["dump"](value)
        elif dataclasses.is_dataclass(value):
            table_ = to_toml(value)
            if table_:
                out[f.name] = table_
            continue
        elif isinstance(value, tuple) and value and all(dataclasses.is_dataclass(v) for v in value):
            value = [to_toml(v) for v in value]
        elif isinstance(value, dict):
            value = dict(value)
        if _required(f) or f.metadata.get("always"):
            out[f.name] = value
            continue
        default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
        if value is not None and value != default:
            out[f.name] = value
    return dict(sorted(out.items(), key=lambda kv: _layout(kv[1])))


def _layout(value: Any) -> int:
    if isinstance(value, dict):
        return 1
    return 2 if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) else 0
