"""Simulated ``df -B1 --output=target,size,avail PATH`` for the station's model disk."""

from __future__ import annotations

import os

SIZE = 3_936_818_876_416  # a 4 TB NVMe


def main(argv: list[str], ctx) -> int:
    paths = [a for a in argv if not a.startswith("-")]
    fs_root = str(ctx.world.station_dir(ctx.station) / "fs")
    used = 0
    for p in paths or ["/"]:
        for dirpath, _dirs, files in os.walk(p):
            for f in files:
                try:
                    used += os.stat(os.path.join(dirpath, f)).st_size
                except OSError:
                    pass
    target = "/"
    if paths and paths[0].startswith(fs_root):
        rel = paths[0][len(fs_root):] or "/"
        target = "/" + rel.strip("/").split("/")[0]
    avail = max(0, SIZE - 400_000_000_000 - used)
    print(f"{'Mounted on':<22}{'1B-blocks':>16}{'Avail':>16}")
    print(f"{target:<22}{SIZE:>16}{avail:>16}")
    return 0
