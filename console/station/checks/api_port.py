"""``api-port`` (per station): nothing but this service's container listens on the API port. Another
team's server already on :8000 makes a launch fail late and obscurely (the engine cannot bind), or worse,
the console's health and chat talk to that server. On the head that refuses the launch (a failure, with
the holder named: pid and process, or "a process this user cannot see" where ss hides it); on a worker,
which serves no API, it is a warning.

ss names a listener's process only to its owner and root: a listener ss hides while this service's own
container runs is taken as its engine (the summary says that is how it was judged); one it hides while the
container is down is someone else's."""

from __future__ import annotations

from console.config import Station, masker
from console.probes import ParseError
from console.probes import processes as pp
from console.probes.docker import parse_inspect
from console.probes.listeners import Listener, parse_listeners
from console.remote import cmdlines as rc
from console.sanitize import one_line
from console.station.checks.context import CheckResult, CheckRun, evidence, join_parts
from console.vocabulary import CheckStatus

ID = "api-port"
HIDDEN = "a process this user cannot see"


async def check_api_port(run: CheckRun, st: Station) -> CheckResult:
    port = run.profile.api_port
    cmd = rc.port_listeners(port)
    res = await run.run(st.name, cmd)
    ev = evidence(cmd, res, st.name)
    if not res.ok:
        return CheckResult(ID, st.name, CheckStatus.SKIP,
                           f"what listens on port {port} could not be read (ss exit {res.exit_status})", ev)
    try:
        found = parse_listeners(res.stdout, port)
    except ParseError as exc:
        return CheckResult(ID, st.name, CheckStatus.SKIP, one_line(str(exc), 200), ev)
    if not found:
        return CheckResult(ID, st.name, CheckStatus.PASS, f"nothing listens on port {port}", ev)
    foreign, ev = await _foreign(run, st, found, ev)
    if any(lst.hidden for lst in found) and not foreign:
        ins = rc.docker_inspect(st.container)
        r3 = await run.run(st.name, ins)
        ev = join_parts(ev, evidence(ins, r3, st.name))
        try:
            running = parse_inspect(st.container, r3.stdout, r3.exit_status).state == "running"
        except ParseError:
            running = False
        if running:
            return CheckResult(ID, st.name, CheckStatus.PASS,
                               f"port {port} is held while {st.container} runs (ss shows this user no process "
                               f"for it: taken as {st.container}'s engine)", ev)
        foreign.append(HIDDEN)
    elif any(lst.hidden for lst in found):
        foreign.append(HIDDEN)
    if not foreign:
        return CheckResult(ID, st.name, CheckStatus.PASS, f"port {port} is this service's container ({st.container})",
                           ev)
    what = "; ".join(dict.fromkeys(foreign))
    status = CheckStatus.FAIL if st.is_head else CheckStatus.WARN
    role = "" if st.is_head else " (a worker serves no API: shown, not fatal)"
    return CheckResult(ID, st.name, status,
                       f"port {port} is held by {what}, not this service's container {st.container}{role}", ev,
                       f"Find whose it is (as root, `ss -ltnp 'sport = :{port}'` names any holder) and have it "
                       f"stopped, or serve on another port (the profile's api_port): the engine cannot bind port "
                       f"{port}, and the console's health and chat would talk to that server.")


async def _foreign(run: CheckRun, st: Station, found: list[Listener], ev: str) -> tuple[list[str], str]:
    """The listeners ss names that are not this service's container, each as ``pid N (name, where, ...)``."""
    holders = {h.pid: h.name for lst in found for h in lst.holders}
    if not holders:
        return [], ev
    det = rc.process_details(sorted(holders))
    r2 = await run.run(st.name, det)
    ev = join_parts(ev, evidence(det, r2, st.name))
    procs, _, rest = r2.stdout.partition(rc.CONTAINERS_MARK)
    rows, containers = pp.parse_ps(procs), pp.parse_containers(rest)
    mask = masker(run.config)
    out: list[str] = []
    for pid, name in sorted(holders.items()):
        row = rows.get(pid)
        comm = one_line(name, 32)
        if row is None:
            out.append(f"pid {pid} ({comm}; gone since, or not visible to {one_line(st.user or 'this user', 40)})")
            continue
        container = pp.container_of(row.container_id, containers)
        if container == st.container:
            continue
        where = (f"container {one_line(container, 64)}" if container else
                 f"container {row.container_id[:12]} (not listed by docker ps)" if row.container_id else "on the host")
        out.append(f"pid {pid} ({comm}, {where}, {one_line(row.user, 32)}: {one_line(mask(row.command), 80)})")
    return out, ev
