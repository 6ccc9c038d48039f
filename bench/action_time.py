"""Launch / stop on the simulated stations: wall time, launch-to-first-token, how late the
log-following waits notice the head's ready line and a fatal line, the stop's verification time,
and how many remote command sessions each action opens.

    python bench/action_time.py [--runs 3] [--stations 2 4]

Prints medians (and min..max) per station count. Engine time is scaled (0.01: a 420 s cold load
takes 4.2 s), so "launch s" is mostly the simulated load; "first token s" is from the launch call
to the head's first streamed token (readiness by a reply); "ready seen +ms" and "fatal seen +ms"
are the reaction times of the event-driven waits (log line written -> step finished); "fit
verdict s" is how soon the estimate rejects the oom case (before any load); "verify s" is the
verified stop's own time (container, port, processes, memory on every station, in parallel).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import tomli_w

from console.config import parse_config
from console.service.actions import ActionOptions, run_action
from console.service.history import LaunchHistory
from console.sim.engine import run_timeline
from console.sim.server import SimServer
from console.sim.world import World


async def _one(n: int, faults: list[str]) -> dict[str, float]:
    world = World.create(tempfile.mkdtemp(prefix="dgx-bench-"), "glm53-nvfp4-2x-gb300-vllm", n, faults, 0.01)
    server = SimServer(world)
    await server.start()
    history = LaunchHistory(Path(world.root) / "launches.jsonl")
    try:
        cfg = parse_config(tomli_w.dumps(server.config_dict()))
        out: dict[str, float] = {}
        if faults:  # the estimate alone: how soon it says no, before anything loads
            t0 = time.monotonic()
            res = await run_action(cfg, "launch", ActionOptions(skip_checks=True, on_failure=False),
                                   ready_timeout_s=120, history=history)
            assert res.result == "failed" and res.steps[-1].action == "fit", res.summary
            out["fit_verdict_s"] = time.monotonic() - t0
        s0, t0, wall0 = server.sessions, time.monotonic(), time.time()
        res = await run_action(cfg, "launch", ActionOptions(skip_checks=True, on_failure=False, skip_fit=bool(faults)),
                               ready_timeout_s=120, history=history)
        out["launch_s"] = time.monotonic() - t0
        out["launch_sessions"] = server.sessions - s0
        if res.result == "ok":
            tok = next(e for e in res.timeline[world.names[0]] if e.event == "first-token")
            out["first_token_s"] = tok.at - wall0
            head = world.names[0]
            st = world.state(head)
            run = st["containers"]["glm53"]["runs"][-1]
            tl = run_timeline(world, head, st, run)
            ready = next(s for s in res.steps if s.action == "ready")
            out["ready_seen_ms"] = (ready.finished_at - (float(run["started_at"]) + tl.ready_at)) * 1000
            # what readiness by a reply costs beyond the engine's ready line: /health, then a first token
            out["token_after_ready_ms"] = (tok.at - (float(run["started_at"]) + tl.ready_at)) * 1000
        else:
            failed = next(s for s in res.steps if s.status == "failed")
            worker = world.names[1]
            wst = world.state(worker)
            wrun = wst["containers"]["glm53"]["runs"][-1]
            wtl = run_timeline(world, worker, wst, wrun)
            fatal_at = min(float(wrun["started_at"]) + off for off, line in wtl.lines if "OutOfMemoryError" in line)
            out["fatal_seen_ms"] = (failed.finished_at - fatal_at) * 1000
        s0, t0 = server.sessions, time.monotonic()
        res = await run_action(cfg, "stop", history=history)
        out["stop_s"] = time.monotonic() - t0
        out["stop_sessions"] = server.sessions - s0
        verify = [s for s in res.steps if s.action == "verify-stop"]
        out["verify_s"] = max(s.finished_at for s in verify) - min(s.started_at for s in verify)
        return out
    finally:
        await server.stop()


def _fmt(values: list[float], unit: str = "") -> str:
    return f"{statistics.median(values):.2f}{unit} ({min(values):.2f}..{max(values):.2f})"


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--stations", type=int, nargs="+", default=[2, 4])
    args = ap.parse_args()
    for n in args.stations:
        ok = [await _one(n, []) for _ in range(args.runs)]
        bad = [await _one(n, ["oom"]) for _ in range(args.runs)]
        print(f"{n} stations, {args.runs} runs (median (min..max)):")
        print(f"  launch s          {_fmt([r['launch_s'] for r in ok])}   sessions {ok[0]['launch_sessions']:.0f}")
        print(f"  first token s     {_fmt([r['first_token_s'] for r in ok])}   (launch call -> first streamed token)")
        print(f"  ready seen +ms    {_fmt([r['ready_seen_ms'] for r in ok])}")
        print(f"  token after +ms   {_fmt([r['token_after_ready_ms'] for r in ok])}   (ready line -> first token)")
        print(f"  fit verdict s     {_fmt([r['fit_verdict_s'] for r in bad])}   (oom: rejected before any load)")
        print(f"  fatal seen +ms    {_fmt([r['fatal_seen_ms'] for r in bad])}   (oom on the first worker, --skip-fit)")
        print(f"  stop s            {_fmt([r['stop_s'] for r in ok])}   sessions {ok[0]['stop_sessions']:.0f}")
        print(f"  verify s          {_fmt([r['verify_s'] for r in ok])}   (stop verification, all stations)")


if __name__ == "__main__":
    asyncio.run(main())
