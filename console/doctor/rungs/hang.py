"""Rung 6, live evidence of a hang, from the one capture ``h`` and ``hang-report`` take
(``evidence.collect``) and its one judgement (``verdict.judgement``): the verdict line first, then
the stacks of every engine process compared across stations (every rank in the same collective? one
elsewhere? one gone?), the RDMA port counters and the NIC's RDMA byte counters read twice (traffic
as a rate over the time measured between the reads; retransmits, out-of-sequence packets, local ACK
timeouts rising?), GPU busy with no memory traffic (a spinning collective), and the kernel log since
the container started (mlx5 link down/up, Xid, NVRM, PCIe AER)."""

from __future__ import annotations

import asyncio

from console.doctor import facts
from console.doctor.context import DoctorContext
from console.doctor.evidence import HangEvidence, StationEvidence, collect
from console.doctor.model import RungResult
from console.doctor.next_steps import next_step
from console.probes import activity as act
from console.probes import pyspy
from console.vocabulary import CheckStatus, ContainerState

ID = "hang"
PYSPY_NEXT = ("py-spy is on neither the station nor the container: `pip install py-spy` on the station (then "
              "`sudo py-spy dump --pid PID`), or in the image; a container needs `--cap-add SYS_PTRACE` for it.")


DEADLINE_S = 90.0  # the rung's capture ends by then, whatever a station's tools do (as hang-report's default)
HANG_KINDS = ("out-of-step", "rank-gone", "stuck-collective", "network", "kernel")
STACKS_NEXT = {
    "same-collective": "Every rank waits in the same collective: the collective itself does not complete (transport "
                       "or NCCL). The counters below tell traffic from silence: retries rising name the network; "
                       "silence with rungs 1-3 passing is a silent hang (software), concluded in this rung's last row.",
    "one-elsewhere": "The others wait for the rank that is elsewhere: look at what that rank does (its stack and log).",
    "rank-missing": "One rank is gone (read its last log lines: watchdog, OOM, Xid) while the others still wait for "
                    "it; restart the whole service, not one station.",
    "mixed": "Ranks are in different places: take a second dump in a minute to see who moves."}
STACKS_KIND = {"same-collective": "stuck-collective", "one-elsewhere": "out-of-step", "rank-missing": "rank-gone",
               "mixed": "unknown"}


async def run(ctx: DoctorContext) -> list[RungResult]:
    """The hang evidence read once by the shared capture (``evidence.collect``: every station at once,
    every tool its own line, one deadline) and judged once (``verdict.judgement``): the rows below say
    what ``h`` and ``hang-report`` say. The rows are built off the loop."""
    hev = await collect(ctx, ctx.options.counter_interval_s, DEADLINE_S, lambda text: ctx.progress(ID, text))
    return await asyncio.to_thread(rows, ctx, hev)


def rows(ctx: DoctorContext, hev: HangEvidence) -> list[RungResult]:
    """The rung's rows from the one capture and its judgement (pure)."""
    evs = hev.stations
    label = ",".join(evs)
    out = [RungResult(ID, n, CheckStatus.SKIP, f"{n}: {e.error}") for n, e in evs.items() if e.error]
    if not any(e.container.get("state") not in (None, ContainerState.ABSENT) for e in evs.values()):
        return out + [RungResult(ID, label, CheckStatus.SKIP, "no engine container on any station: nothing to inspect")]
    status = (CheckStatus.FAIL if hev.kind in HANG_KINDS else CheckStatus.PASS if hev.kind in ("idle", "moving")
              else CheckStatus.WARN)
    out.append(RungResult(ID, label, status, f"verdict: {hev.verdict}",
                          tuple(f"{k}: {v}" for k, v in hev.findings.items()), hev.next_step))
    out += _stacks(hev)
    silent = _counters(ctx, hev, out)
    out += _kernel(hev)
    return out + _conclusion(ctx, out, silent, label)


def _pyspy_ev(e: StationEvidence) -> str:
    text = e.raw.get("pyspy.txt", "")
    return facts.ev(e.name, "py-spy dump (every engine process)", text[-6000:]) if text else ""


