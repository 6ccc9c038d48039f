"""NVIDIA Xid codes in the operator's words: what the driver's ``NVRM: Xid (PCI:...): N, ...`` line means.

Pure data. The texts follow NVIDIA's Xid catalogue ("Xid Errors", docs.nvidia.com/deploy/xid-errors/,
the "Analyzing Xid Errors with the Xid Catalog" page and its resolution buckets: RESTART_APP,
RESET_GPU, RESTART_BM / reboot, CONTACT_SUPPORT, CHECK_MECHANICALS) and its page-retirement notes
(docs.nvidia.com/deploy/dynamic-page-retirement: Xid 48 = a double-bit error was detected, 63/64 =
a page retired / failed to retire). Only the codes an operator of a serving Station meets are kept;
any other code reads "Xid N (see NVIDIA's Xid catalogue)" (``describe``). ``severity``: ``fatal`` =
the GPU's state is lost (the rank on it is dead until the GPU is reset or the host rebooted),
``error`` = the application on it failed, ``warning`` = worth watching. The diagnosis reads
the same table (one home per Xid fact).
"""

from __future__ import annotations

from dataclasses import dataclass

CATALOGUE_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"


@dataclass(frozen=True)
class XidInfo:
    code: int
    text: str  # what happened, in NVIDIA's words (shortened)
    severity: str  # fatal | error | warning
    cause: str  # the usual cause
    action: str  # what to do (NVIDIA's resolution bucket in words)


def _x(code: int, text: str, severity: str, cause: str, action: str) -> tuple[int, XidInfo]:
    return code, XidInfo(code, text, severity, cause, action)


_RESTART_APP = "restart the application (the engine container)"
_RESET_GPU = "reset the GPU (`nvidia-smi -r -i N` with no process on it) or reboot the station"
_REBOOT = "reboot the station; if it comes back, contact NVIDIA support / the system vendor"

XIDS: dict[int, XidInfo] = dict([
    _x(8, "GPU stopped processing (channel idle timeout)", "error", "a kernel that never finishes or a driver fault",
       _RESTART_APP),
    _x(13, "Graphics engine exception", "error", "an application fault (illegal address, bad kernel) or memory "
       "corruption", _RESTART_APP + "; if it repeats on one GPU, run the GPU's diagnostics"),
    _x(31, "GPU memory page fault", "error", "the application touched memory it does not own (a bug in it or "
       "its libraries)", _RESTART_APP),
    _x(32, "Invalid or corrupted push buffer stream", "error", "driver/PCIe corruption or an application fault",
       _RESTART_APP + "; check the PCIe link (AER errors)"),
    _x(38, "Driver firmware error", "error", "a driver or firmware fault", _RESET_GPU),
    _x(43, "GPU stopped processing (reset channel verification error)", "error",
       "the application hit a fault on the GPU (its kernels ended)", _RESTART_APP),
    _x(45, "Preemptive cleanup, due to previous errors", "warning", "the driver ended the application's "
       "channels after another error (look at the Xid before it)", _RESTART_APP),
    _x(48, "Double-bit (uncorrectable) ECC error", "fatal", "a memory cell failed: uncorrectable ECC error; "
       "the page is retired or the row remapped", _RESET_GPU + "; if it repeats, the GPU needs service"),
    _x(56, "Display engine error", "warning", "display engine / clocking fault", "usually harmless on a "
       "compute GPU; reboot if it repeats"),
    _x(61, "Internal micro-controller breakpoint/warning", "fatal", "GPU firmware fault", _RESET_GPU),
    _x(62, "Internal micro-controller halt", "fatal", "GPU firmware halted (often thermal)", _RESET_GPU
       + "; check cooling"),
    _x(63, "ECC page retirement or row remapping recorded", "warning", "a memory page was retired / a row "
       "marked for remapping", "reset the GPU when convenient so the remap takes effect"),
    _x(64, "ECC page retirement or row remapping failed", "fatal", "the GPU could not retire a bad page",
       _RESET_GPU + "; the GPU likely needs service"),
    _x(68, "Video decoder (NVDEC) exception", "error", "an application fault in the video engine", _RESTART_APP),
    _x(69, "Graphics engine class error", "error", "an application fault", _RESTART_APP),
    _x(74, "NVLink error", "fatal", "an NVLink link failed (training, CRC, replay)", _RESET_GPU
       + "; check the NVLink / C2C connections"),
    _x(79, "GPU has fallen off the bus", "fatal", "the GPU stopped answering on PCIe (power, thermal, PCIe link, "
       "or hardware failure)", _REBOOT + "; check power and the PCIe slot/cable"),
    _x(92, "High single-bit ECC error rate", "warning", "many corrected memory errors", "watch it; reset the "
       "GPU at the next window"),
    _x(94, "Contained ECC error", "error", "an uncorrectable memory error, contained to one application",
       _RESTART_APP + "; reset the GPU when convenient"),
    _x(95, "Uncontained ECC error", "fatal", "an uncorrectable memory error that could not be contained",
       _RESET_GPU),
    _x(109, "Context switch timeout", "error", "an application fault or a hung kernel", _RESTART_APP),
    _x(119, "GSP RPC timeout", "fatal", "the GPU's system processor (GSP) stopped answering the driver",
       _RESET_GPU),
    _x(120, "GSP error", "fatal", "a fault in the GPU's system processor (GSP) firmware", _RESET_GPU),
    _x(121, "C2C link corrected error", "warning", "corrected errors on the chip-to-chip (C2C) link",
       "watch it; service if it keeps rising"),
    _x(140, "Unrecovered ECC error", "fatal", "an uncorrectable memory error the driver could not recover",
       _RESET_GPU),
    _x(143, "GPU initialization failure", "fatal", "the GPU failed to initialise", _REBOOT),
    _x(154, "GPU recovery action changed", "warning", "the driver says what recovery the GPU now needs "
       "(reset or reboot)", "do what `nvidia-smi -q` says under 'GPU Recovery Action'"),
])


def meaning(code: int) -> XidInfo | None:
    """NVIDIA's meaning of Xid ``code`` (None: not in this table)."""
    return XIDS.get(code)


def describe(code: int) -> str:
    """One line: ``Xid 79: GPU has fallen off the bus``."""
    info = meaning(code)
    return f"Xid {code}: {info.text}" if info else f"Xid {code} (see NVIDIA's Xid catalogue)"


def severity(code: int) -> str:
    """``fatal`` | ``error`` | ``warning``; a code not in the table is an ``error`` (unknown is never calm)."""
    info = meaning(code)
    return info.severity if info else "error"
