"""Rung 6, live evidence of a hang: ``py-spy dump`` of every engine process on every station (host
py-spy, else the container's; otherwise how to get it), the frames compared across stations (every
rank in the same collective? one elsewhere? one gone?); the RDMA port counters and the NIC's RDMA
byte counters read twice a few seconds apart (is traffic flowing; are retransmits, out-of-sequence
packets, local ACK timeouts rising?); GPU busy with no memory traffic (a spinning collective); the
kernel log since the container started (mlx5 link down/up, Xid, NVRM, PCIe AER)."""

from __future__ import annotations

import asyncio
import time

from console.config import Station
from console.doctor import facts
from console.doctor.context import DoctorContext
from console.doctor.model import RungResult
from console.doctor.next_steps import next_step
from console.probes import ParseError, pyspy
from console.probes import activity as act
from console.probes import kernel_log as kl
from console.probes.docker import parse_time
from console.remote import cmdlines as rc
from console.station.checks import ToolMissing
from console.vocabulary import CheckStatus

ID = "hang"
PYSPY_NEXT = ("py-spy is on neither the station nor the container: `pip install py-spy` on the station (then "
              "`sudo py-spy dump --pid PID`), or in the image; a container needs `--cap-add SYS_PTRACE` for it.")


async def _sample(ctx: DoctorContext, st: Station, rails: list[facts.RailInfo], tag: str) -> dict:
    """One read of every rail's RDMA and NIC counters and the GPUs' activity: one command on the station
    (``cmdlines.in_one``: the tools one after the other, each part's output and exit status its own)."""
    out: dict = {"rdma": {}, "nic": {}, "gpu": None, "ev": []}
    counters = [(r, kind, cmd, parse) for r in rails
                for kind, cmd, parse in (("rdma", rc.rdma_statistic(r.device), act.parse_rdma_statistic),
                                         ("nic", rc.ethtool_stats(r.netdev), act.parse_ethtool_stats))]
    cmds = [cmd for _r, _k, cmd, _p in counters] + [rc.gpu_activity()]
    res = await ctx.run(st.name, rc.in_one(cmds), tag=tag)
    parts = rc.split_parts(res.stdout, len(cmds))

    def answer(cmd: str, part: rc.PartResult | None) -> str:
        """The part's output; ToolMissing (exit 127) as a command of its own raises it; ParseError when
        the part never finished (the command was cut before it)."""
        if part is None:
            raise ParseError(f"not read: the command ended before it (exit {res.exit_status})")
        if part.exit_status == 127:
            raise ToolMissing(f"{cmd.split()[0]} not found on {st.name}")
        return part.stdout

    for (r, kind, cmd, parse), part in zip(counters, parts, strict=False):
        try:
            text = answer(cmd, part)
            parsed = parse(text)
            out[kind][r.device] = (next(iter(parsed.values())) if kind == "rdma" and parsed else parsed)
            keep = [ln for ln in text.splitlines() if kind == "rdma" or "rdma_unicast" in ln]
            out["ev"].append(facts.ev(st.name, cmd, "\n".join(keep)))
        except (ParseError, ToolMissing, StopIteration) as exc:
            out["ev"].append(f"[{st.name}] $ {cmd}\n({exc})")
    try:
        text = answer(cmds[-1], parts[-1])
        out["gpu"] = act.parse_gpu_activity(text)
        out["ev"].append(facts.ev(st.name, cmds[-1], text))
    except (ParseError, ToolMissing):
        pass
    return out


async def _station(ctx: DoctorContext, st: Station) -> dict:
    c = await facts.container(ctx, st, fresh="hang:")  # live state: not what it was when the run began
    rails = list(await facts.rails(ctx, st))
    got: dict = {"c": c, "rails": rails, "dumps": [], "pyspy": None, "pyspy_ev": ""}
    if c.running:
        cmd = rc.pyspy_dump_engines(c.name)
        res = await ctx.run(st.name, cmd, timeout=max(60.0, ctx.config.command_timeout_s))
        text = res.stdout + res.stderr
        got["pyspy_ev"] = facts.ev(st.name, "py-spy dump (every engine process)", text[-6000:], res.exit_status)
        if "NO-PY-SPY" in text:
            got["pyspy"] = "missing"
        elif "NO-ENGINE-PROCESS" in text:
            got["pyspy"] = "no-process"
        else:
            try:
                got["dumps"] = pyspy.parse_pyspy(text)
            except ParseError:
                got["pyspy"] = "unreadable"
    since = parse_time(c.runtime.started_at or "") if c.runtime else None
    since = since or time.time() - 3600
    cmd = rc.kernel_log_since(since)
    res = await ctx.run(st.name, cmd)
    got["kernel"] = kl.parse_kernel_log(res.stdout, since=since)
    got["kernel_unreadable"] = kl.unreadable(res.stdout + res.stderr)
    got["kernel_ev"] = facts.ev(st.name, cmd, "\n".join(
        ln for ln in res.stdout.splitlines() if kl.parse_kernel_line(ln) is not None)[-4000:] or "(nothing relevant)")
    got["s1"] = await _sample(ctx, st, rails, "hang1:")
    return got


