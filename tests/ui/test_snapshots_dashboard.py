"""Snapshots of the dashboard in its states (loading, ready, failed), with the diagnosis panel open,
the fleet view of six stations and the NCCL workbench, at 200x50, 120x35 and 80x24.

Deterministic by construction: the app runs without services (the test posts what the station
services and the serving monitor would), every sample carries a fixed time, the screens' "now"
is pinned (``console.ui.clock``), the time zone is UTC, and each picture is taken once the fed
state is on screen (``until``), with the timers' work done and the toasts cleared (``settle``),
never after a fixed pause. The behaviour behind these pictures is tested live against the
simulated stations in test_dashboard.py and the other files."""

from __future__ import annotations

import time

import pytest

from console.config import parse_config
from console.doctor.model import RungResult
from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress, TimelineEvent
from console.probes.meminfo import HostMemory
from console.probes.nvidia_smi import GpuReading
from console.serving.metrics import ServingSnapshot
from console.station.messages import (
    ConnectionState,
    ContainerUpdate,
    EngineUpdate,
    GpuSample,
    HostMemSample,
    LogBatch,
)
from console.ui import clock
from console.ui.app import ConsoleApp
from console.ui.widgets.fleet_table import FleetTable
from console.ui.widgets.serving_panel import ServingPanel, ServingUpdate
from tests.ui.pair_app import pair_config, pane_text
from tests.ui.snap_settle import settle
from tests.waiting import until

SIZES = [(200, 50), (120, 35), (80, 24)]
IDS = [f"{w}x{h}" for w, h in SIZES]
T0 = 1764590400.0  # 2025-12-01 12:00:00 UTC: the newest sample; "now" is 2 s later
URL = "http://127.0.0.1:8000"


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch, tmp_path):
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # no workbench report from this machine
    time.tzset()
    monkeypatch.setattr(clock, "now", lambda: T0 + 2.0)
    yield
    monkeypatch.undo()
    time.tzset()


def _gpus(used: float, util: int = 0, total: float = 256703) -> list[GpuReading]:
    return [GpuReading(0, "GPU-d0", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 1184, 97887, 1, 31, 22.5),
            GpuReading(1, "GPU-s1", "NVIDIA GB300", used, total, util, 48, 310.0)]


HEAD_LOG = [
    "(APIServer pid=1) INFO 12-01 11:55:21 [api_server.py:1896] vLLM API server version 0.30.0",
    "station-a:412:530 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
    "station-a:412:530 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
    "Loading safetensors checkpoint shards:  60% Completed | 30/50 [02:23<01:35, 4.79s/it]",
]
READY_LOG = HEAD_LOG + [
    "(Worker_TP0 pid=412) INFO 12-01 11:59:21 [gpu_model_runner.py:2677] Model loading took 218.00 GiB memory",
    "(EngineCore_DP0 pid=263) INFO 12-01 11:59:40 [kv_cache_utils.py:1087] GPU KV cache size: 1,234,560 tokens",
    "INFO:     Application startup complete.",
    '(APIServer pid=1) INFO:     127.0.0.1:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
]
WORKER_LOG = [
    "(APIServer pid=1) INFO 12-01 11:55:19 [api_server.py:1830] Launching vLLM (v0.30.0) headless multiproc executor",
    "station-b:412:530 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDRDMA",
    "Loading safetensors checkpoint shards:  60% Completed | 30/50 [02:23<01:35, 4.79s/it]",
]
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of "
       "250.69 GiB of which 1.19 GiB is free. Process 4242 has 29.20 GiB memory in use. Of the allocated memory "
       "216.40 GiB is allocated by PyTorch, and 2.10 GiB is reserved by PyTorch but unallocated.")
