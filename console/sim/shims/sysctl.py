"""Simulated ``sysctl``: ``-w vm.drop_caches=3`` empties the station's page cache (the drop-caches
step GB10 launches need when page cache holds the unified memory vLLM wants free)."""

from __future__ import annotations

import sys

from console.sim.engine import write_meminfo

PAGE_CACHE_AFTER_DROP_MIB = 512


def main(argv: list[str], ctx) -> int:
    settings = [a for a in argv if "=" in a]
    if "-w" not in argv or not settings:
        print("sysctl: the simulator supports only: sysctl [-q] -w vm.drop_caches=N", file=sys.stderr)
        return 1
    for kv in settings:
        key, _, value = kv.partition("=")
        if key != "vm.drop_caches" or value not in ("1", "2", "3"):
            print(f'sysctl: cannot stat /proc/sys/{key.replace(".", "/")}: No such file or directory', file=sys.stderr)
            return 255
        with ctx.world.edit(ctx.station) as st:
            st["page_cache_mib"] = PAGE_CACHE_AFTER_DROP_MIB
        write_meminfo(ctx.world, ctx.station, ctx.profile.gpu.unified_memory)
        if "-q" not in argv:
            print(f"{key} = {value}")
    return 0
