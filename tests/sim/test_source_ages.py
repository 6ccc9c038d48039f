"""Every source its own age, over real SSH to the simulated stations: a
hung ``nvidia-smi`` (no output, hangup ignored) turns the station ``stale`` naming the GPU samples
while every other stream keeps answering and the connection is kept; a driver failure's error
clears within seconds of the tool answering again (no growing restart delay)."""

from __future__ import annotations

import time

from test_monitor import Collector

from console.station.aspects import Aspect
from console.station.messages import ConnectionState, GpuSample, HostMemSample
from console.station.monitor import StationService
from console.station.state import StationState


def _folded(sink: Collector, name: str) -> StationState:
    state = StationState(name, gpu_interval_s=0.2)
    for m in sink.messages:
        if getattr(m, "station", None) == name:
            state.apply(m)
    return state


async def test_a_hung_nvidia_smi_is_stale_by_its_own_age_while_the_rest_answers(sim):
    sink = Collector()
    svc = StationService(sim.config, sim.config.station("B"), sink, gpu_interval_ms=200)
    svc.start()
    try:
        await sink.wait_for(lambda: len(sink.of(GpuSample, "B")) > 3 and _folded(sink, "B").conn.live)
        sim.world.set_faults("B", ["smi-hang"])
        t0 = time.monotonic()
        await sink.wait_for(lambda: _folded(sink, "B").conn.late == Aspect.GPUS)
        detected = time.monotonic() - t0
        state = _folded(sink, "B")
        now = time.time()
        assert state.conn.state == "stale" and not state.conn.live
        why = state.why(now) or ""
        assert why.startswith("GPU samples stale ") and why.endswith("nvidia-smi not answering; SSH fine"), why
        assert state.stale(Aspect.GPUS, now) and state.stale(Aspect.MEMORY, now)
        assert not state.values_stale  # one source late: the container and the log are not old
        assert not state.stale(Aspect.CONTAINER, now) and not state.stale(Aspect.HOSTMEM, now)
        # the other streams keep answering and the connection is kept (not dropped for one source)
        n = len(sink.of(HostMemSample, "B"))
        await sink.wait_for(lambda: len(sink.of(HostMemSample, "B")) >= n + 3)
        assert [m.state for m in sink.of(ConnectionState, "B")][-1] == "stale"
        assert "unreachable" not in [m.state for m in sink.of(ConnectionState, "B")]
        assert _folded(sink, "B").stale_sources(time.time())[:1] == [Aspect.GPUS]
        sim.world.set_faults("B", [])
        t1 = time.monotonic()
        await sink.wait_for(lambda: _folded(sink, "B").conn.live, timeout=10)
        recovered = time.monotonic() - t1
        assert not _folded(sink, "B").stale(Aspect.GPUS, time.time())
        assert detected < svc.stale_after + 2 and recovered < 5, (detected, recovered)
    finally:
        sim.world.set_faults("B", [])
        await svc.stop()


async def test_a_driver_failure_clears_within_seconds_of_the_tool_answering_again(sim):
    """``smi-fail``: nvidia-smi prints NVML's failure and exits at once. Restarted with a growing
    delay (1, 2, 5, 10, 30 s) the error outlived the driver's return by up to 30 s."""
    sink = Collector()
    svc = StationService(sim.config, sim.config.station("B"), sink, gpu_interval_ms=200)
    svc.start()
    try:
        await sink.wait_for(lambda: len(sink.of(GpuSample, "B")) > 3)
        sim.world.set_faults("B", ["smi-fail"])
        t0 = time.monotonic()

        def errors() -> list[GpuSample]:
            return [m for m in sink.of(GpuSample, "B") if m.error and not m.gpus]

        await sink.wait_for(lambda: errors())
        state = _folded(sink, "B")
        assert "Driver/library version mismatch" in (state.gpu_error or "") and state.gpus  # last readings kept
        assert state.conn.live and state.stale(Aspect.GPUS, time.time())  # the tool answers; its values are old
        # long enough in error that a growing restart delay would have reached 10 s
        await sink.wait_for(lambda: len(errors()) >= 6 and time.monotonic() - t0 > 8, timeout=20)
        sim.world.set_faults("B", [])
        t1 = time.monotonic()
        n = len(sink.of(GpuSample, "B"))
        await sink.wait_for(lambda: any(m.gpus and not m.error for m in sink.of(GpuSample, "B")[n:]), timeout=15)
        recovered = time.monotonic() - t1
        assert recovered < 5, recovered
        state = _folded(sink, "B")
        assert state.gpu_error is None and not state.stale(Aspect.GPUS, time.time()) and state.conn.live
    finally:
        sim.world.set_faults("B", [])
        await svc.stop()


async def test_status_with_a_hung_nvidia_smi_is_reachable_and_names_the_tool(sim):
    """``status``: a hung nvidia-smi used to cut the station's whole round (the station "unreachable":
    "command timed out"); it is the GPU source's failure, the rest of the station answers."""
    import dataclasses

    from console.station.status import collect_status

    config = dataclasses.replace(sim.config, command_timeout_s=2.0)
    sim.world.set_faults("B", ["smi-hang"])
    try:
        data = await collect_status(config)
    finally:
        sim.world.set_faults("B", [])
    a, b = data["stations"]
    assert a["reachable"] and a["gpus"] and a["error"] is None
    assert b["reachable"] and b["gpus"] == [] and b["host_memory"] is not None
    assert b["container"]["state"] is not None
    assert b["error"].startswith("nvidia-smi not answering (") and b["error"].endswith("); SSH fine"), b["error"]
