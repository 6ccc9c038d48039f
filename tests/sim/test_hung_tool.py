"""A wedged tool is that tool's problem: with ``nvidia-smi`` hung (NVML stuck: no
output, a hangup ignored) a reconnect must not make the station unreachable for the whole hang or stop
its other streams, and the hung remote processes must be ended, never piled up one per retry.

The simulated station runs real processes and its sshd does what sshd does when a channel closes
(a hangup with a PTY, closed pipes without): the processes are counted on the station."""

from __future__ import annotations

import asyncio
import contextlib
import time

from test_monitor import Collector

from console.station.messages import ConnectionState, ContainerUpdate, GpuSample, HostMemSample
from console.station.monitor import StationService
from tests.sim.station_procs import hung_procs, set_hang, station_procs
from tests.waiting import until


async def test_reconnects_during_a_hung_nvidia_smi_keep_the_station_and_leave_no_stuck_processes(sim):
    w = sim.world
    sink = Collector()
    svc = StationService(sim.config, sim.config.station("B"), sink, gpu_interval_ms=200)
    svc.start()
    try:
        await until(lambda: len(sink.of(GpuSample, "B")) > 2 and sink.of(HostMemSample, "B"),
                    what="B streaming", timeout=30)
        set_hang(w, "B", True)
        for cycle in range(3):  # three reconnects during the hang (a link blip each)
            mark = len(sink.messages)
            t0 = time.monotonic()
            svc._drop()

            def back(mark=mark):
                new = sink.messages[mark:]
                return (any(isinstance(m, HostMemSample) for m in new)
                        and any(isinstance(m, ContainerUpdate) for m in new)
                        and svc.state not in ("unreachable", "connecting"))

            await until(back, what=f"reconnect {cycle + 1}: memory and container monitoring back, not unreachable",
                        timeout=10, detail=lambda: (svc.state, svc.detail, sink.messages[-3:]))
            assert time.monotonic() - t0 < 10
            # the GPU side says what is wrong instead of the station going away
            errs = [m.error for m in sink.of(GpuSample, "B")[-3:] if m.error]
            assert any("nvidia-smi" in e and "not answering" in e for e in errs), errs
        # what is left on the station: at most the three live streams' (GPU rounds, compute apps, and
        # the health rows), however many times it reconnected
        await until(lambda: len(station_procs(w, "B")) <= 3, what="at most the 3 live nvidia-smi streams",
                    timeout=30, detail=lambda: station_procs(w, "B"))
        assert len(station_procs(w, "B")) <= 3
        states = [m.state for m in sink.of(ConnectionState, "B")]
        assert states[-1] not in ("unreachable", "error"), states
        # NVML answers again: samples come back on the same connection
        n = len(sink.of(GpuSample, "B"))
        set_hang(w, "B", False)
        await until(lambda: any(not m.error and m.gpus for m in sink.of(GpuSample, "B")[n:]),
                    what="GPU samples after the hang", timeout=20)
    finally:
        set_hang(w, "B", False)
        await svc.stop()
    await until(lambda: not station_procs(w, "B"), what="no nvidia-smi left after the console stopped",
                timeout=10, detail=lambda: station_procs(w, "B"))


async def test_a_closed_stream_ends_a_tool_that_ignores_the_hangup(sim):
    """The GPU stream's command line itself: closing its channel kills the hung tool on the station."""
    from console.remote import cmdlines
    from console.remote.transport import SSHTransport

    set_hang(sim.world, "A", True)
    t = SSHTransport(sim.config.station("A"), connect_timeout=3, command_timeout=10)
    try:
        for query in (cmdlines.gpu_query(200), cmdlines.compute_apps_query(200)):
            stream = t.stream(query)
            reading = asyncio.ensure_future(stream.__anext__())  # opens the channel, waits for a line
            await until(lambda: hung_procs(sim.world, "A"), what="the stream's nvidia-smi hung", timeout=10)
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await reading
            await stream.aclose()
            await until(lambda: not station_procs(sim.world, "A"), what="the hung nvidia-smi ended with its channel",
                        timeout=30, detail=lambda: station_procs(sim.world, "A"))
        # a one-shot (no PTY, so no hangup at all) is ended station-side too
        res = await t.run(cmdlines.gpu_query(), timeout=30)
        assert res.exit_status != 0
        assert not station_procs(sim.world, "A")
    finally:
        set_hang(sim.world, "A", False)
        await t.close()


async def test_a_station_whose_nvidia_smi_hangs_from_the_start_is_never_called_live(sim):
    """The first GPU round times out: that is no GPU sample, so the station is stale with the GPU source
    named (its other sources answer), never "live" on GPU values nobody read."""
    from console.station.aspects import Aspect

    w = sim.world
    set_hang(w, "B", True)
    sink = Collector()
    svc = StationService(sim.config, sim.config.station("B"), sink, gpu_interval_ms=200)
    svc.start()
    try:
        await until(lambda: any(m.error and "not answering" in m.error for m in sink.of(GpuSample, "B")),
                    what="the first GPU round's timeout", timeout=30)
        await until(lambda: sink.of(ConnectionState, "B")[-1].late == Aspect.GPUS,
                    what="stale, the GPU source named", timeout=20,
                    detail=lambda: sink.of(ConnectionState, "B")[-3:])
        states = [m.state for m in sink.of(ConnectionState, "B")]
        assert "live" not in states, states
        set_hang(w, "B", False)
        await until(lambda: sink.of(ConnectionState, "B")[-1].state == "live", what="live once it answers",
                    timeout=30)
    finally:
        set_hang(w, "B", False)
        await svc.stop()
