"""The hang evidence screen (Pilot) against the simulated stations: ``h`` on the dashboard and in the
workbench opens it, the capture runs as the screen's worker, and the verdict names the rank behind."""

from __future__ import annotations

import asyncio

import pytest
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
    # the sim writes its engine threads' /proc every second: the capture reads them once they are there
    await waiting.until(lambda: all(any((h.world.fs_dir(n) / "proc").glob("[0-9]*/task/*/stat"))
                                    for n in h.world.names), what="the simulated /proc", timeout=20)
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
        a = str(screen.query_one("#hang-rank-0", Static).render())
        # the simulated stations' /proc: every thread read, none in D; RAS found B behind, not A
        assert "threads     " in a and " threads, none in D" in a and " threads, none in D" in b
        assert "straggler   behind by 1 op (RAS on A, two reads" in b and "straggler   not behind (RAS on A" in a
        # no service ran the API poll here: the head says so, never a count
        assert "requests    not read: " in a and "requests" not in b
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


D_TASKS = """=== PID 2657: VLLM::Worker_TP0
--- TID 2657
stat 2657 (VLLM::Worker_TP) D 1 2657 2657 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0
wchan nv_wait_for_event
stack-error cat: /proc/2657/task/2657/stack: Permission denied
--- TID 2665
stat 2665 (nccl-proxy) D 1 2657 2657 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0
wchan uvm_wait_for_fence
stack-error cat: /proc/2657/task/2665/stack: Permission denied
--- TID 2664
stat 2664 (pt_nccl_watchdg) S 1 2657 2657 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0
wchan hrtimer_nanosleep
stack-error cat: /proc/2657/task/2664/stack: Permission denied
"""


def _wedged_evidence(config):
    """The desync fixture, with A's threads stuck in the driver (two in D), B's thread read cut by the
    deadline, A's RAS read 40 s ago (stale past the 3 s interval + 2 s), A's threads read just now."""
    import time

    from console.doctor import evidence
    from console.probes import proc_tasks
    from tests.ui.test_snapshots_hang import desync_evidence

    ev = desync_evidence(config)
    ev.stations["A"].tasks = proc_tasks.tasks_json(D_TASKS)
    ev.stations["B"].tasks = {"status": "not-read", "note": "not read: cut by the deadline (60 s)", "processes": []}
    ev.stations["A"].read_at = {"tasks": time.time(), "ras": time.time() - 40.0}
    ev.stragglers = evidence.stragglers(config, ev.stations, 3.0)
    return ev


@pytest.mark.parametrize("size", [(120, 35), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_threads_stragglers_and_requests_on_screen_in_the_clis_words(size):
    """Every rank's column says its threads in D and their wait channels, whether RAS found it behind
    (with the read's station and its stale age) and, on the head, the requests in flight: on screen, in
    the words ``hang-report`` prints (``evidence_words``); a read that did not happen says "not read"."""
    from textual.app import App

    from console.commands.hang_report import station_lines as cli_lines
    from console.doctor.evidence_words import requests_words
    from tests.ui.pair_app import pair_config
    from tests.ui.test_log_pane import screen_text

    config = pair_config()
    ev = _wedged_evidence(config)
    asked: list[int] = []

    def requests() -> dict:
        asked.append(1)
        return {"status": "ok", "running": 3, "waiting": 1, "age_s": 2.0, "note": ""}

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(HangEvidenceScreen(config, evidence=ev, autostart=False, requests=requests))

    app = Host()
    async with app.run_test(size=size) as pilot:
        await waiting.until(lambda: isinstance(app.screen, HangEvidenceScreen), what="the screen", pilot=pilot)
        await pilot.pause()
        a = str(app.screen.query_one("#hang-rank-0", Static).render())
        b = str(app.screen.query_one("#hang-rank-1", Static).render())
        assert "3 threads, 2 in D (1 nv_wait_for_event, 1 uvm_wait_for_fence)" in a
        assert "stacks not read: permission" in a and "(0 s old)" not in a  # a fresh read: no age
        assert "not behind (RAS on A, two reads, stale: 4" in a  # 40 s old, past 3 s + 2 s
        assert "requests    3 running, 1 waiting (2 s old)" in a and asked
        assert "threads     not read: cut by the deadline (60 s)" in b
        assert "behind by 1 op (RAS on A, two reads, stale: 4" in b
        assert "requests" not in b  # a worker serves no API
        # the CLI prints the same words of the same evidence
        cli = "\n".join(cli_lines(ev, "A"))
        assert "A threads: 3 threads, 2 in D (1 nv_wait_for_event, 1 uvm_wait_for_fence)" in cli
        assert "B threads: not read: cut by the deadline (60 s)" in cli
        assert "stragglers: B behind by 1 op (RAS on A, two reads)" in cli
        assert requests_words({"status": "ok", "running": 3, "waiting": 1, "age_s": 2.0}) in a
        # painted: the rows sit right under the container, inside the terminal at both sizes
        shown = screen_text(app)
        assert shown.count("threads     ") == 2 and "in D" in shown and "nv_wait_for_event" in shown
        assert "behind by 1 op" in shown and "not behind" in shown and "3 running, 1 waiting" in shown
        assert "not read: cut by the" in shown
        for box in app.screen.query(".hang-rank"):
            assert box.region.right <= size[0]


async def test_a_head_without_a_poll_of_its_metrics_says_requests_not_read():
    from textual.app import App

    from tests.ui.pair_app import pair_config

    config = pair_config()
    ev = _wedged_evidence(config)
    ev.stragglers = {"status": "not-read", "note": "not read: A: ncclras: command not found", "ranks": []}

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(HangEvidenceScreen(config, evidence=ev, autostart=False))

    app = Host()
    async with app.run_test(size=(120, 35)) as pilot:
        await waiting.until(lambda: isinstance(app.screen, HangEvidenceScreen), what="the screen", pilot=pilot)
        await pilot.pause()
        a = str(app.screen.query_one("#hang-rank-0", Static).render())
        assert "requests    not read: this capture has no read of the engine's metrics" in a
        assert "straggler   not read: A: ncclras: command not found" in a
        assert "clean" not in a.split("kernel")[0]  # nothing above the kernel row claims "clean"
