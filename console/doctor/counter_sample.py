"""One read of a station's rail counters and GPU activity (the hang capture reads it twice, an
interval apart): every rail's RDMA statistic and the NIC's ethtool counters, and the GPUs' activity."""

from __future__ import annotations

import asyncio

from console.config import Station
from console.doctor import facts
from console.doctor.context import DoctorContext
from console.probes import ParseError
from console.probes import activity as act
from console.remote import cmdlines as rc
from console.station.checks import ToolMissing


async def sample(ctx: DoctorContext, st: Station, rails: list[facts.RailInfo], tag: str) -> dict:
    """One read of every rail's RDMA and NIC counters and the GPUs' activity, the commands at once."""
    out: dict = {"rdma": {}, "nic": {}, "gpu": None, "ev": []}

    async def counter(r: facts.RailInfo, kind: str, cmd: str, parse) -> str:
        try:
            res = await ctx.run(st.name, cmd, tag=tag)
            parsed = parse(res.stdout)
            out[kind][r.device] = (next(iter(parsed.values())) if kind == "rdma" and parsed else parsed)
            keep = [ln for ln in res.stdout.splitlines() if kind == "rdma" or "rdma_unicast" in ln]
            return facts.ev(st.name, cmd, "\n".join(keep))
        except (ParseError, ToolMissing, StopIteration) as exc:
            return f"[{st.name}] $ {cmd}\n({exc})"

    async def gpu() -> str:
        try:
            res = await ctx.run(st.name, rc.gpu_activity(), tag=tag)
            out["gpu"] = act.parse_gpu_activity(res.stdout)
            return facts.ev(st.name, rc.gpu_activity(), res.stdout)
        except (ParseError, ToolMissing):
            return ""

    jobs = [counter(r, kind, cmd, parse) for r in rails
            for kind, cmd, parse in (("rdma", rc.rdma_statistic(r.device), act.parse_rdma_statistic),
                                     ("nic", rc.ethtool_stats(r.netdev), act.parse_ethtool_stats))]
    got = await asyncio.gather(*jobs, gpu())
    out["ev"] = [x for x in got if x]
    return out