FAILED_LOG = WORKER_LOG[:2] + [
    "(Worker_TP1 pid=412) ERROR 12-01 11:57:02 [multiproc_executor.py:744] WorkerProc failed to start.",
    "(Worker_TP1 pid=412) ERROR 12-01 11:57:02 [multiproc_executor.py:744] " + OOM,
]
TIMELINE = (TimelineEvent("nccl-init", T0 - 240, "2 ranks"), TimelineEvent("weights-end", T0 - 60, "218.00 GiB in 180 s"))


def _app(config=None) -> ConsoleApp:
    return ConsoleApp(config or pair_config(api_url=URL), start_services=False, clock=False)


async def _samples(pilot, station: str, top_mib: float, util: int = 0, n: int = 12) -> None:
    """``n`` GPU samples 10 s apart by their own clock, the last at T0, memory rising to ``top_mib``."""
    for k in range(n):
        pilot.app.post_message(GpuSample(station, _gpus(600 + (top_mib - 600) * (k + 1) / n, util),
                                         T0 - 10 * (n - 1 - k)))
        await pilot.pause()


async def _pair(pilot, a: EngineProgress, b: EngineProgress, a_log, b_log, serving: ServingSnapshot,
                b_container: ContainerInfo | None = None) -> None:
    app = pilot.app
    post = app.post_message
    await pilot.pause()
    for st in ("A", "B"):
        post(ConnectionState(st, "live"))
        post(HostMemSample(st, HostMemory(507904, 482000), T0))
    await _samples(pilot, "A", 236902 if a.phase == "ready" else 150000, 37 if a.phase == "ready" else 21)
    await _samples(pilot, "B", 236902 if b.phase == "ready" else 150000, 35 if b.phase == "ready" else 21)
    post(ContainerUpdate("A", ContainerInfo("glm53", "running")))
    post(ContainerUpdate("B", b_container or ContainerInfo("glm53", "running")))
    post(EngineUpdate("A", a))
    post(EngineUpdate("B", b))
    post(LogBatch("A", a_log))
    post(LogBatch("B", b_log))
    post(ServingUpdate(serving))
    panes = app.panes
    panel = app.dashboard.query_one(ServingPanel)
    await until(lambda: panes["A"].log_pane.total == len(a_log) and panes["B"].log_pane.total == len(b_log)
                and panes["A"].progress == a and panes["B"].progress == b and panel.snapshot == serving
                and all(len(p.meters) == 2 and p.meters[1].used_mib for p in panes.values()),
                what="the fed state", pilot=pilot,
                detail=lambda: (panes["A"].log_pane.total, len(a_log), panes["B"].log_pane.total, len(b_log),
                                panes["A"].progress == a, panes["B"].progress == b, panel.snapshot == serving,
                                panel.snapshot and {k: (v, getattr(serving, k)) for k, v in vars(panel.snapshot).items() if v != getattr(serving, k)},
                                [(len(p.meters), p.meters[-1].used_mib if p.meters else None)
                                 for p in panes.values()]))
    await settle(pilot)


LOADING = ServingSnapshot(url=URL, status="unreachable", error="all connection attempts failed", polled_at=T0)
READY = ServingSnapshot(url=URL, healthy=True, status="ok", model="glm-5.3", version="0.30.0", engine="vllm",
                        running=3, waiting=1, kv_usage=0.235, gen_tok_s=1310.4, prompt_tok_s=5210.0, ttft_p50_s=0.48,
                        itl_p50_s=0.021, prefix_hit_rate=0.42, spec_accept_rate=0.71, spec_mean_len=2.9,
                        preemptions=0, updated_at=T0, polled_at=T0)


async def _loading(pilot) -> None:
    await _pair(pilot, EngineProgress("loading", load_pct=60, transport="gdrdma", timeline=TIMELINE[:1]),
                EngineProgress("loading", load_pct=60, transport="gdrdma", headless=True, timeline=TIMELINE[:1]),
                HEAD_LOG, WORKER_LOG, LOADING)


