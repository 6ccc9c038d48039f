"""What the simulated ``nvidia-smi`` says of a GPU's health: clocks-event reasons, PCIe
link, ECC, retired pages / remapped rows, power limits, SM clocks, in the real formats.

A discrete GPU at idle runs its PCIe link at Gen1 and says "GPU idle" (0x1) as real ones do (no
flag: that is power saving). GB10 reports ``[N/A]`` for what it does not have (ECC, a PCIe link of
its own, power limits). An older driver (``smi-old-driver``) knows ``clocks_throttle_reasons.*``
only. Faults: ``gpu-pcie-downtrained``, ``gpu-ecc``, ``gpu-power-capped`` (on the serving GPU)."""

from __future__ import annotations

NA = "[N/A]"
DEFAULT_LIMIT_W = {True: 1000.0, False: 300.0}  # serving GPU / display GPU
CAPPED_W = 600.0


def health_values(g: dict, util: float, power: float, faults: list[str]) -> dict[str, str]:
    serving, unified = g["serving"], g["unified"]
    busy = util >= 5
    fault = (lambda f: f in faults) if serving else (lambda f: False)
    reasons = 0x0 if busy else 0x1
    sm_max = 2100 if not unified else 3003
    sm = (1965 if busy else 210) if not unified else (2400 if busy else 208)
    if fault("gpu-power-capped"):
        power = min(power, CAPPED_W)
        if busy:
            reasons |= 0x4
            sm = 1410
    gen = "3" if fault("gpu-pcie-downtrained") else ("5" if busy else "1")
    width = "8" if fault("gpu-pcie-downtrained") else "16"
    ecc = "2" if fault("gpu-ecc") else "0"
    remap = "Yes" if fault("gpu-ecc") else "No"
    limit = CAPPED_W if fault("gpu-power-capped") else DEFAULT_LIMIT_W[serving]
    name = "clocks_throttle_reasons.active" if "smi-old-driver" in faults else "clocks_event_reasons.active"
    out = {
        name: f"0x{reasons:016X}",
        "pcie.link.gen.current": NA if unified else gen, "pcie.link.gen.max": NA if unified else "5",
        "pcie.link.width.current": NA if unified else width, "pcie.link.width.max": NA if unified else "16",
        "ecc.errors.uncorrected.volatile.total": NA if unified else ecc,
        "retired_pages.pending": NA,  # Blackwell remaps rows instead of retiring pages
        "remapped_rows.pending": NA if unified else remap,
        "enforced.power.limit": NA if unified else f"{limit:.2f}",
        "power.default_limit": NA if unified else f"{DEFAULT_LIMIT_W[serving]:.2f}",
        "clocks.sm": str(sm), "clocks.max.sm": str(sm_max),
        "power.draw": f"{power:.2f}",
    }
    return out