def _stacks(hev: HangEvidence) -> list[RungResult]:
    """Where every engine process waits: the verdict's own comparison of the stacks, with the stations
    whose stack was not read said (a comparison of the others is not called every station's)."""
    evs = hev.stations
    out = []
    ev_py = tuple(x for x in (_pyspy_ev(e) for e in evs.values()) if x)
    for n, e in evs.items():
        if e.pyspy.get("status") == "missing":
            out.append(RungResult(ID, n, CheckStatus.WARN, f"{n}: no py-spy on the station or in the container",
                                  ev_py, PYSPY_NEXT))
        elif e.pyspy.get("status") == "permission-denied":
            out.append(RungResult(ID, n, CheckStatus.WARN, f"{n}: py-spy: permission denied", ev_py,
                                  next_step("no-ptrace").text))
    summ = hev.stacks
    unread = [n for n, e in evs.items() if e.running and not e.dumps]
    if summ is None or (summ.verdict == "no-dumps" and not unread):
        return out
    status = {"same-collective": CheckStatus.FAIL, "one-elsewhere": CheckStatus.FAIL,
              "rank-missing": CheckStatus.FAIL, "idle": CheckStatus.PASS, "mixed": CheckStatus.WARN,
              "no-dumps": CheckStatus.SKIP}[summ.verdict]
    text = summ.text
    if unread:
        why = "; ".join(f"{n}: {evs[n].pyspy.get('note') or evs[n].pyspy.get('status')}" for n in unread)
        text = f"{text} (no stack from {why})"
        if status in (CheckStatus.FAIL, CheckStatus.PASS) and summ.verdict != "rank-missing":
            status = CheckStatus.WARN  # what the others do is not every station's
    nxt = STACKS_NEXT.get(summ.verdict, "")
    if kind := STACKS_KIND.get(summ.verdict):  # the same next step as h and hang-report give (one table)
        nxt = f"{nxt} Next: {next_step(kind).text}"
    out.append(RungResult(ID, ",".join(evs), status, f"stacks: {text}", ev_py, nxt))
    return out


def _counters(ctx: DoctorContext, hev: HangEvidence, out: list[RungResult]) -> dict[str, bool]:
    """Traffic and retries per station over the time measured between its two reads; returns, per
    station read, whether a collective waits with no traffic and no retries."""
    silent: dict[str, bool] = {}
    for n, e in hev.stations.items():
        if e.error:
            continue
        c, ev_c = e.counters, _counter_ev(e, hev.interval_s)
        if c.get("status") != "ok":
            note = c.get("note") or "no RDMA or NIC counter could be read"
            out.append(RungResult(ID, n, CheckStatus.SKIP, f"{n}: port counters not readable ({note})", ev_c))
            continue
        rate, rising = _rate(c), c["retries_rising"]
        if rising:
            out.append(_retries_rising(n, rate, c["interval_s"], rising, ev_c))
        else:
            silent[n] = _silent(e, c["rdma_bytes_moved"])
            out.append(_no_retries(n, rate, silent[n], ev_c))
        if spin := _spinning(ctx, n, e, ev_c):
            out.append(spin)
    return silent


def _counter_ev(e: StationEvidence, interval_s: float) -> tuple[str, ...]:
    """Both reads' evidence, the time between them said in between."""
    s1, s2, c = e.counter_reads.first, e.counter_reads.second, e.counters
    return tuple((s1 or {}).get("ev", []) + [f"(second read {c.get('interval_s', interval_s):g} s later)"]
                 + (s2 or {}).get("ev", []))


def _rate(c: dict) -> str:
    """The RDMA traffic over the measured time (its rate unknown when no time was measured)."""
    secs, moved = c["interval_s"], c["rdma_bytes_moved"]
    if not moved:
        return "no RDMA traffic"
    return f"{moved * 8 / secs / 1e9:.1f} Gb/s of RDMA traffic" if secs > 0 else "RDMA traffic (rate unknown)"


def _retries_rising(n: str, rate: str, secs: float, rising: dict[str, int], ev_c: tuple[str, ...]) -> RungResult:
    """Retry counters rising: the network path is the cause."""
    grown = ", ".join(f"{k} +{v}" for k, v in sorted(rising.items()))
    return RungResult(ID, n, CheckStatus.FAIL, f"{n}: {rate}; retry counters rising in {secs:g} s: {grown}",
                      ev_c, "RoCE packets are lost or unanswered: local ACK timeouts mean the peer never "
                      "acknowledges (wrong GID index, MTU, a port or cable); out-of-sequence / sequence "
                      "errors mean drops on the link: reseat or replace the cable.", cause=True)


def _silent(e: StationEvidence, moved: int) -> bool:
    """A collective waits on a running engine with no RDMA traffic: a silent hang, if no retry rises."""
    waiting = e.running and any(pyspy.wait_point(d).kind == "collective" for d in e.dumps)
    return bool(waiting and not moved)


