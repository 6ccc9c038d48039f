"""Strict JSON for everything the console prints or writes as JSON (``--json`` outputs, ``watch``'s
lines, bundle members): never a ``NaN`` / ``Infinity`` token, which strict parsers (jq, Go, browsers'
JSON.parse) refuse. The parsers map such readings to unknown already; this is the one place that makes
sure no path lets one through: a non-finite float becomes ``null``."""

from __future__ import annotations

import json
import math
from typing import Any


def finite(obj: Any, depth: int = 0) -> Any:
    """``obj`` with every non-finite float as None (dicts, lists and tuples walked; other values as they
    are)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if depth > 200:
        return obj
    if isinstance(obj, dict):
        return {k: finite(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v, depth + 1) for v in obj]
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that never writes NaN or Infinity (``allow_nan=False`` after mapping them to null);
    the common case (nothing to map) costs one ``json.dumps``."""
    kwargs["allow_nan"] = False
    try:
        return json.dumps(obj, **kwargs)
    except ValueError:
        return json.dumps(finite(obj), **kwargs)
