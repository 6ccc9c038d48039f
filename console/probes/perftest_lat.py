"""perftest latency tests (``ib_write_lat``, ``ib_send_lat`` ...): the header-named result columns.

The table header names the columns (perftest ``src/perftest_parameters.h`` ``RESULT_FMT_LAT``)::

     #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]

Builds before perftest 3.4 (2016) print only ``t_min t_max t_typical``; duration runs (``-D``) print
``#bytes #iterations t_avg[usec] tps average``. Columns are matched by name, so each form reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from console.probes import ParseError
from console.probes.perftest import find_error, header_fields

_HEADER = re.compile(r"^\s*#bytes\s+#iterations\s+(.*)$")
_COLUMN = re.compile(r"(99(?:\.9)?%\s+percentile|t_\w+|tps\s+average)(?:\[(\w+)\])?")


@dataclass(frozen=True)
class LatRow:
    bytes: int
    iterations: int
    values: dict[str, float]  # t_min, t_max, t_typical, t_avg, t_stdev, p99, p99.9, tps (usec)

    def get(self, key: str) -> float | None:
        return self.values.get(key)


@dataclass(frozen=True)
class LatResult:
    rows: list[LatRow] = field(default_factory=list)
    header: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    error_line: str | None = None

    @property
    def last(self) -> LatRow | None:
        return self.rows[-1] if self.rows else None

    @property
    def typical_us(self) -> float | None:
        r = self.last
        return None if r is None else (r.get("t_typical") or r.get("t_avg"))

    @property
    def p99_us(self) -> float | None:
        return None if self.last is None else self.last.get("p99")


def _key(name: str) -> str:
    name = re.sub(r"\s+", " ", name)
    return {"99% percentile": "p99", "99.9% percentile": "p99.9", "tps average": "tps"}.get(name, name)


def parse_lat(text: str) -> LatResult:
    header = header_fields(text)
    rows: list[LatRow] = []
    columns: list[str] | None = None
    for line in text.splitlines():
        if m := _HEADER.match(line):
            columns = [_key(c.group(1)) for c in _COLUMN.finditer(m.group(1))]
            continue
        if columns is None:
            continue
        f = line.split()
        if len(f) >= 2 + len(columns) and f[0].isdigit() and f[1].isdigit():
            try:
                vals = {c: float(v) for c, v in zip(columns, f[2:2 + len(columns)], strict=True)}
            except ValueError:
                continue
            rows.append(LatRow(int(f[0]), int(f[1]), vals))
    err = find_error(text)
    if not rows and err is None:
        raise ParseError(f"perftest latency: no result table in {text.strip()[-160:]!r}")
    return LatResult(rows, header, err[0] if err else None, err[1] if err else None)