async def _ready(pilot) -> None:
    await _pair(pilot, EngineProgress("ready", weights_gib=218.0, transport="gdrdma", timeline=TIMELINE),
                EngineProgress("ready", weights_gib=218.0, transport="gdrdma", headless=True, timeline=TIMELINE),
                READY_LOG, WORKER_LOG, READY)


async def _failed(pilot) -> None:
    await _pair(pilot, EngineProgress("loading", load_pct=60, transport="gdrdma"),
                EngineProgress("failed", transport="gdrdma", fatal=FAILED_LOG[-1]), HEAD_LOG, FAILED_LOG,
                LOADING, ContainerInfo("glm53", "exited", exit_code=1))


async def _diagnosis(pilot) -> None:
    await _failed(pilot)
    await pilot.press("d")
    await until(lambda: pilot.app.dashboard.has_class("-show-diagnosis"),
                what="the diagnosis panel", pilot=pilot)
    await settle(pilot)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_dashboard_loading(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size, run_before=_loading)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_dashboard_ready(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size, run_before=_ready)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_dashboard_failed(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size, run_before=_failed)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_dashboard_diagnosis(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size, run_before=_diagnosis)


# ------------------------------------------------------------------ fleet (six stations)

FLEET = "[api]\nurl = \"http://127.0.0.1:8000\"\n" + "".join(
    f'[[stations]]\nname = "S{i}"\nhost = "127.0.0.{i + 1}"\nrank = {i}\n' for i in range(6))


async def _fleet(pilot) -> None:
    app = pilot.app
    post = app.post_message
    await pilot.pause()
    phases = ["ready", "ready", "loading", "ready", "failed", None]
    for i, phase in enumerate(phases):
        st = f"S{i}"
        if phase is None:
            post(ConnectionState(st, "unreachable", "no answer from 127.0.0.6:22 (timed out after 5 s)"))
            continue
        seen = T0 - 40 if i == 3 else T0 - i  # S3's samples stopped 40 s ago: stale, values kept
        post(GpuSample(st, _gpus(236902 if phase == "ready" else 120000, 40 + i), seen))
        post(ConnectionState(st, "stale" if i == 3 else "live", last_sample_at=seen))
        post(ContainerUpdate(st, ContainerInfo("glm53", "running" if phase != "failed" else "exited",
                                               exit_code=None if phase != "failed" else 1)))
        post(EngineUpdate(st, EngineProgress(phase, load_pct=45 if phase == "loading" else None, transport="gdrdma",
                                             fatal=OOM if phase == "failed" else None)))
    panes = app.panes
    await until(lambda: all(panes[f"S{i}"].progress is not None for i in range(5))
                and panes["S5"].conn_state == "unreachable" and panes["S3"].conn_state == "stale"
                and all(panes[f"S{i}"].meters and panes[f"S{i}"].meters[-1].used_mib for i in range(5)),
                what="the fleet", pilot=pilot)
    app.dashboard.query_one(FleetTable).update_from(app.stations.by_rank())  # what the dashboard's 0.5 s timer does
    await settle(pilot)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_fleet(snap_compare, size):
    app = _app(parse_config('profile = "glm53-nvfp4-2x-gb300-vllm"\n' + FLEET, "fleet.toml"))
    assert snap_compare(app, terminal_size=size, run_before=_fleet)


# ------------------------------------------------------------------ NCCL workbench

