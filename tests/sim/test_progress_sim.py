"""Progress truth on the simulated stations: ``watch --json`` says ``progress: wedged`` within W + 10 s of
the wedge fault's freeze, and ``stuck`` for init-hang; the sim's faults look as they do on real
stations (/health 200 with tokens frozen, GPUs at 100 % util at idle power)."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import time

from console.commands.watch import watch
from console.serving.client import ApiClient
from console.serving.metrics import parse_metrics
from console.sim.engine import container_status
from console.station.status import collect_status
from tests.waiting import until

W = 5.0  # the test config's window (the smallest the config allows)


def small_window(config):
    return dataclasses.replace(config, ui=dataclasses.replace(config.ui, progress_window_s=W))


async def watch_until(config, seconds: float, stop_when, start=None, log=None) -> list[dict]:
    """Run ``watch --json`` until ``stop_when(objects)`` or ``seconds``; the NDJSON objects.
    ``start``: called once the head is live (the engine starts under the console's eyes, as an
    operator's dashboard sees it: the GPUs idle first)."""
    out = io.StringIO()
    stop = asyncio.Event()

    async def check() -> None:
        started = start is None
        while not stop.is_set():
            await asyncio.sleep(0.25)
            objs = [json.loads(x) for x in out.getvalue().splitlines()]
            if not started and any(o["station"] == "A" and o["state"] == "live" and o["gpus"] for o in objs):
                start()
                started = True
            if started and stop_when(objs):
                stop.set()

    checker = asyncio.create_task(check())
    try:
        await watch(config, out, as_json=True, seconds=seconds, interval=0.5, stop=stop, log=log)
    finally:
        checker.cancel()
    return [json.loads(x) for x in out.getvalue().splitlines()]


async def wedge_time(h) -> float:
    """When the wedge fault froze the head's tokens (wall time), once its container runs."""
    st = await until(lambda: (s := container_status(h.world, "A", h.world.state("A"), "glm53"))["state"] == "running"
                     and s, what="the head's container running", timeout=30)
    assert st["timeline"].wedge_at is not None
    return float(st["started_at"]) + st["timeline"].wedge_at


async def test_wedge_reads_wedged_within_w_plus_10_s_while_health_answers_200(sim_factory):
    h = await sim_factory(faults=["wedge"], time_scale=0.005)
    objs = await watch_until(small_window(h.config), 60.0,
                             lambda o: any(x.get("progress") == "wedged" and x["station"] == "A" for x in o),
                             start=h.start_service)
    frozen_at = await wedge_time(h)
    wedged = [o for o in objs if o.get("progress") == "wedged" and o["station"] == "A"]
    assert wedged, [(o["station"], o.get("progress"), o.get("progress_why")) for o in objs][-6:]
    first = wedged[0]
    # W + 10 s is the target (bench/wedge_latency.py --judge tokens measures it: W + 0.8 s median of 3); the bound leaves
    # room for a loaded CI machine and still proves the judge, not the watchdog, said it
    assert first["t"] - frozen_at <= W + 20, first["t"] - frozen_at
    assert first["progress_since_s"] is not None and first["progress_since_s"] >= W
    assert "4 running" in first["progress_why"]
    ev = " ".join(first["progress_evidence"])
    assert "/health answers 200" in ev and "spinning kernel" in ev
    before = [o for o in objs if o["station"] == "A" and o["t"] < frozen_at - 1 and o.get("progress")]
    assert all(o["progress"] != "wedged" for o in before)
    async with ApiClient(h.config.api_url(), timeout=5) as c:  # the sim's side of it
        assert (await c.health()).ok
        one = parse_metrics(await c.metrics_text())
        await asyncio.sleep(1.0)
        two = parse_metrics(await c.metrics_text())
    assert one.gauges["running"] == 4 and one.counters["generation_tokens"] == two.counters["generation_tokens"] > 0


async def test_init_hang_reads_stuck_on_every_station(sim_factory):
    h = await sim_factory(faults=["init-hang"], time_scale=0.005)
    objs = await watch_until(small_window(h.config), 60.0, lambda o: {x["station"] for x in o
                                                                     if x.get("progress") == "stuck"} == {"A", "B"},
                             start=h.start_service)
    stuck = {o["station"]: o for o in objs if o.get("progress") == "stuck"}
    assert set(stuck) == {"A", "B"}, [(o["station"], o.get("progress"), o.get("progress_why")) for o in objs][-6:]
    a = stuck["A"]
    assert a["progress_why"].startswith("stuck in NCCL init / first collective for ")
    assert a["engine"]["phase"] == "connecting" and "spinning kernel" in " ".join(a["progress_evidence"])
    # the watchdog is far off: nothing ends the container
    assert container_status(h.world, "A", h.world.state("A"), "glm53")["state"] == "running"


async def test_a_healthy_serving_sim_is_never_wedged(sim_factory):
    h = await sim_factory(running=True, time_scale=0.005)
    t0 = time.time()
    objs = await watch_until(small_window(h.config), 20.0,
                             lambda o: any(x.get("progress") == "idle" and x["station"] == "A"
                                           and x["t"] > t0 + W + 3 for x in o))
    a = [o for o in objs if o["station"] == "A"]
    assert a and a[-1]["progress"] == "idle" and not any(o["progress"] in ("wedged", "stuck") for o in objs)


async def test_status_json_carries_progress_stuck_for_init_hang_from_the_logs_stamps(sim_factory, tmp_path):
    h = await sim_factory(faults=["init-hang"], time_scale=0.005)
    h.start_service()
    config = small_window(h.config)

    async def stuck():
        doc = await collect_status(config)
        return doc if all(st["progress"] == "stuck" for st in doc["stations"]) else None

    doc = await until(stuck, what="status --json: progress stuck on A and B", timeout=40)
    for st in doc["stations"]:
        assert st["progress_since_s"] >= W and st["progress_why"].startswith("stuck in NCCL init")


async def test_status_json_on_a_wedge_says_what_one_look_can_tell(sim_factory):
    h = await sim_factory(running=True, faults=["wedge"], time_scale=0.005)
    frozen_at = await wedge_time(h)
    await until(lambda: time.time() > frozen_at + 0.5, what="the wedge", timeout=30)
    doc = await collect_status(small_window(h.config))
    a = next(st for st in doc["stations"] if st["name"] == "A")
    assert a["api"]["healthy"] is True  # /health 200 ...
    assert a["progress"] == "unknown" and "no token moved in a " in a["progress_why"]  # ... not healthy
    assert "s look with requests running; a wedge shows after 0:05" in a["progress_why"]
    assert a["progress_since_s"] is None
