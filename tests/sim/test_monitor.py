"""StationService streams against simulated stations over real SSH."""

import asyncio
import time

from console.sim.engine import start_container, stop_container
from console.station.messages import (
    AppsSample,
    ConnectionState,
    ContainerUpdate,
    EngineUpdate,
    GpuSample,
    HostMemSample,
    LogBatch,
)
from console.station.monitor import StationService


class Collector:
    def __init__(self):
        self.messages = []
        self.event = asyncio.Event()

    def __call__(self, msg):
        self.messages.append(msg)
        self.event.set()

    def of(self, kind, station=None):
        return [m for m in self.messages if isinstance(m, kind) and (station is None or m.station == station)]

    def log_lines(self, station):
        return [ln for m in self.of(LogBatch, station) for ln in m.lines]

    async def wait_for(self, pred, timeout=20.0):
        deadline = time.monotonic() + timeout
        while not pred():
            left = deadline - time.monotonic()
            assert left > 0, "condition not reached; last messages: " + repr(self.messages[-5:]) + "; last log lines: " + repr(
                [(m.station, ln) for m in self.messages if isinstance(m, LogBatch) for ln in m.lines][-40:]) + repr(
                [(m.station, m.progress.phase) for m in self.messages if isinstance(m, EngineUpdate)])
            self.event.clear()
            try:
                await asyncio.wait_for(self.event.wait(), left)
            except TimeoutError:
                pass


async def _services(handle, sink, interval_ms=200):
    svcs = [StationService(handle.config, st, sink, gpu_interval_ms=interval_ms) for st in handle.config.stations]
    for s in svcs:
        s.start()
    return svcs


async def test_both_stations_stream_gpu_memory_logs_and_readiness(sim_factory):
    h = await sim_factory(running=False, time_scale=0.005)
    sink = Collector()
    svcs = await _services(h, sink)
    try:
        # Watch from before the start, as the demo does: B first, then A.
        await sink.wait_for(lambda: sink.of(GpuSample, "A") and sink.of(ContainerUpdate, "A"))
        assert sink.of(ContainerUpdate, "A")[-1].info.state in ("created", "exited")
        h.start_service()

        def ready():
            ups = sink.of(EngineUpdate, "A")
            return ups and ups[-1].progress.phase == "ready"

        await sink.wait_for(ready)
        for name in ("A", "B"):
            assert any(m.state == "live" for m in sink.of(ConnectionState, name))
            assert sink.of(HostMemSample, name)
            assert sink.of(ContainerUpdate, name)[-1].info.state == "running"
        # GPU memory climbed while weights loaded: the GB300 (device 1) went from ~0 to ~231 GiB.
        await sink.wait_for(lambda: any((g.memory_used_mib or 0) > 230 * 1024
                                        for m in sink.of(GpuSample, "A") for g in m.gpus if g.name == "NVIDIA GB300"))
        used = [g.memory_used_mib for m in sink.of(GpuSample, "A") for g in m.gpus if g.name == "NVIDIA GB300"]
        assert used[0] < 1024 and max(used) > 230 * 1024
        climb = used[: used.index(max(used)) + 1]
        assert climb == sorted(climb)  # memory only grows while loading
        await sink.wait_for(lambda: any("Application startup complete." in ln for ln in sink.log_lines("A")))
        a_log = sink.log_lines("A")
        assert any(ln.startswith("(APIServer pid=1) INFO") for ln in a_log)
        b_log = sink.log_lines("B")
        assert any("headless multiproc executor" in ln for ln in b_log)
        assert sink.of(EngineUpdate, "A")[-1].progress.transport == "gdrdma"
        # Log lines arrive batched, not one message per line.
        assert len(sink.of(LogBatch, "A")) < len(a_log)
    finally:
        await asyncio.gather(*(s.stop() for s in svcs))


async def test_dead_station_does_not_block_the_other(sim_factory):
    h = await sim_factory(running=True, faults=["station-unreachable@B"], time_scale=0.005)
    sink = Collector()
    svcs = await _services(h, sink)
    try:
        await sink.wait_for(lambda: any(m.state == "unreachable" for m in sink.of(ConnectionState, "B")))
        n_before = len(sink.of(GpuSample, "A"))
        await sink.wait_for(lambda: len(sink.of(GpuSample, "A")) >= n_before + 3)
        assert "no answer" in [m for m in sink.of(ConnectionState, "B") if m.state == "unreachable"][0].detail
        assert not sink.of(GpuSample, "B")
    finally:
        await asyncio.gather(*(s.stop() for s in svcs))


