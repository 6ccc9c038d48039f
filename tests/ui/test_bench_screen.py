"""The bench screen (Pilot) against the simulated API on 127.0.0.1: a sweep fills the table, the
figure (total against per-user tok/s) and the saved files; the reference sits beside the results
only when the settings compare; a level that never reached its concurrency and replies too short
to time say so; cancel closes the streams; bad settings say why; the max-num-seqs warning follows
the levels typed."""

from __future__ import annotations

import csv
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from rich.console import Console
from textual.app import App
from textual.widgets import DataTable, Input, Static, Switch

from console.config import parse_config
from console.serving.bench_model import RequestRecord, summarize
from console.serving.client import ApiClient
from console.serving.metrics import parse_metrics
from console.sim.api import FixedBackend, create_app
from console.ui.screens.bench import BenchScreen, ThroughputFigure, figure_points, knee_line
from tests.ports import refused_port
from tests.two_stations import stations_toml
from tests.waiting import until

Backend = FixedBackend


CONFIG = """\
profile = "glm53-nvfp4-2x-gb300-vllm"

[api]
url = "{url}"

""" + stations_toml(rail=False)


@pytest.fixture
async def api_url() -> AsyncIterator[str]:
    runner = web.AppRunner(create_app(Backend()))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
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


async def healthy(client: ApiClient) -> bool:
    return (await client.health()).ok


def _set(screen: BenchScreen, **values: str) -> None:
    for wid, value in values.items():
        screen.query_one(f"#{wid.replace('_', '-')}", Input).value = value


def _figure(screen: BenchScreen) -> str:
    return _text(screen.query_one("#figure", ThroughputFigure).render())


async def test_sweep_fills_table_figure_and_files(api_url, tmp_path):
    cfg = parse_config(CONFIG.format(url=api_url), str(tmp_path / "c.toml"))
    screen = BenchScreen(cfg, results_dir=tmp_path / "results")
    app = BenchApp(screen)
    async with app.run_test(size=(150, 50)) as pilot:
        assert "--max-num-seqs 16" in _text(screen.query_one("#warning", Static).render())  # 1,8,16,32 default
        assert "INDICATIVE: built-in coding prompts" in _text(screen.query_one("#reference", Static).render())
        _set(screen, concurrency="1,2", requests="3", warmup="0", max_tokens="30")
        await pilot.pause()
        assert _text(screen.query_one("#warning", Static).render()).strip() == ""  # 2 <= 16, 3 >= 2
        # a 30-token cap is not NVIDIA's 8,192: said before the run, and the reference leaves the table
        reference = _text(screen.query_one("#reference", Static).render())
        assert "NOT COMPARABLE: max tokens 30 (reference 8,192)" in reference
        await pilot.press("ctrl+r")
        await until(lambda: screen.state not in ("idle", "running"), what="the sweep", pilot=pilot)
        assert screen.state == "done", _text(screen.query_one("#status", Static).render())
        table = screen.query_one("#results", DataTable)
        assert table.row_count == 2
        assert [str(c.label) for c in table.columns.values()][:3] == ["conc", "total tok/s", "per-user"]
        row1 = [str(c) for c in table.get_row("1")]
        assert row1[0] == "1" and "107.4" not in row1  # NVIDIA's C1 is not beside a 30-token run
        assert row1[7] == row1[8]  # tokens counted == server counter delta
        assert [lv.output_tokens for lv in screen.levels] == [int(row1[7].replace(",", "")),
                                                              int(str(table.get_row("2")[7]).replace(",", ""))]
        figure = _figure(screen)
        assert "per-user tok/s" in figure and "total tok/s" in figure
        assert "● C1" in figure and "● C2" in figure and "this sweep" in figure
        assert "● C16" not in figure and "reference" not in figure  # NOT COMPARABLE is not drawn
        status = _text(screen.query_one("#status", Static).render())
        assert "done" in status and "saved" in status
        jpath, cpath = screen.saved
        data = json.loads(jpath.read_text())
        assert [lv["concurrency"] for lv in data["levels"]] == [1, 2] and len(data["requests"]["2"]) == 3
        assert data["reference"]["verdict"] == "not comparable"
        assert [r["concurrency"] for r in csv.DictReader(cpath.open())] == ["1", "2"]


