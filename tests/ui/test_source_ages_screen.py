"""Every value its own age on screen: a station whose GPU samples alone
are late says which source and how late, with its GPU rows dimmed and aged while the container and
host memory stay bright; a stale or unreachable station's GPU rows, container, engine and NCCL
labels are dimmed with their age, in the pane and in the fleet row; GPU readings frozen under an
nvidia-smi error are dimmed with their age."""

from __future__ import annotations

import time

from rich.text import Text

from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress
from console.probes.meminfo import HostMemory
from console.probes.nvidia_smi import GpuReading
from console.station.messages import ConnectionState, ContainerUpdate, EngineUpdate, GpuSample, HostMemSample
from console.ui import clock
from console.ui.app import ConsoleApp
from console.ui.widgets.fleet_table import cells, fleet_row
from console.ui.widgets.gpu_meter import GpuMeter
from tests.ui.pair_app import pair_app, pane_text
from tests.waiting import until


def gpus(used=236902):
    return [GpuReading(0, "GPU-0", "NVIDIA GB300", used, 256703, 35, 41, 461.0)]


def dim_spans(text: Text, word: str) -> bool:
    """``word`` is drawn dim in ``text`` (its own span, or the whole text)."""
    start = text.plain.find(word)
    assert start >= 0, (word, text.plain)
    styles = [str(text.style)] + [str(s.style) for s in text.spans if s.start <= start < s.end]
    return any("dim" in s for s in styles)


def status_text(pane) -> Text:
    return pane.query_one(".status").content.joined  # type: ignore[attr-defined]


async def test_gpu_samples_late_alone_say_so_and_only_they_are_dimmed(monkeypatch):
    now = [time.time()]
    monkeypatch.setattr(clock, "now", lambda: now[0])
    app = pair_app()
    async with app.run_test(size=(200, 50)) as pilot:
        t = now[0]
        post = app.post_message
        post(ConnectionState("B", "live", last_sample_at=t))
        post(GpuSample("B", gpus(), t))
        post(HostMemSample("B", HostMemory(507904, 400000), t))
        post(ContainerUpdate("B", ContainerInfo("glm53", "running"), at=t))
        post(EngineUpdate("B", EngineProgress("ready", transport="gdrdma"), at=t))
        pane = app.panes["B"]
        await until(lambda: "● live" in pane_text(app, "B") and "engine serving" in pane_text(app, "B"),
                    what="B live", pilot=pilot)
        meter = pane.query_one(GpuMeter)
        assert not meter.has_class("-stale") and "old" not in pane_text(app, "B")
        # nvidia-smi hangs: 12 s later the host memory still comes, the GPU samples do not
        now[0] = t + 12
        post(HostMemSample("B", HostMemory(507904, 400000), t + 12))
        post(ConnectionState("B", "stale", "nvidia-smi not answering; SSH fine", last_sample_at=t + 12, late="gpus"))
        await until(lambda: "GPU samples stale 12 s: nvidia-smi not answering; SSH fine" in pane_text(app, "B"),
                    what="the late source named", pilot=pilot, detail=lambda: pane_text(app, "B"))
        await until(lambda: meter.has_class("-stale"), what="the GPU rows dimmed", pilot=pilot)
        text = pane_text(app, "B")
        assert "util 35%" in text and "· 12 s old" in text  # the frozen numbers, with their age
        assert not pane.has_class("-stale")  # one source late: the rest is not old
        status = status_text(pane)
        assert not dim_spans(status, "glm53: running") and "(" not in status.plain.split("glm53: running")[1][:3]
        assert "host mem" in text and "old)" not in text.split("host mem")[1].splitlines()[0]
        # the age moves by itself (the dashboard ticks the panes every second)
        now[0] = t + 14
        await until(lambda: "GPU samples stale 14 s" in pane_text(app, "B") and "· 14 s old" in pane_text(app, "B"),
                    what="the ages to move", pilot=pilot, detail=lambda: pane_text(app, "B"))
        # the fleet row: dimmed, aged by its GPU readings, the why in the error column
        row = fleet_row(app.stations["B"], now[0])
        assert row.stale and round(row.age_s or 0) == 14
        assert row.error == "GPU samples stale 14 s: nvidia-smi not answering; SSH fine"
        cs = cells(row, None, 24)
        assert all(dim_spans(c, c.plain[:1]) for c in (cs[3], cs[4], cs[5], cs[6]))  # engine, memory, util, NCCL
        # back: live, nothing dimmed
        post(GpuSample("B", gpus(), t + 14))
        post(ConnectionState("B", "live", last_sample_at=t + 14))
        await until(lambda: not meter.has_class("-stale") and "● live" in pane_text(app, "B"),
                    what="B live again", pilot=pilot)
        assert "old" not in pane_text(app, "B") and not fleet_row(app.stations["B"], now[0]).stale