def _no_retries(n: str, rate: str, silent: bool, ev_c: tuple[str, ...]) -> RungResult:
    """No retry counter rising: traffic passes, or (silent) a collective waits for nothing on the wire."""
    return RungResult(ID, n, CheckStatus.WARN if silent else CheckStatus.PASS,
                      f"{n}: {rate}, no retry counter rising"
                      + (" while a collective waits: a silent hang (software, not the network)" if silent else ""),
                      ev_c)


def _spinning(ctx: DoctorContext, n: str, e: StationEvidence, ev_c: tuple[str, ...]) -> RungResult | None:
    """GPUs busy with no memory traffic in both samples: a collective kernel spinning on a silent peer."""
    reads = (e.counter_reads.first, e.counter_reads.second)
    spin = act.spinning([x["gpu"] for x in reads if x and x.get("gpu")], ctx.profile.gpu.name)
    if not spin:
        return None
    return RungResult(ID, n, CheckStatus.WARN,
                      f"{n}: GPU {', '.join(map(str, spin))} at >= 90 % with no memory "
                      "traffic in both samples: a collective kernel spinning on a peer that never sends", ev_c)


def _kernel(hev: HangEvidence) -> list[RungResult]:
    """The kernel log since the container started, per station: "clean" only of a log that was read."""
    out = []
    for n, e in hev.stations.items():
        if e.error:
            continue
        k = e.kernel
        evs = k.get("events", [])
        ev_k = (facts.ev(n, "kernel log since the container started",
                         "\n".join(x["text"] for x in evs)[-4000:] or "(nothing relevant)"),)
        if k.get("status") == "unreadable":
            out.append(RungResult(ID, n, CheckStatus.SKIP, f"{n}: kernel log not readable ({k.get('note')})", ev_k,
                                  "Add the login user to the adm / systemd-journal group, or allow dmesg "
                                  "(kernel.dmesg_restrict=0)."))
            continue
        if k.get("status") != "ok":
            out.append(RungResult(ID, n, CheckStatus.SKIP, f"{n}: kernel log not read ({k.get('note') or 'no answer'})",
                                  ev_k))
            continue
        bad = [x for x in evs if x["severity"] == "error"]
        warn = [x for x in evs if x["severity"] == "warning"]
        flaps = [x for x in evs if x["kind"] in ("link-down", "link-up")]
        if bad:
            kinds = ", ".join(sorted({f"Xid {x['xid']}" if x["kind"] == "xid" else x["kind"] for x in bad}))
            out.append(RungResult(ID, n, CheckStatus.FAIL,
                                  f"{n}: kernel log since the start: {kinds} ({len(evs)} events; "
                                  f"first: {bad[0]['text'][:140]})", ev_k,
                                  "A link that went down breaks every queue pair on it (NCCL does not recover): "
                                  "fix the port/cable, then restart the service; an Xid names the GPU's fault "
                                  "(NVIDIA's Xid catalog; 79/119: the GPU fell off the bus / GSP timeout).",
                                  cause=True))
        elif warn or flaps:
            out.append(RungResult(ID, n, CheckStatus.WARN,
                                  f"{n}: kernel log: {len(evs)} events (e.g. {(warn or flaps)[0]['text'][:140]})",
                                  ev_k, "Corrected PCIe errors are survivable; many of them point at a "
                                  "riser, slot or the NIC's PCIe link."))
        else:
            out.append(RungResult(ID, n, CheckStatus.PASS,
                                  f"{n}: kernel log clean since the container started "
                                  "(no mlx5 link change, Xid, NVRM or AER line)", ev_k))
    return out


SILENT_NEXT = ("The collective will not complete by itself. 1) Keep the evidence: `dgx-console bundle PATH` (these "
               "stacks and counters go with it). 2) Serve again: restart the whole service (R on the dashboard, or "
               "`dgx-console restart`), every station, not one. 3) If it comes back after hours of load: compare "
               "rung 4's NCCL version with the image's release notes and try a newer image; a debug relaunch (x) "
               "with NCCL_DEBUG=INFO shows the last collective's SeqNum on each rank.")


def _conclusion(ctx: DoctorContext, out: list[RungResult], silent: dict[str, bool], label: str) -> list[RungResult]:
    """What the rung concludes when every rank waits in one collective and nothing on the wire or in the
    kernel explains it: a silent hang (software, not the network), named as the cause with a way on,
    instead of a warning per station and a next step that sends the operator back to the rungs that passed."""
    stacks = next((r for r in out if r.summary.startswith("stacks: ") and r.status == CheckStatus.FAIL), None)
    if stacks is None or "same collective" not in stacks.summary or not silent or not all(silent.values()):
        return []
    if any(r.status == CheckStatus.FAIL and r is not stacks and not r.summary.startswith("verdict: ") for r in out):
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
