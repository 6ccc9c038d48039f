"""The bench screen (Pilot) against the simulated API on 127.0.0.1: a sweep fills the table beside
the reference, the plot and the saved files; cancel closes the streams; bad settings say why;
the max-num-seqs warning follows the levels typed."""

from __future__ import annotations

import asyncio
import csv
import json
import re
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from rich.console import Console
from textual.app import App
from textual.widgets import DataTable, Input, Static, Switch

from console.config import BenchRow, parse_config
from console.serving.bench import RequestRecord, summarize
from console.serving.client import ApiClient
from console.serving.metrics import parse_metrics
from console.sim.api import FixedBackend, create_app
from console.ui.screens.bench import BenchScreen, knee_of, render_plot

Backend = FixedBackend


CONFIG = """\
profile = "glm53-nvfp4-2x-gb300-vllm"

[api]
url = "{url}"

[[stations]]
name = "A"
host = "127.0.0.1"
rank = 0

[[stations]]
name = "B"
host = "127.0.0.2"
rank = 1
"""


@pytest.fixture
async def api_url() -> AsyncIterator[str]:
    runner = web.AppRunner(create_app(Backend()))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


class BenchApp(App):
    def __init__(self, screen: BenchScreen) -> None:
        super().__init__()
        self.bench = screen

    def on_mount(self) -> None:
        self.push_screen(self.bench)


def _text(renderable) -> str:
    c = Console(width=140, record=True, color_system=None)
    c.print(renderable)
    return c.export_text()


async def _until(pilot, cond, what: str, tries: int = 600) -> None:
    for _ in range(tries):
        await pilot.pause()
        if cond():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _set(screen: BenchScreen, **values: str) -> None:
    for wid, value in values.items():
        screen.query_one(f"#{wid.replace('_', '-')}", Input).value = value


async def test_sweep_fills_table_plot_and_files(api_url, tmp_path):
    cfg = parse_config(CONFIG.format(url=api_url), str(tmp_path / "c.toml"))
    screen = BenchScreen(cfg, results_dir=tmp_path / "results")
    app = BenchApp(screen)
    async with app.run_test(size=(150, 50)) as pilot:
        assert "--max-num-seqs 16" in _text(screen.query_one("#warning", Static).render())  # 1,8,16,32 default
        _set(screen, concurrency="1,2", requests="3", warmup="0", max_tokens="30")
        await pilot.pause()
        assert _text(screen.query_one("#warning", Static).render()).strip() == ""  # 2 <= 16
        await pilot.press("ctrl+r")
        await _until(pilot, lambda: screen.state not in ("idle", "running"), "the sweep")
        assert screen.state == "done", _text(screen.query_one("#status", Static).render())
        table = screen.query_one("#results", DataTable)
        assert table.row_count == 2
        row1 = [str(c) for c in table.get_row("1")]
        assert row1[0] == "1" and row1[2] == "107.4" and row1[4] == "115.3"  # NVIDIA's C1 beside ours
        assert row1[12] == row1[13]  # tokens counted == server counter delta
        assert [lv.output_tokens for lv in screen.levels] == [int(row1[12].replace(",", "")),
                                                              int(str(table.get_row("2")[12]).replace(",", ""))]
        plot = _text(screen.query_one("#plot", Static).render())
        assert "total output tok/s" in plot and "per-user tok/s" in plot
        for c in ("C1", "C2", "C16", "C32"):  # ours and the reference's levels
            assert c in plot
        assert "607.8" in plot
        status = _text(screen.query_one("#status", Static).render())
        assert "done" in status and "saved" in status
        jpath, cpath = screen.saved
        data = json.loads(jpath.read_text())
        assert [lv["concurrency"] for lv in data["levels"]] == [1, 2] and len(data["requests"]["2"]) == 3
        assert [r["concurrency"] for r in csv.DictReader(cpath.open())] == ["1", "2"]