async def run(ctx: DoctorContext) -> list[RungResult]:
    stations = ctx.stations
    label = ",".join(s.name for s in stations)
    per, out = await ctx.per_station(ID, lambda s: _station(ctx, s))
    if not per:
        return out
    if not any(g["c"].runtime is not None for g in per.values()):
        return out + [RungResult(ID, label, CheckStatus.SKIP,
                                 "no engine container on any station: nothing to inspect")]
    interval = ctx.options.counter_interval_s
    ctx.progress(ID, f"counters: first sample taken; second in {interval:g} s")
    await asyncio.sleep(interval)
    second = await asyncio.gather(*(_sample(ctx, ctx.config.station(n), g["rails"], "hang2:") for n, g in per.items()))
    for (_n, g), s2 in zip(per.items(), second, strict=True):
        g["s2"] = s2

    # 1. where every engine process waits
    dumps = {n: g["dumps"] for n, g in per.items() if g["dumps"]}
    missing = {n: f"its container {g['c'].runtime.state} with code {g['c'].runtime.exit_code}"
               for n, g in per.items() if g["c"].runtime is not None and not g["c"].running}
    missing.update({n: f"no stack dump ({g['pyspy'] or 'py-spy printed none'})" for n, g in per.items()
                    if g["c"].running and not g["dumps"]})
    ev_py = tuple(g["pyspy_ev"] for g in per.values() if g["pyspy_ev"])
    for n, g in per.items():
        if g["pyspy"] == "missing":
            out.append(RungResult(ID, n, CheckStatus.WARN,
                                  f"{n}: no py-spy on the station or in the container", ev_py,
                                  PYSPY_NEXT))
    if dumps or missing:
        summ = pyspy.summarise(dumps, missing)
        status = {"same-collective": CheckStatus.FAIL, "one-elsewhere": CheckStatus.FAIL,
                  "rank-missing": CheckStatus.FAIL, "idle": CheckStatus.PASS, "mixed": CheckStatus.WARN,
                  "no-dumps": CheckStatus.SKIP}[summ.verdict]
        nxt = {"same-collective": "Every rank waits in the same collective: the collective itself does not complete "
                                  "(transport or NCCL). The counters below tell traffic from silence: retries rising "
                                  "name the network; silence with rungs 1-3 passing is a silent hang (software), "
                                  "concluded in this rung's last row.",
               "one-elsewhere": "The others wait for the rank that is elsewhere: look at what that rank does (its "
                                "stack and log).",
               "rank-missing": "One rank is gone (read its last log lines: watchdog, OOM, Xid) while the others still "
                               "wait for it; restart the whole service, not one station.",
               "mixed": "Ranks are in different places: take a second dump in a minute to see who moves."}.get(
            summ.verdict, "")
        kind = {"same-collective": "stuck-collective", "one-elsewhere": "out-of-step", "rank-missing": "rank-gone",
                "mixed": "unknown"}.get(summ.verdict)
        if kind:  # the same next step as h and hang-report give (one table)
            nxt = f"{nxt} Next: {next_step(kind).text}"
        out.append(RungResult(ID, label, status, f"stacks: {summ.text}", ev_py, nxt))  # type: ignore[arg-type]

    # 2. counters: traffic and retries
    silent: dict[str, bool] = {}  # station -> a collective waits with no traffic and no retries
    for n, g in per.items():
        ev_c = tuple(g["s1"]["ev"] + [f"(second read {interval:g} s later)"] + g["s2"]["ev"])
        rising: dict[str, int] = {}
        moved = 0
        for dev, a in g["s1"]["rdma"].items():
            b = g["s2"]["rdma"].get(dev, {})
            rising.update({f"{dev} {k}": v for k, v in act.growth(a, b, act.RETRY_COUNTERS).items()})
        for dev, a in g["s1"]["nic"].items():
            b = g["s2"]["nic"].get(dev, {})
            moved += sum(act.growth(a, b, act.TRAFFIC_COUNTERS).values())
        if not g["s1"]["rdma"] and not g["s1"]["nic"]:
            out.append(RungResult(ID, n, CheckStatus.SKIP, f"{n}: port counters not readable", ev_c))
            continue
        rate = f"{moved * 8 / interval / 1e9:.1f} Gb/s of RDMA traffic" if moved else "no RDMA traffic"
        if rising:
            grown = ", ".join(f"{k} +{v}" for k, v in sorted(rising.items()))
            out.append(RungResult(ID, n, CheckStatus.FAIL,
                                  f"{n}: {rate}; retry counters rising in {interval:g} s: {grown}",
                                  ev_c, "RoCE packets are lost or unanswered: local ACK timeouts mean the peer never "
                                  "acknowledges (wrong GID index, MTU, a port or cable); out-of-sequence / sequence "
                                  "errors mean drops on the link: reseat or replace the cable.", cause=True))
        else:
            waiting = g["c"].running and g["dumps"] and any(pyspy.wait_point(d).kind == "collective" for d in g["dumps"])
            silent[n] = bool(waiting and not moved)
            out.append(RungResult(ID, n, CheckStatus.WARN if waiting and not moved else CheckStatus.PASS,
                                  f"{n}: {rate}, no retry counter rising"
                                  + (" while a collective waits: a silent hang (software, not the network)"
                                     if waiting and not moved else ""), ev_c))
        spin = act.spinning([x for x in (g["s1"]["gpu"], g["s2"]["gpu"]) if x], ctx.profile.gpu.name)
        if spin:
            out.append(RungResult(ID, n, CheckStatus.WARN,
                                  f"{n}: GPU {', '.join(map(str, spin))} at >= 90 % with no memory "
                                  "traffic in both samples: a collective kernel spinning on a peer that never sends",
                                  ev_c))

    # 3. the kernel log since the container started
    for n, g in per.items():
        evs = g["kernel"]
        if g["kernel_unreadable"] and not evs:
            out.append(RungResult(ID, n, CheckStatus.SKIP,
                                  f"{n}: kernel log not readable ({g['kernel_unreadable']})",
                                  (g["kernel_ev"],), "Add the login user to the adm / systemd-journal group, or "
                                  "allow dmesg (kernel.dmesg_restrict=0)."))
            continue
        bad = [e for e in evs if e.severity == "error"]
        warn = [e for e in evs if e.severity == "warning"]
        flaps = [e for e in evs if e.kind in ("link-down", "link-up")]
        if bad:
            kinds = ", ".join(sorted({("Xid " + str(e.xid)) if e.kind == "xid" else e.kind for e in bad}))
            out.append(RungResult(ID, n, CheckStatus.FAIL,
                                  f"{n}: kernel log since the start: {kinds} ({len(evs)} events; "
                                  f"first: {bad[0].text[:140]})", (g["kernel_ev"],),
                                  "A link that went down breaks every queue pair on it (NCCL does not recover): "
                                  "fix the port/cable, then restart the service; an Xid names the GPU's fault "
                                  "(NVIDIA's Xid catalog; 79/119: the GPU fell off the bus / GSP timeout).",
                                  cause=True))
        elif warn or flaps:
            out.append(RungResult(ID, n, CheckStatus.WARN,
                                  f"{n}: kernel log: {len(evs)} events (e.g. {(warn or flaps)[0].text[:140]})",
                                  (g["kernel_ev"],), "Corrected PCIe errors are survivable; many of them point at a "
                                  "riser, slot or the NIC's PCIe link."))
        else:
            out.append(RungResult(ID, n, CheckStatus.PASS,
                                  f"{n}: kernel log clean since the container started "
                                  "(no mlx5 link change, Xid, NVRM or AER line)", (g["kernel_ev"],)))
    return out + _conclusion(ctx, out, dumps, silent, label)


