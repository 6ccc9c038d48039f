"""The hang evidence screen (Pilot) against the simulated stations: ``h`` on the dashboard and in the
workbench opens it, the capture runs as the screen's worker, and the verdict names the rank behind."""

from __future__ import annotations

import asyncio

from textual.widgets import Static

from console.ui.screens.doctor import DoctorScreen
from console.ui.screens.hang_evidence import HangEvidenceScreen
from tests import waiting
from tests.sim.test_hang_report_sim import started


async def test_h_opens_the_evidence_with_the_verdict(sim_factory):
    from console.ui.app import ConsoleApp

    h = await sim_factory(faults=["desync"], time_scale=0.05)
    started(h, ago=30)
    app = ConsoleApp(h.config, start_services=False, clock=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("h")
        await waiting.until(lambda: isinstance(app.screen, HangEvidenceScreen), what="h", pilot=pilot)
        screen = app.screen
        await waiting.until(lambda: screen.job is not None, what="the capture to start", pilot=pilot)
        await asyncio.wait_for(screen.job.wait(), 120)
        await pilot.pause()
        verdict = str(screen.query_one("#hang-verdict", Static).render())
        assert "verdict: ranks out of step: A at op" in verdict and "B at op" in verdict
        b = str(screen.query_one("#hang-rank-1", Static).render())
        assert b.startswith("B") and "RAS" in b and "idle" in b
        await pilot.press("escape")
        await pilot.press("n")
        await waiting.until(lambda: isinstance(app.screen, DoctorScreen), what="n", pilot=pilot)
        app.screen.stop_run()
        await pilot.press("h")
        await waiting.until(lambda: isinstance(app.screen, HangEvidenceScreen), what="h in the workbench",
                            pilot=pilot)
        await asyncio.wait_for(app.screen.job.wait(), 120) if app.screen.job else None
