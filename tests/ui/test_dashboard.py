"""The real app, headless (Pilot): live against simulated stations, and snapshots of fixed states."""

import io
import time

import pytest
from rich.console import Console
from textual.widgets import Input

from console.config import parse_config
from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress
from console.probes.meminfo import HostMemory
from console.probes.nvidia_smi import ComputeApp, GpuReading
from console.station.messages import (
    AppsSample,
    ConnectionState,
    ContainerUpdate,
    EngineUpdate,
    GpuSample,
    HostMemSample,
    LogBatch,
)
from console.ui import clock
from console.ui.app import ConsoleApp
from console.ui.widgets.log_view import LogView
from console.ui.widgets.station_pane import StationPane
from tests.ui.pair_app import pane_text
from tests.ui.snap_settle import settle
from tests.waiting import until


async def test_demo_shows_both_stations_with_gpu_memory_and_logs(sim_factory):
    h = await sim_factory(running=True, time_scale=0.005)
    app = ConsoleApp(h.config, gpu_interval_ms=200)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(lambda: all(app.stations[n].gpus and p.meters for n, p in app.panes.items()),
                    what="both stations' GPUs", pilot=pilot)
        a, b = app.panes["A"], app.panes["B"]
        assert "rank 0" in a.border_title and "API host" in a.border_title
        assert "rank 1" in b.border_title and "worker" in b.border_title
        await until(lambda: "Application startup complete." in "\n".join(a.log_pane.lines),
                    what="A's ready line", pilot=pilot)
        await until(lambda: a.progress is not None and a.progress.phase == "ready", what="A ready", pilot=pilot)
        text = pane_text(app, "A")
        assert "live" in text and "glm53: running" in text and "ready" in text
        assert "GPUDirect RDMA" in text
        assert "/250.7 GiB" in text  # the GB300's memory, used/total
        await until(lambda: any("headless multiproc executor" in ln for ln in b.log_pane.lines),
                    what="B's worker line", pilot=pilot)
        assert "DEMO" in app.sub_title
        # The log filter narrows the pane to matching lines and Esc restores them.
        await pilot.press("slash")
        await until(lambda: isinstance(app.focused, Input), what="the filter's input", pilot=pilot)
        await pilot.press(*"GDRDMA")
        await until(lambda: (shown := list(a.log_pane.log_widget.lines)) and all("GDRDMA" in ln for ln in shown),
                    what="only the matching lines", pilot=pilot, detail=lambda: list(a.log_pane.log_widget.lines)[:5])
        await pilot.press("escape")
        await until(lambda: len(a.log_pane.log_widget.lines) == len(a.log_pane.lines), what="every line again",
                    pilot=pilot)
        assert isinstance(app.focused, LogView)


async def test_unreachable_station_is_shown_while_the_other_updates(sim_factory):
    h = await sim_factory(running=True, faults=["station-unreachable@B"], time_scale=0.005)
    app = ConsoleApp(h.config, gpu_interval_ms=200)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(lambda: app.panes["B"].conn_state == "unreachable", what="B unreachable", pilot=pilot)
        assert "no answer" in pane_text(app, "B")
        a = app.stations["A"]
        await until(lambda: app.panes["A"].meters and a.traces, what="A's GPU traces", pilot=pilot)
        trace = a.traces[app.panes["A"].meters[-1].index]
        n = len(trace.times)
        await until(lambda: len(trace.times) >= n + 3,
                    what="3 more samples of A", pilot=pilot)  # A keeps updating
        assert a.conn.state == "live"


async def test_unknown_host_key_offers_the_trust_step(sim_factory, tmp_path):
    import dataclasses

    h = await sim_factory(running=False)
    empty = tmp_path / "kh"
    empty.write_text("")
    stations = tuple(dataclasses.replace(s, known_hosts=str(empty)) for s in h.config.stations)
    cfg = dataclasses.replace(h.config, stations=stations)
    app = ConsoleApp(cfg, gpu_interval_ms=200)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(lambda: app.panes["A"].conn_state == "host-key-unknown",
                    what="A's unknown host key", pilot=pilot)
        fp = app.panes["A"].fingerprint
        assert fp and fp.startswith("SHA256:") and fp in pane_text(app, "A")
        await pilot.press("T")
        await until(lambda: app.screen.__class__.__name__ == "TrustHostKeyScreen", what="the trust dialog",
                    pilot=pilot)
        await pilot.click("#yes")
        await until(lambda: app.panes["A"].conn_state == "live", what="A live", pilot=pilot)
        assert fp.removeprefix("SHA256:") not in empty.read_text()  # the key itself is stored, not the hash
        assert "ssh-ed25519" in empty.read_text()


# ---------------------------------------------------------------- snapshots (fixed data, no I/O)

