"""The station service under faults, over real SSH to the in-process simulated stations: an
unexpected exception is a visible ``error`` and a restart; a station whose samples stop (its
processes frozen, the SSH connection itself fine) turns ``stale``, is declared dead and comes back;
a dropped connection resumes the log with nothing lost or repeated and a marker at the gap."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time

from test_monitor import Collector

from console.remote.session import SessionRegistry
from console.sim.world import append_log
from console.station.messages import ConnectionState, GpuSample, LogMarker
from console.station.monitor import StationService
from console.station.services import job_name, start_station_services
from console.supervisor import Supervisor


def states(sink, station="A"):
    return [m.state for m in sink.of(ConnectionState, station)]


async def test_an_exception_in_the_service_is_an_error_state_and_it_restarts(sim):
    sink = Collector()
    svc = StationService(sim.config, sim.config.station("A"), sink, gpu_interval_ms=200)
    real = svc._post_gpus
    injected = []

    def post(gpus, error=None):
        if not injected and sink.of(GpuSample, "A"):
            injected.append(time.monotonic())
            raise RuntimeError("injected: a parser bug")
        real(gpus, error)

    svc._post_gpus = post
    svc.start()
    try:
        await sink.wait_for(lambda: "error" in states(sink))
        err = next(m for m in sink.of(ConnectionState, "A") if m.state == "error")
        assert err.detail == "RuntimeError: injected: a parser bug" and err.next_try_at is not None
        n = len(sink.of(GpuSample, "A"))
        await sink.wait_for(lambda: states(sink)[-1] == "live" and len(sink.of(GpuSample, "A")) > n + 2)
        assert svc.restarts == 1 and "RuntimeError" in svc.last_traceback
    finally:
        await svc.stop()


async def test_a_service_loop_that_dies_is_the_stations_error_state_and_its_job_restarts(sim):
    """The loop that shows every failure can itself fail (here: the first state it reports cannot be
    delivered): the supervisor the TUI and ``watch`` share turns that into the station's ``error`` state,
    with the reason and the restart time, and runs the service again."""
    sink = Collector()
    broken = [True]

    def post(msg):
        if broken[0] and isinstance(msg, ConnectionState) and msg.station == "A":
            broken[0] = False
            raise RuntimeError("injected: the state could not be delivered")
        sink(msg)

    async with SessionRegistry(sim.config) as sessions, Supervisor() as jobs:
        services = start_station_services(jobs, sim.config, post, sessions, 200)
        await sink.wait_for(lambda: "error" in states(sink))
        err = next(m for m in sink.of(ConnectionState, "A") if m.state == "error")
        assert err.detail == "RuntimeError: injected: the state could not be delivered"
        assert err.next_try_at is not None and err.next_try_at > time.time()
        await sink.wait_for(lambda: states(sink)[-1] == "live" and len(sink.of(GpuSample, "A")) > 2)
        job = jobs[job_name("A")]
        assert job.restarts == 1 and job.state == "running" and services["A"].restarts == 1
        assert "RuntimeError" in services["A"].last_traceback
        assert jobs[job_name("B")].restarts == 0 and "error" not in states(sink, "B")
    assert {j.state for j in jobs.jobs.values()} == {"stopped"}


async def test_silent_samples_turn_stale_then_the_connection_is_dropped_and_reopened(sim):
    """SIGSTOP every remote process: the SSH connection (and its keepalive) stays up; only the
    samples stop. That is exactly what a frozen number shown as live would hide."""
    sink = Collector()
    svc = StationService(sim.config, sim.config.station("A"), sink, gpu_interval_ms=200)
    svc.start()
    frozen: list[int] = []
    try:
        await sink.wait_for(lambda: "live" in states(sink) and len(sink.of(GpuSample, "A")) > 3)
        t0 = time.monotonic()
        for pid in list(sim.server._children):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGSTOP)
                frozen.append(pid)
        await sink.wait_for(lambda: states(sink)[-1] == "stale")
        stale = next(m for m in reversed(sink.of(ConnectionState, "A")) if m.state == "stale")
        assert stale.last_sample_at is not None and "no sample for" in stale.detail
        await sink.wait_for(lambda: "declared dead" in (sink.of(ConnectionState, "A")[-1].detail or "")
                            or states(sink)[-1] == "unreachable")
        n = len(sink.of(GpuSample, "A"))
        await sink.wait_for(lambda: states(sink)[-1] == "live" and len(sink.of(GpuSample, "A")) > n)
        assert time.monotonic() - t0 >= svc.stale_after
        seq = states(sink)
        assert seq.index("stale") < len(seq) - 1 - seq[::-1].index("unreachable") < len(seq) - 1
    finally:
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGCONT)
        await svc.stop()


async def test_dropped_connection_resumes_the_log_without_loss_or_repeat(sim_factory):
    h = await sim_factory(running=True, time_scale=0.002)
    sink = Collector()
    svc = StationService(h.config, h.config.station("B"), sink, gpu_interval_ms=200)
    stop = threading.Event()
    written = [0]

    def writer():
        while not stop.is_set():
            written[0] += 1
            append_log(h.world, "B", f"INFO request done seq={written[0]}")
            stop.wait(0.02)

    def seqs():
        return [int(m.group(1)) for ln in sink.log_lines("B") if (m := re.search(r"seq=(\d+)", ln))]

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    svc.start()
    try:
        await sink.wait_for(lambda: len(seqs()) > 20)
        svc._drop()  # the connection goes away under every stream at once
        await sink.wait_for(lambda: "unreachable" in states(sink, "B"))
        await sink.wait_for(lambda: states(sink, "B")[-1] == "live" and any(
            isinstance(ln, LogMarker) for ln in sink.log_lines("B")))
        await sink.wait_for(lambda: len(seqs()) > 0 and max(seqs()) > written[0] - 5)
        stop.set()
        th.join()
        last = written[0]
        await sink.wait_for(lambda: last in seqs())
        got = seqs()
        assert sorted(got) == list(range(1, last + 1)), (len(got), last)  # none lost, none twice
        markers = [ln for ln in sink.log_lines("B") if isinstance(ln, LogMarker)]
        assert len(markers) == 1 and "B: stream interrupted" in markers[0]
    finally:
        stop.set()
        await svc.stop()
