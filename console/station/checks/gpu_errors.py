"""The ``gpu-errors`` check (issue 21): a GPU nvidia-smi cannot read — its error line in place of the
GPU's row ("Unable to determine the device handle for GPU...: Unknown Error", "GPU is lost", "GPU
requires reset", a field read as ``[Unknown Error]``) — fails, with nvidia-smi's words, the kernel
log's Xid lines when the log is readable, and the way out: reset, reboot, reseat.

Separate from the ``gpu-health`` check (throttling, ECC, PCIe link) on purpose: this one is "the
driver has lost the GPU", which no setting fixes. ``FIX`` is also the live diagnosis finding's remedy
(``console/ui/app.py`` feeds the station state's GPUs in error to the diagnoser).
"""

from __future__ import annotations

from console.config import Station
from console.probes import ParseError
from console.probes import kernel_log as kl
from console.probes.nvidia_smi import not_answering, parse_gpus
from console.remote import cmdlines as rc
from console.station.checks.context import CheckResult, CheckRun, evidence, join_parts
from console.vocabulary import CheckStatus

ID = "gpu-errors"
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
        return CheckResult(ID, st.name, CheckStatus.PASS, f"every GPU answers nvidia-smi ({len(gpus)})", ev)
    kcmd = rc.kernel_log_since(0)
    kres = await run.run(st.name, kcmd)
    xids = [e for e in kl.parse_kernel_log(kres.stdout) if e.kind == "xid"]
    kev = f"[{st.name}] $ {kcmd}\n" + ("\n".join(e.text for e in xids[-8:]) or "(no Xid line)")
    words = "; ".join(f"GPU {g.index}" + (f" ({g.bus_id})" if g.bus_id else "") + f": {g.error}" for g in bad)
    if xids:
        words += f"; kernel: Xid {xids[-1].xid} ({xids[-1].text[:120]})"
    return CheckResult(ID, st.name, CheckStatus.FAIL, words, join_parts(ev, kev),
                       FIX.replace("INDEX", ",".join(str(g.index) for g in bad)))