async def test_comparable_settings_put_the_reference_beside_ours(api_url, tmp_path):
    cfg = parse_config(CONFIG.format(url=api_url), str(tmp_path / "c.toml"))
    screen = BenchScreen(cfg, results_dir=tmp_path / "results")
    async with BenchApp(screen).run_test(size=(150, 50)) as pilot:
        _set(screen, concurrency="1", requests="1", warmup="0")  # NVIDIA's 8,192-token cap
        await pilot.press("ctrl+r")
        await until(lambda: screen.state not in ("idle", "running"), what="the sweep", pilot=pilot)
        row = [str(c) for c in screen.query_one("#results", DataTable).get_row("1")]
        assert row[2] == "107.4" and row[4] == "115.3"  # NVIDIA's C1 beside ours
        assert "INDICATIVE" in _text(screen.query_one("#reference", Static).render())  # other prompts


async def test_short_level_and_short_replies_are_not_reported_as_if_measured(api_url, tmp_path):
    cfg = parse_config(CONFIG.format(url=api_url), str(tmp_path / "c.toml"))
    screen = BenchScreen(cfg, results_dir=tmp_path / "results")
    async with BenchApp(screen).run_test(size=(150, 50)) as pilot:
        _set(screen, concurrency="1,4", requests="2", warmup="0", max_tokens="9")
        await pilot.pause()
        warning = _text(screen.query_one("#warning", Static).render())
        assert "C4: only 2 measured requests per level, so at most 2 in flight" in warning
        await pilot.press("ctrl+r")
        await until(lambda: screen.state not in ("idle", "running"), what="the sweep", pilot=pilot)
        table = screen.query_one("#results", DataTable)
        assert str(table.get_row("4")[0]) == "4 (2)"  # the concurrency reached, not C4
        assert str(table.get_row("1")[2]) == "n/m"  # 9-token replies: no per-user figure
        assert all(lv.per_user_tok_s is None for lv in screen.levels)
        notes = _text(screen.query_one("#notes", Static).render())
        assert "C4: at most 2 requests in flight (2 measured), so this level is not C4" in notes
        assert "per-user tok/s not measured: no reply was long enough" in notes
        assert "knee" not in notes  # only one level reached its concurrency
        assert "● C4" not in _figure(screen)  # no per-user figure, no point


async def test_cancel_stops_the_streams(api_url, tmp_path):
    cfg = parse_config(CONFIG.format(url=api_url), str(tmp_path / "c.toml"))
    screen = BenchScreen(cfg, results_dir=tmp_path / "results")
    app = BenchApp(screen)
    async with app.run_test(size=(150, 50)) as pilot, ApiClient(api_url) as client:
        _set(screen, concurrency="4", requests="8", warmup="0", max_tokens="5000")
        screen.query_one("#ignore-eos", Switch).value = True  # 5,000 tokens each: long enough to cancel
        await pilot.press("ctrl+r")
        await until(lambda: "measuring" in _text(screen.query_one("#status", Static).render()), what="streams",
                    pilot=pilot)

        async def running_is(n: int) -> bool:
            return parse_metrics(await client.metrics_text()).gauges["running"] == n

        await until(lambda: running_is(4), what="four streams running on the server", pilot=pilot)
        await pilot.press("ctrl+b")
        await until(lambda: not screen.running, what="the cancel", pilot=pilot)
        assert screen.state == "cancelled" and screen.levels == []
        assert "cancelled" in _text(screen.query_one("#status", Static).render())
        await until(lambda: running_is(0), what="the server to free every slot", timeout=5)


async def test_bad_settings_say_why_and_start_nothing(api_url, tmp_path):
    cfg = parse_config(CONFIG.format(url=api_url), str(tmp_path / "c.toml"))
    screen = BenchScreen(cfg, results_dir=tmp_path / "results")
    async with BenchApp(screen).run_test(size=(150, 50)) as pilot:
        _set(screen, concurrency="1,eight")
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert "--concurrency" in _text(screen.query_one("#status", Static).render())
        assert not screen.running and screen.state == "idle"


