"""On-demand jobs beside a streaming dashboard (Pilot, the real app against the simulated stations):
RDMA validation (k, v) and the workbench (n) get their SSH channels while every station's dashboard
streams run, and pass on a healthy pair as headless they do; when a station's job slots are taken the
wait is said, and a job that never gets a channel is "not measured" (a channel shortage), never a
verdict on the network."""

from __future__ import annotations

import asyncio
import time

from textual.widgets import Static

from console.doctor import DoctorOptions, run_doctor
from console.remote import channels
from console.remote.session import SessionRegistry
from console.remote.transport import ssh_of
from console.sim.engine import start_container
from console.station.rdma import SHORTAGE_ID, overall, validate_rdma
from console.ui.app import ConsoleApp
from console.ui.screens.checks import ChecksScreen
from console.ui.screens.doctor import DoctorScreen
from console.vocabulary import CheckStatus
from tests.waiting import until


def started(h) -> None:
    """Both containers started half a minute ago (worker first): the demo, serving."""
    t = time.time() - 30.5
    start_container(h.world, "B", at=t)
    start_container(h.world, "A", at=t + 0.3)


def streams(app: ConsoleApp, name: str) -> int:
    return ssh_of(app.sessions.session(name)).budget.streams_open


async def test_validation_and_workbench_run_while_the_dashboard_streams(sim_factory, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    h = await sim_factory(time_scale=0.005)
    started(h)
    app = ConsoleApp(h.config, gpu_interval_ms=200)
    async with app.run_test(size=(200, 50)) as pilot:
        # every station's dashboard streams are open: GPU loop, station loop, log, health channel
        await until(lambda: all(streams(app, n) == channels.WATCH_STREAMS for n in "AB"),
                    what="the dashboard's four streams on each station", pilot=pilot, timeout=60,
                    detail=lambda: {n: ssh_of(app.sessions.session(n)).budget.open for n in "AB"})
        await pilot.press("k")
        await until(lambda: isinstance(app.screen, ChecksScreen) and not app.screen.busy, what="the checks",
                    pilot=pilot, timeout=120)
        checks = app.screen
        await pilot.press("v")
        await until(lambda: checks.busy, what="the validation to start", pilot=pilot, timeout=10)
        await until(lambda: not checks.busy, what="the validation to end", pilot=pilot, timeout=240)
        runs = [r for r in checks.results.values() if r.id in ("rdma-bandwidth", "rdma-timeout", SHORTAGE_ID)]
        assert len(runs) == 8, [(r.id, r.summary) for r in runs]
        assert all(r.status == CheckStatus.PASS and r.id == "rdma-bandwidth" for r in runs), \
            [(r.id, r.status, r.summary) for r in runs]
        assert all(streams(app, n) == channels.WATCH_STREAMS for n in "AB")  # the dashboard kept its streams
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, ChecksScreen), what="the dashboard", pilot=pilot)
        await pilot.press("n")
        await until(lambda: isinstance(app.screen, DoctorScreen) and app.screen.job is not None,
                    what="the workbench's run", pilot=pilot, timeout=30)
        doctor = app.screen
        await asyncio.wait_for(doctor.job.wait(), 300)
        await pilot.pause()
        rep = doctor.report
        bad = [(r.id, r.station, r.summary) for r in rep.results if r.status != CheckStatus.PASS]
        assert rep.verdict == "ok", bad
        assert not [r for r in rep.results if "SSH channel" in r.summary], bad
        assert any(r.status == CheckStatus.PASS and "over IB" in r.summary for r in rep.of("nccl"))
        assert "verdict: ok" in str(doctor.query_one("#doc-status", Static).render())


async def _hold_job_slots(registry: SessionRegistry, name: str) -> list[asyncio.Task]:
    """Take every job slot on ``name`` with a long-lived stream (two other jobs still running)."""
    t = registry.transport(name)

    async def hold() -> None:
        async for _line in t.stream("echo held; sleep 60"):
            pass

    tasks = [asyncio.ensure_future(hold()) for _ in range(channels.JOB_STREAMS)]
    budget = ssh_of(registry.session(name)).budget
    await until(lambda: len(budget.open["job"]) == channels.JOB_STREAMS, what="the job slots taken", timeout=20)
    return tasks


async def test_no_channel_is_a_shortage_named_as_such_never_an_rdma_verdict(sim_factory, monkeypatch):
    # a refusal after 1 s: still past the 0.5 s after which a wait is said (WAIT_NOTICE_S, checked first:
    # the refusal cannot come before it), and every run refused on B costs that second
    assert channels.WAIT_NOTICE_S < 1.0
    monkeypatch.setattr(channels, "STREAM_SLOT_WAIT_S", 1.0)
    h = await sim_factory(time_scale=0.005)
    heard: list[channels.ChannelWait] = []
    async with SessionRegistry(h.config) as reg:
        held = await _hold_job_slots(reg, "B")
        try:
            with channels.on_wait(heard.append):
                runs = await validate_rdma(h.config, gpu=False)
            on_b = [r for r in runs if r.server == "B"]
            assert on_b and all(r.status == CheckStatus.SKIP and r.id == SHORTAGE_ID for r in on_b), \
                [(r.status, r.id, r.summary) for r in on_b]
            assert all("not measured: no SSH channel on B" in r.summary and "not the network" in r.summary
                       for r in on_b)
            assert all(r.status == CheckStatus.PASS for r in runs if r.server == "A")  # the other way round works
            assert overall(runs) == 1  # nothing proved about B's side: not "ok"
            said = [w.text() for w in heard if w.station == "B"]
            assert any(s.startswith("waiting for an SSH channel on B (2 job streams open") for s in said), said
            # the workbench's RDMA rung: skipped as a shortage, so the verdict is not "rdma"
            progress: list[str] = []
            rep = await run_doctor(h.config, rungs=["rdma"], options=DoctorOptions(rdma_gpu=False, rdma_latency=False),
                                   on_progress=lambda rid, text: progress.append(text))
            skipped = [r for r in rep.results if r.status == CheckStatus.SKIP]
            assert skipped and all("not measured" in r.summary for r in skipped)
            assert rep.verdict != "rdma" and not [r for r in rep.results if r.status == CheckStatus.FAIL]
            assert any(p.startswith("waiting for an SSH channel on B") for p in progress), progress
        finally:
            for t in held:
                t.cancel()
            await asyncio.gather(*held, return_exceptions=True)
