"""On-demand jobs in the TUI beside the streaming dashboard vs headless, on the simulated stations.

Per round, interleaved (the machine's load hits both alike): ``validate-rdma`` headless (its own
session registry, as the CLI runs it), then the same validation from the checks screen (``v``) of the
real app whose dashboard streams every station; then, with ``--doctor``, the workbench ladder headless
and from the app (``n``). Prints each time and the TUI/headless ratio (target: within +-20 %).

    PYTHONPATH=$PWD python3 bench/jobs_beside_dashboard.py [--rounds 2] [--doctor]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tomli_w  # noqa: E402

from console.config import parse_config  # noqa: E402
from console.doctor import run_doctor  # noqa: E402
from console.remote.session import SessionRegistry  # noqa: E402
from console.remote.transport import ssh_of  # noqa: E402
from console.sim.engine import start_container  # noqa: E402
from console.sim.server import SimServer  # noqa: E402
from console.sim.world import World  # noqa: E402
from console.station.rdma import validate_rdma  # noqa: E402


async def until(cond, pilot, limit: float) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await pilot.pause(0.1)


async def headless(config, doctor: bool) -> float:
    async with SessionRegistry(config):
        t0 = time.monotonic()
        if doctor:
            rep = await run_doctor(config)
            assert rep.verdict == "ok", rep.verdict
        else:
            runs = await validate_rdma(config)
            assert all(r.status == "pass" for r in runs), [r.summary for r in runs]
        return time.monotonic() - t0


async def in_tui(config, doctor: bool) -> float:
    from console.ui.app import ConsoleApp
    from console.ui.screens.checks import ChecksScreen
    from console.ui.screens.doctor import DoctorScreen

    app = ConsoleApp(config)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(lambda: all(ssh_of(app.sessions.session(s.name)).streams_open == 4 for s in config.stations),
                    pilot, 60)
        if doctor:
            t0 = time.monotonic()
            await pilot.press("n")
            await until(lambda: isinstance(app.screen, DoctorScreen) and app.screen.job is not None, pilot, 30)
            await app.screen.job.wait()
            assert app.screen.report.verdict == "ok", app.screen.report.verdict
            return time.monotonic() - t0
        await pilot.press("k")
        await until(lambda: isinstance(app.screen, ChecksScreen) and not app.screen.busy, pilot, 120)
        screen = app.screen
        t0 = time.monotonic()
        await pilot.press("v")
        await until(lambda: screen.busy, pilot, 10)
        await until(lambda: not screen.busy, pilot, 300)
        took = time.monotonic() - t0
        bad = [r.summary for r in screen.results.values() if r.id.startswith("rdma") and r.status != "pass"]
        assert not bad, bad
        return took


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--doctor", action="store_true", help="also the workbench ladder")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_STATE_HOME"] = f"{tmp}/state"
        world = World.create(Path(tmp) / "world", "glm53-nvfp4-2x-gb300-vllm", 2, [], 0.005)
        server = SimServer(world)
        await server.start()
        try:
            path = Path(tmp) / "sim.toml"
            path.write_text(tomli_w.dumps(server.config_dict()))
            config = parse_config(path.read_text(), str(path))
            now = time.time() - 30.5
            start_container(world, "B", at=now)
            start_container(world, "A", at=now + 0.3)
            kinds = [False, True] if args.doctor else [False]
            for doctor in kinds:
                what = "workbench ladder" if doctor else "validate-rdma"
                h, t = [], []
                for _ in range(args.rounds):
                    h.append(await headless(config, doctor))
                    t.append(await in_tui(config, doctor))
                mh, mt = statistics.median(h), statistics.median(t)
                print(f"{what}: headless {', '.join(f'{x:.1f}' for x in h)} s; TUI beside the dashboard "
                      f"{', '.join(f'{x:.1f}' for x in t)} s; median TUI/headless {mt / mh:.2f} "
                      f"({100 * (mt / mh - 1):+.0f} %)")
        finally:
            await server.stop()
    print("load:", os.getloadavg())


if __name__ == "__main__":
    asyncio.run(main())
