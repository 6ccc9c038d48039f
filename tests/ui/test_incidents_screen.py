"""The flight recorder in the TUI on the simulated stations: a wedge is captured once (a notice
that says where the bundle went, one ledger row), and ``I`` lists it."""

from __future__ import annotations

import dataclasses

from textual.widgets import DataTable, Static

from console.incidents.store import Ledger
from console.ui.app import ConsoleApp
from console.ui.screens.incidents import IncidentsScreen
from tests.waiting import until


async def test_a_wedge_in_the_tui_is_captured_once_and_listed_on_I(sim_factory):
    h = await sim_factory(faults=["wedge"], time_scale=0.005)
    config = dataclasses.replace(h.config, ui=dataclasses.replace(h.config.ui, progress_window_s=5.0),
                                 incidents=dataclasses.replace(h.config.incidents, capture_deadline_s=30.0))
    app = ConsoleApp(config, gpu_interval_ms=500)
    said: list[str] = []
    real = app.notify

    def notify(message, *a, **kw):
        said.append(str(message))
        return real(message, *a, **kw)

    app.notify = notify  # type: ignore[method-assign]
    async with app.run_test(size=(160, 45)) as pilot:
        await until(lambda: app.stations["A"].gpus, what="A's GPUs", pilot=pilot, timeout=30)
        h.start_service()
        await until(lambda: any("evidence in" in s or "capture failed" in s for s in said), what="the capture",
                    pilot=pilot, timeout=120, detail=lambda: said)
        rows = Ledger().incidents()
        assert len(rows) == 1 and rows[0].action == "captured" and rows[0].bundle, rows
        assert sum("evidence in" in s for s in said) == 1 and rows[0].bundle in " ".join(said)
        await pilot.press("I")
        screen = await until(lambda: isinstance(app.screen, IncidentsScreen) and app.screen, what="the screen",
                             pilot=pilot, timeout=10)
        table = screen.query_one(DataTable)
        await until(lambda: table.row_count == 1, what="one row", pilot=pilot, timeout=10)
        detail = str(screen.query_one("#incident-detail", Static).content)
        assert f"incident {rows[0].id}: wedge" in detail and rows[0].bundle in detail
        await pilot.press("escape")
        assert not isinstance(app.screen, IncidentsScreen)


async def test_the_head_pane_says_the_stalls_of_the_last_hour(tmp_path):
    import time

    from console.incidents.store import Stall
    from tests.ui.pair_app import pair_app

    app = pair_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        now = time.time()
        app.incidents.stalls.extend([Stall(now - 600, 9.0, ("A", "B"), 4), Stall(now - 60, 14.2, ("A", "B"), 4),
                                     Stall(now - 7200, 30.0, ("A", "B"), 4)])
        app.judge_progress()
        await pilot.pause()
        assert app.panes["A"].badges["stalls"].plain == "⏸ 2 stalls in the last hour, longest 14 s"
        assert "stalls" not in app.panes["B"].badges