T0 = 1764590400.0  # fixed sample clock: the history rows and plots never depend on the test machine
NOW = T0 + 237.902  # the screens' "now" in the snapshots: 1 s after the newest sample (every value fresh)

SNAP_CONFIG = """
profile = "glm53-nvfp4-2x-gb300-vllm"
[[stations]]
name = "A"
host = "station-a"
rank = 0
[[stations]]
name = "B"
host = "station-b"
rank = 1
"""

A_LOG = [
    "(APIServer pid=1) INFO 11-30 14:05:21 [api_server.py:1896] vLLM API server version 0.30.0",
    "station-a:412:530 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
    "(Worker_TP0 pid=412) INFO 11-30 14:09:21 [gpu_model_runner.py:2677] Model loading took 218.00 GiB memory",
    "(EngineCore_DP0 pid=263) WARNING 11-30 14:10:01 [core.py:90] something worth a look",
    "INFO:     Application startup complete.",
]
B_LOG = [
    "(APIServer pid=1) INFO 11-30 14:05:19 [api_server.py:1830] Launching vLLM (v0.30.0) headless multiproc executor",
    "Loading safetensors checkpoint shards:  60% Completed | 30/50",
    "(Worker_TP1 pid=412) ERROR 11-30 14:07:02 [multiproc_executor.py:744] WorkerProc failed to start.",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB.",
]


def _gpus(used):
    return [GpuReading(0, "GPU-0", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 1184, 97887, 1, 31, 22.5),
            GpuReading(1, "GPU-1", "NVIDIA GB300", used, 256703, 0, 41, 165.4)]


def snapshot_app(theme="dgx-dark"):
    """The app and what to run before its snapshot (feeding it what the station services would post)."""
    cfg = parse_config(SNAP_CONFIG, "snap.toml")
    app = ConsoleApp(cfg, start_services=False, clock=False, theme=theme)

    async def feed(pilot):
        await pilot.pause()
        post = app.post_message
        post(ConnectionState("A", "live"))
        post(ConnectionState("B", "live"))
        for used in (600, 60000, 120000, 180000, 223000, 236902):
            post(GpuSample("A", _gpus(used), T0 + used / 1000))
            await pilot.pause()
        for used in (600, 40000, 90000, 140000):  # B's newest sample as new as A's (NOW - 1 s): both fresh
            post(GpuSample("B", _gpus(used), T0 + 96.902 + used / 1000))
            await pilot.pause()
        post(HostMemSample("A", HostMemory(507904, 483000), NOW - 1))
        post(HostMemSample("B", HostMemory(507904, 480000), NOW - 1))
        post(ContainerUpdate("A", ContainerInfo("glm53", "running")))
        post(ContainerUpdate("B", ContainerInfo("glm53", "exited", exit_code=1)))
        post(EngineUpdate("A", EngineProgress(phase="ready", transport="gdrdma")))
        post(EngineUpdate("B", EngineProgress(phase="failed", transport="gdrdma",
                                              fatal="torch.OutOfMemoryError: CUDA out of memory.")))
        post(LogBatch("A", A_LOG))
        post(LogBatch("B", B_LOG))
        panes = app.panes
        await until(lambda: all(panes[n].log_pane.total == len(log) for n, log in (("A", A_LOG), ("B", B_LOG)))
                    and app.stations["B"].engine is not None and app.stations["B"].host_mem is not None,
                    what="the fed state", pilot=pilot)
        # the diagnosis (a 0.5 s interval) is drawn now and its toast cleared: CI once took the
        # picture before the interval fired
        await settle(pilot)

    return app, feed


def test_snapshot_dashboard_dark(snap_compare, monkeypatch):
    monkeypatch.setattr(clock, "now", lambda: NOW)  # every value is as old as it is, judged at a fixed now
    app, feed = snapshot_app()
    assert snap_compare(app, terminal_size=(160, 40), run_before=feed)


def test_snapshot_dashboard_light(snap_compare, monkeypatch):
    monkeypatch.setattr(clock, "now", lambda: NOW)
    app, feed = snapshot_app("dgx-light")
    assert snap_compare(app, terminal_size=(160, 40), run_before=feed)


