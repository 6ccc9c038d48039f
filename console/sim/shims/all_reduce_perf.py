"""Simulated nccl-tests ``all_reduce_perf`` run alone (one rank on this station)."""

from __future__ import annotations

import os

from console.sim.shims import _nccl_tests
from console.sim.shims._net import rails


def main(argv: list[str], ctx) -> int:
    rail = next(x for x in rails(ctx.world, ctx.station) if x.primary)
    env = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    return _nccl_tests.run(ctx.world, [_nccl_tests.Rank(ctx.station, rail.ip, env, argv)], ctx.orphaned)
