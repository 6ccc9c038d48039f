"""Simulated perftest ``ib_write_lat``: server and client meet through a rendezvous file per port (as
``ib_write_bw`` does) and print perftest's latency table (``RESULT_FMT_LAT``). ``stale-rail`` makes the
station's primary port slow and jittery; ``rdma-port-down`` fails the QP; ``link-down`` cannot connect."""

from __future__ import annotations

import os
import random
import sys
import time

from console.sim.shims._net import rail_by_device, station_by_ip
from console.sim.shims.ib_write_bw import SEP, WAIT_S, _parse, _read, _write

LAT_FMT = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
           "99% percentile[usec]   99.9% percentile[usec] ")


def _header(device: str, gid: int | None, mtu: int) -> str:
    return "\n".join([
        SEP, "                    RDMA_Write Latency Test",
        f" Dual-port       : OFF\t\tDevice         : {device}",
        " Number of qps   : 1\t\tTransport type : IB",
        " Connection type : RC\t\tUsing SRQ      : OFF",
        " PCIe relax order: OFF", " ibv_wr* API     : ON", " TX depth        : 1",
        f" Mtu             : {mtu}[B]", " Link type       : Ethernet",
        f" GID index       : {gid if gid is not None else 3}", " Max inline data : 220[B]",
        " rdma_cm QPs\t : OFF", " Data ex. method : Ethernet", SEP,
    ])


def _table(typ: float, p99: float) -> str:
    t_min, t_max = typ * 0.96, p99 * 2.6
    return "\n".join([LAT_FMT, f" 2       1000          {t_min:<7.2f}        {t_max:<7.2f}      {typ:<7.2f}  \t       "
                      f"{typ * 1.02:<7.2f}     \t{typ * 0.06:<7.2f}\t\t{p99:<7.2f} \t\t{t_max:<7.2f}", SEP])


def _latency(ctx, peer_faults: list[str], device: str) -> tuple[float, float]:
    if ("stale-rail" in ctx.faults or "stale-rail" in peer_faults) and device == ctx.state["rail"]["rdma"]:
        return round(random.uniform(6.0, 7.5), 2), round(random.uniform(38.0, 52.0), 2)
    if "slow-rail" in ctx.faults or "slow-rail" in peer_faults:
        return round(random.uniform(2.0, 2.3), 2), round(random.uniform(3.5, 4.2), 2)
    typ = round(random.uniform(1.55, 1.8), 2)
    return typ, round(typ * random.uniform(1.15, 1.35), 2)


def _rv(ctx, port: int) -> str:
    d = ctx.world.root / "perftest-lat"
    d.mkdir(exist_ok=True)
    return str(d / str(port))


def server(ctx, opts: dict) -> int:
    if rail_by_device(ctx.world, ctx.station, opts["device"]) is None:
        print(f" IB device {opts['device']} not found\n Unable to find the Infiniband/RoCE device", file=sys.stderr)
        return 1
    path = _rv(ctx, opts["port"])
    _write(path, {"state": "waiting", "station": ctx.station, "device": opts["device"], "pid": ctx.pid})
    print("\n************************************\n* Waiting for client to connect... *\n"
          "************************************", flush=True)
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline:
            cur = _read(path) or {}
            if cur.get("state") == "done":
                print(_header(opts["device"], opts["gid"], cur.get("mtu", 4096)))
                if cur.get("error"):
                    print(cur["error"], flush=True)
                    return 1
                print(_table(cur["typ"], cur["p99"]), flush=True)
                return 0
            time.sleep(0.05)
        return 1
    finally:
        if (_read(path) or {}).get("pid") == ctx.pid:
            os.unlink(path)


def client(ctx, opts: dict) -> int:
    rail = rail_by_device(ctx.world, ctx.station, opts["device"])
    if rail is None:
        print(f" IB device {opts['device']} not found", file=sys.stderr)
        return 1
    hit = station_by_ip(ctx.world, opts["server"])
    path = _rv(ctx, opts["port"])
    srv = _read(path)
    if not rail.up or hit is None or not hit[1].up or not srv or srv.get("state") != "waiting":
        print(f"Couldn't connect to {opts['server']}:{opts['port']}\nUnable to open file descriptor for socket "
              "connection Unable to init the socket connection", flush=True)
        return 1
    srv_rail = rail_by_device(ctx.world, hit[0], srv["device"])
    mtu = 4096 if min(rail.mtu, srv_rail.mtu if srv_rail else rail.mtu) >= 4154 else 1024
    print(_header(opts["device"], opts["gid"], mtu))
    if not rail.port_active or (srv_rail is not None and not srv_rail.port_active):
        err = "Failed to modify QP 265 to RTR\n Unable to Connect the HCA's through the link"
        _write(path, {**srv, "state": "done", "error": err, "mtu": mtu})
        print(err, flush=True)
        return 1
    time.sleep(0.2)
    typ, p99 = _latency(ctx, ctx.world.faults(hit[0]), opts["device"])
    _write(path, {**srv, "state": "done", "typ": typ, "p99": p99, "mtu": mtu})
    print(_table(typ, p99), flush=True)
    return 0


def main(argv: list[str], ctx) -> int:
    opts = _parse(argv)
    if not opts["device"]:
        opts["device"] = ctx.state["rail"]["rdma"]
    return client(ctx, opts) if opts["server"] else server(ctx, opts)