async def test_gb10_pane_shows_process_memory_in_unified_memory():
    cfg = parse_config(SNAP_CONFIG.replace("glm53-nvfp4-2x-gb300-vllm", "glm53-flash-nvfp4-2x-gb10-sglang"), "x.toml")
    app = ConsoleApp(cfg, start_services=False, clock=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        app.post_message(GpuSample("A", [GpuReading(0, "GPU-x", "NVIDIA GB10", None, None, 0, 35, 11.2)], 0))
        app.post_message(HostMemSample("A", HostMemory(123904, 20000), 0))
        app.post_message(AppsSample("A", [ComputeApp("GPU-x", 114687, "python", 92672)], 0))
        await until(lambda: "90.5/121.0 GiB" in pane_text(app, "A"), what="A's process memory", pilot=pilot,
                    detail=lambda: pane_text(app, "A"))
        assert "unified" in pane_text(app, "A")


@pytest.mark.parametrize("n", [3, 4, 8])
async def test_many_stations_wrap_into_a_grid(n):
    text = "".join(f'[[stations]]\nname = "S{i}"\nhost = "h{i}"\nrank = {i}\n' for i in range(n))
    app = ConsoleApp(parse_config(text, "x.toml"), start_services=False, clock=False)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        if n >= 5:  # the fleet table comes first from 5 stations; f shows the panes
            assert app.dashboard.view == "fleet"
            await pilot.press("f")
            await pilot.pause()
        panes = list(app.dashboard.query(StationPane))
        assert len(panes) == n
        cols = len({p.region.x for p in panes})
        assert cols == (2 if n <= 4 else 3)
        assert all(p.region.width > 40 for p in panes)


async def test_log_width_follows_the_widest_line_ascii_tabs_and_wide_chars():
    """LogView measures width as lines arrive (no thread worker per write): the horizontal extent must
    still be the widest line's cells, tabs expanded and wide characters counted twice."""
    app = ConsoleApp(parse_config(SNAP_CONFIG, "snap.toml"), start_services=False, clock=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        log = app.panes["A"].log_pane.log_widget
        app.post_message(LogBatch("A", ["x" * 300, "short"]))
        await until(lambda: log.virtual_size.height == 2, what="two lines", pilot=pilot)
        assert log.widest == 300 and log.virtual_size.width == 320  # (scrollable in steps of WIDTH_STEP)
        app.post_message(LogBatch("A", ["\t" + "y" * 300]))  # a tab expands to 8 cells
        await until(lambda: log.virtual_size.height == 3, what="the tab line", pilot=pilot)
        assert log.widest == 308 and log.virtual_size.width == 320
        app.post_message(LogBatch("A", ["模型" * 160]))  # 320 double-width characters
        await until(lambda: log.virtual_size.height == 4, what="the wide line", pilot=pilot)
        assert log.widest == 640 and log.virtual_size.width == 640


async def test_p_lists_the_gpu_processes_from_the_station(sim_factory):
    """nvidia-smi --query-compute-apps on the station's session, shown on p in the focused pane."""
    from console.ui.widgets.process_list import ProcessList

    h = await sim_factory(running=True, time_scale=0.005)
    app = ConsoleApp(h.config, gpu_interval_ms=200)
    async with app.run_test(size=(200, 50)) as pilot:
        pane = app.panes["A"]
        state = app.stations["A"]
        await until(lambda: state.apps_seen and state.apps, what="A's GPU processes", pilot=pilot)
        procs = pane.query_one(ProcessList)
        assert not procs.display or not procs.has_class("-shown")
        pane.log_pane.log_widget.focus()
        await pilot.press("p")
        await until(lambda: procs.has_class("-shown") and procs.region.height > 1, what="the process list",
                    pilot=pilot)
        app_row = max(state.apps, key=lambda a: a.used_memory_mib or 0)
        console = Console(width=90, record=True, file=io.StringIO(), color_system=None)
        console.print(procs.content)
        text = console.export_text()
        assert "PID" in text and str(app_row.pid) in text and "GiB" in text
        await pilot.press("p")
        await until(lambda: not procs.has_class("-shown"), what="the process list hidden", pilot=pilot)


async def test_fleet_age_is_the_newest_sample_while_live():
    """The connection's last_sample_at is said once (when a station turns live); the GPU samples
    keep coming: the fleet's age is the newer of the two, never the time since it turned live."""
    from console.ui.widgets.fleet_table import fleet_row

    app = ConsoleApp(parse_config(SNAP_CONFIG, "snap.toml"), start_services=False, clock=False)
    async with app.run_test(size=(160, 40)) as pilot:
        now = time.time()
        app.post_message(ConnectionState("A", "live", last_sample_at=now - 30))
        app.post_message(GpuSample("A", _gpus(1000), now - 1))
        state = app.stations["A"]
        await until(lambda: state.gpus_at is not None and state.conn.state == "live",
                    what="A's sample", pilot=pilot)
        assert fleet_row(state, now).age_s == pytest.approx(1.0)
        app.post_message(ConnectionState("A", "stale", last_sample_at=now - 1))
        await until(lambda: state.conn.state == "stale", what="A stale", pilot=pilot)
        assert fleet_row(state, now + 20).age_s == pytest.approx(21.0)
