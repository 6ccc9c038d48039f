"""Reading numbers and JSON from a station without trusting them: every hang-evidence parser asks
here, so that ``1e999``, ``NaN``, a 400-digit integer, a negative count or a 10,000-deep nesting is
"unknown" (or the source's one error line), never a crash and never a value in state or JSON."""

from __future__ import annotations

import json
import math
from typing import Any

MAX_INT = 2**63 - 1
MAX_JSON_DEPTH = 64


def count(v: Any, default: int | None = None, limit: int = MAX_INT) -> int | None:
    """A non-negative integer (an int, an integral finite float, or up to 19 ASCII digits) no larger
    than ``limit``; anything else (bool, NaN, inf, negative, huge, wrong type) is ``default``."""
    if isinstance(v, bool):
        return default
    if isinstance(v, float):
        if not math.isfinite(v) or not v.is_integer():
            return default
        v = int(v)
    elif isinstance(v, str):
        t = v.strip()
        if not (0 < len(t) <= 19 and t.isascii() and t.isdigit()):
            return default
        v = int(t)
    if not isinstance(v, int) or not 0 <= v <= limit:
        return default
    return v


def digits(s: str | None, default: int | None = None) -> int | None:
    """``int(s)`` for a regex's ``\\d+`` group, bounded (``None`` stays ``default``)."""
    return default if s is None else count(s, default)


def text(v: Any, limit: int = 200) -> str | None:
    """A short string field (at most ``limit`` characters); another type is None."""
    return v[:limit] if isinstance(v, str) else None


def _depth(obj: Any, limit: int) -> None:
    """Raise ValueError when ``obj`` (fresh from json.loads: a tree, no sharing) nests past ``limit``."""
    todo = [(obj, 0)]
    while todo:
        o, d = todo.pop()
        if d > limit:
            raise ValueError(f"nested deeper than {limit}")
        if isinstance(o, dict):
            todo.extend((v, d + 1) for v in o.values())
        elif isinstance(o, list):
            todo.extend((v, d + 1) for v in o)


def strict_json(s: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """JSON without NaN/Infinity, numbers of at most 40 characters, finite floats, nesting bounded;
    ValueError for anything else (a RecursionError of a deep document included)."""

    def bad_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a number JSON allows")

    def number(t: str) -> float:
        if len(t) > 40:
            raise ValueError(f"a number of {len(t)} characters")
        f = float(t)
        if not math.isfinite(f):
            raise ValueError(f"{t[:40]} is out of range")
        return f

    def integer(t: str) -> int:
        if len(t) > 40:
            raise ValueError(f"an integer of {len(t)} digits")
        return int(t)

    try:
        data = json.loads(s, parse_constant=bad_constant, parse_float=number, parse_int=integer)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    _depth(data, max_depth)
    return data
