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


async def test_samples_sooner_than_the_interval_are_drawn_by_one_later_build():
    """New samples less than PLOT_EVERY_S (the samples' clock) after the drawn ones keep the figure for
    that long, then one build draws the newest; samples further apart are drawn at once."""
    from console.ui.widgets.gpu_history import PLOT_EVERY_S
    from tests.waiting import until

    app = Host()
    async with app.run_test(size=(90, 12)) as pilot:
        plot = app.query_one(GpuHistoryPlot)
        times = [0.0, 30.0, 60.0]
        plot.show(times, [200_000.0] * 3, [10, 20, 30], 256_703.0)
        await pilot.pause()
        built = plot.builds  # (with the figure before any sample)
        first = plot.render().plain
        for k in range(1, 6):  # five samples 0.2 s apart: the figure stays
            times = times[1:] + [60.0 + 0.2 * k]
            plot.show(times, [200_000.0, 200_000.0, 250_000.0], [10, 20, 99], 256_703.0)
            await pilot.pause()
        assert plot.builds == built and plot.render().plain == first
        await until(lambda: plot.builds == built + 1, what="the newest samples drawn", pilot=pilot, timeout=PLOT_EVERY_S + 10)
        assert plot.render().plain != first
        times = times[1:] + [times[-1] + PLOT_EVERY_S]  # as far as the interval: drawn at once
        plot.show(times, [200_000.0] * 3, [10, 20, 30], 256_703.0)
        await pilot.pause()
        assert plot.builds == built + 2
