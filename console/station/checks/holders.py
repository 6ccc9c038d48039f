"""``gpu-holders`` (per station): who holds the GPUs besides this service's container — another
container (someone's job), or a process on the host (a leftover). Shown as a warning with the pid,
the container or "on the host", the memory and the command (masked, one line), never a failure:
the station is still usable and whether to end it is the operator's call (``P`` lists and ends
processes). A GPU process list that cannot be read is a skip with the reason."""

from __future__ import annotations

from console.config import Station, masker
from console.probes import processes as pp
from console.probes.nvidia_smi import parse_compute_apps
from console.remote import cmdlines as rc
from console.sanitize import one_line
from console.station.checks.context import CheckResult, CheckRun, evidence, join_parts
from console.vocabulary import CheckStatus

ID = "gpu-holders"


async def check_gpu_holders(run: CheckRun, st: Station) -> CheckResult:
    cmd = rc.compute_apps_query()
    res = await run.run(st.name, cmd)
    ev = evidence(cmd, res, st.name)
    if not res.ok:
        return CheckResult(ID, st.name, CheckStatus.SKIP, "the GPU processes could not be read (nvidia-smi)", ev)
    apps = parse_compute_apps(res.stdout)
    if not apps:
        return CheckResult(ID, st.name, CheckStatus.PASS, "no process holds a GPU", ev)
    det = rc.process_details([a.pid for a in apps])
    r2 = await run.run(st.name, det)
    ev = join_parts(ev, evidence(det, r2, st.name))
    procs, _, rest = r2.stdout.partition(rc.CONTAINERS_MARK)
    rows, containers = pp.parse_ps(procs), pp.parse_containers(rest)
    mask = masker(run.config)
    foreign: list[str] = []
    for a in apps:
        row = rows.get(a.pid)
        if row is None:
            foreign.append(f"pid {a.pid} (gone, or not visible to {one_line(st.user or 'this user', 40)})")
            continue
        name = pp.container_of(row.container_id, containers)
        if name == st.container:
            continue
        where = (f"container {name}" if name else
                 f"container {row.container_id[:12]} (not listed by docker ps)" if row.container_id else "on the host")
        mem = f", {a.used_memory_mib} MiB" if a.used_memory_mib is not None else ""
        foreign.append(f"pid {a.pid} ({where}{mem}, {row.user}: {one_line(mask(row.command), 80)})")
    if not foreign:
        return CheckResult(ID, st.name, CheckStatus.PASS,
                           f"every GPU process is this service's container ({st.container})", ev)
    return CheckResult(ID, st.name, CheckStatus.WARN,
                       f"held by something else than {st.container}: " + "; ".join(foreign), ev,
                       "Ask whose it is before ending it; `P` on the dashboard shows who holds the GPU and ends "
                       "a process after a confirmation. The launch's fit estimate counts this memory as taken.")
