"""nvidia-smi CSV query output (``--format=csv,noheader,nounits``), row by row.

Discrete GPUs report memory in MiB; GB10 (unified memory) reports ``[N/A]`` or ``Not Supported``
for the memory fields, which become ``None`` (never an invented number). One GPU's trouble never
hides another: a GPU that fell off the bus prints an error line in place of its row, and a field
can hold an NVML error (``[GPU requires reset]``, ``[Unknown Error]``, ``ERR!``). Such a GPU
becomes a reading *in error* that carries what nvidia-smi printed, next to the good readings.
Variants from public reports (shared/reference/command-outputs.md):

- ``Unable to determine the device handle for GPU00000000:01:00.0: Unknown Error``
  (NVIDIA/nvidia-container-toolkit#846, NVIDIA/open-gpu-kernel-modules#387)
- ``Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to
  recover this GPU`` (JosephKJ/OWOD#81)
- ``[Unknown Error]`` next to ``[Not Supported]`` and ``[N/A]`` in query fields (enkore/i3pystatus#850),
  ``GPU requires reset`` as an NVML error (leptonai/gpud#1133)
"""

from __future__ import annotations

import csv
import math
import re
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

# The value is simply not reported on this GPU (GB10 memory, power on some boards).
_MISSING = {"[n/a]", "n/a", "not supported", "[not supported]", ""}
# NVML errors printed in place of a value: the GPU is in trouble and the operator must see it.
_FIELD_ERRORS = {"[unknown error]", "unknown error", "[gpu requires reset]", "gpu requires reset", "err!",
                 "[gpu is lost]", "gpu is lost", "[insufficient permissions]", "[unknown]"}
# A PCI bus id as nvidia-smi prints it in error lines (``GPU00000000:01:00.0``, ``GPU 0000:0B:00.0``).
_BUS_ID = re.compile(r"\b(?:GPU\s?)?((?:[0-9A-Fa-f]{4}|[0-9A-Fa-f]{8}):[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\b")
# Whole-tool failures: no GPU can be read at all (the driver, NVML, no device).
_TOOL_FAILURES = ("NVIDIA-SMI has failed", "Failed to initialize NVML", "No devices were found",
                  "couldn't communicate with the NVIDIA driver", "Driver/library version mismatch")
# What the tool prints after such a failure (not a GPU row): "NVML library version: 580.95".
_TOOL_FAILURE_TAIL = ("NVML library version",)


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
    error: str | None = None  # what nvidia-smi printed for a GPU it could not (fully) read
    bus_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


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


# What a cell may hold at most: a value outside [lo, hi] (or nan, inf, a 400-digit number) is no
# reading; it is unknown (None) here, once, so nothing downstream ever sees it.
ANY = (0.0, 1e12)
INDEX = (0, 4095)
PID = (1, 4_194_304)  # the kernel's pid limit (2^22)
MIB = (0, 1e9)  # a petabyte of GPU memory is no reading
PCT = (0, 100)
TEMP_C = (0, 200)  # NVML reports an unsigned temperature
WATTS = (0, 1e5)


def _num(value: str, kind: type = int, limits: tuple[float, float] = ANY) -> int | float | None:
    """A cell as a number, or None: not reported, an NVML error word, not a number, not finite, or
    outside ``limits``."""
    v = _clean(value)
    if len(v) > 32 or v.lower() in _MISSING or v.lower() in _FIELD_ERRORS:
        return None
    try:
        f = float(v.replace(",", ""))
    except ValueError:
        return None
    if not math.isfinite(f) or not limits[0] <= f <= limits[1]:
        return None
    return int(round(f)) if kind is int else f


def _is_field_error(value: str) -> bool:
    v = _clean(value).lower()
    return v in _FIELD_ERRORS or (v.startswith("[") and v.endswith("]") and v not in _MISSING)


def _cells(line: str) -> list[str]:
    row = next(csv.reader([line], skipinitialspace=True), [])
    return [c.strip() for c in row]


def is_tool_failure(line: str) -> bool:
    return any(m in line for m in _TOOL_FAILURES)


def error_reading(index: int, text: str) -> GpuReading:
    """A GPU nvidia-smi could not read: its index (position), bus id if printed, and the line."""
    m = _BUS_ID.search(text)
    return GpuReading(index, "", "", None, None, None, None, None, error=text.strip(),
                      bus_id=m.group(1) if m else None)


