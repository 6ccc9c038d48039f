"""Simulated ``date``: the station's clock (``clock-skew`` puts it 2.5 s ahead); any other use
falls through to the real ``date``."""

from __future__ import annotations

import os
import time

SKEW_S = 2.5


def main(argv: list[str], ctx) -> int:
    now = time.time() + (SKEW_S if "clock-skew" in ctx.faults else 0.0)
    if argv == ["+%s.%N"]:
        print(f"{now:.9f}")
        return 0
    if argv == ["+%s"]:
        print(int(now))
        return 0
    real = next(p for p in ("/usr/bin/date", "/bin/date") if os.path.exists(p))
    os.execv(real, [real, *argv])
    return 0
