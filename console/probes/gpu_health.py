"""Per-GPU health from a second, slower ``nvidia-smi --query-gpu`` stream, row by row, and the flags
an operator needs from it (each only when it says something).

Fields: clocks-event reasons (active bitmask; older drivers call them ``clocks_throttle_reasons.*``,
newer ones ``clocks_event_reasons.*``: the monitor asks with the new names and falls back once when
nvidia-smi answers ``Field "..." is not a valid field to query``), PCIe link gen/width current vs
max, uncorrected volatile ECC errors, retired pages / remapped rows pending, power draw vs the
enforced and default limits, SM clock vs max. Every variant of a cell is taken: ``[N/A]``, ``N/A``,
``[Not Supported]`` (GB10: no ECC, no PCIe link of its own, unified memory: missing values, never a
flag), NVML errors in a cell (``[Unknown Error]``: that cell is unknown), an error line in place of
a GPU's row (a GPU off the bus: the GPU loop already says so), CRLF and padding.

The bit values are NVML's ``nvmlClocksEventReasons`` (nvml.h; ``nvidia-smi -q`` "Clocks Event Reasons").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from console.probes.nvidia_smi import _BUS_ID, ANY, INDEX, PCT, WATTS, _cells, _num, is_tool_failure

EVENT_PREFIX = "clocks_event_reasons"  # R535+ name
THROTTLE_PREFIX = "clocks_throttle_reasons"  # older drivers (and still accepted by many newer ones)
_FIELDS_AFTER = ("pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max",
                 "ecc.errors.uncorrected.volatile.total", "retired_pages.pending", "remapped_rows.pending",
                 "power.draw", "enforced.power.limit", "power.default_limit", "clocks.sm", "clocks.max.sm",
                 "utilization.gpu")


def fields(prefix: str = EVENT_PREFIX) -> tuple[str, ...]:
    return ("index", "pci.bus_id", f"{prefix}.active", *_FIELDS_AFTER)


def query(prefix: str = EVENT_PREFIX) -> str:
    return "--query-gpu=" + ",".join(fields(prefix))


N_FIELDS = len(fields())
_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query', re.I)

# nvmlClocksEventReasons: (bit, words, level). Idle, application clocks, sync boost and display
# clocks are the GPU doing what it was told, never a flag.
IDLE = 0x1
REASONS = (
    (0x4, "power cap", "warn"),  # SW power cap: drawing what the limit allows
    (0x8, "HW slowdown", "error"),  # the board pulled the clocks down (power brake, thermal)
    (0x20, "thermal (SW)", "warn"),
    (0x40, "thermal (HW)", "error"),
    (0x80, "power brake (HW)", "error"),
)
POWER_CAPPED_BELOW = 0.9  # enforced limit under 90 % of the default: someone capped it
PCIE_BUSY_UTIL = 10  # the PCIe gen drops at idle by design: below max it is a flag only while busy


@dataclass(frozen=True)
class GpuHealth:
    index: int
    bus_id: str | None = None
    reasons: int | None = None  # active clocks-event bitmask
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    ecc_uncorrected: int | None = None
    retired_pending: bool | None = None
    remap_pending: bool | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    power_default_w: float | None = None
    sm_mhz: int | None = None
    sm_max_mhz: int | None = None
    util_pct: int | None = None
    error: str | None = None  # the GPU's row could not be read (what nvidia-smi printed)


@dataclass(frozen=True)
class HealthFlag:
    kind: str  # throttle | pcie | ecc | pending | power-cap
    level: str  # warn | error
    text: str  # "PCIe Gen3 x8 (max Gen5 x16)"
    fix: str = ""

    @property
    def icon(self) -> str:
        return "✖" if self.level == "error" else "⚠"


@dataclass(frozen=True)
class HealthRound:
    gpus: list[GpuHealth] = field(default_factory=list)


class InvalidField(ValueError):
    """nvidia-smi does not know a field of the query (an older or newer driver): ask with the other names."""

    def __init__(self, name: str) -> None:
        super().__init__(f"nvidia-smi does not know the field {name!r}")
        self.name = name


def invalid_field(line: str) -> str | None:
    m = _INVALID_FIELD.search(line)
    return m.group(1) if m else None


def _yes_no(value: str) -> bool | None:
    v = value.strip().lower()
    return True if v == "yes" else False if v == "no" else None


def _hex(value: str) -> int | None:
    v = value.strip().lower()
    if not v.startswith("0x") or len(v) > 18:  # a 64-bit mask at most
        return None
    try:
        return int(v, 16)
    except ValueError:
        return None


def parse_health_line(line: str) -> GpuHealth | None:
    """One row of the health query; None for what is not a row (blank, header). An error line in
    place of a row is a reading in error (index from nothing: -1; bus id when printed)."""
    line = line.strip()
    if not line or line.lower().startswith("index,"):
        return None
    if name := invalid_field(line):
        raise InvalidField(name)
    row = _cells(line)
    if len(row) != N_FIELDS or _num(row[0]) is None:
        m = _BUS_ID.search(line)
        return GpuHealth(-1, m.group(1) if m else None, error=line[:300])
    # each cell in its physical range (a negative ECC count, "Gen-1 x-16", a 2^64 clock: unknown)
    n = [_num(c, int, lim) for c, lim in zip(row, _INT_LIMITS, strict=True)]
    f = [_num(c, float, WATTS) for c in row]
    return GpuHealth(
        index=int(n[0]), bus_id=row[1] or None, reasons=_hex(row[2]),  # type: ignore[arg-type]
        pcie_gen=n[3], pcie_gen_max=n[4], pcie_width=n[5], pcie_width_max=n[6],  # type: ignore[arg-type]
        ecc_uncorrected=n[7], retired_pending=_yes_no(row[8]), remap_pending=_yes_no(row[9]),  # type: ignore[arg-type]
        power_w=f[10], power_limit_w=f[11], power_default_w=f[12],
        sm_mhz=n[13], sm_max_mhz=n[14], util_pct=n[15])  # type: ignore[arg-type]


_GEN, _WIDTH, _MHZ = (1, 16), (1, 64), (0, 100_000)
# per cell of the query, in its order (the non-numeric cells' limits are never used)
_INT_LIMITS = (INDEX, ANY, ANY, _GEN, _GEN, _WIDTH, _WIDTH, ANY, ANY, ANY, WATTS, WATTS, WATTS, _MHZ, _MHZ, PCT)


def parse_health(text: str) -> list[GpuHealth]:
    """Every row of a one-shot health query (``status``, the ``gpu-health`` check)."""
    out = []
    for line in text.splitlines():
        if is_tool_failure(line) or line.startswith("NVML library version"):
            continue
        h = parse_health_line(line)
        if h is not None:
            out.append(h)
    return out


class HealthRounds:
    """Rows of ``nvidia-smi -lms`` grouped into rounds: a round ends when an index repeats or when
    ``expected`` rows came."""

    def __init__(self, expected: int | None = None) -> None:
        self.expected = expected
        self._round: list[GpuHealth] = []

    def feed(self, line: str) -> list[GpuHealth] | None:
        if is_tool_failure(line) or line.strip().startswith("NVML library version"):
            return None
        h = parse_health_line(line)
        if h is None:
            return None
        done = None
        if h.index >= 0 and any(g.index == h.index for g in self._round):
            done, self._round = self._round, []
            if self.expected is None:
                self.expected = len(done)
        self._round.append(h)
        if self.expected is not None and len(self._round) >= self.expected:
            done, self._round = self._round, []
        return done


def _reason_words(mask: int) -> list[tuple[str, str]]:
    return [(words, level) for bit, words, level in REASONS if mask & bit]


def flags(h: GpuHealth) -> list[HealthFlag]:
    """What this GPU's health says, worst first; nothing when all is well or nothing is known (GB10's
    ``[N/A]`` fields are missing values, never a flag)."""
    if h.error is not None:
        return []
    out: list[HealthFlag] = []
    if h.ecc_uncorrected:
        out.append(HealthFlag("ecc", "error", f"{h.ecc_uncorrected} uncorrected ECC",
                              "Uncorrectable memory errors since the driver loaded: drain the GPU, reset it "
                              "(`nvidia-smi -r -i N`) or reboot; if they come back the GPU needs service."))
    if h.retired_pending or h.remap_pending:
        what = "row remap" if h.remap_pending else "page retirement"
        out.append(HealthFlag("pending", "warn", f"{what} pending (reset)",
                              f"A {what} waits for a GPU reset to take effect: reset the GPU at the next "
                              "window (`nvidia-smi -r -i N` with no process on it) or reboot."))
    capped = bool(h.power_limit_w and h.power_default_w and h.power_limit_w < POWER_CAPPED_BELOW * h.power_default_w)
    if h.reasons:
        # under a lowered limit the SW power cap is that limit at work: said once, as the cap
        words = [(w, lv) for w, lv in _reason_words(h.reasons) if not (capped and w == "power cap")]
        if words:
            level = "error" if any(lv == "error" for _, lv in words) else "warn"
            clock = f" (SM {h.sm_mhz}/{h.sm_max_mhz} MHz)" if h.sm_mhz and h.sm_max_mhz else ""
            out.append(HealthFlag("throttle", level, "throttled: " + ", ".join(w for w, _ in words) + clock,
                                  "Clocks pulled down: check cooling and airflow (thermal), the power supply "
                                  "and limits (`nvidia-smi -q -d PERFORMANCE,POWER`)."))
    width_low = h.pcie_width and h.pcie_width_max and h.pcie_width < h.pcie_width_max
    busy = (h.reasons is not None and not h.reasons & IDLE) if h.reasons is not None else (
        (h.util_pct or 0) >= PCIE_BUSY_UTIL)
    gen_low = h.pcie_gen and h.pcie_gen_max and h.pcie_gen < h.pcie_gen_max and busy
    if width_low or gen_low:
        out.append(HealthFlag("pcie", "warn", f"PCIe Gen{h.pcie_gen} x{h.pcie_width} "
                              f"(max Gen{h.pcie_gen_max} x{h.pcie_width_max})",
                              "The PCIe link trained below its maximum: reseat the GPU/riser, check the slot's "
                              "BIOS setting and `lspci -vv` LnkSta; AER errors in the kernel log point at it."))
    if capped:
        clock = f" (SM {h.sm_mhz}/{h.sm_max_mhz} MHz)" if h.sm_mhz and h.sm_max_mhz and h.reasons and h.reasons & 0x4 else ""
        out.append(HealthFlag("power-cap", "warn", f"power-capped {h.power_limit_w:.0f}/{h.power_default_w:.0f} W{clock}",
                              "The enforced power limit is below the default: `nvidia-smi -q -d POWER` says who "
                              "set it; restore with `sudo nvidia-smi -pl "
                              f"{h.power_default_w:.0f} -i N`."))
    return out


def worst(fl: list[HealthFlag]) -> str | None:
    """``error`` | ``warn`` | None."""
    if any(f.level == "error" for f in fl):
        return "error"
    return "warn" if fl else None


def to_dict(h: GpuHealth) -> dict:
    """``health`` of one GPU in ``status --json`` / ``watch --json``."""
    return {
        "bus_id": h.bus_id, "clocks_event_reasons": None if h.reasons is None else f"0x{h.reasons:016x}",
        "pcie": {"gen": h.pcie_gen, "gen_max": h.pcie_gen_max, "width": h.pcie_width, "width_max": h.pcie_width_max},
        "ecc_uncorrected": h.ecc_uncorrected, "retired_pages_pending": h.retired_pending,
        "remapped_rows_pending": h.remap_pending, "power_w": h.power_w, "power_limit_w": h.power_limit_w,
        "power_default_w": h.power_default_w, "sm_mhz": h.sm_mhz, "sm_max_mhz": h.sm_max_mhz, "error": h.error,
        "flags": [{"kind": f.kind, "level": f.level, "text": f.text} for f in flags(h)],
    }
