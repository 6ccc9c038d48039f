"""Colours mean expected (calm), attention (warning), broken (error): the GB300's expected
231/251 GiB fill is not a warning in any theme, RDMA without GDR is expected on a GB10 pair,
the history row has a time scale and '1 sample' is singular, the diagnosis badge is labelled."""

from __future__ import annotations

import time

import pytest
from pair_app import GB10, GB300, pair_app, pair_config
from rich.console import Console

from console.probes.engine_log import EngineProgress
from console.probes.nvidia_smi import GpuReading
from console.station.messages import EngineUpdate, GpuSample
from console.ui.palette import fill_level
from console.ui.screens.dashboard import expected_gpu_fill
from console.ui.widgets.gpu_meter import GpuMeter, bar, history_label, sparkline
from tests.waiting import until


def _rendered(renderable, width: int = 90):
    """The Text a width-aware renderable (the meter's Bar / Spark) makes at ``width``."""
    console = Console(width=width)
    return next(iter(renderable.__rich_console__(console, console.options)))


def _styles(text) -> set[str]:
    return {str(s.style) for s in text.spans} | ({str(text.style)} if text.style else set())


def test_fill_levels_follow_the_profiles_expectation():
    cfg = pair_config(profile=GB300)
    expected = expected_gpu_fill(cfg.profile)
    assert expected == pytest.approx(0.93)
    loaded = 231.35 * 1024 / 256703  # the tutorial's idle, loaded GPU
    assert fill_level(loaded, expected) == "ok"
    assert fill_level(0.96, expected) == "warn" and fill_level(0.99, expected) == "error"
    assert fill_level(loaded) == "warn"  # a GPU the profile says nothing about: 92 % is worth a look
    assert "yellow" not in _styles(bar(loaded, 40, expected)) and "green" in _styles(bar(loaded, 40, expected))


@pytest.mark.parametrize("theme", ["dgx-dark", "dgx-light"])
async def test_the_expected_fill_is_calm_in_every_theme(theme):
    app = pair_app(theme=theme, profile=GB300)
    async with app.run_test(size=(200, 50)) as pilot:
        gpus = [GpuReading(0, "GPU-d", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 1200, 97887, 1, 31, 22.0),
                GpuReading(1, "GPU-s", "NVIDIA GB300", int(231.35 * 1024), 256703, 0, 41, 165.0)]
        app.post_message(GpuSample("A", gpus, 100.0))
        pane = app.panes["A"]
        await until(lambda: len(pane.meters) == 2 and pane.meters[1].used_mib is not None,
                    what="the meters", pilot=pilot)
        serving = pane.meters[1]
        assert serving.expected_frac == pytest.approx(0.93) and pane.meters[0].expected_frac is None
        text = _rendered(serving.query_one(".gpu-bar").content, 60)
        theme_obj = app.current_theme
        assert theme_obj.success in _styles(text) and theme_obj.warning not in " ".join(_styles(text))


async def test_rdma_without_gdr_is_expected_on_a_gb10_pair_and_loading_is_calm():
    for profile, expect_calm in ((GB10, True), (GB300, False)):
        app = pair_app(profile=profile)
        async with app.run_test(size=(200, 50)) as pilot:
            app.post_message(EngineUpdate("B", EngineProgress(phase="loading", load_pct=30, transport="rdma")))
            pane = app.panes["B"]
            await until(lambda p=pane: p.progress is not None, what="the phase", pilot=pilot)
            status = pane.query_one(".status").content.joined
            rdma = next(s for s in status.spans if status.plain[s.start:s.end] == "RDMA (no GDR)")
            loading = next(s for s in status.spans if status.plain[s.start:s.end].startswith("loading weights"))
            theme = app.current_theme
            assert (str(rdma.style) == theme.success) is expect_calm
            assert (str(rdma.style) == "yellow") is (not expect_calm)  # a GB300 pair expects GPUDirect
            assert str(loading.style) == theme.secondary  # loading after a launch is expected: calm


def test_history_row_has_a_time_scale_and_singular_sample():
    assert history_label(1, 1, None, True) == " 1 sample"
    assert history_label(2, 2, 1.0, True) == " last 1 s · 2 samples"
    assert history_label(120, 120, 119.0, False) == " last 2 min"
    row = sparkline([100.0] * 120, 200.0, 90, [i * 1.0 for i in range(120)]).plain
    assert row.endswith(" last 65 s · 120 samples") and len(row) == 90  # what is shown: 66 samples
    narrow = sparkline([100.0] * 120, 200.0, 36, [i * 2.0 for i in range(120)]).plain
    assert narrow.endswith(" last 50 s") and len(narrow) == 36
    assert sparkline([1.0], 10.0, 40, [5.0]).plain.endswith(" 1 sample")


async def test_meter_time_scale_comes_from_the_samples_clock():
    app = pair_app(profile=GB300)
    async with app.run_test(size=(200, 50)) as pilot:
        g = [GpuReading(1, "GPU-s", "NVIDIA GB300", 1000, 256703, 0, 41, 165.0)]
        t0 = time.time()
        state = app.stations["A"]
        for k in range(3):  # three samples 30 s apart by their own clock (each taken before the next replaces it)
            app.post_message(GpuSample("A", g, t0 + 30 * k))
            await until(lambda: state.gpus_at == t0 + 30 * k, what=f"sample {k}", pilot=pilot)  # noqa: B023
        meter: GpuMeter = app.panes["A"].meters[0]
        assert list(app.stations["A"].traces[meter.index].times) == [t0, t0 + 30, t0 + 60]
        assert _rendered(meter.query_one(".gpu-hist").content).plain.endswith(" last 60 s · 3 samples")
