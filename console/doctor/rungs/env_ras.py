"""The env rung's cross-rank comparison by NCCL itself: on NCCL 2.31+ the head's RAS
service compares GPU model and count, CUDA driver, volatile ECC, NVLink and every ``NCCL_*`` variable
across all ranks (``ncclras -D``); below 2.31 the rung keeps its own diff of each container's environment.
Each result says which one it used."""

from __future__ import annotations

from console.doctor import facts
from console.doctor.context import DoctorContext
from console.doctor.model import RungResult
from console.probes import nccl_diag as nd
from console.remote import cmdlines as rc
from console.remote.transport import TransportError
from console.vocabulary import CheckStatus

ID = "env"
USED_RAS = "ncclras -D (NCCL's RAS diagnostics)"
# What to do when a RAS check reports a condition ([INFO]), per check; (status, fix).
RAS_FIX = {
    "NCCL environment": (CheckStatus.FAIL, "Use the same NCCL_* on every station (launch script / config overrides): "
                                           "every rank of a communicator must agree."),
    "CUDA driver version": (CheckStatus.FAIL, "Install the same NVIDIA driver on every station."),
    "GPU inventory": (CheckStatus.FAIL, "Serve from the same GPU model and count on every station (station.gpu)."),
    "ECC": (CheckStatus.WARN, "A GPU reports uncorrected ECC errors: `nvidia-smi -q -d ECC` on it; reset or replace it."),
    "NVLink": (CheckStatus.WARN, "An NVLink is not active: `nvidia-smi nvlink -s`; power-cycle or reseat."),
}


def why_not(versions: dict[str, str | None]) -> str | None:
    """Why ncclras -D cannot be asked (a version below 2.31 or unknown), or None when it can."""
    for n, v in versions.items():
        if not v:
            return f"the NCCL version of {n} is not in its log"
        if not nd.has_diagnostics(v):
            return f"NCCL {v} on {n}: ncclras -D needs {nd.DIAG_MIN_VERSION.rsplit('.', 1)[0]}+"
    return None if versions else "no station answered"


async def ras_report(ctx: DoctorContext, fs: dict[str, dict], versions: dict[str, str | None]
                     ) -> tuple[nd.DiagReport | None, str]:
    """(the RAS report, its evidence), or (None, why the rung uses its own diff)."""
    why = why_not(versions)
    if why is not None:
        return None, why
    st = next((s for s in ctx.stations if s.name in fs and fs[s.name]["c"].running), None)
    if st is None:
        return None, "no container runs: the RAS service lives in the NCCL processes"
    cmd = rc.ncclras_diag(fs[st.name]["c"].name)
    try:
        res = await ctx.run(st.name, cmd, timeout=max(30.0, ctx.config.command_timeout_s))
    except TransportError as exc:
        return None, f"ncclras -D on {st.name} failed: {exc}"
    text = res.stdout + res.stderr
    evidence = facts.ev(st.name, cmd, text, res.exit_status)
    if nd.busy(text):
        return None, f"ncclras -D on {st.name}: a diagnostics request already runs (try again)"
    report = next((r for r in nd.parse_diag(text.splitlines()) if r.name == "RAS Diagnostics"), None)
    if report is None:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "no output")
        return None, f"ncclras -D on {st.name} gave no report ({first[:120]})"
    return report, evidence


def ras_results(label: str, report: nd.DiagReport, evidence: str) -> list[RungResult]:
    """The rung's results from a RAS report: one per check that reports a condition, one pass for the rest."""
    out: list[RungResult] = []
    for check in report.checks():
        lines = [r for r in report.results if r.check == check]
        if all(r.ok for r in lines):
            continue
        status, fix = RAS_FIX.get(check, (CheckStatus.WARN, "Read NCCL's report in the evidence."))
        bad = [r for r in lines if not r.ok]
        out.append(RungResult(ID, label, status, f"{USED_RAS}: {check}: {bad[0].text}",
                              (evidence, "\n".join(f"[INFO] {check}: {r.text}" for r in bad)), fix,
                              cause=status == CheckStatus.FAIL))
    ok = [c for c in report.checks() if all(r.ok for r in report.results if r.check == c)]
    if ok:
        out.append(RungResult(ID, label, CheckStatus.PASS,
                              f"{USED_RAS}: {', '.join(ok)} consistent across ranks"
                              + (f" ({report.completed})" if report.completed else ""), (evidence,)))
    return out
