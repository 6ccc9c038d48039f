"""Wall time of a full ``check`` pass: on the simulated stations (in-process asyncssh server) and,
when run as root with the lab prerequisites, on the lab (real sshd in network namespaces).

    python bench/check_time.py [--runs 5] [--no-lab]

Prints the median and the spread per target; also the per-pass command count on the simulator.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import tomli_w

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "lab"))

from console.config import parse_config  # noqa: E402
from console.sim.server import SimServer  # noqa: E402
from console.sim.world import World  # noqa: E402
from console.station.checks import run_checks  # noqa: E402


async def _time(config, runs: int) -> tuple[list[float], int]:
    times, bad = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        results = await run_checks(config)
        times.append(time.perf_counter() - t0)
        bad += sum(r.status == "fail" for r in results)
    return times, bad


async def bench_sim(runs: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        world = World.create(Path(root) / "w", "glm53-nvfp4-2x-gb300-vllm", 2, [], 0.02)
        server = SimServer(world)
        await server.start()
        try:
            cfg = parse_config(tomli_w.dumps(server.config_dict()))
            before = server.sessions
            times, bad = await _time(cfg, runs)
            per_pass = (server.sessions - before) / runs
        finally:
            await server.stop()
    _report("simulator", times, bad, f"{per_pass:.0f} remote commands per pass")


def bench_lab(runs: int) -> None:
    from lab import Lab, missing_prerequisites

    missing = missing_prerequisites()
    if missing:
        print(f"lab: skipped (needs {', '.join(missing)})")
        return
    lab = Lab().setup()
    try:
        times, bad = asyncio.run(_time(lab.config(), runs))
    finally:
        lab.teardown()
    _report("lab (real sshd, netns)", times, bad, "")


def _report(what: str, times: list[float], bad: int, note: str) -> None:
    med = statistics.median(times)
    print(f"{what}: full check median {med:.2f} s (min {min(times):.2f}, max {max(times):.2f}, n={len(times)}); "
          f"failing results {bad}" + (f"; {note}" if note else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-lab", action="store_true")
    args = ap.parse_args()
    asyncio.run(bench_sim(args.runs))
    if not args.no_lab:
        bench_lab(args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
