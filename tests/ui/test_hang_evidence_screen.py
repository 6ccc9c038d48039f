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


def _evidence():
    from console.doctor.evidence import HangEvidence, StationEvidence

    st = StationEvidence("A")
    st.container = {"name": "glm53", "state": "running"}
    return HangEvidence({"A": st}, "every rank stuck in all_reduce", {"ras": "RAS: x"}, 0.0, 1.0, 3.0, True,
                        next_step="restart the whole service")


async def test_save_into_a_directory_named_with_markup_and_a_failed_capture_keep_the_app(tmp_path, monkeypatch):
    from textual.app import App

    from console.ui.screens import hang_evidence
    from tests.ui.pair_app import pair_config

    where = tmp_path / "x[" / "]y"  # the directory x[/]y: "[/]" is a closing tag to Rich markup
    where.mkdir(parents=True)
    monkeypatch.chdir(where)

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(HangEvidenceScreen(pair_config(), evidence=_evidence(), autostart=False))

    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        await waiting.until(lambda: isinstance(app.screen, HangEvidenceScreen), what="the screen", pilot=pilot)
        assert "next: restart the whole service" in str(app.screen.query_one("#hang-verdict", Static).render())
        await pilot.press("s")
        await waiting.until(lambda: list(where.glob("hang-report-*.tar.gz")), what="the archive", pilot=pilot)
        assert app.is_running

        async def broken(*_a, **_k):
            raise ValueError("a station answered nonsense")

        monkeypatch.setattr(hang_evidence, "capture", broken)
        await pilot.press("r")
        await waiting.until(lambda: app.screen.failure is not None, what="the failure line", pilot=pilot)
        assert app.is_running
        assert "capture failed: ValueError: a station answered nonsense" in str(
            app.screen.query_one("#hang-verdict", Static).render())


async def test_evidence_older_than_the_interval_and_2_s_shows_as_stale():
    """Mid-session the screen keeps what it captured, but a read older than the interval + 2 s is
    said to be stale (with its age), never shown as the stations' present."""
    import time

    from textual.app import App

    from tests.ui.pair_app import pair_config

    ev = _evidence()

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(HangEvidenceScreen(pair_config(), evidence=ev, autostart=False))

    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        await waiting.until(lambda: isinstance(app.screen, HangEvidenceScreen), what="the screen", pilot=pilot)

        def head() -> str:
            return str(app.screen.query_one("#hang-verdict", Static).render())

        ev.stations["A"].read_at = {"pyspy": time.time() - 1.0, "ras": time.time() + 60}
        app.screen._show()
        assert "stale" not in head() and "verdict: every rank stuck" in head()  # 1 s old: within 3 s + 2 s
        ev.stations["A"].read_at["pyspy"] = time.time() - 30.0  # the py-spy read is now past 5 s
        await waiting.until(lambda: "s old, 1 reads past 5 s): verdict:" in head(), what="stale",
                            pilot=pilot, timeout=5, detail=head)
        assert head().startswith("stale (3")
        assert "not the stations' present" in head()
