"""The workbench screen (Pilot) against the simulated stations: the ladder's verdicts, the cause, the
selected result's evidence and next step, re-running one rung, cancelling, and the debug relaunch
dialog showing the exact diff before anything runs; the dashboard's n / i open it."""

from __future__ import annotations

import asyncio
import time

import pytest
from textual.app import App
from textual.widgets import Button, DataTable, Input, Static

from console.doctor import DoctorOptions
from console.doctor.runner import RUNGS
from console.sim.engine import start_container
from console.ui.screens.doctor import DebugRelaunchScreen, DoctorScreen
from tests import waiting

FAST = DoctorOptions(nccl_timeout_s=20.0, counter_interval_s=1.0, rdma_latency=False, rdma_gpu=False)


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


class Host(App):
    def __init__(self, screen: DoctorScreen) -> None:
        super().__init__()
        self.doctor = screen

    def on_mount(self) -> None:
        self.push_screen(self.doctor)


async def until(pilot, cond, limit: float = 90.0, what: str = "condition") -> None:
    """The suite's one wait (tests/waiting.py), positional for these tests' calls."""
    await waiting.until(cond, what=what, pilot=pilot, timeout=limit)


async def ladder_run(pilot, screen: DoctorScreen, before=None, limit: float = 90.0) -> None:
    """Until the ladder's run (a worker of the screen; a new one after ``before``) has ended."""
    await until(pilot, lambda: screen.job is not None and screen.job is not before, limit, "the run to start")
    await asyncio.wait_for(screen.job.wait(), limit)
    await pilot.pause()


def started(h) -> None:
    now = time.time() - 0.5  # both started already (none in the future)
    start_container(h.world, "B", at=now)
    start_container(h.world, "A", at=now + 0.3)


async def test_ladder_cause_detail_rerun_and_relaunch_dialog(sim_factory):
    h = await sim_factory(faults=["nccl-timeout"], time_scale=0.005)
    started(h)
    screen = DoctorScreen(h.config, options=FAST, reason="nccl-timeout on A")
    async with Host(screen).run_test(size=(160, 48)) as pilot:
        await ladder_run(pilot, screen)
        status = str(screen.query_one("#doc-status", Static).render())
        assert "verdict: nccl" in status and "cause: env B: GID index 3 in use" in status
        assert "investigating nccl-timeout on A" in status
        table = screen.query_one("#doc-table", DataTable)
        keys = [r.value for r in table.rows]
        assert keys[0] == "rung:links" and "rung:relaunch" in keys
        # passes are folded away; the cursor sits on the verdict rung's first failure
        assert not any(k.startswith("res:") and screen.report.of(k.split(":")[1])[int(k.split(":")[2])].status == "pass"
                       for k in keys)
        detail = str(screen.query_one("#doc-detail", Static).render())
        assert detail.startswith("3 nccl") and "IB completion error status=12" in detail
        assert "Next:" in detail and "NCCL_IB_GID_INDEX set by environment to 3" in detail
        await pilot.press("p")
        assert len(list(screen.query_one("#doc-table", DataTable).rows)) > len(keys)
        # re-run only the env rung: its results come back, the others stay
        env_key = next(k for k in screen._row_keys if k.startswith("res:env:"))
        table.move_cursor(row=screen._row_keys.index(env_key))
        before, first = len(screen.report.of("rdma")), screen.job
        await pilot.press("r")
        await ladder_run(pilot, screen, before=first)
        assert screen.rung_state["env"] == "done"
        assert screen.report.of("env") and len(screen.report.of("rdma")) == before
        # the debug relaunch dialog: prefilled from the cause, diff shown before anything runs
        await pilot.press("x")
        await until(pilot, lambda: isinstance(pilot.app.screen, DebugRelaunchScreen), what="the dialog")
        dialog = pilot.app.screen
        assert dialog.query_one("#dr-NCCL_IB_GID_INDEX-B", Input).value == "5"
        assert dialog.query_one("#dr-go", Button).disabled
        await pilot.click("#dr-preview")
        await until(pilot, lambda: not dialog.query_one("#dr-go", Button).disabled, what="the diff")
        diff = str(dialog.query_one("#dr-diff", Static).render())
        assert "-    -e NCCL_IB_GID_INDEX=3" in diff and "+    -e NCCL_IB_GID_INDEX=5" in diff
        assert "NCCL_DEBUG_SUBSYS=INIT,NET,ENV" in diff and "normal command is relaunched" in diff
        dialog.query_one("#dr-NCCL_IB_GID_INDEX-B", Input).value = "4"  # a change needs a new preview
        await pilot.pause()
        assert dialog.query_one("#dr-go", Button).disabled
        await pilot.press("escape")
        assert isinstance(pilot.app.screen, DoctorScreen)
        assert not screen.tries  # nothing was relaunched