def test_figure_points_and_the_knee_come_from_levels_that_reached_their_concurrency():
    def lv(c: int, tokens_each: int) -> object:  # c requests in flight together for 1 s
        return summarize(c, [RequestRecord(0.0, 1.0, 0.1, 1.0, tokens_each, tokens_each)] * c)

    levels = [lv(1, 1000), lv(8, 500), lv(16, 400), lv(32, 120)]
    points = figure_points(levels)
    assert [p.label for p in points] == ["C1", "C8", "C16", "C32"]
    assert points[2].total == 16 * 400 and points[2].per_user == pytest.approx(399 / 0.9)
    assert knee_line(levels).startswith("knee: total throughput peaks at C16 (6,400.0 tok/s, 443.3 per user)")
    # C64 with more throughput but only 2 requests in flight is not a knee at C64
    short = summarize(64, [RequestRecord(0.0, 1.0, 0.1, 1.0, 9000, 9000)] * 2)  # 18,000 tok/s
    assert short.label == "C64 (2 in flight)"
    assert knee_line([*levels, short]).startswith("knee: total throughput peaks at C16")
    # the best level is the last one measured: no knee yet, and it says so
    assert knee_line(levels[:3]).startswith("total throughput still rises at C16")
    assert "the knee is beyond it" in knee_line(levels[:3])


async def test_b_on_the_dashboard_opens_the_bench_against_the_simulated_head(sim_factory, tmp_path, monkeypatch):
    from console.ui.app import ConsoleApp

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    h = await sim_factory(running=True, time_scale=0.005)
    app = ConsoleApp(h.config, gpu_interval_ms=500)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("b")
        await until(lambda: isinstance(app.screen, BenchScreen), what="the bench screen", pilot=pilot)
        screen = app.screen
        assert screen.url == h.config.api_url()
        async with ApiClient(screen.url) as client:
            await until(lambda: healthy(client), what="the simulated API", timeout=20)
        _set(screen, concurrency="2", requests="2", warmup="0", max_tokens="8")
        await pilot.press("ctrl+r")
        await until(lambda: screen.state not in ("idle", "running"), what="the sweep", pilot=pilot)
        assert screen.state == "done" and screen.levels[0].server_tokens == screen.levels[0].output_tokens
        assert screen.saved[0].parent == tmp_path / "data" / "dgx-console" / "bench"
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, BenchScreen), what="back to the dashboard", pilot=pilot)


async def test_unreachable_api_is_a_state_not_a_crash(tmp_path):
    port = refused_port()
    cfg = parse_config(CONFIG.format(url=f"http://127.0.0.1:{port}"), str(tmp_path / "c.toml"))
    screen = BenchScreen(cfg, results_dir=tmp_path / "results")
    async with BenchApp(screen).run_test(size=(150, 50)) as pilot:
        await pilot.press("ctrl+r")
        await until(lambda: screen.state != "running" and not screen.running, what="the failure", pilot=pilot)
        assert screen.state == "error"
        assert "cannot reach" in _text(screen.query_one("#status", Static).render())
        assert screen.saved is None and not (tmp_path / "results").exists()


async def test_the_ready_line_follows_the_fields_and_a_not_comparable_reference_is_not_drawn(api_url, tmp_path):
    """Before, "Ready" said NVIDIA's method whatever was typed; the figure drew a reference the
    table had already left out as NOT COMPARABLE."""
    cfg = parse_config(CONFIG.format(url=api_url), str(tmp_path / "c.toml"))
    screen = BenchScreen(cfg, results_dir=tmp_path / "results")
    async with BenchApp(screen).run_test(size=(150, 50)) as pilot:
        await pilot.pause()
        status = lambda: _text(screen.query_one("#status", Static).render())  # noqa: E731
        assert "NVIDIA's method: warm-up 3x, measured 10x per level" in status()
        assert "reference" in _figure(screen)  # comparable (indicative) at the defaults: drawn
        _set(screen, concurrency="1,4", requests="2", warmup="0")
        await until(lambda: "at concurrency 1,4 (warm-up 0, measured 2 per level" in status(),
                    what="the ready line to follow the fields", pilot=pilot, detail=status)
        assert "NVIDIA's method" not in status()
        _set(screen, max_tokens="100")
        await until(lambda: "NOT COMPARABLE" in _text(screen.query_one("#reference", Static).render()).upper(),
                    what="not comparable", pilot=pilot)
        await until(lambda: "reference" not in _figure(screen).replace("the reference is not comparable", ""),
                    what="the reference gone from the figure", pilot=pilot, detail=lambda: _figure(screen))
        _set(screen, concurrency="1,x")
        await until(lambda: status().startswith("✖"), what="a bad field named", pilot=pilot, detail=status)


