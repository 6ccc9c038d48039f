"""The continuous RAS watch on the simulated stations, through ``watch --json`` with no request in
flight: ``desync`` reads ``out-of-step`` with B named behind before A's watchdog fires, and once the
watchdog has killed A, B is not ready: the death is the consequence, B's straggle the cause;
``collective-hang`` reads ``stuck`` (every rank frozen in one collective, GPUs busy) with no culprit;
a healthy pair's RAS stays healthy."""

from __future__ import annotations

import time

from console.sim.engine import container_status
from tests.sim.test_hang_report_sim import started
from tests.sim.test_progress_sim import watch_until


def _times(h) -> tuple[float, float]:
    """(hang, watchdog) wall times: when the ranks stopped, when A's watchdog ends its container."""
    st = container_status(h.world, "A", h.world.state("A"), "glm53")
    t0, tl = float(st["started_at"]), st["timeline"]
    hang = next(t for t, name in tl.phases if name == "hung in all-reduce")
    assert tl.exit_at is not None
    return t0 + hang, t0 + tl.exit_at


def _trail(objs: list[dict]) -> list:
    return [(o["station"], round(o["t"] % 1000, 1), o.get("progress"), o["ras"]["state"], o["ras"]["why"][:90])
            for o in objs][-8:]


async def test_desync_without_traffic_is_out_of_step_before_the_watchdog_then_the_death_is_the_consequence(
        sim_factory):
    # a faster clock than the other RAS tests: NCCL's 600 s watchdog is then 24 s after the hang, still
    # six RAS reads (RAS_WATCH_EVERY_S) for the straggler to be read stuck before it (read at ~5.5 s at
    # load 6; a loaded CI needs the rest); the test waits for it
    h = await sim_factory(faults=["desync"], time_scale=0.04)
    started(h, ago=13)  # ready ~4 s from now, out of step ~1 s later, A's watchdog ~24 s after that

    def dead_after(objs: list[dict]) -> bool:
        """B's line that names A's death as the consequence of B's straggle (RAS read on B). Under load the
        line at A's death can say peer-down first (A's container dead, the RAS read not yet in or aged out:
        RAS_LATE_S), which names A too but not the cause; the next RAS read on B does."""
        return any(o["station"] == "B" and o.get("progress_consequence") == ["A"] and o.get("progress") == "out-of-step"
                   for o in objs)

    objs = await watch_until(h.config, 110.0, dead_after)
    hang_at, watchdog_at = _times(h)
    out = [o for o in objs if o.get("progress") == "out-of-step"]
    assert out, _trail(objs)
    first = out[0]
    assert first["t"] < watchdog_at, (first["t"] - hang_at, watchdog_at - hang_at)  # seen before the watchdog
    assert first["t"] > hang_at
    assert first["progress_stragglers"] == ["B"] and first["ras"]["state"] == "stuck"
    assert first["ras"]["behind"] == ["B"] and first["ras"]["kind"] == "out-of-step"
    assert "B 1 op behind" in first["progress_why"]
    before = [o for o in objs if o["t"] < hang_at - 0.5 and o.get("progress")]
    assert all(o["progress"] in ("idle", "unknown", "progressing") for o in before), _trail(before)
    assert dead_after(objs), _trail(objs)
    last = next(o for o in objs if dead_after([o]))  # B: not "ready · idle"
    assert last["progress_stragglers"] == ["B"], _trail(objs)
    assert last["ras"]["cause"] == ["B"] and last["ras"]["missing"] == ["A"] and last["ras"]["read_on"] == "B"
    assert "B fell behind" in last["progress_why"] and "consequence" in last["progress_why"]


async def test_collective_hang_without_traffic_is_stuck_with_no_culprit(sim_factory):
    h = await sim_factory(faults=["collective-hang"], time_scale=0.05)
    started(h, ago=19)  # ready ~2 s from now, hung 1.5 s later, A's watchdog 30 s after that
    objs = await watch_until(h.config, 60.0, lambda o: any(x.get("progress") == "stuck" for x in o))
    stuck = [o for o in objs if o.get("progress") == "stuck"]
    assert stuck, _trail(objs)
    hang_at, watchdog_at = _times(h)
    first = stuck[0]
    assert hang_at < first["t"] < watchdog_at
    assert first["ras"]["state"] == "stuck" and first["ras"]["kind"] == "frozen-equal"
    assert first["progress_stragglers"] == [] and first["ras"]["behind"] == []
    assert first["progress_why"].startswith("every rank stuck in one collective (RAS: every rank at AllReduce op ")


async def test_a_healthy_pairs_ras_reads_healthy(sim_factory):
    h = await sim_factory(time_scale=0.05)
    started(h, ago=30)
    t0 = time.time()
    objs = await watch_until(h.config, 40.0, lambda o: sum(1 for x in o if x["ras"]["state"] == "healthy"
                                                           and x["t"] > t0 + 10) >= 4)
    seen = {o["ras"]["state"] for o in objs}
    assert "healthy" in seen and not seen & {"stuck"}, _trail(objs)
    assert not any(o.get("progress") in ("out-of-step", "stuck", "peer-down", "wedged") for o in objs)


async def test_status_after_the_watchdog_killed_the_head_says_b_cannot_serve(sim_factory):
    from console.station.status import collect_status

    h = await sim_factory(faults=["desync"], time_scale=0.05)
    started(h, ago=62)  # ready ~41 s ago, out of step ~39 s ago, A ended by its watchdog ~8 s ago
    _hang_at, watchdog_at = _times(h)
    assert watchdog_at < time.time() - 5
    doc = await collect_status(h.config)
    b = next(st for st in doc["stations"] if st["name"] == "B")
    assert b["progress"] == "peer-down" and b["progress_consequence"] == ["A"], (b["progress"], b["progress_why"])
    assert b["ras"]["state"] == "stuck" and b["ras"]["missing"] == ["A"] and b["ras"]["read_on"] == "B"
    assert "the service cannot serve" in b["progress_why"]
