"""The GPU and fabric health checks, the same facts as the dashboard's health stream read once:

- ``gpu-health``: every GPU's flags (console/probes/gpu_health.py: throttling, PCIe trained down, ECC,
  a pending remap, a power cap). GB10's ``[N/A]`` fields are missing values: no flag. Evidence: the
  query and its rows; fix: the flag's own.
- ``rail-live``: the rail's link state, speed, MTU, carrier changes and RoCE counters, read twice a
  second apart with the rails loop's own read (``cmdlines.rails_once``) and folded by the same
  ``RailTracker`` the dashboard's state keeps: down, flapping or errors rising now.
"""

from __future__ import annotations

import asyncio
import time

from console.config import Station
from console.probes import gpu_health as gh
from console.probes import kernel_log as kl
from console.probes.rails import parse_round
from console.remote import cmdlines as rc
from console.station.checks.context import COUNTER_INTERVAL_S, CheckResult, CheckRun, evidence, join_parts
from console.station.rails_live import FLAP_WINDOW_S, RailTracker
from console.vocabulary import CheckStatus


async def check_gpu_health(run: CheckRun, st: Station) -> CheckResult:
    cmd = rc.gpu_health_query()
    res = await run.run(st.name, cmd)
    try:
        rows = gh.parse_health(res.stdout)
    except gh.InvalidField:  # an older driver: its names
        cmd = rc.gpu_health_query(prefix=gh.THROTTLE_PREFIX)
        res = await run.run(st.name, cmd)
        try:
            rows = gh.parse_health(res.stdout)
        except gh.InvalidField as exc:
            return CheckResult("gpu-health", st.name, CheckStatus.WARN, f"health not readable: {exc}",
                               evidence(cmd, res), "Update the NVIDIA driver (its nvidia-smi lacks these fields).")
    ev = evidence(cmd, res)
    read = [h for h in rows if h.error is None]
    if not read:
        return CheckResult("gpu-health", st.name, CheckStatus.WARN, "no GPU health read", ev,
                           "Run `nvidia-smi -q` on the station: the driver must answer before anything runs.")
    flagged = [(h, f) for h in read for f in gh.flags(h)]
    if not flagged:
        return CheckResult("gpu-health", st.name, CheckStatus.PASS,
                           f"{len(read)} GPU{'s' if len(read) != 1 else ''}: no throttling, PCIe, ECC or power flag", ev)
    worst = CheckStatus.FAIL if any(f.level == "error" for _, f in flagged) else CheckStatus.WARN
    summary = "; ".join(f"GPU{h.index} {f.text}" for h, f in flagged)
    fixes = []
    for _, f in flagged:
        if f.fix not in fixes:
            fixes.append(f.fix)
    return CheckResult("gpu-health", st.name, worst, summary, ev, " ".join(fixes))


FLAP_FIX = ("A link that flaps loses RDMA packets and stalls NCCL: reseat or replace the cable/transceiver, compare "
            "`ethtool -S` on both ends; the kernel log's mlx5 Link down/up lines say when.")


async def _kernel_flaps(run: CheckRun, st: Station) -> tuple[int, str]:
    """How many times the kernel logged the rail's link going down in the flap window (0 when the log
    is not readable), with the evidence."""
    cmd = rc.kernel_log_since(time.time() - FLAP_WINDOW_S)
    res = await run.run(st.name, cmd)
    if kl.unreadable(res.stdout):
        return 0, ""
    downs = [e for e in kl.parse_kernel_log(res.stdout) if e.kind == "link-down" and st.rail_netdev in e.text]
    return len(downs), f"[{st.name}] $ {cmd}\n" + "\n".join(e.text for e in downs[-6:])


async def check_rail_live(run: CheckRun, st: Station) -> CheckResult:
    cmd = rc.rails_once([(st.rail_netdev, st.rdma_device or "")])
    tracker = RailTracker(run.profile.link.speed_mbps, run.profile.link.mtu)
    first = await run.run(st.name, cmd, tag="read1:")
    tracker.feed(parse_round(first.stdout.splitlines(), [st.rail_netdev]), time.time())
    await asyncio.sleep(COUNTER_INTERVAL_S)
    second = await run.run(st.name, cmd, tag="read2:")
    view = tracker.feed(parse_round(second.stdout.splitlines(), [st.rail_netdev]), time.time())[st.rail_netdev]
    ev = join_parts(evidence(cmd, first), evidence(cmd, second))
    words = f"{st.rail_netdev} {view.words(time.time())}"
    # two reads a second apart catch a flap only by luck: the kernel's Link down lines of the flap
    # window (the pane's "flapped N×") say it every run
    downs, kev = await _kernel_flaps(run, st)
    if downs and not view.flaps and view.up is not False:
        words += f" · flapped {downs}× in the last {FLAP_WINDOW_S / 60:.0f} min (kernel log: Link down)"
        ev = join_parts(ev, kev)
        return CheckResult("rail-live", st.name, CheckStatus.FAIL, words, ev, FLAP_FIX)
    if view.up is None:
        return CheckResult("rail-live", st.name, CheckStatus.WARN, f"{st.rail_netdev}: link state unreadable", ev,
                           f"Check that /sys/class/net/{st.rail_netdev} exists (the netdev named in the config).")
    if view.up is False:
        return CheckResult("rail-live", st.name, CheckStatus.FAIL, words, ev,
                           f"The rail is down: reseat the cable, `sudo ip link set dev {st.rail_netdev} up` on both "
                           "stations; the kernel log's mlx5 'Link down' lines say when.")
    if view.flaps or (view.err_rate or 0) > 0:
        return CheckResult("rail-live", st.name, CheckStatus.FAIL, words, ev,
                           "A link that flaps or counts out-of-sequence / sequence errors / ACK timeouts now loses "
                           "RDMA packets: reseat or replace the cable/transceiver, compare `ethtool -S` on both ends, "
                           "and check that PFC/ECN are set the same on both ports.")
    return CheckResult("rail-live", st.name, CheckStatus.PASS, words, ev)
