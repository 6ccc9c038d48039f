"""One read of a station's rail counters and GPUs (the hang capture reads it twice, an interval
apart): every rail's RDMA statistic and the NIC's ethtool counters, the GPUs' activity (busy with no
memory traffic: a spinning collective) and the GPU query the capture's GPU samples come from (one
nvidia-smi for both) -- one command line whose parts run at once (``cmdlines.at_once``), so that the
counters and the GPUs are read at the same moment, in the time of the slowest tool, not their sum."""

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
    """One read of every rail's RDMA and NIC counters, the GPUs' activity and the GPU query: one command
    on the station (``cmdlines.at_once``: the tools started together, each part's output and exit
    status its own; each tool killed station-side after ``TOOL_LIMIT_S``, so that one that hangs is
    its own "not read" and the others come back). ``gpu_query``: the query's text (``smi.parse_gpus``
    reads it), else None and ``gpu_error`` says why."""
    out: dict = {"rdma": {}, "nic": {}, "gpu": None, "gpu_query": None, "gpu_error": None, "ev": []}
    counters = [(r, kind, cmd, parse) for r in rails
                for kind, cmd, parse in (("rdma", rc.rdma_statistic(r.device), act.parse_rdma_statistic),
                                         ("nic", rc.ethtool_stats(r.netdev), act.parse_ethtool_stats))]
    cmds = [cmd for _r, _k, cmd, _p in counters] + [rc.gpu_query_with_activity()]
    res = await ctx.run(st.name, rc.at_once([rc.bounded(c) for c in cmds[:-1]] + cmds[-1:]), tag=tag)
    parts = rc.split_parts(res.stdout, len(cmds))

    def answer(cmd: str, part: rc.PartResult | None) -> str:
        """The part's output; ToolMissing (exit 127) as a command of its own raises it; ParseError when
        the part never finished (the command was cut before it) or was killed at its limit."""
        if part is None:
            raise ParseError(f"not read: the command ended before it (exit {res.exit_status})")
        if part.exit_status == 127:
            raise ToolMissing(f"{cmd.split()[0]} not found on {st.name}")
        if part.exit_status == rc.KILLED_STATUS and not part.stdout.strip():
            raise ParseError(f"not read: no answer within {rc.TOOL_LIMIT_S} s (killed station-side)")
        return part.stdout

    def parse_all() -> None:  # the tables are parsed off the event loop
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
            text = answer("nvidia-smi", parts[-1] if parts else None)
        except (ParseError, ToolMissing) as exc:
            out["gpu_error"] = str(exc) if str(exc).startswith("not read") else f"not read: {exc}"
            return
        out["gpu_query"], activity = act.split_gpu_sample(text)
        out["ev"].append(facts.ev(st.name, cmds[-1], text))
        try:
            out["gpu"] = act.parse_gpu_activity(activity)
        except ParseError:
            pass

    await asyncio.to_thread(parse_all)
    return out