DOCTOR_RESULTS = [
    RungResult("links", "A", "pass", "enp1s0f1np1 up at 400 Gb/s, MTU 9000"),
    RungResult("links", "A->B", "pass", "198.18.0.2 answers 9000-byte pings with DF set"),
    RungResult("rdma", "A->B", "fail", "ib_write_bw: no completion with GID index 0 (a link-local IPv6 GID)",
               ("$ ib_write_bw -d mlx5_0 -x 0 198.18.0.2\n Couldn't connect to 198.18.0.2:18515",),
               "Use the RoCE v2 GID of the rail's IPv4 address: NCCL_IB_GID_INDEX=3 on both stations.", cause=True),
    RungResult("rdma", "B->A", "pass", "ib_write_bw 372.4 Gb/s with GID index 3"),
    RungResult("nccl", "A,B", "fail", "all_reduce_perf hangs at 8 MiB with the default GID index",
               ("# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592",), "Fix the GID index first (rung 2)."),
    RungResult("env", "A<->B", "warn", "NCCL_IB_GID_INDEX is set on A (3), not on B"),
    RungResult("addresses", "A,B", "pass", "every part uses the 198.18.0.0/15 rail"),
]


async def _doctor(pilot) -> None:
    from console.ui.screens.doctor import DoctorScreen

    app = pilot.app
    await pilot.pause()
    screen = DoctorScreen(app.config, reason="nccl-timeout on B", autostart=False)
    await app.push_screen(screen)
    for rid in ("links", "rdma", "nccl", "env", "addresses", "hang"):
        screen._on_rung(rid, "done", [r for r in DOCTOR_RESULTS if r.id == rid])
    screen._focus_verdict()
    await until(lambda: screen.report.verdict == "rdma", what="the verdict", pilot=pilot)
    await settle(pilot)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_doctor(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size, run_before=_doctor)


# ------------------------------------------------------------------ GPU and fabric health


def _rail(up: bool, changes: int, oos: int) -> dict:
    from console.probes.rails import parse_round

    n = "enp1s0f1np1"
    return parse_round([f"{n}.carrier {int(up)}", f"{n}.speed {400000 if up else -1}", f"{n}.mtu 9000",
                        f"{n}.carrier_changes {changes}", f"{n}.ib.out_of_sequence {oos}",
                        f"{n}.ib.packet_seq_err {oos // 40}"], [n])


async def _health(pilot) -> None:
    """The ready pair; A healthy (its rail strip only); B: a PCIe link trained down and a power cap on
    its serving GPU, an Xid 79 in its kernel log, its rail flapped twice and counting out-of-sequence
    packets."""
    from console.probes.gpu_health import parse_health
    from console.probes.kernel_log import parse_kernel_line
    from console.station.messages import GpuHealthSample, KernelEvents, RailsSample

    await _ready(pilot)
    app, post = pilot.app, pilot.app.post_message
    ok = "0, 00000000:01:00.0, 0x0000000000000001, 1, 5, 16, 16, 0, [N/A], No, 22.5, 300, 300, 210, 2100, 1"
    post(GpuHealthSample("A", parse_health(ok + "\n" + "1, 00000001:01:00.0, 0x0000000000000000, 5, 5, 16, 16, 0, "
                                           "[N/A], No, 850, 1000, 1000, 1965, 2100, 37"), T0))
    post(GpuHealthSample("B", parse_health(ok + "\n" + "1, 00000001:01:00.0, 0x0000000000000004, 3, 5, 8, 16, 0, "
                                           "[N/A], No, 598, 600, 1000, 1410, 2100, 35"), T0))
    for k, t in enumerate((T0 - 60, T0 - 30, T0)):
        post(RailsSample("A", _rail(True, 0, 0), t))
        post(RailsSample("B", _rail(True, 4 * k, 45000 * k), t))
    xid = parse_kernel_line("2025-12-01T11:59:30+0000 station-b kernel: NVRM: Xid (PCI:0001:01:00): 79, pid=2757, "
                            "name=VLLM::Worker_TP0, GPU has fallen off the bus.")
    post(KernelEvents("B", [xid], T0))
    b = app.panes["B"]
    await until(lambda: "Xid 79" in pane_text(app, "B") and b.query_one(".rails").display
                and app.panes["A"].query_one(".rails").display, what="the health box and the rail strips",
                pilot=pilot)
    await settle(pilot)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_dashboard_health(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size, run_before=_health)
