"""Simulated nccl-tests ``all_reduce_perf`` (one rank per station, launched by the simulated
``mpirun``): the header, each rank's NCCL INFO lines for its own environment, then the result table
-- or what NCCL does instead: fall back to sockets, fail with an IB completion error (a GID index that
does not reach the peer), or hang after init (different MTUs at the two ends)."""

from __future__ import annotations

import random
import re
import sys
import time
from dataclasses import dataclass

from console.sim import launch
from console.sim.shims._net import rails

HEADERS = ("#                                                              out-of-place                       in-place          ",
           "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
           "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ")


@dataclass
class Rank:
    station: str
    host: str
    env: dict[str, str]
    args: list[str]


def size_of(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMGkmg]?)", text)
    if not m:
        return 0
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]


def _opts(args: list[str]) -> tuple[int, int, int]:
    lo, hi, f = 32 << 20, 32 << 20, 2
    for i, a in enumerate(args[:-1]):
        if a in ("-b", "--minbytes"):
            lo = size_of(args[i + 1])
        elif a in ("-e", "--maxbytes"):
            hi = size_of(args[i + 1])
        elif a in ("-f", "--stepfactor"):
            f = max(2, int(args[i + 1]))
    return max(lo, 4), max(hi, lo), f


def _out(line: str = "") -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run(world, ranks: list[Rank], orphaned) -> int:
    prof = world.profile
    lo, hi, factor = _opts(ranks[0].args)
    n = len(ranks)
    _out(f"# nThread 1 nGpus 1 minBytes {lo} maxBytes {hi} step: {factor}(factor) warmup iters: 5 iters: 20 "
         "agg iters: 1 validation: 1 graph: 0")
    _out("#")
    _out("# Using devices")
    pids = {r.station: 31000 + 17 * i for i, r in enumerate(ranks)}
    for i, r in enumerate(ranks):
        host = world.state(r.station)["hostname"]
        _out(f"#  Rank {i:2d} Group  0 Pid {pids[r.station]:6d} on {host:>10} device  0 [0x01] {prof.gpu.name}")
    sockets = any(launch.sockets_forced(world, r.station, r.env) for r in ranks)
    for i, r in enumerate(ranks):
        host, pid = world.state(r.station)["hostname"], pids[r.station]
        rail = next(x for x in rails(world, r.station) if x.primary)

        def info(text: str, host=host, pid=pid) -> None:
            _out(f"{host}:{pid}:{pid} [0] NCCL INFO {text}")

        info(f"Bootstrap : Using {rail.netdev}:{rail.ip}<0>")
        if i == 0:
            _out(f"NCCL version {launch.nccl_version(r.env)}+cuda13.0")
        for line in launch.env_lines(r.env):
            info(line)
        if sockets:
            if "socket-fallback" in world.faults(r.station):
                info("Failed to open libibverbs.so[.1]")
            info(f"NET/Socket : Using [0]{rail.netdev}:{rail.ip}<0>")
            info("Using network Socket")
        else:
            devs = " ".join(f"[{k}]{d}:1/RoCE" for k, d in enumerate(prof.link.rails or (rail.device,)))
            info(f"NET/IB : Using {devs} [RO]; OOB {rail.netdev}:{rail.ip}<0>")
            info("Using network IB")
            gdr = launch.gdr_enabled(world, r.env)
            info(f"NET/IB : GPU Direct RDMA {'Enabled' if gdr else 'Disabled'} for HCA 0 '{rail.device}'")
    time.sleep(0.2)
    for i, r in enumerate(ranks):
        host, pid = world.state(r.station)["hostname"], pids[r.station]
        via = "NET/Socket/0" if sockets else ("NET/IB/0/GDRDMA" if launch.gdr_enabled(world, r.env) else "NET/IB/0")
        _out(f"{host}:{pid}:{pid + 12} [0] NCCL INFO Channel 00/0 : {i}[0] -> {(i + 1) % n}[0] [send] via {via}")
    bad_gid = [r for r in ranks if not launch.gid_ok(world, r.station, r.env)]
    mtus = {next(x for x in rails(world, r.station) if x.primary).mtu for r in ranks}
    if bad_gid and not sockets:
        time.sleep(2.0)  # NCCL_IB_TIMEOUT x NCCL_IB_RETRY_CNT: the retries run out
        peer = next(r for r in ranks if r not in bad_gid) if len(bad_gid) < n else ranks[0]
        for r in ranks:
            host, pid = world.state(r.station)["hostname"], pids[r.station]
            mine = next(x for x in rails(world, r.station) if x.primary)
            other = next(x for x in rails(world, (peer if r is not peer else bad_gid[0]).station) if x.primary)
            local = f"fd00::{world.names.index(r.station) + 1}" if r in bad_gid else f"::ffff:{mine.ip}"
            _out(f"{host}:{pid}:{pid + 30} [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
                 f"{other.ip}<50012> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid {local} "
                 f"remoteGids::ffff:{other.ip}")
        host = world.state(bad_gid[0].station)["hostname"]
        _out(f"{host}: Test NCCL failure common.cu:1279 'remote process exited or there was a network error'")
        _out(" .. " + host + " pid " + str(pids[bad_gid[0].station]) + ": Test failure common.cu:1145")
        _out("--------------------------------------------------------------------------")
        _out("Primary job  terminated normally, but 1 process returned")
        _out("a non-zero exit code. Per user-direction, the job has been aborted.")
        _out("--------------------------------------------------------------------------")
        return 1
    for i, r in enumerate(ranks):
        host, pid = world.state(r.station)["hostname"], pids[r.station]
        _out(f"{host}:{pid}:{pid + 12} [0] NCCL INFO Connected all rings, use ring PXN 0 GDR "
             f"{0 if sockets or not launch.gdr_enabled(world, r.env) else 1}")
        _out(f"{host}:{pid}:{pid} [0] NCCL INFO comm 0x5571c{i:02d}0 rank {i} nranks {n} cudaDev 0 nvmlDev 0 "
             "busId 1000 commId 0x3e1b - Init COMPLETE")
    for h in HEADERS:
        _out(h)
    if len(mtus) > 1 and not sockets:
        while not orphaned():  # different MTUs: RoCE packets of one side are dropped by the other; no error
            time.sleep(0.5)
        return 1
    expected = prof.link.nccl_busbw_gbytes or prof.link.speed_mbps / 8000 * 0.8
    peak = expected * random.uniform(1.06, 1.12)
    fset = launch.all_faults(world)
    if sockets:
        peak = random.uniform(1.9, 2.6)
    elif "stale-rail" in fset:
        peak = random.uniform(1.0, 3.1)
    elif "slow-rail" in fset:
        peak *= 0.5
    elif not all(launch.gdr_enabled(world, r.env) for r in ranks) and prof.link.gpudirect:
        peak *= 0.84
    busbws = []
    size = lo
    while size <= hi:
        count = max(1, size // 4)
        t_us = 22.0 + size / (peak * 1e3 * n / (2 * (n - 1)))
        alg = size / (t_us * 1e3)
        bus = alg * 2 * (n - 1) / n
        busbws += [bus, bus * 0.99]
        _out(f"{size:12d}  {count:12d}     float     sum      -1  {t_us:7.1f}  {alg:6.2f}  {bus:6.2f}      0  "
             f"{t_us * 1.01:7.1f}  {alg / 1.01:6.2f}  {bus / 1.01:6.2f}      0")
        time.sleep(0.01)
        size *= factor
    _out("# Out of bounds values : 0 OK")
    _out(f"# Avg bus bandwidth    : {sum(busbws) / len(busbws):.4f}")
    _out("#")
    return 0
