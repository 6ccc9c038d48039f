"""A copied directory's identity as ``cmdlines.copy.manifest`` prints it, and rsync's progress
lines: pure parsers, no I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HASH = re.compile(r"^\\?([0-9a-f]{64}) [ *](.+)$")
# rsync --info=progress2: "  1,234,567  45%   12.34MB/s    0:00:12 (xfr#1, to-chk=0/3)"
_PROGRESS = re.compile(r"^\s*([\d,]+)\s+(\d+)%\s+([\d.]+)([kMGT]?B)/s\s+(\d+:\d\d:\d\d)")
_UNIT = {"B": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}


@dataclass
class Manifest:
    """Whether the directory is there, its bad symlinks, each file's size and (when read) sha256."""

    present: bool = True
    bad_links: list[tuple[str, str]] = field(default_factory=list)  # (dangling|escapes, name)
    sizes: dict[str, int] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes.values())


def parse_manifest(text: str) -> Manifest:
    m = Manifest()
    for line in text.splitlines():
        if line == "@@nodir":
            m.present = False
        elif line.startswith("L "):
            kind, _, name = line[2:].partition(" ")
            m.bad_links.append((kind, name))
        elif line.startswith("F "):
            size, _, name = line[2:].partition(" ")
            if size.isdigit():
                m.sizes[name] = int(size)
        elif h := _HASH.match(line):
            name = h.group(2)
            if line.startswith("\\"):  # sha256sum escapes a name with a backslash or newline
                name = name.replace("\\n", "\n").replace("\\\\", "\\")
            m.hashes[name.removeprefix("./")] = h.group(1)
    return m


@dataclass(frozen=True)
class Progress:
    bytes_done: int
    pct: int
    rate_bytes_s: float
    eta: str


def parse_progress(line: str) -> Progress | None:
    """One rsync ``--info=progress2`` line, or None for any other line."""
    p = _PROGRESS.match(line)
    if not p:
        return None
    return Progress(int(p.group(1).replace(",", "")), int(p.group(2)),
                    float(p.group(3)) * _UNIT.get(p.group(4), 1), p.group(5))


def differences(src: Manifest, dst: Manifest) -> list[str]:
    """What differs between the two sides: missing or extra files, sizes, hashes (one line each)."""
    out: list[str] = []
    for name in sorted(src.sizes.keys() - dst.sizes.keys()):
        out.append(f"missing on the destination: {name}")
    for name in sorted(dst.sizes.keys() - src.sizes.keys()):
        out.append(f"only on the destination: {name}")
    for name in sorted(src.sizes.keys() & dst.sizes.keys()):
        if src.sizes[name] != dst.sizes[name]:
            out.append(f"size differs: {name} ({src.sizes[name]:,} vs {dst.sizes[name]:,} bytes)")
        elif name not in src.hashes or name not in dst.hashes:
            out.append(f"sha256 not read: {name}")
        elif src.hashes[name] != dst.hashes[name]:
            out.append(f"sha256 differs: {name}")
    return out
