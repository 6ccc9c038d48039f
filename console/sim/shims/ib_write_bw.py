"""Simulated perftest ``ib_write_bw``: a server that waits for a client, and a client that connects
to it over the rail. The two are separate processes (on different stations): they meet through a
rendezvous file per port in the world directory. Faults: ``link-down`` (cannot connect),
``rdma-port-down`` (QP to RTR fails), ``slow-rail`` (low bandwidth); GPU memory (``--use_cuda``) on a
profile without GPUDirect fails to register the MR, as on GB10."""

from __future__ import annotations

import json
import os
import random
import sys
import time

from console.sim.shims._net import rail_by_device, station_by_ip

SEP = "-" * 87
WAIT_S = 120.0


def _parse(argv: list[str]) -> dict:
    opts = {"device": None, "port": 18515, "gid": None, "cuda": None, "dmabuf": False, "server": None,
            "duration": None}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-d", "--ib-dev"):
            opts["device"], i = argv[i + 1], i + 2
            continue
        if a in ("-p", "--port"):
            opts["port"], i = int(argv[i + 1]), i + 2
            continue
        if a in ("-x", "--gid-index"):
            opts["gid"], i = int(argv[i + 1]), i + 2
            continue
        if a in ("-s", "--size", "-D", "--duration", "-n", "--iters", "-q", "--qp"):
            if a in ("-D", "--duration"):
                opts["duration"] = float(argv[i + 1])
            i += 2
            continue
        if a.startswith("--use_cuda="):
            opts["cuda"] = a.split("=", 1)[1]
        elif a == "--use_cuda_dmabuf":
            opts["dmabuf"] = True
        elif not a.startswith("-"):
            opts["server"] = a
        i += 1
    return opts


def _header(device: str, gid: int | None, mtu: int) -> str:
    return "\n".join([
        SEP,
        "                    RDMA_Write BW Test",
        f" Dual-port       : OFF\t\tDevice         : {device}",
        " Number of qps   : 1\t\tTransport type : IB",
        " Connection type : RC\t\tUsing SRQ      : OFF",
        " PCIe relax order: ON",
        " ibv_wr* API     : ON",
        " TX depth        : 128",
        " CQ Moderation   : 1",
        f" Mtu             : {mtu}[B]",
        " Link type       : Ethernet",
        f" GID index       : {gid if gid is not None else 3}",
        " Max inline data : 0[B]",
        " rdma_cm QPs\t : OFF",
        " Data ex. method : Ethernet",
        SEP,
    ])


def _table(gbps: float) -> str:
    iters = int(gbps * 1e9 / 8 / 65536 * 5)
    return "\n".join([
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
        f" 65536      {iters:<16} 0.00               {gbps:<20.2f} {gbps * 1e9 / 8 / 65536 / 1e6:.6f}",
        SEP,
    ])


def _rv(ctx, port: int) -> str:
    d = ctx.world.root / "perftest"
    d.mkdir(exist_ok=True)
    return str(d / str(port))