async def test_cancel_ends_the_running_rung(sim_factory):
    h = await sim_factory(faults=["mtu-mismatch"])
    screen = DoctorScreen(h.config, options=DoctorOptions(nccl_timeout_s=60.0), autostart=False)
    async with Host(screen).run_test(size=(120, 35)) as pilot:
        screen._start(["nccl"])
        await until(pilot, lambda: "all_reduce_perf" in screen.progress_text, what="nccl-tests to start")
        await pilot.press("c")
        await asyncio.wait_for(screen.job.wait(), 30)  # the stop ends the run with its report (not a cancel)
        assert screen.rung_state["nccl"] == "cancelled" and screen.report.cancelled
        assert "cancelled after" in screen.report.of("nccl")[0].summary
        # a cancelled run says so, never "verdict: ok"
        status = str(screen.query_one("#doc-status", Static).render())
        assert "verdict: cancelled" in status and "verdict: ok" not in status
        assert "cause: none: the run was cancelled in nccl" in status


class BrokenSession:
    """A station session whose every command raises what no code expects."""

    def __init__(self, station) -> None:
        self.station = station

    async def run(self, command: str, timeout: float | None = None, input: str | None = None):
        raise RuntimeError("injected: the session broke")

    def stream(self, command: str):
        return self._broken()

    async def _broken(self):
        raise RuntimeError("injected: the session broke")
        yield  # (an async generator, as a stream is)

    async def close(self) -> None:
        return None


async def test_a_rung_that_raises_is_a_failed_row_and_the_ladder_goes_on(sim_factory):
    h = await sim_factory()
    transports = {s.name: BrokenSession(s) for s in h.config.stations}
    screen = DoctorScreen(h.config, options=FAST, transports=transports)
    async with Host(screen).run_test(size=(160, 48)) as pilot:
        await ladder_run(pilot, screen)
        assert screen.rung_state == {r.id: "done" for r in RUNGS}  # every rung ran: one failure hides no other
        links = screen.report.of("links")
        assert links[0].status == "fail" and links[0].summary == "the rung failed: RuntimeError: injected: the session broke"
        table = screen.query_one("#doc-table", DataTable)
        shown = [str(table.get_row(r.value)[-1]) for r in table.rows if r.value.startswith("res:links:")]
        assert shown and "the rung failed: RuntimeError" in shown[0]


async def test_dashboard_keys_open_the_workbench(sim_factory):
    from console.ui.app import ConsoleApp

    h = await sim_factory()
    app = ConsoleApp(h.config, start_services=False, clock=False)
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, DoctorScreen), what="n")
        app.screen.stop_run()
        await pilot.press("escape")
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, DoctorScreen), what="i")
        app.screen.stop_run()


async def test_a_failed_launch_offers_the_workbench(sim_factory):
    from console.service.actions import ActionResult
    from console.ui.app import ConsoleApp
    from console.ui.screens.actions import ActionProgressScreen

    h = await sim_factory()

    async def failed(progress, ask) -> ActionResult:
        return ActionResult("launch", result="failed", summary="A: nccl-timeout: Watchdog caught collective operation timeout")

    app = ConsoleApp(h.config, start_services=False, clock=False)
    async with app.run_test(size=(120, 35)) as pilot:
        progress = ActionProgressScreen("launch", failed)
        await app.push_screen(progress)
        await progress.job.wait()
        assert "i: investigate" in str(progress.query_one("#verdict", Static).render())
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, DoctorScreen), what="the workbench")
        assert app.screen.reason.startswith("launch failed: A: nccl-timeout")
        app.screen.stop_run()


async def test_a_saved_report_reopens_on_its_named_cause(sim_factory):
    """The saved report keeps which failure is the cause (the conclusion line)."""
    from console.doctor import store
    from console.doctor.model import DoctorReport, RungResult

    h = await sim_factory()
    rep = DoctorReport(order=tuple(r.id for r in RUNGS), results=[
        RungResult("nccl", "A,B", "fail", "no result within 90 s"),
        RungResult("env", "B", "fail", "GID index 3 in use", (), "set NCCL_IB_GID_INDEX=5 on B", cause=True)])
    store.save_report(h.config, rep.to_dict())
    screen = DoctorScreen(h.config, autostart=False)
    async with Host(screen).run_test(size=(120, 35)) as pilot:
        await pilot.pause()
        status = str(screen.query_one("#doc-status", Static).render())
        assert "verdict: nccl" in status and "cause: env B: GID index 3 in use" in status
        assert "next: set NCCL_IB_GID_INDEX=5 on B" in status
