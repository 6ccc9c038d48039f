"""nvidia-smi CSV query output (``--format=csv,noheader,nounits``).

Discrete GPUs report memory in MiB; GB10 (unified memory) reports ``[N/A]`` or ``Not Supported``
for the memory fields, which become ``None`` (never an invented number).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass

from console.probes import ParseError

GPU_FIELDS = (
    "index",
    "uuid",
    "name",
    "memory.used",
    "memory.total",
    "utilization.gpu",
    "temperature.gpu",
    "power.draw",
)
GPU_QUERY = "--query-gpu=" + ",".join(GPU_FIELDS)
APPS_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")
APPS_QUERY = "--query-compute-apps=" + ",".join(APPS_FIELDS)
CSV_FORMAT = "--format=csv,noheader,nounits"

_MISSING = {"[n/a]", "n/a", "not supported", "[not supported]", "[unknown error]", "unknown error", ""}


@dataclass(frozen=True)
class GpuReading:
    index: int
    uuid: str
    name: str
    memory_used_mib: int | None
    memory_total_mib: int | None
    util_pct: int | None
    temp_c: int | None
    power_w: float | None


@dataclass(frozen=True)
class ComputeApp:
    gpu_uuid: str
    pid: int
    process_name: str
    used_memory_mib: int | None


def _clean(value: str) -> str:
    v = value.strip()
    for unit in (" MiB", " %", " W", " C"):
        if v.endswith(unit):
            v = v[: -len(unit)].strip()
    return v


def _num(value: str, kind: type = int) -> int | float | None:
    v = _clean(value)
    if v.lower() in _MISSING:
        return None
    try:
        f = float(v.replace(",", ""))
    except ValueError:
        return None
    return int(round(f)) if kind is int else f


def _rows(text: str) -> list[list[str]]:
    return [row for row in csv.reader(text.splitlines(), skipinitialspace=True) if row and any(c.strip() for c in row)]


def parse_gpu_line(row: list[str]) -> GpuReading:
    if len(row) != len(GPU_FIELDS):
        raise ParseError(f"nvidia-smi: expected {len(GPU_FIELDS)} fields, got {len(row)}: {','.join(row)!r}")
    idx = _num(row[0])
    if idx is None:
        raise ParseError(f"nvidia-smi: GPU index is not a number: {row[0]!r}")
    return GpuReading(
        index=int(idx),
        uuid=row[1].strip(),
        name=row[2].strip(),
        memory_used_mib=_num(row[3]),  # type: ignore[arg-type]
        memory_total_mib=_num(row[4]),  # type: ignore[arg-type]
        util_pct=_num(row[5]),  # type: ignore[arg-type]
        temp_c=_num(row[6]),  # type: ignore[arg-type]
        power_w=_num(row[7], float),  # type: ignore[arg-type]
    )


def parse_gpus(text: str) -> list[GpuReading]:
    """Parse ``nvidia-smi --query-gpu=<GPU_FIELDS> --format=csv,noheader,nounits``."""
    out = []
    for row in _rows(text):
        if row[0].strip().lower() == "index":  # tolerate a header line
            continue
        out.append(parse_gpu_line(row))
    if not out and text.strip():
        raise ParseError(f"nvidia-smi: no GPU rows in output: {text.strip()[:120]!r}")
    return out


def parse_compute_apps(text: str) -> list[ComputeApp]:
    """Parse ``nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory``."""
    out = []
    for row in _rows(text):
        if row[0].strip().lower() in ("gpu_uuid", "no running processes found"):
            continue
        if len(row) != 4:
            raise ParseError(f"nvidia-smi compute-apps: expected 4 fields: {','.join(row)!r}")
        pid = _num(row[1])
        out.append(ComputeApp(row[0].strip(), int(pid or 0), row[2].strip(), _num(row[3])))  # type: ignore[arg-type]
    return out
