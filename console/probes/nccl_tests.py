"""nccl-tests (``all_reduce_perf`` ...): the result rows and ``# Avg bus bandwidth``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from console.probes import ParseError


@dataclass(frozen=True)
class NcclRow:
    size: int
    count: int
    type: str
    time_us: float
    algbw: float
    busbw: float
    wrong: str


@dataclass(frozen=True)
class NcclTestResult:
    rows: list[NcclRow]
    avg_busbw_gbytes: float | None  # GB/s, as nccl-tests prints it

    @property
    def avg_busbw_gbits(self) -> float | None:
        return None if self.avg_busbw_gbytes is None else self.avg_busbw_gbytes * 8


# The Spark setup script fails below this bus bandwidth (GB/s) = 175 Gb/s.
SPARK_MIN_BUSBW = 21.875


def parse_nccl_tests(text: str) -> NcclTestResult:
    rows = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        f = line.split()
        if len(f) >= 9 and f[0].isdigit() and f[1].isdigit():
            try:
                rows.append(NcclRow(int(f[0]), int(f[1]), f[2], float(f[5]), float(f[6]), float(f[7]), f[8]))
            except ValueError:
                continue
    m = re.search(r"#\s*Avg bus bandwidth\s*:\s*([\d.]+)", text)
    if not rows and not m:
        raise ParseError("nccl-tests: no result rows and no '# Avg bus bandwidth' line")
    return NcclTestResult(rows, float(m.group(1)) if m else None)
