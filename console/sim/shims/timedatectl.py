"""Simulated ``timedatectl show -p NTPSynchronized --value``."""

from __future__ import annotations


def main(argv: list[str], ctx) -> int:
    synced = "clock-skew" not in ctx.faults
    value = "yes" if synced else "no"
    if "--value" in argv:
        print(value)
    else:
        print(f"NTPSynchronized={value}")
    return 0
