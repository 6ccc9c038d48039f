"""/proc/meminfo -> host memory (the real budget on unified-memory GB10)."""

from __future__ import annotations

from dataclasses import dataclass

from console.probes import ParseError


@dataclass(frozen=True)
class HostMemory:
    total_mib: int
    available_mib: int
    cached_mib: int | None = None
    free_mib: int | None = None  # MemFree: what cudaMemGetInfo reports as free on unified memory (GB10)

    @property
    def used_mib(self) -> int:
        return self.total_mib - self.available_mib


def parse_meminfo(text: str) -> HostMemory:
    vals: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if parts and parts[0].isdigit():
            kib = int(parts[0])
            vals[key.strip()] = kib // 1024 if len(parts) > 1 and parts[1] == "kB" else kib // (1024 * 1024)
    if "MemTotal" not in vals or "MemAvailable" not in vals:
        raise ParseError(f"/proc/meminfo: MemTotal/MemAvailable missing in {text.strip()[:80]!r}")
    return HostMemory(vals["MemTotal"], vals["MemAvailable"], vals.get("Cached"), vals.get("MemFree"))
