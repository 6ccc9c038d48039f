"""Simulated Open MPI ``mpirun`` for nccl-tests across the stations: ``-np 1 -H IP:1 [env K=V ...] BIN
ARGS`` app contexts separated by ``:``, ranks reached over the rail with the station's SSH (key login,
BatchMode), as NVIDIA's NCCL playbook runs it."""

from __future__ import annotations

import os
import sys

from console.sim.shims import _nccl_tests
from console.sim.shims._net import rails, station_by_ip

_GLOBAL_VALUE = {"--mca", "-x", "--bind-to", "--map-by", "-hostfile", "--hostfile", "--prefix"}


def _contexts(argv: list[str]) -> list[list[str]]:
    out, cur = [], []
    for a in argv:
        if a == ":":
            out.append(cur)
            cur = []
        else:
            cur.append(a)
    out.append(cur)
    return [c for c in out if c]


def main(argv: list[str], ctx) -> int:
    ranks: list[_nccl_tests.Rank] = []
    for c in _contexts(argv):
        host, env, i = None, {}, 0
        while i < len(c):
            a = c[i]
            if a in ("-H", "--host", "-host"):
                host = c[i + 1].split(",")[0].split(":")[0]
                i += 2
            elif a in ("-np", "-n") or a in _GLOBAL_VALUE:
                i += 3 if a == "--mca" else 2
            elif a.startswith("-"):
                i += 1
            else:
                break
        prog = c[i:]
        if prog[:1] == ["env"]:
            prog = prog[1:]
            while prog and "=" in prog[0] and not prog[0].startswith("-"):
                k, _, v = prog.pop(0).partition("=")
                env[k] = v
        if not prog:
            print("mpirun: no executable specified", file=sys.stderr)
            return 1
        if not os.path.basename(prog[0]).startswith("all_reduce_perf"):
            print(f"mpirun: the simulator only runs all_reduce_perf, not {prog[0]}", file=sys.stderr)
            return 1
        hit = station_by_ip(ctx.world, host or "")
        mine = next(x for x in rails(ctx.world, ctx.station) if x.primary)
        if hit is None or (hit[0] != ctx.station and (not mine.up or not hit[1].up)):
            print(f"ssh: connect to host {host} port 22: No route to host\n"
                  "--------------------------------------------------------------------------\n"
                  "ORTE was unable to reliably start one or more daemons.\n"
                  "--------------------------------------------------------------------------", flush=True)
            return 1
        ranks.append(_nccl_tests.Rank(hit[0], host, env, prog[1:]))
    if not ranks:
        print("mpirun: nothing to run", file=sys.stderr)
        return 1
    return _nccl_tests.run(ctx.world, ranks, ctx.orphaned)
