"""The ``gpu-errors`` check: a GPU nvidia-smi cannot read — its error line in place of the
GPU's row ("Unable to determine the device handle for GPU...: Unknown Error", "GPU is lost", "GPU
requires reset", a field read as ``[Unknown Error]``) — fails, with nvidia-smi's words, the kernel
log's Xid lines when the log is readable, and the way out: reset, reboot, reseat.

Separate from the ``gpu-health`` check (throttling, ECC, PCIe link) on purpose: this one is "the
driver has lost the GPU", which no setting fixes. ``FIX`` is also the live diagnosis finding's remedy
(``console/ui/app.py`` feeds the station state's GPUs in error to the diagnoser).
"""

from __future__ import annotations

import time

from console.catalogue.xid import describe as xid_describe
from console.catalogue.xid import meaning as xid_meaning
from console.catalogue.xid import severity as xid_severity
from console.config import Station
from console.probes import ParseError
from console.probes import kernel_log as kl
from console.probes.docker import parse_inspect, parse_time
from console.probes.nvidia_smi import not_answering, parse_gpus
from console.remote import cmdlines as rc
from console.station.checks.context import CheckResult, CheckRun, evidence, join_parts
from console.vocabulary import CheckStatus

ID = "gpu-errors"
RECENT_S = 3600.0  # the Xids the pane shows: this run's, read from at most this far back (health_streams)
FIX = ("Stop the service, then reset the GPU with nothing on it: `sudo nvidia-smi -r -i INDEX`. If the reset "
       "fails or nvidia-smi says the GPU is lost, reboot the station. If it drops out again (Xid 79: fallen off "
       "the bus), reseat the GPU and its power cables or move it to another slot, and call the vendor.")


async def check_gpu_errors(run: CheckRun, st: Station) -> CheckResult:
    cmd = rc.gpu_query()
    res = await run.run(st.name, cmd)
    ev = evidence(cmd, res)
    if res.exit_status == rc.KILLED_STATUS:
        return CheckResult(ID, st.name, CheckStatus.FAIL, not_answering(rc.TOOL_LIMIT_S), ev, FIX)
    try:
        gpus = parse_gpus(res.stdout + ("\n" + res.stderr if not res.ok else ""))
    except ParseError as exc:
        return CheckResult(ID, st.name, CheckStatus.FAIL, f"no GPU readable: {exc}", ev,
                           "nvidia-smi itself fails: a driver/library mismatch after an update needs a reboot; "
                           "otherwise reinstall the driver. " + FIX)
    bad = [g for g in gpus if g.error is not None]
    if not bad:
        return await _recent_xids(run, st, len(gpus), ev)
    kcmd = rc.kernel_log_since(0)
    kres = await run.run(st.name, kcmd)
    xids = [e for e in kl.parse_kernel_log(kres.stdout) if e.kind == "xid"]
    kev = f"[{st.name}] $ {kcmd}\n" + ("\n".join(e.text for e in xids[-8:]) or "(no Xid line)")
    words = "; ".join(f"GPU {g.index}" + (f" ({g.bus_id})" if g.bus_id else "") + f": {g.error}" for g in bad)
    if xids:
        words += f"; kernel: Xid {xids[-1].xid} ({xids[-1].text[:120]})"
    return CheckResult(ID, st.name, CheckStatus.FAIL, words, join_parts(ev, kev),
                       FIX.replace("INDEX", ",".join(str(g.index) for g in bad)))


async def _recent_xids(run: CheckRun, st: Station, count: int, ev: str) -> CheckResult:
    """Every GPU answers; the Xids of this run (since the container started, at most ``RECENT_S`` back,
    as the pane's health box counts them) still fail or warn: the pane and the check say the same."""
    since = await _run_started(run, st)
    kcmd = rc.kernel_log_since(since)
    kres = await run.run(st.name, kcmd)
    if kl.unreadable(kres.stdout):
        return CheckResult(ID, st.name, CheckStatus.PASS,
                           f"every GPU answers nvidia-smi ({count}); the kernel log is not readable here, so its "
                           "Xids are not read", ev)
    xids = _xids_since(kl.parse_kernel_log(kres.stdout), since)
    if not xids:
        return CheckResult(ID, st.name, CheckStatus.PASS,
                           f"every GPU answers nvidia-smi ({count}); no Xid in the kernel log this run", ev)
    return _xids_result(st, ev, kcmd, xids)


async def _run_started(run: CheckRun, st: Station) -> float:
    """Where this run's kernel log begins: ``RECENT_S`` ago, or the container's start (less a second)
    when that is later and docker says it."""
    since = time.time() - RECENT_S
    with_container = st.container
    if with_container:
        ires = await run.run(st.name, rc.docker_inspect(with_container))
        info = parse_inspect(with_container, ires.stdout, ires.exit_status)
        t0 = parse_time(info.started_at) if info.started_at else None
        if t0 is not None:
            since = max(since, t0 - 1.0)
    return since


def _xids_since(events: list[kl.KernelEvent], since: float) -> list[kl.KernelEvent]:
    """The Xid events with a code, at ``since`` or later (an event without a time is kept)."""
    return [e for e in events if e.kind == "xid" and e.xid is not None and (e.time is None or e.time >= since)]


def _xids_result(st: Station, ev: str, kcmd: str, xids: list[kl.KernelEvent]) -> CheckResult:
    """Every code logged, the worst (the latest of the most severe) named with its time, device and
    the catalogue's action: an error or fatal one fails, a warning warns."""
    worst = max(xids, key=lambda e: (("warning", "error", "fatal").index(_sev(e)), e.time or 0.0))
    level = CheckStatus.FAIL if _sev(worst) in ("fatal", "error") else CheckStatus.WARN
    when = time.strftime("%H:%M:%S", time.localtime(worst.time)) if worst.time else "?"
    codes = ", ".join(dict.fromkeys(f"Xid {e.xid}" for e in xids))
    info = xid_meaning(worst.xid or 0)
    kev = f"[{st.name}] $ {kcmd}\n" + "\n".join(e.text for e in xids[-8:])
    return CheckResult(ID, st.name, level,
                       f"every GPU answers nvidia-smi now, but the kernel logged {codes} this run; worst: "
                       f"{xid_describe(worst.xid or 0)} at {when}" + (f" ({worst.device})" if worst.device else ""),
                       join_parts(ev, kev), (info.action if info else "") or FIX)


def _sev(e: kl.KernelEvent) -> str:
    s = xid_severity(e.xid or 0)
    return s if s in ("warning", "error", "fatal") else "error"