SILENT_NEXT = ("The collective will not complete by itself. 1) Keep the evidence: `dgx-console bundle PATH` (these "
               "stacks and counters go with it). 2) Serve again: restart the whole service (R on the dashboard, or "
               "`dgx-console restart`), every station, not one. 3) If it comes back after hours of load: compare "
               "rung 4's NCCL version with the image's release notes and try a newer image; a debug relaunch (x) "
               "with NCCL_DEBUG=INFO shows the last collective's SeqNum on each rank.")


def _conclusion(ctx: DoctorContext, out: list[RungResult], dumps: dict, silent: dict[str, bool],
                label: str) -> list[RungResult]:
    """What the rung concludes when every rank waits in one collective and nothing on the wire or in the
    kernel explains it: a silent hang (software, not the network), named as the cause with a way on,
    instead of a warning per station and a next step that sends the operator back to the rungs that passed."""
    stacks = next((r for r in out if r.summary.startswith("stacks: ") and r.status == CheckStatus.FAIL), None)
    if stacks is None or "same collective" not in stacks.summary or not silent or not all(silent.values()):
        return []
    if any(r.status == CheckStatus.FAIL and r is not stacks for r in out):
        return []  # a retry counter or the kernel log names something: that is the cause
    network = [r for r in ctx.previous if r.id in ("links", "rdma", "nccl")]
    if any(r.status == CheckStatus.FAIL for r in network):
        return []  # an earlier rung failed: the network is still a suspect
    ran = sorted({r.id for r in network if r.status == CheckStatus.PASS},
                 key=("links", "rdma", "nccl").index)
    passed = f"; {', '.join(ran)} pass" if ran else "; run rungs 1-3 to rule the network out for certain"
    return [RungResult(ID, label, CheckStatus.FAIL,
                       f"a silent hang: software, not the network (every rank waits in the same collective, no "
                       f"RDMA traffic and no retry counter rising on {', '.join(sorted(silent))}, no kernel log "
                       f"error{passed})", stacks.evidence, SILENT_NEXT, cause=True)]