async def test_the_slo_field_gives_goodput_and_the_users_within_it(api_url, tmp_path):
    cfg = parse_config(CONFIG.format(url=api_url), str(tmp_path / "c.toml"))
    screen = BenchScreen(cfg, results_dir=tmp_path / "results")
    async with BenchApp(screen).run_test(size=(150, 50)) as pilot:
        _set(screen, concurrency="1,2", requests="2", warmup="0", max_tokens="20", slo="itl:5")
        await pilot.pause()
        assert "expected NAME:MS" in _text(screen.query_one("#status", Static).render())  # vLLM's itl is not TPOT
        _set(screen, slo="ttft:600000 e2el:600000")
        await pilot.press("ctrl+r")
        await until(lambda: screen.state not in ("idle", "running"), what="the sweep", pilot=pilot)
        assert [lv.goodput_pct for lv in screen.levels] == [100.0, 100.0]
        notes = _text(screen.query_one("#notes", Static).render())
        assert "within SLO (ttft <= 600000 ms, e2el <= 600000 ms; 90% of requests): up to C2 users" in notes
        jpath, _ = screen.saved
        assert json.loads(jpath.read_text())["slo"]["answers"][0]["max_concurrency"] == 2
        assert jpath.with_suffix(".html").is_file() and jpath.with_suffix(".svg").is_file()


async def test_a_field_entered_by_a_click_selects_its_value(tmp_path):
    cfg = parse_config(CONFIG.format(url=f"http://127.0.0.1:{refused_port()}"), str(tmp_path / "c.toml"))
    screen = BenchScreen(cfg, results_dir=tmp_path / "results")
    async with BenchApp(screen).run_test(size=(150, 50)) as pilot:
        field = screen.query_one("#max-tokens", Input)
        await until(lambda: field.region.width > 0, what="the settings laid out", pilot=pilot)
        await pilot.click(field)
        await until(lambda: screen.focused is field, what="the field focused", pilot=pilot)
        assert field.selection.start == 0 and field.selection.end == len(field.value) > 0  # typing replaces it
        await pilot.press("1", "2", "8")
        assert field.value == "128"
        await pilot.click(field)  # a click on the field that has focus places the cursor, as usual
        assert screen.focused is field and field.selection.start == field.selection.end


async def test_the_depth_and_decode_floor_fields_reach_the_sweep(api_url, tmp_path):
    """The CLI's --depth and --decode-floor as fields: each depth runs every level (a row per depth and
    level), and a floor of 0 times the short replies the default floor leaves "n/m"."""
    cfg = parse_config(CONFIG.format(url=api_url), str(tmp_path / "c.toml"))
    screen = BenchScreen(cfg, results_dir=tmp_path / "results")
    async with BenchApp(screen).run_test(size=(150, 50)) as pilot:
        status = lambda: " ".join(_text(screen.query_one("#status", Static).render()).split())  # noqa: E731
        _set(screen, concurrency="1", requests="2", warmup="0", max_tokens="9", depth="0,64", decode_floor="0")
        await until(lambda: "floor 0: every reply timed), depths 0,64" in status(),
                    what="the ready line to name the depths and the floor", pilot=pilot, detail=status)
        _set(screen, depth="0,x")
        await until(lambda: status().startswith("✖") and "--depth" in status(), what="a bad depth named",
                    pilot=pilot, detail=status)
        _set(screen, depth="0,64")
        await pilot.press("ctrl+r")
        await until(lambda: screen.state not in ("idle", "running"), what="the sweep", pilot=pilot)
        assert [lv.depth for lv in screen.levels] == [0, 64]
        table = screen.query_one("#results", DataTable)
        assert str(table.get_row("1")[0]) == "1" and str(table.get_row("1 @64")[0]) == "1 @64"
        assert all(lv.per_user_tok_s is not None for lv in screen.levels)  # 9-token replies timed at floor 0
        assert screen.runner.report.settings.decode_floor_tokens == 0
