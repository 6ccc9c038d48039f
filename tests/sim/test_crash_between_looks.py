"""A crash while watched shows its reason: a container that starts and dies between
two looks (here: its whole run lies between two polls of the station) still has its log read, so the
fatal line and the engine's failure reach the pane that watched, not only a console started later."""

from __future__ import annotations

import time

from test_monitor import Collector

from console.probes.docker import parse_time
from console.sim.engine import start_container
from console.station.messages import ContainerUpdate, EngineUpdate, HostMemSample, LogBatch
from console.station.monitor import StationService
from tests.sim.station_procs import events_watching
from tests.waiting import until


def _last(sink, kind, station="B"):
    got = sink.of(kind, station)
    return got[-1] if got else None


async def _watch_b(h):
    sink = Collector()
    svc = StationService(h.config, h.config.station("B"), sink, gpu_interval_ms=200)
    svc.start()
    await until(lambda: sink.of(HostMemSample, "B") and sink.of(ContainerUpdate, "B"), what="B watched",
                timeout=30)
    await until(lambda: events_watching(h.world, "B"), what="B's container events watched", timeout=30)
    return sink, svc


def _crashed(sink) -> bool:
    ctr, eng = _last(sink, ContainerUpdate), _last(sink, EngineUpdate)
    return bool(ctr and ctr.info.state == "exited" and ctr.info.exit_code == 1 and eng
                and eng.progress.phase == "failed" and "OutOfMemoryError" in (eng.progress.fatal or "")
                and any("OutOfMemoryError" in ln for ln in sink.log_lines("B")))


def _seen(sink):
    eng = _last(sink, EngineUpdate)
    return (_last(sink, ContainerUpdate).info, eng and (eng.progress.phase, eng.progress.fatal),
            sink.log_lines("B")[-3:])


async def test_a_first_run_that_died_between_two_looks_is_read_with_its_fatal_line(sim_factory):
    h = await sim_factory(faults=["oom@B"], time_scale=0.005)
    sink, svc = await _watch_b(h)
    try:
        start_container(h.world, "B", at=time.time() - 3)  # started and died (OOM, exit 1) since the last look
        await until(lambda: _crashed(sink), what="B: exited (1), engine failed with the OOM line, the line in the log",
                    timeout=20, detail=lambda: _seen(sink))
    finally:
        await svc.stop()


def _new_run_read(sink, started: float) -> bool:
    """The run that started at ``started``: its exit seen, its OOM line read (by its docker time), the
    engine failed after it."""
    ctr = _last(sink, ContainerUpdate)
    if not ctr or abs((parse_time(ctr.info.started_at or "") or 0) - started) > 0.01:
        return False
    oom = [s for m in sink.of(LogBatch, "B") for ln, s in zip(m.lines, m.stamps, strict=True)
           if "OutOfMemoryError" in ln and s and (parse_time(s) or 0) >= started]
    return bool(oom) and _crashed(sink)


async def test_a_restart_that_died_between_two_looks_is_read_after_the_previous_run(sim_factory):
    """The previous run's log was read (the stream resumes ``--since`` its last line); the new run
    crashed before anyone looked: its lines follow, the old run's are not repeated."""
    h = await sim_factory(faults=["oom@B"], time_scale=0.005)
    start_container(h.world, "B", at=time.time() - 60)  # an earlier crash, before the console started
    sink, svc = await _watch_b(h)
    try:
        await until(lambda: _crashed(sink), what="the earlier run read", timeout=20, detail=lambda: _seen(sink))
        before = sum("OutOfMemoryError" in ln for ln in sink.log_lines("B"))
        started = time.time() - 3
        start_container(h.world, "B", at=started)  # started and died since the last look
        await until(lambda: _new_run_read(sink, started), what="the second run's exit, OOM line and failure",
                    timeout=20, detail=lambda: _seen(sink))
        assert sum("OutOfMemoryError" in ln for ln in sink.log_lines("B")) == 2 * before  # not the old run again
    finally:
        await svc.stop()
