"""Kernel log lines that matter for a stalled collective: mlx5 link flaps, NVIDIA Xid / NVRM errors,
PCIe AER reports.

Accepts ``journalctl -k`` (``short``: ``Sep 19 16:18:04 host kernel: [68185.875052] msg``; ``short-iso``:
``2024-09-12T14:24:29+0000 host kernel: msg``), ``dmesg`` (``[68185.875052] msg``), ``dmesg -T``
(``[Fri Aug 29 20:09:52 2025] msg``) and ``dmesg --time-format iso``
(``2024-09-12T14:24:29,123456+00:00 msg``). Lines that match none of the patterns are ignored.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

KINDS = ("link-down", "link-up", "xid", "nvrm", "aer", "mlx5",
         "oom-kill", "memreg")  # the OOM killer, RDMA memory registration (the diagnosis reads them)


@dataclass(frozen=True)
class KernelEvent:
    kind: str  # one of KINDS
    severity: str  # error | warning | info
    text: str  # the message without the time/host prefix
    time: float | None = None  # Unix seconds when the line says (ISO forms, journalctl short with a year)
    device: str | None = None  # PCI address or netdev
    xid: int | None = None


_ISO = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[.,](\d+))?([+-]\d\d:?\d\d|Z)?\s+(.*)$")
_SHORT = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d\s+(.*)$")
_BRACKET = re.compile(r"^\[\s*(?:\d+\.\d+|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]\s*(.*)$")
_HOST_KERNEL = re.compile(r"^\S+ kernel: (?:\[\s*\d+\.\d+\]\s*)?(.*)$")

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]+)\): (\d+)")
_LINK = re.compile(r"mlx5_core (\S+)(?: (\S+?))?: Link (down|up)", re.I)
_AER = re.compile(r"(?:AER: |PCIe Bus Error: )(.*)")
_OOM = re.compile(r"[Oo]ut of memory: Killed process \d|oom-kill:constraint=")
_MEMREG = re.compile(r"reg_mr\w* failed|Failed to register mr|reg mr failed|CREATE_MKEY\(0x\w+\) op_mod\(0x\w+\) failed")
# Xids that mean the GPU is gone or its state is lost (NVIDIA's Xid catalog): the rank is dead.
FATAL_XIDS = {48, 61, 62, 63, 64, 74, 79, 94, 95, 119, 120, 140, 144, 145, 149}


def _message(line: str) -> tuple[str, float | None]:
    line = line.rstrip("\r\n")
    t = None
    if m := _ISO.match(line):
        frac = float("0." + m.group(2)) if m.group(2) else 0.0
        tz = m.group(3) or "+00:00"
        if tz == "Z":
            tz = "+00:00"
        elif ":" not in tz:
            tz = tz[:3] + ":" + tz[3:]
        try:
            t = dt.datetime.fromisoformat(m.group(1) + tz).timestamp() + frac
        except ValueError:
            t = None
        line = m.group(4)
    elif m := _SHORT.match(line):
        line = m.group(1)
    if m := _HOST_KERNEL.match(line):
        line = m.group(1)
    if m := _BRACKET.match(line):
        line = m.group(1)
    return line.strip(), t


def parse_kernel_line(line: str) -> KernelEvent | None:
    msg, t = _message(line)
    if m := _XID.search(msg):
        xid = int(m.group(2))
        return KernelEvent("xid", "error" if xid in FATAL_XIDS else "warning", msg, t, m.group(1), xid)
    if m := _LINK.search(msg):
        kind = "link-down" if m.group(3).lower() == "down" else "link-up"
        return KernelEvent(kind, "error" if kind == "link-down" else "info", msg, t, m.group(2) or m.group(1))
    if "NVRM:" in msg:
        return KernelEvent("nvrm", "warning", msg, t)
    if m := _AER.search(msg):
        sev = "warning" if re.search(r"[Cc]orrect", msg) else "error"
        dev = re.match(r"(\S+ [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d)", msg)
        return KernelEvent("aer", sev, msg, t, dev.group(1).split()[-1] if dev else None)
    # The OOM killer and failed RDMA memory registration (warnings here: the hang rung's
    # verdict stays the link's and the GPU's; the diagnosis makes them findings of their own)
    if _OOM.search(msg):
        return KernelEvent("oom-kill", "warning", msg, t)
    if _MEMREG.search(msg):
        return KernelEvent("memreg", "warning", msg, t)
    if "mlx5_core" in msg and re.search(r"error|fail|timeout|health|fatal|syndrome", msg, re.I):
        return KernelEvent("mlx5", "warning", msg, t)
    return None


def parse_kernel_log(text: str, since: float | None = None) -> list[KernelEvent]:
    """The events of ``text``, in order; with ``since`` (Unix seconds) drop the dated ones before it."""
    out = []
    for line in text.splitlines():
        ev = parse_kernel_line(line)
        if ev is None or (since is not None and ev.time is not None and ev.time < since):
            continue
        out.append(ev)
    return out


def unreadable(text: str) -> str | None:
    """Why the kernel log could not be read (journal permissions, dmesg_restrict), or None."""
    for pat in (r"No journal files were (?:opened|found).*", r"Insufficient permissions.*",
                r"dmesg: read kernel buffer failed: .*", r"Operation not permitted"):
        if m := re.search(pat, text):
            return m.group(0).strip()
    return None
