"""Progress truth on the dashboard: the banner of a wedged or stuck service (since when, the evidence, the
key to the hang evidence), within W + 5 s of the wedge on the simulated stations; the serving panel
and the fleet row never read a wedge as healthy. Snapshots of the banner at 200x50, 120x35, 80x24."""

from __future__ import annotations

import dataclasses
import time

import pytest

from console.doctor.next_steps import TABLE
from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress
from console.probes.nvidia_smi import GpuReading
from console.serving.metrics import ServingSnapshot
from console.sim.engine import container_status
from console.station.messages import (
    ConnectionState,
    ContainerUpdate,
    EngineUpdate,
    GpuSample,
    LogBatch,
    RasSample,
)
from console.ui import clock
from console.ui.app import ConsoleApp
from console.ui.widgets.fleet_table import fleet_row
from console.ui.widgets.progress_banner import HINT, ProgressBanner
from console.ui.widgets.serving_panel import ServingPanel, ServingUpdate
from tests.ui.pair_app import pair_config
from tests.ui.snap_settle import settle
from tests.waiting import until

SIZES = [(200, 50), (120, 35), (80, 24)]
IDS = [f"{w}x{h}" for w, h in SIZES]
T0 = 1764590400.0  # 2025-12-01 12:00:00 UTC; "now" is 2 s later
URL = "http://127.0.0.1:8000"
W = 5.0


def _gpus(util: int, power: float) -> list[GpuReading]:
    return [GpuReading(0, "GPU-s0", "NVIDIA GB300", 236902, 256703, util, 48, power)]


async def _wedged(pilot, now: float = T0 + 2.0) -> None:
    """A and B serving; the counter last moved at T0 - 40 with 4 requests running; the GPUs at 100 %
    and idle power: what the dashboard's 1 s judge then shows."""
    app = pilot.app
    post = app.post_message
    await pilot.pause()
    for st in ("A", "B"):
        post(ConnectionState(st, "live", last_sample_at=T0))
        post(GpuSample(st, _gpus(1, 108.0), T0 - 120))  # idle before the load: its idle power
        await pilot.pause()  # (a newer sample replaces one still queued)
        post(GpuSample(st, _gpus(100, 117.0), T0))
        post(ContainerUpdate(st, ContainerInfo("glm53", "running"), T0 - 300))
        post(EngineUpdate(st, EngineProgress("ready", transport="gdrdma", headless=st == "B"), T0 - 300))
        post(LogBatch(st, ["INFO:     Application startup complete."], at=T0 - 300))
    base = ServingSnapshot(url=URL, healthy=True, status="ok", model="glm-5.3", version="0.30.0", engine="vllm",
                           running=4, waiting=0, kv_usage=0.031, gen_tok_s=0.0, gen_tokens_total=51230.0)
    for at in (T0 - 44, T0 - 40, T0):
        moved = 51230.0 if at >= T0 - 40 else 50900.0
        post(ServingUpdate(dataclasses.replace(base, gen_tokens_total=moved, updated_at=at, polled_at=at), at=at))
        await pilot.pause()  # each poll on its own (a newer one replaces one still queued)
    panel = app.dashboard.query_one(ServingPanel)
    await until(lambda: app.stations["A"].progress.tokens_read_at == T0 and panel.snapshot is not None
                and app.stations["B"].gpus_at == T0, what="the fed state", pilot=pilot)
    app.judge_progress()  # what the dashboard's 1 s timer does
    await until(lambda: app.dashboard.query_one(ProgressBanner).has_class("-alarm"), what="the banner", pilot=pilot)
    await settle(pilot)


def _app() -> ConsoleApp:
    return ConsoleApp(pair_config(api_url=URL), start_services=False, clock=False)


