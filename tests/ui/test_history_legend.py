"""The history plot's legend says which axis is which, in words."""

from __future__ import annotations

from textual.app import App, ComposeResult

from console.ui.widgets.gpu_history import GpuHistoryPlot


class Host(App):
    def compose(self) -> ComposeResult:
        yield GpuHistoryPlot(id="plot")


async def test_the_legend_names_the_axes():
    app = Host()
    async with app.run_test(size=(90, 12)) as pilot:
        plot = app.query_one(GpuHistoryPlot)
        plot.show([0.0, 30.0, 60.0], [200_000.0, 230_000.0, 236_000.0], [10, 90, 0], 256_703.0)
        await pilot.pause()
        text = plot.render().plain
        assert "memory (GiB, left)" in text and "util (%, right)" in text