def _write(path: str, data: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def _read(path: str) -> dict | None:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _bandwidth(ctx, peer_faults: list[str], gpu: bool, device: str | None = None) -> float:
    lo, hi = ctx.profile.link.rdma_host_gbps
    if ("stale-rail" in ctx.faults or "stale-rail" in peer_faults) and device == ctx.state["rail"]["rdma"]:
        return round(random.uniform(8.0, 25.0), 2)  # a port in a stale state (workbench fault)
    if "slow-rail" in ctx.faults or "slow-rail" in peer_faults:
        return round(random.uniform(90.0, 95.0), 2)
    base = random.uniform(lo, hi) if hi else ctx.profile.link.speed_mbps / 1000 * 0.56
    return round(base * (0.97 if gpu else 1.0), 2)


def _gpu_ok(ctx, opts: dict) -> bool:
    return opts["cuda"] is None or ctx.profile.link.gpudirect


def server(ctx, opts: dict) -> int:
    rail = rail_by_device(ctx.world, ctx.station, opts["device"])
    if rail is None:
        print(f" IB device {opts['device']} not found\n Unable to find the Infiniband/RoCE device", file=sys.stderr)
        return 1
    if not _gpu_ok(ctx, opts):
        print(f"initializing CUDA\nUsing CUDA device {opts['cuda']}\nCouldn't allocate MR with error=524\n"
              " Couldn't create IB resources", flush=True)
        return 1
    path = _rv(ctx, opts["port"])
    if _read(path) and _read(path).get("state") == "waiting":
        print(" Couldn't listen to port 18515\n Unable to open file descriptor for socket connection", flush=True)
        return 1
    _write(path, {"state": "waiting", "station": ctx.station, "device": opts["device"], "pid": ctx.pid,
                  "cuda": opts["cuda"]})
    print("\n************************************\n* Waiting for client to connect... *\n"
          "************************************", flush=True)
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline:
            cur = _read(path) or {}
            if cur.get("state") == "done":
                print(_header(opts["device"], opts["gid"], cur.get("mtu", 4096)))
                print(f" local address: LID 0000 QPN 0x0108 PSN 0x5c3f0a RKey 0x1fff00 VAddr 0x00ffff8a1f0000\n{SEP}")
                if cur.get("error"):
                    print(cur["error"], flush=True)
                    return 1
                print(_table(cur["gbps"]), flush=True)
                return 0
            time.sleep(0.05)
        return 1
    finally:
        cur = _read(path) or {}
        if cur.get("pid") == ctx.pid:
            os.unlink(path)


def client(ctx, opts: dict) -> int:
    rail = rail_by_device(ctx.world, ctx.station, opts["device"])
    if rail is None:
        print(f" IB device {opts['device']} not found", file=sys.stderr)
        return 1
    host = opts["server"]
    hit = station_by_ip(ctx.world, host)
    path = _rv(ctx, opts["port"])
    srv = _read(path)
    peer_up = hit is not None and hit[1].up
    if not rail.up or not peer_up or not srv or srv.get("state") != "waiting" or srv.get("station") != hit[0]:
        print(f"Couldn't connect to {host}:{opts['port']}\nUnable to open file descriptor for socket connection"
              " Unable to init the socket connection", flush=True)
        return 1
    if not _gpu_ok(ctx, opts):
        print("Couldn't allocate MR with error=524\n Couldn't create IB resources", flush=True)
        return 1
    peer_faults = ctx.world.faults(hit[0])
    srv_rail = rail_by_device(ctx.world, hit[0], srv["device"])
    mtu = min(rail.mtu, srv_rail.mtu if srv_rail else rail.mtu)
    roce = 4096 if mtu >= 4154 else 1024
    print(_header(opts["device"], opts["gid"], roce))
    print(f" local address: LID 0000 QPN 0x0109 PSN 0x8e2a11 RKey 0x1ffeff VAddr 0x00ffff9b3c0000\n{SEP}")
    if not rail.port_active or (srv_rail is not None and not srv_rail.port_active):
        err = "Failed to modify QP 265 to RTR\n Unable to Connect the HCA's through the link"
        _write(path, {**srv, "state": "done", "error": err, "mtu": roce})
        print(err, flush=True)
        return 1
    time.sleep(min(opts["duration"] or 0.5, 0.5))
    gbps = _bandwidth(ctx, peer_faults, opts["cuda"] is not None, opts["device"])
    _write(path, {**srv, "state": "done", "gbps": gbps, "mtu": roce})
    print(_table(gbps), flush=True)
    return 0


def main(argv: list[str], ctx) -> int:
    opts = _parse(argv)
    if not opts["device"]:
        opts["device"] = ctx.state["rail"]["rdma"]
    return client(ctx, opts) if opts["server"] else server(ctx, opts)