async def test_oom_during_load_is_reported_with_the_line(sim_factory):
    h = await sim_factory(running=True, faults=["oom"], time_scale=0.005)
    sink = Collector()
    svcs = await _services(h, sink)
    try:
        def failed():
            ups = sink.of(EngineUpdate, "B")
            return ups and ups[-1].progress.phase == "failed"

        await sink.wait_for(failed)
        prog = sink.of(EngineUpdate, "B")[-1].progress
        assert "OutOfMemoryError" in prog.fatal
        await sink.wait_for(lambda: sink.of(ContainerUpdate, "B")[-1].info.state == "exited")
        assert sink.of(ContainerUpdate, "B")[-1].info.exit_code == 1
        # The head then fails too, and the worker's OOM line is still in B's log for the operator.
        await sink.wait_for(lambda: any("OutOfMemoryError" in ln for ln in sink.log_lines("B")))
        await sink.wait_for(lambda: sink.of(EngineUpdate, "A") and sink.of(EngineUpdate, "A")[-1].progress.phase == "failed")
    finally:
        await asyncio.gather(*(s.stop() for s in svcs))


async def test_gb10_unified_memory_uses_process_memory(sim_factory):
    h = await sim_factory(profile="glm53-flash-nvfp4-2x-gb10-sglang", running=True, time_scale=0.005)
    sink = Collector()
    svcs = await _services(h, sink)
    try:
        await sink.wait_for(lambda: any(a.used_memory_mib and a.used_memory_mib > 90 * 1024
                                        for m in sink.of(AppsSample, "A") for a in m.apps))
        g = sink.of(GpuSample, "A")[-1].gpus[0]
        assert g.name == "NVIDIA GB10" and g.memory_used_mib is None and g.memory_total_mib is None
        mem = sink.of(HostMemSample, "A")[-1].memory
        assert mem.total_mib == 121 * 1024
        await sink.wait_for(lambda: sink.of(EngineUpdate, "A") and sink.of(EngineUpdate, "A")[-1].progress.phase == "ready")
        await sink.wait_for(lambda: any("fired up and ready to roll" in ln for ln in sink.log_lines("A")))
    finally:
        await asyncio.gather(*(s.stop() for s in svcs))


async def test_container_restart_resumes_log_without_repeating(sim_factory):
    h = await sim_factory(running=True, time_scale=0.002)
    sink = Collector()
    svcs = await _services(h, sink)
    try:
        await sink.wait_for(lambda: any("Application startup complete." in ln for ln in sink.log_lines("A")))
        stop_container(h.world, "A")
        await sink.wait_for(lambda: sink.of(ContainerUpdate, "A")[-1].info.state == "exited")
        n = len(sink.log_lines("A"))
        start_container(h.world, "A")
        await sink.wait_for(lambda: sink.log_lines("A").count("INFO:     Application startup complete.") >= 2)
        second = sink.log_lines("A")[n:]
        assert second.count("INFO:     Application startup complete.") == 1
    finally:
        await asyncio.gather(*(s.stop() for s in svcs))


async def test_events_replay_a_start_that_beat_the_subscription(sim_factory):
    """``docker events --since 30s``: a start between our inspect and the subscription is not lost."""
    from console.probes import docker as docker_probe
    from console.remote import cmdlines
    from console.remote.transport import SSHTransport

    h = await sim_factory(running=False, time_scale=0.005)
    h.start_service(gap_s=0.0)
    t = SSHTransport(h.config.station("A"), connect_timeout=2.0, command_timeout=10.0)
    try:
        # the container is running (docker says so) before anyone subscribes to its events
        deadline = time.monotonic() + 10
        while True:
            res = await t.run(cmdlines.docker_inspect("glm53"))
            if docker_probe.parse_inspect("glm53", res.stdout, res.exit_status).state == "running":
                break
            assert time.monotonic() < deadline, "the container never started"
            await asyncio.sleep(0.1)
        lines = []

        async def first_line():
            async for line in t.stream(cmdlines.docker_events("glm53")):
                lines.append(line)
                return

        await asyncio.wait_for(first_line(), 10)
        ev = docker_probe.parse_event(lines[0])
        assert ev is not None and ev.status == "start" and ev.name == "glm53"
    finally:
        await t.close()
