"""Capture-then-recover in the TUI: a wedge with ``[recover] on = ["wedge"]`` is captured, then the
console restarts the service itself (through the monitors' log streams) and says so: a notice
"recovered in N s" and the head pane's badge; the ledger row reads ``captured, recovered``."""

from __future__ import annotations

import dataclasses

from console.config.schema import RecoverSettings
from console.incidents.store import Ledger
from console.ui.app import ConsoleApp
from tests.waiting import until


async def test_the_tui_recovers_a_wedge_after_its_capture_and_shows_it(sim_factory):
    h = await sim_factory(faults=["wedge"], time_scale=0.005)
    config = dataclasses.replace(h.config, ui=dataclasses.replace(h.config.ui, progress_window_s=5.0),
                                 incidents=dataclasses.replace(h.config.incidents, capture_deadline_s=30.0),
                                 recover=RecoverSettings(("wedge",), 1, 0))
    app = ConsoleApp(config, gpu_interval_ms=500)
    said: list[str] = []
    real = app.notify

    def notify(message, *a, **kw):
        said.append(str(message))
        if "restarting the service" in str(message):
            # the fault is mended as the restart begins (said before its first step): the simulator's wedge
            # otherwise comes back 300 engine-s (1.5 s here) into the new run's serving, and on a loaded
            # machine that can be before the restart's first token, which it then never reads
            for name in ("A", "B"):
                h.world.set_faults(name, [])
        return real(message, *a, **kw)

    app.notify = notify  # type: ignore[method-assign]
    async with app.run_test(size=(160, 45)) as pilot:
        await until(lambda: app.stations["A"].gpus, what="A's GPUs", pilot=pilot, timeout=30)
        h.start_service()
        await until(lambda: any("recovered in" in s or "recovery failed" in s for s in said), what="the recovery",
                    pilot=pilot, timeout=150, detail=lambda: said[-6:])
        assert any("recovered in" in s and "first token" in s for s in said), said
        i_cap = next(i for i, s in enumerate(said) if "evidence in" in s)
        i_restart = next(i for i, s in enumerate(said) if "restarting the service" in s)
        assert i_cap < i_restart  # the evidence first, then the restart
        screen = app.screen
        pane = screen.panes["A"]  # type: ignore[attr-defined]
        await until(lambda: "recover" in pane.badges and pane.badges["recover"].plain.startswith(
            "✓ recovered: recovered in"), what="the head pane's badge", pilot=pilot, timeout=10,
            detail=lambda: pane.badges.get("recover"))
        row = min(Ledger().incidents(), key=lambda r: r.id)
        assert row.action.startswith("captured, recovered") and "recovered in" in row.note