async def test_cancel_stops_the_streams(api_url, tmp_path):
    cfg = parse_config(CONFIG.format(url=api_url), str(tmp_path / "c.toml"))
    screen = BenchScreen(cfg, results_dir=tmp_path / "results")
    app = BenchApp(screen)
    async with app.run_test(size=(150, 50)) as pilot, ApiClient(api_url) as client:
        _set(screen, concurrency="4", requests="8", warmup="0", max_tokens="5000")
        screen.query_one("#ignore-eos", Switch).value = True  # 5,000 tokens each: long enough to cancel
        await pilot.press("ctrl+r")
        await _until(pilot, lambda: "measuring" in _text(screen.query_one("#status", Static).render()), "streams")
        await asyncio.sleep(0.2)
        assert parse_metrics(await client.metrics_text()).gauges["running"] == 4
        await pilot.press("ctrl+b")
        await _until(pilot, lambda: not screen.running, "the cancel")
        assert screen.state == "cancelled" and screen.levels == []
        assert "cancelled" in _text(screen.query_one("#status", Static).render())
        for _ in range(50):
            if parse_metrics(await client.metrics_text()).gauges["running"] == 0:
                break
            await asyncio.sleep(0.1)
        assert parse_metrics(await client.metrics_text()).gauges["running"] == 0


async def test_bad_settings_say_why_and_start_nothing(api_url, tmp_path):
    cfg = parse_config(CONFIG.format(url=api_url), str(tmp_path / "c.toml"))
    screen = BenchScreen(cfg, results_dir=tmp_path / "results")
    async with BenchApp(screen).run_test(size=(150, 50)) as pilot:
        _set(screen, concurrency="1,eight")
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert "--concurrency" in _text(screen.query_one("#status", Static).render())
        assert not screen.running and screen.state == "idle"


def test_plot_shows_the_knee_beside_the_reference():
    def lv(c: int, total_tokens: int, duration: float) -> object:
        return summarize(c, [RequestRecord(0.0, duration, 0.1, duration, total_tokens, total_tokens)])

    levels = [lv(1, 100, 1.0), lv(8, 400, 1.0), lv(16, 600, 1.0), lv(32, 380, 1.0)]
    ref = (BenchRow(1, 107.4, 115.3), BenchRow(16, 607.8, 42.4))
    assert knee_of(levels) == 16
    text = _text(render_plot(levels, ref, width=20))
    lines = text.splitlines()
    c16 = next(i for i, line in enumerate(lines) if line.strip().startswith("C16"))
    assert lines[c16].count("█") == 19  # 600 of the 607.8 maximum over 20 cells
    assert "607.8" in lines[c16 + 1] and "▒" in lines[c16 + 1]
    c8 = next(i for i, line in enumerate(lines) if line.strip().startswith("C8"))
    assert re.fullmatch(r"ref\s+-", lines[c8 + 1].strip())  # no reference row at C8
    assert "knee: total throughput peaks at C16" in text


async def test_b_on_the_dashboard_opens_the_bench_against_the_simulated_head(sim_factory, tmp_path, monkeypatch):
    from console.ui.app import ConsoleApp

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    h = await sim_factory(running=True, time_scale=0.005)
    app = ConsoleApp(h.config, gpu_interval_ms=500)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("b")
        await _until(pilot, lambda: isinstance(app.screen, BenchScreen), "the bench screen")
        screen = app.screen
        assert screen.url == h.config.api_url()
        async with ApiClient(screen.url) as client:
            for _ in range(200):
                if (await client.health()).ok:
                    break
                await asyncio.sleep(0.1)
        _set(screen, concurrency="2", requests="2", warmup="0", max_tokens="8")
        await pilot.press("ctrl+r")
        await _until(pilot, lambda: screen.state not in ("idle", "running"), "the sweep")
        assert screen.state == "done" and screen.levels[0].server_tokens == screen.levels[0].output_tokens
        assert screen.saved[0].parent == tmp_path / "data" / "dgx-console" / "bench"
        await pilot.press("escape")
        await _until(pilot, lambda: not isinstance(app.screen, BenchScreen), "back to the dashboard")


async def test_unreachable_api_is_a_state_not_a_crash(tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = parse_config(CONFIG.format(url=f"http://127.0.0.1:{port}"), str(tmp_path / "c.toml"))
    screen = BenchScreen(cfg, results_dir=tmp_path / "results")
    async with BenchApp(screen).run_test(size=(150, 50)) as pilot:
        await pilot.press("ctrl+r")
        await _until(pilot, lambda: screen.state != "running" and not screen.running, "the failure")
        assert screen.state == "error"
        assert "cannot reach" in _text(screen.query_one("#status", Static).render())
        assert screen.saved is None and not (tmp_path / "results").exists()
