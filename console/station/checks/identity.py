"""``pair-identity``: the two stations of a pair are two machines. Two names (or addresses) for one
box pass every link test through loopback and prove nothing about the cable, and a launch on
"both" starts two ranks on one GPU; so the pair is refused when the stations share their
``/etc/machine-id``, a GPU UUID, or the SSH host key they offered, or when the head's neighbour
table resolves the worker's rail address to the head's own rail MAC. A mark that could not be read
is said as such and decides nothing."""

from __future__ import annotations

from console.config import Station
from console.probes import ParseError
from console.probes import identity as idp
from console.remote import cmdlines as rc
from console.station.checks.context import CheckResult, CheckRun, evidence, join_parts
from console.tasks import gather_owned
from console.vocabulary import CheckStatus


async def _identity(run: CheckRun, s: Station) -> tuple[idp.Identity, str]:
    cmds = [rc.machine_id_read(), rc.gpu_list()] + ([rc.rail_mac_read(s.rail_netdev)] if s.rail_netdev else [])
    res = await gather_owned(*(run.run(s.name, c) for c in cmds))
    mid = idp.machine_id(res[0].stdout) if res[0].ok else None
    uuids = idp.gpu_uuids(res[1].stdout) if res[1].ok else frozenset()
    mac = idp.mac_address(res[2].stdout) if len(res) > 2 and res[2].ok else None
    key = getattr(run.transports.get(s.name), "host_key_id", None)
    ev = join_parts(*(evidence(c, r, s.name) for c, r in zip(cmds, res, strict=True)),
                    f"[{s.name}] SSH host key offered: {key if key is not None else 'not read (local or not SSH)'}")
    return idp.Identity(s.name, mid, str(key) if key is not None else None, uuids, mac), ev


async def check_pair_identity(run: CheckRun, head: Station, worker: Station) -> CheckResult:
    label = f"{head.name}<->{worker.name}"
    (a, ev_a), (b, ev_b) = await gather_owned(_identity(run, head), _identity(run, worker))
    seen: str | None = None
    ev_n = ""
    if head.rail_netdev and worker.rail_ip:
        cmd = rc.neigh_json(worker.rail_ip, head.rail_netdev)
        res = await run.run(head.name, cmd)
        ev_n = evidence(cmd, res, head.name)
        if res.ok:
            try:
                seen = idp.neighbour_mac(idp.parse_neigh_json(res.stdout), worker.rail_ip, head.rail_netdev)
            except ParseError as exc:
                ev_n += f"\n(not read: {exc})"
    ev = join_parts(ev_a, ev_b, ev_n)
    why = idp.same_machine(a, b, seen)
    if why:
        return CheckResult("pair-identity", label, CheckStatus.FAIL,
                           f"{head.name} and {worker.name} are the same machine: " + "; ".join(why), ev,
                           f"Point [[stations]] {worker.name} at the second machine (its host, user and port), "
                           "not at another name or address of the first; every check between one machine and "
                           "itself passes through loopback and proves nothing about the link.")
    unread = [what for what, gone in (("machine-id", not (a.machine_id and b.machine_id)),
                                      ("GPU UUIDs", not (a.gpu_uuids and b.gpu_uuids)),
                                      ("host keys", not (a.host_key and b.host_key))) if gone]
    if len(unread) == 3:
        return CheckResult("pair-identity", label, CheckStatus.WARN,
                           "cannot tell whether these are two machines: no machine-id, GPU UUID or host key read",
                           ev, "Check that /etc/machine-id and nvidia-smi are readable on both stations.")
    said = ", ".join(x for x in ("machine-id", "GPU UUIDs", "host keys") if x not in unread)
    return CheckResult("pair-identity", label, CheckStatus.PASS,
                       f"two machines: {said} differ" + (f" ({', '.join(unread)} not read)" if unread else ""), ev)