async def test_down_means_dimmed_gpu_rows_container_engine_and_nccl_with_their_age(monkeypatch):
    now = [time.time()]
    monkeypatch.setattr(clock, "now", lambda: now[0])
    app = pair_app()
    async with app.run_test(size=(200, 50)) as pilot:
        t = now[0]
        post = app.post_message
        post(ConnectionState("B", "live", last_sample_at=t))
        post(GpuSample("B", gpus(), t))
        post(HostMemSample("B", HostMemory(507904, 400000), t))
        post(ContainerUpdate("B", ContainerInfo("glm53", "running"), at=t))
        post(EngineUpdate("B", EngineProgress("ready", transport="gdrdma"), at=t))
        pane = app.panes["B"]
        await until(lambda: "engine serving" in pane_text(app, "B"), what="B live", pilot=pilot)
        status = status_text(pane)
        assert not any(dim_spans(status, w) for w in ("glm53: running", "serving (worker)", "GPUDirect RDMA"))
        now[0] = t + 20
        post(ConnectionState("B", "unreachable", "B: no sample for 6 s; connection declared dead",
                             last_sample_at=t, next_try_at=t + 21))
        await until(lambda: "✖ unreachable" in pane_text(app, "B"), what="B down", pilot=pilot)
        await until(lambda: pane.query_one(GpuMeter).has_class("-stale"), what="the GPU rows dimmed", pilot=pilot)
        status = status_text(pane)
        assert all(dim_spans(status, w) for w in ("glm53: running", "serving (worker)", "GPUDirect RDMA"))
        assert "glm53: running (20 s old)" in status.plain and "serving (worker) (20 s old)" in status.plain
        text = pane_text(app, "B")
        assert "· 20 s old" in text and "(20 s old)" in text.split("host mem")[1].splitlines()[0]
        row = fleet_row(app.stations["B"], now[0])
        assert row.stale and all(dim_spans(c, c.plain[:1]) for c in cells(row, None, 24)[3:7])


async def test_gpu_readings_frozen_under_an_nvidia_smi_error_are_dimmed_with_their_age(monkeypatch):
    now = [time.time()]
    monkeypatch.setattr(clock, "now", lambda: now[0])
    app = pair_app()
    async with app.run_test(size=(200, 50)) as pilot:
        t = now[0]
        post = app.post_message
        post(ConnectionState("B", "live", last_sample_at=t))
        post(GpuSample("B", gpus(), t))
        pane = app.panes["B"]
        await until(lambda: "util 35%" in pane_text(app, "B"), what="B's GPU", pilot=pilot)
        now[0] = t + 5
        post(GpuSample("B", [], t + 5, error="nvidia-smi: Failed to initialize NVML: Driver/library version mismatch"))
        await until(lambda: "Driver/library version mismatch" in pane_text(app, "B"), what="the error", pilot=pilot)
        await until(lambda: pane.query_one(GpuMeter).has_class("-stale") and "· 5 s old" in pane_text(app, "B"),
                    what="the frozen values dimmed with their age", pilot=pilot, detail=lambda: pane_text(app, "B"))
        post(GpuSample("B", gpus(), t + 6))
        await until(lambda: not pane.query_one(GpuMeter).has_class("-stale"), what="fresh again", pilot=pilot)
        assert "Driver/library" not in pane_text(app, "B") and "old" not in pane_text(app, "B")


async def test_the_real_app_over_the_sim_names_a_hung_nvidia_smi_and_comes_back(sim_factory):
    """The whole path: the station service over SSH to a simulated station whose nvidia-smi hangs
    (no output, hangup ignored) while everything else answers; the pane names the source, dims
    its GPU rows with their age, keeps the container bright; live again when the tool answers."""
    h = await sim_factory(running=True, time_scale=0.005)
    app = ConsoleApp(h.config, gpu_interval_ms=200)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.panes["B"]
        await until(lambda: pane.conn_state == "live" and pane.meters and pane.meters[-1].used_mib is not None,
                    what="B live with its GPUs", pilot=pilot, timeout=60)
        h.world.set_faults("B", ["smi-hang"])
        try:
            await until(lambda: "nvidia-smi not answering; SSH fine" in pane_text(app, "B"),
                        what="the late source named", pilot=pilot, timeout=30, detail=lambda: pane_text(app, "B"))
            assert "GPU samples stale " in pane_text(app, "B") and pane.conn_state == "stale"
            await until(lambda: all(m.has_class("-stale") for m in pane.meters), what="B's GPU rows dimmed",
                        pilot=pilot)
            assert " s old" in pane_text(app, "B") and not pane.has_class("-stale")
            assert not dim_spans(status_text(pane), "glm53: running")
            assert app.panes["A"].conn_state == "live"  # the other station is not disturbed
        finally:
            h.world.set_faults("B", [])
        await until(lambda: pane.conn_state == "live" and not any(m.has_class("-stale") for m in pane.meters),
                    what="B live again", pilot=pilot, timeout=30, detail=lambda: pane_text(app, "B"))
        assert "GPU samples stale" not in pane_text(app, "B") and " s old" not in pane_text(app, "B")