@pytest.fixture
def _fixed_clock(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.setattr(clock, "now", lambda: T0 + 2.0)
    yield
    monkeypatch.undo()
    time.tzset()


async def test_the_banner_says_wedged_since_when_with_the_evidence_and_the_key(_fixed_clock):
    app = _app()
    async with app.run_test(size=(160, 45)) as pilot:
        await _wedged(pilot)
        banner = app.dashboard.query_one(ProgressBanner)
        text = banner.content.plain
        assert text.startswith(f"⚠ WEDGED since 11:59:20 (0:42) · {HINT} — A: wedged for 0:42: 4 running, 0 waiting")
        assert "generation tokens 51,230, last moved 0:42 ago" in text and "/health answers 200" in text
        assert text.splitlines()[1] == "next: " + TABLE["wedged"].brief  # the shared table's step, its own line
        assert "A GPU0 100 % at 117 W: spinning kernel (busy at idle power, idle 108 W)" in text
        assert "B GPU0 100 % at 117 W: spinning kernel" in text  # every rank's GPUs
        health = app.dashboard.query_one(ServingPanel).content.rows[0][0][1].plain
        assert health == "● /health 200 but WEDGED for 0:42"  # a 200 never reads healthy
        row = fleet_row(app.stations["A"], T0 + 2.0, verdict=app.stations.judged.stations["A"])
        assert row.engine == "WEDGED 0:42" and row.alarm and "wedged for 0:42" in row.error


async def test_the_banner_says_stuck_in_nccl_init_from_the_last_log_line(_fixed_clock):
    app = _app()
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.pause()
        post = app.post_message
        for st in ("A", "B"):
            post(ConnectionState(st, "live", last_sample_at=T0))
            post(GpuSample(st, _gpus(2, 104.0), T0 - 200))
            await pilot.pause()
            post(GpuSample(st, _gpus(100, 112.0), T0))
            post(ContainerUpdate(st, ContainerInfo("glm53", "running"), T0 - 200))
            post(EngineUpdate(st, EngineProgress("connecting"), T0 - 140))
            post(LogBatch(st, ["NCCL INFO comm 0x55d5c8a000 rank 0 nranks 2 - Init COMPLETE"], at=T0 - 130))
        await until(lambda: all(app.stations[n].gpus_at == T0 and app.stations[n].progress.log_line_at == T0 - 130
                                for n in ("A", "B")), what="the fed state", pilot=pilot)
        app.judge_progress()
        banner = app.dashboard.query_one(ProgressBanner)
        await until(lambda: banner.has_class("-alarm"), what="the banner", pilot=pilot)
        text = banner.content.plain
        assert text.startswith(f"⚠ STUCK since 11:57:50 (2:12) · {HINT} — A: stuck in NCCL init / first collective "
                               "for 2:12")
        assert "A: last log line 2:12 ago" in text and "B GPU0 100 % at 112 W: spinning kernel" in text
        assert text.splitlines()[1] == "next: " + TABLE["start-stuck"].brief


async def test_no_banner_while_tokens_move_or_nothing_runs(_fixed_clock, monkeypatch):
    app = _app()
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        post = app.post_message
        post(ConnectionState("A", "live", last_sample_at=T0))
        post(GpuSample("A", _gpus(85, 720.0), T0))
        post(ContainerUpdate("A", ContainerInfo("glm53", "running"), T0 - 300))
        post(EngineUpdate("A", EngineProgress("ready"), T0 - 300))
        for k, at in enumerate((T0 - 4, T0 - 2, T0)):
            post(ServingUpdate(ServingSnapshot(url=URL, healthy=True, status="ok", running=4, waiting=0,
                                               gen_tokens_total=1000.0 + 300 * k, updated_at=at, polled_at=at), at=at))
            await pilot.pause()
        await until(lambda: app.stations["A"].progress.tokens_read_at == T0, what="the polls", pilot=pilot)
        app.judge_progress()
        await pilot.pause()
        assert app.stations.judged.stations["A"].state == "progressing"
        assert not app.dashboard.query_one(ProgressBanner).has_class("-alarm")
        assert app.dashboard.query_one(ServingPanel).content.rows[0][0][1].plain == "● healthy"


async def test_opened_on_requests_in_flight_it_never_reads_healthy_before_it_can_judge(_fixed_clock):
    """A console opened on a wedged service: the first reads show 4 running and a counter that never
    moves; until W has passed it says "progress unknown", never "● healthy"."""
    app = _app()
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        post = app.post_message
        post(ConnectionState("A", "live", last_sample_at=T0))
        post(GpuSample("A", _gpus(100, 267.0), T0))  # busy at high power: it says nothing about tokens
        post(ContainerUpdate("A", ContainerInfo("glm53", "running"), T0 - 300))
        post(EngineUpdate("A", EngineProgress("ready"), T0 - 300))
        for at in (T0 - 2, T0):
            post(ServingUpdate(ServingSnapshot(url=URL, healthy=True, status="ok", running=4, waiting=0,
                                               gen_tokens_total=51230.0, updated_at=at, polled_at=at), at=at))
            await pilot.pause()
        await until(lambda: app.stations["A"].progress.tokens_read_at == T0, what="the polls", pilot=pilot)
        app.judge_progress()
        await pilot.pause()
        v = app.stations.judged.stations["A"]
        assert v.state == "unknown" and "judged after 0:30 (0:26 left)" in v.words
        health = app.dashboard.query_one(ServingPanel).content.rows[0][0][1].plain
        assert health == "◌ /health 200 · progress unknown (judged in 0:26)"
        assert not app.dashboard.query_one(ProgressBanner).has_class("-alarm")


async def test_ranks_out_of_step_raise_the_banner_with_no_request_and_point_to_h(_fixed_clock):
    """Two RAS reads 4 s apart with B one operation behind and frozen, nothing running: the banner."""
    app = _app()
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        post = app.post_message
        for st in ("A", "B"):
            post(ConnectionState(st, "live", last_sample_at=T0))
            post(GpuSample(st, _gpus(100, 110.0), T0))
            post(ContainerUpdate(st, ContainerInfo("glm53", "running"), T0 - 300))
            post(EngineUpdate(st, EngineProgress("ready", headless=st == "B"), T0 - 300))
        post(ServingUpdate(ServingSnapshot(url=URL, healthy=True, status="ok", running=0, waiting=0,
                                           gen_tokens_total=9000.0, updated_at=T0, polled_at=T0), at=T0))
        for at in (T0 - 3, T0 + 1):
            post(RasSample("A", _ras({0: 757, 1: 756}), at))
            await pilot.pause()
        await until(lambda: app.stations["A"].ras.read_at == T0 + 1, what="two RAS reads", pilot=pilot)
        app.judge_progress()
        banner = app.dashboard.query_one(ProgressBanner)
        await until(lambda: banner.has_class("-alarm"), what="the banner", pilot=pilot)
        text = banner.content.plain
        assert text.startswith("⚠ OUT-OF-STEP since ") and HINT in text and "B: ranks out of step" in text
        assert text.splitlines()[1] == "next: " + TABLE["out-of-step"].brief
        row = fleet_row(app.stations["B"], T0 + 2.0, verdict=app.stations.judged.stations["B"])
        assert row.alarm and row.engine.startswith("OUT-OF-STEP")


def _ras(ops: dict[int, int]) -> str:
    """``ncclras -f json`` of a two-rank job (the AllReduce count of each rank)."""
    ranks = ",".join(f'{{"rank": {r}, "host": "198.18.0.{r + 1}", "pid": {100 + r}, "cuda_dev": 0, "status": {{}}, '
                     f'"collective_counts": {{"AllReduce": {n}}}}}' for r, n in ops.items())
    return f'{{"nccl_version": "2.30.7", "communicators": [{{"hash": "0x1", "size": 2, "ranks": [{ranks}]}}]}}'


async def test_the_banner_comes_within_w_plus_5_s_of_the_sims_wedge(sim_factory):
    """Live: the dashboard over the simulated stations with the wedge fault and W = 5 s (the time
    from the freeze to the banner is printed: docs/performance.md's figure is the median of three runs)."""
    h = await sim_factory(faults=["wedge"], time_scale=0.005)
    config = dataclasses.replace(h.config, ui=dataclasses.replace(h.config.ui, progress_window_s=W))
    app = ConsoleApp(config, gpu_interval_ms=500)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(lambda: app.stations["A"].gpus, what="A's GPUs", pilot=pilot, timeout=30)
        h.start_service()
        st = await until(lambda: (s := container_status(h.world, "A", h.world.state("A"), "glm53"))["state"]
                         == "running" and s, what="A's container running", pilot=pilot, timeout=30)
        frozen_at = float(st["started_at"]) + st["timeline"].wedge_at
        banner = app.dashboard.query_one(ProgressBanner)
        await until(lambda: banner.has_class("-alarm"), what="the banner", pilot=pilot, timeout=60,
                    detail=lambda: {n: (v.state, v.words) for n, v in app.stations.judged.stations.items()})
        took = time.time() - frozen_at
        print(f"wedge -> banner: {took:.1f} s (W = {W:g} s)")
        # The target (W + 1 s) is measured by bench/wedge_latency.py --judge tokens (median of 3: W + 0.8 s); here the bound
        # only proves the judge, not a watchdog, raised it, with room for a loaded 2-core CI machine.
        assert W <= took + 1.0 and took <= W + 15, took
        # The freeze is named by whichever judge sees it first: the head's token counter (WEDGED) or,
        # when a loaded machine reads the headless rank's log late, that rank quiet with spinning GPUs
        # (STUCK); either way the alarm is the freeze's and the hint leads to the evidence.
        assert ("WEDGED" in banner.content.plain or "STUCK" in banner.content.plain) and HINT in banner.content.plain


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_snapshot_wedge_banner(snap_compare, size, _fixed_clock):
    assert snap_compare(_app(), terminal_size=size, run_before=_wedged)


def test_every_banner_state_ends_in_one_short_next_step_from_the_shared_table():
    """Each state that raises the banner has its next step in ``next_steps`` (the table ``h``,
    ``hang-report`` and ``doctor`` use), short enough for one line of an 80-column banner."""
    from console.doctor.next_steps import banner_step
    from console.vocabulary import PROGRESS_ALARMS

    for state in PROGRESS_ALARMS:
        step = banner_step(state)
        assert step.startswith("next: ") and len(step) <= 76, (state, step)
    assert banner_step("progressing") == "" and banner_step("idle") == ""