def parse_gpu_line(line: str, position: int = 0) -> GpuReading:
    """One line of the GPU query. A line that is not a valid row becomes a reading in error at
    ``position`` (nvidia-smi prints one line per device, in index order)."""
    row = _cells(line)
    if len(row) != len(GPU_FIELDS):
        return error_reading(position, line)
    idx = _num(row[0], int, INDEX)
    bad = [f"{f}: {v}" for f, v in zip(GPU_FIELDS, row, strict=True) if _is_field_error(v)]
    if idx is None:
        return error_reading(position, line if not bad else f"GPU index unreadable: {', '.join(bad)}")
    return GpuReading(
        index=int(idx),
        uuid=row[1],
        name=row[2],
        memory_used_mib=_num(row[3], int, MIB),  # type: ignore[arg-type]
        memory_total_mib=_num(row[4], int, MIB),  # type: ignore[arg-type]
        util_pct=_num(row[5], int, PCT),  # type: ignore[arg-type]
        temp_c=_num(row[6], int, TEMP_C),  # type: ignore[arg-type]
        power_w=_num(row[7], float, WATTS),  # type: ignore[arg-type]
        error=("nvidia-smi reports " + ", ".join(bad)) if bad else None,
    )


def _gpu_lines(text: str) -> list[str]:
    lines = [ln.strip() for ln in text.splitlines()]
    return [ln for ln in lines if ln and not ln.lower().startswith("index,")  # tolerate a header line
            and not ln.startswith(_TOOL_FAILURE_TAIL)]


def not_answering(limit_s: float) -> str:
    """What a one-shot nvidia-smi that had to be killed station-side means (the connection answered)."""
    return f"nvidia-smi not answering (killed after {limit_s:g} s: the driver or NVML is stuck; SSH fine)"


def parse_gpus(text: str) -> list[GpuReading]:
    """Parse ``nvidia-smi --query-gpu=<GPU_FIELDS> --format=csv,noheader,nounits``: every GPU, the
    broken ones as readings in error. Raises ParseError only when no GPU could be read at all
    (the driver or NVML failed, or the output is not the query's)."""
    out: list[GpuReading] = []
    tool: list[str] = []
    for line in _gpu_lines(text):
        if is_tool_failure(line) or ("," not in line and not _BUS_ID.search(line)):
            tool.append(line)
            continue
        out.append(parse_gpu_line(line, len(out)))
    if not out and tool:
        raise ParseError(f"nvidia-smi: {tool[0][:200]}")
    # Nothing that looks like a GPU (a row, a bus id, a field error): not this query's output at all.
    if out and not any(g.name or g.bus_id or (g.error or "").startswith("GPU index unreadable") for g in out):
        raise ParseError(f"nvidia-smi: no GPU rows in output: {text.strip()[:120]!r}")
    return out


class GpuRounds:
    """Groups the lines of ``nvidia-smi -lms`` into rounds (one line per GPU per interval).

    A round is complete when every GPU seen at connect time has reported, or when an index repeats.
    A line that is not a valid row is the GPU at its position in the round, in error. ``expected``
    None: the count is unknown (the first read failed, e.g. nvidia-smi hung): the first round ends when
    an index repeats, and its size is the count from then on.
    """

    def __init__(self, expected: int | None = 1):
        self.expected = max(1, expected) if expected is not None else None
        self._round: dict[int, GpuReading] = {}
        self._position = 0

    def feed(self, line: str) -> list[GpuReading] | None:
        line = line.strip()
        if not line or line.lower().startswith("index,") or line.startswith(_TOOL_FAILURE_TAIL):
            return None
        if is_tool_failure(line):
            raise ParseError(f"nvidia-smi: {line[:200]}")
        done = None
        reading = parse_gpu_line(line, self._position)
        if reading.index in self._round:
            done = self._flush()
            if self.expected is None:
                self.expected = len(done)
            reading = parse_gpu_line(line, self._position)
        self._round[reading.index] = reading
        self._position += 1
        if self.expected is not None and len(self._round) >= self.expected:
            done = self._flush()
        return done

    def _flush(self) -> list[GpuReading]:
        out = [self._round[i] for i in sorted(self._round)]
        self._round, self._position = {}, 0
        return out


def parse_compute_apps(text: str) -> list[ComputeApp]:
    """Parse ``nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory``; a row that
    is not one is left out (the others still count)."""
    out = []
    for line in text.splitlines():
        row = _cells(line)
        if not row or not any(row) or row[0].lower() in ("gpu_uuid", "no running processes found"):
            continue
        pid = _num(row[1], int, PID) if len(row) == 4 else None
        if pid is None:
            continue
        out.append(ComputeApp(row[0], int(pid), row[2], _num(row[3], int, MIB)))  # type: ignore[arg-type]
    if not out and text.strip() and is_tool_failure(text):
        raise ParseError(f"nvidia-smi: {text.strip().splitlines()[0][:200]}")
    return out
