"""Simulated ``dmesg [--time-format iso]``: the kernel ring buffer (uptime stamps by default)."""

from __future__ import annotations

import datetime as dt

from console.sim.workbench import kernel_lines


def main(argv: list[str], ctx) -> int:
    iso = "--time-format" in argv and "iso" in argv
    lines = kernel_lines(ctx.world, ctx.station)
    boot = lines[0][0] - 2.0 if lines else 0.0
    for t, msg in lines:
        if iso:
            d = dt.datetime.fromtimestamp(t).astimezone()
            print(d.strftime("%Y-%m-%dT%H:%M:%S,") + f"{d.microsecond:06d}" + d.strftime("%z")[:3] + ":"
                  + d.strftime("%z")[3:] + f" {msg}")
        else:
            print(f"[{t - boot:12.6f}] {msg}")
    return 0
