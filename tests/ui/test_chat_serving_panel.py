"""Serving panel: rendering of snapshots (pure) and the live path monitor -> message -> panel
against the simulated API, including the stale state once the API stops answering."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web
from rich.console import Console
from textual.app import App, ComposeResult

from console.serving.chat import ChatRequest
from console.serving.client import ApiClient
from console.serving.metrics import ServingMonitor, ServingSnapshot
from console.sim.api import FixedBackend, create_app
from console.ui.widgets.serving_panel import ServingPanel, ServingUpdate, render_snapshot
from tests.waiting import until


def text_of(renderable) -> str:
    c = Console(width=62, record=True, color_system=None)  # a station pane's width
    c.print(renderable)
    return c.export_text()


FULL = ServingSnapshot(url="http://h:8000", healthy=True, status="ok", model="glm-5.3", version="0.30.0",
                       engine="vllm", running=3, waiting=1, kv_usage=0.235, gen_tok_s=412.34, ttft_p50_s=0.48,
                       itl_p50_s=0.0088, prefix_hit_rate=0.62, spec_accept_rate=0.71, spec_mean_len=2.84,
                       updated_at=1000.0, polled_at=1000.0)


def test_render_fresh_snapshot() -> None:
    out = text_of(render_snapshot(FULL, now=1002.0))
    for want in ("● healthy", "glm-5.3 (vllm 0.30.0)", "3 run · 1 wait", "23.5 %", "412.3 tok/s",
                 "480 ms p50", "8.8 ms p50", "62.0 % hit", "71.0 % accepted", "2.84 tok/step", "updated 2 s ago"):
        assert want in out, want


def test_render_unknowns_as_dashes_and_no_mtp_row() -> None:
    snap = ServingSnapshot(status="ok", model="m", updated_at=10.0)
    out = text_of(render_snapshot(snap, now=11.0))
    assert "— run · — wait" in out and "MTP" not in out and "0.0" not in out


def test_render_stale_with_age_and_error() -> None:
    from dataclasses import replace

    snap = replace(FULL, status="unreachable", healthy=False, error="cannot reach http://h:8000: refused")
    out = text_of(render_snapshot(snap, now=1000.0 + 125))
    assert "● not answering" in out and "stale: last good poll 2 min ago" in out and "refused" in out
    assert "412.3 tok/s" in out  # the last values stay visible
    assert "waiting for the first poll" in text_of(render_snapshot(None))


@dataclass
class Backend(FixedBackend):
    tokens_per_s: float = 3000.0
    max_num_seqs: int = 4
    num_speculative_tokens: int = 4


class PanelApp(App):
    def compose(self) -> ComposeResult:
        yield ServingPanel(id="serving")

    def on_serving_update(self, msg: ServingUpdate) -> None:
        self.query_one(ServingPanel).show(msg.snapshot)


async def test_monitor_to_panel_then_stale() -> None:
    runner = web.AppRunner(create_app(Backend()))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    app = PanelApp()
    # timeout: the whole request now (connect + headers + body); 2 s flaked on a loaded 2-core box
    async with app.run_test(size=(100, 12)) as pilot, ApiClient(f"http://127.0.0.1:{port}", timeout=10) as c:
        mon = ServingMonitor(c, lambda s: app.post_message(ServingUpdate(s)))
        mon.post(await mon.poll_once())
        await c.chat(ChatRequest(({"role": "user", "content": "hi"},), "glm-5.3"))
        mon.post(await mon.poll_once())
        await pilot.pause()
        panel = app.query_one(ServingPanel)
        out = text_of(panel.content)
        assert "● healthy" in out and "glm-5.3" in out and "MTP" in out and "tok/s" in out
        assert not panel.has_class("-stale")
        await runner.cleanup()  # the API goes away
        mon.post(await mon.poll_once())
        await pilot.pause()
        out = text_of(panel.content)  # one miss is a warning, red after 3 in a row
        assert "◌ missed 1/3 (refused)" in out and "health check: refused: down" in out
        assert not panel.has_class("-down")
        for _ in range(2):
            mon.post(await mon.poll_once())
        await pilot.pause()
        out = text_of(panel.content)
        assert "● not answering (refused)" in out and "stale: last good poll" in out
        assert panel.has_class("-stale") and panel.has_class("-down")
        assert panel.snapshot.gen_tok_s is not None  # old values kept


def test_narrow_panel_keeps_every_label_whole() -> None:
    """A station pane at 80 columns is ~32 wide: pairs are packed whole into lines, never `M…`."""
    c = Console(width=32, record=True, color_system=None)
    c.print(render_snapshot(FULL, now=1002.0))
    out = c.export_text()
    assert "…" not in out
    for label in ("API ", "Model ", "Reqs ", "KV ", "Gen ", "Prefix ", "TTFT ", "ITL ", "MTP ", "Len "):
        assert label in out, label
    assert all(len(line) <= 32 for line in out.splitlines())
    # a small terminal's budget: the first lines only, the health first
    c = Console(width=32, record=True, color_system=None)
    c.print(render_snapshot(FULL, now=1002.0, max_lines=3))
    lines = c.export_text().splitlines()
    assert len(lines) == 3 and lines[0].startswith("API ● healthy") and lines[1].startswith("Model glm-5.3")


async def test_the_panel_fits_its_content_as_it_grows_and_shrinks() -> None:
    """A redraw lays the screen out again only when the panel's height changed (every second otherwise):
    the panel still grows to the figures and shrinks back to the one waiting line."""
    app = PanelApp()
    async with app.run_test(size=(100, 20)) as pilot:
        panel = app.query_one(ServingPanel)
        await pilot.pause()
        waiting = panel.size.height
        panel.show(FULL)
        await until(lambda: panel.size.height > waiting, what="the panel grown to the figures", pilot=pilot)
        grown = panel.size.height
        assert panel.content_size.height == panel.get_content_height(panel.content_size, app.size,
                                                                      panel.content_size.width)
        panel.show(FULL)  # the same height again: no layout needed, and the size stays right
        await pilot.pause()
        assert panel.size.height == grown
        panel.show(None)
        await until(lambda: panel.size.height == waiting, what="the panel back to one line", pilot=pilot)
