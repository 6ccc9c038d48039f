"""The action screens headless (Pilot) against the simulated stations: confirm shows the exact
commands, progress fills the steps table from the real action, cancel and failure choices work."""

from __future__ import annotations

import asyncio
import dataclasses
import shlex

import pytest
from textual.app import App
from textual.widgets import Button, DataTable, Static
from textual.worker import WorkerCancelled, WorkerState

from console.config import ApiSettings
from console.service.actions import PlannedCommand
from console.sim.engine import container_status
from console.ui.screens.actions import (
    ACTION_GROUP,
    ActionFinished,
    ActionProgressScreen,
    ConfirmActionScreen,
    Confirmed,
    StopOnFailureScreen,
    action_in_progress,
    action_runner,
    plan_action,
    start_action,
)


class Host(App):
    def __init__(self) -> None:
        super().__init__()
        self.finished: list = []
        self.answers: list = []

    def on_action_finished(self, msg: ActionFinished) -> None:
        self.finished.append(msg.result)


def plain(widget: Static) -> str:
    r = widget.render()
    return r.plain if hasattr(r, "plain") else str(r)


def relaxed(cfg):
    """Timeouts for a loaded CI machine (the sim fixture's 3 s connect is tight)."""
    return dataclasses.replace(cfg, connect_timeout_s=20.0, command_timeout_s=60.0)


def state(sim, name: str) -> str:
    return container_status(sim.world, name, sim.world.state(name), "glm53")["state"]


async def wait_for(pilot, cond, limit: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    while not cond():
        assert loop.time() < end, "condition not reached"
        await pilot.pause(0.05)


async def launch_until_ready(app: App, pilot, sim) -> ActionProgressScreen:
    """A launch on its progress screen, once its steps wait for the head to be ready (both started)."""
    screen = ActionProgressScreen("launch", action_runner(relaxed(sim.config), "launch", ready_timeout_s=60))
    await app.push_screen(screen)
    table = screen.query_one(DataTable)
    await wait_for(pilot, lambda: any(str(table.get_row_at(i)[1]) == "ready" for i in range(table.row_count)))
    return screen


async def test_confirm_shows_every_command_in_order_with_the_key_masked(sim_factory, monkeypatch):
    monkeypatch.setenv("DGX_UI_KEY", "sk-ui-secret")
    sim = await sim_factory(n=2, time_scale=0.01)
    cfg = dataclasses.replace(sim.config, api=ApiSettings(url=sim.config.api.url, api_key_env="DGX_UI_KEY"))
    plan = await plan_action(relaxed(cfg), "launch")
    app = Host()
    async with app.run_test(size=(160, 60)) as pilot:
        app.push_screen(ConfirmActionScreen("launch", plan), app.answers.append)
        await pilot.pause()
        text = plain(app.screen.query_one("#plan", Static))
        assert text.index("[B] start worker") < text.index("[A] start head")
        assert "VLLM_API_KEY=*** docker run" in text and "sk-ui-secret" not in text
        assert "--headless" in text and "--gpus device=GPU-" in text
        # the launch adds ptrace for py-spy and the flight recorder's env, and says so
        assert "hang evidence: SYS_PTRACE for py-spy, flight recorder: last 2,000 collectives per rank" in text
        assert "--cap-add SYS_PTRACE" in text and "TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/dgx-console-fr-pipe_" in text
        assert app.screen.focused is app.screen.query_one("#no", Button)
        fit = plain(app.screen.query_one("#fit", Static))
        assert "A: weights 217.4 GiB/GPU" in fit and "KV cache ~11.8 GiB" in fit
        assert not app.screen.query_one("#yes", Button).disabled and not app.screen.query("#replace")
        await pilot.press("escape")
        await pilot.pause()
        assert app.answers == [False]
    assert state(sim, "A") != "running" and state(sim, "B") != "running"


async def test_progress_screen_runs_the_launch_and_shows_the_transport(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01)
    app = Host()
    async with app.run_test(size=(160, 60)) as pilot:
        screen = ActionProgressScreen("launch", action_runner(relaxed(sim.config), "launch", ready_timeout_s=60))
        await app.push_screen(screen)
        res = await screen.job.wait()  # the action's run, a worker of the screen
        assert res.result == "ok" and res.transport == "gdrdma" and screen.result is res
        await wait_for(pilot, lambda: app.finished)  # ... and the app is told
        assert app.finished == [res]
        table = screen.query_one(DataTable)
        rows = [tuple(str(c) for c in table.get_row_at(i)[:3]) for i in range(table.row_count)]
        assert ("B", "run", "ok") in rows and ("A", "ready", "ok") in rows
        assert rows.index(("B", "run", "ok")) < rows.index(("A", "run", "ok"))
        verdict = plain(screen.query_one("#verdict", Static))
        assert verdict.startswith("OK") and "GPUDirect RDMA" in verdict
        assert "A: KV cache logged" in verdict
        # the start-up timeline, live, per station, in order
        a_events = [e for st, e, _d in screen.timeline if st == "A"]
        assert a_events[0] == "container-started" and a_events[-1] == "first-token"
        assert [e for st, e, _d in screen.timeline if st == "B"][-1] == "cuda-graphs"
        assert screen.query_one("#timeline", DataTable).row_count == len(screen.timeline)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ActionProgressScreen)
    assert state(sim, "A") == "running"


async def test_cancel_key_stops_what_started(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.02)
    app = Host()
    async with app.run_test(size=(160, 60)) as pilot:
        screen = await launch_until_ready(app, pilot, sim)
        await pilot.press("c")
        res = await screen.job.wait()  # c asks the action to stop: it ends with its verdict, not a cancel
        assert res.result == "cancelled"
        assert plain(screen.query_one("#verdict", Static)).startswith("CANCELLED")
    assert state(sim, "A") == "exited" and state(sim, "B") == "exited"


async def test_closing_the_progress_screen_cancels_the_run_and_the_guard_stops_what_started(sim_factory):
    """The screen's removal (the app quitting does the same) cancels its worker: the action's guard
    stops what the run started, then the cancel propagates (the worker ends cancelled, no verdict)."""
    sim = await sim_factory(n=2, time_scale=0.02)
    app = Host()
    async with app.run_test(size=(160, 60)) as pilot:
        screen = await launch_until_ready(app, pilot, sim)
        assert state(sim, "A") == "running" and state(sim, "B") == "running"
        await app.pop_screen()  # unmounted once its run has ended, clean-up included
        assert screen.job.state == WorkerState.CANCELLED
        with pytest.raises(WorkerCancelled):
            await screen.job.wait()
        assert screen.result is None and not app.finished
        assert state(sim, "A") == "exited" and state(sim, "B") == "exited"


async def test_a_run_that_raises_is_a_failed_verdict_not_a_dead_screen():
    """An unexpected error of the run is the screen's verdict and the app is told; the worker ends
    normally (nothing is left to a log nobody reads)."""

    async def broken(progress, ask):
        raise RuntimeError("injected: the run broke")

    app = Host()
    async with app.run_test(size=(160, 60)) as pilot:
        screen = ActionProgressScreen("stop", broken)
        await app.push_screen(screen)
        res = await screen.job.wait()
        assert res.result == "failed" and res.summary == "internal error: injected: the run broke"
        assert screen.job.state == WorkerState.SUCCESS
        assert plain(screen.query_one("#verdict", Static)).startswith("FAILED - internal error: injected: the run broke")
        await wait_for(pilot, lambda: app.finished)
        assert app.finished == [res]


async def test_failed_start_asks_and_leave_running_keeps_the_worker(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01, faults=["kv-too-small"])
    app = Host()
    async with app.run_test(size=(160, 60)) as pilot:
        runner = action_runner(relaxed(sim.config), "launch", choice=Confirmed(skip_fit=True), ready_timeout_s=60)
        progress = ActionProgressScreen("launch", runner)
        await app.push_screen(progress)
        await wait_for(pilot, lambda: isinstance(app.screen, StopOnFailureScreen) and app.screen.query("#keep"))
        await pilot.pause()
        assert "kv-cache-too-small" in plain(app.screen.query_one("#failure", Static))
        await pilot.click("#keep")
        res = await progress.job.wait()
        assert res.result == "failed" and "left running" in res.summary
    assert state(sim, "B") == "running"


async def test_read_only_refuses_without_touching_a_station(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01)
    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        assert start_action(app, sim.config, "stop", read_only=True) is None
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmActionScreen)
    assert sim.server.sessions == 0


async def test_stop_flow_confirm_then_run(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01, running=True)
    app = Host()
    async with app.run_test(size=(160, 60)) as pilot:
        worker = start_action(app, relaxed(sim.config), "stop")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmActionScreen) and app.screen.query("#yes"))
        await pilot.pause()
        plan_text = plain(app.screen.query_one("#plan", Static))
        assert plan_text.index("[A] stop") < plan_text.index("[B] stop")
        await pilot.click("#yes")
        await wait_for(pilot, lambda: isinstance(app.screen, ActionProgressScreen))
        res = await app.screen.job.wait()
        await pilot.press("escape")  # the flow ends when its progress screen closes
        await worker.wait()
        assert res.result == "ok"
    assert state(sim, "A") == "exited" and state(sim, "B") == "exited"


async def test_launch_over_a_running_service_needs_its_own_tick(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01, running=True)
    app = Host()
    async with app.run_test(size=(160, 60)) as pilot:
        await wait_for(pilot, lambda: state(sim, "A") == "running")
        worker = start_action(app, relaxed(sim.config), "launch")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmActionScreen) and app.screen.query("#yes"))
        await pilot.pause()
        confirm = app.screen
        running = plain(confirm.query_one("#running", Static))
        assert "service is running on A and B" in running and running.endswith("launch replaces it")
        yes = confirm.query_one("#yes", Button)
        assert yes.disabled and str(yes.label) == "Replace"
        assert "[A] stop the running container" in plain(confirm.query_one("#plan", Static))
        await pilot.click("#replace")
        await pilot.pause()
        assert not yes.disabled
        assert confirm._consents() == Confirmed(replace=True)
        await pilot.press("escape")  # cancelled: nothing changed
        await worker.wait()
    assert state(sim, "A") == "running" and not app.finished


async def test_a_launch_the_estimate_rejects_needs_launch_anyway(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01, faults=["kv-too-small"])
    plan = await plan_action(relaxed(sim.config), "launch")
    app = Host()
    async with app.run_test(size=(160, 60)) as pilot:
        app.push_screen(ConfirmActionScreen("launch", plan), app.answers.append)
        await pilot.pause()
        assert "kv-cache-too-small" not in plain(app.screen.query_one("#fit", Static))  # words, not ids
        assert "error: A: one request of --max-model-len 1,048,576" in plain(app.screen.query_one("#fit", Static))
        assert app.screen.query_one("#yes", Button).disabled
        await pilot.click("#skip-fit")
        await pilot.pause()
        await pilot.click("#yes")
        await pilot.pause()
        assert app.answers == [Confirmed(skip_fit=True)]


async def test_a_second_key_while_an_action_is_planned_starts_no_second_plan(sim_factory):
    """L / S / R are one at a time: a second press while the first plans is refused with a notice."""
    from console.ui.app import ConsoleApp

    class Told(ConsoleApp):
        """The console, writing down what it tells the operator."""

        def __init__(self, *args, **kw) -> None:
            super().__init__(*args, **kw)
            self.told: list[str] = []

        def notify(self, message, **kw) -> None:
            self.told.append(str(message))
            super().notify(message, **kw)

    sim = await sim_factory(n=2, time_scale=0.01)
    gate = sim.world.root / "docker-may-answer"  # the stations' docker waits for it: the plan is still planning
    docker = sim.world.root / "bin" / "docker"
    real = docker.rename(docker.with_name("docker.real"))
    docker.write_text(f"#!/bin/sh\nwhile [ ! -e {shlex.quote(str(gate))} ] && [ -d {shlex.quote(str(sim.world.root))} ]; "
                      "do sleep 0.05; done\n"
                      f'exec {shlex.quote(str(real))} "$@"\n')
    docker.chmod(0o755)
    app = Told(relaxed(sim.config), start_services=False, clock=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("L", "L", "S")
        await wait_for(pilot, lambda: app.told.count("A launch is being planned: one action at a time.") == 2)
        flows = [w for w in app.workers if w.group == ACTION_GROUP]
        assert [w.name for w in flows] == ["launch"]
        gate.touch()
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmActionScreen) and app.screen.query("#yes"))
        assert app.screen.action == "launch"
        await pilot.press("escape")
        await flows[0].wait()
        assert not isinstance(app.screen, ConfirmActionScreen)  # no second confirmation behind the first
        assert action_in_progress(app) is None
        await pilot.press("S")  # free again: the next key plans
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmActionScreen) and app.screen.query("#yes"))
        assert app.screen.action == "stop"
        await pilot.press("escape")
    inspected = [ln for st, ln in sim.server.command_log if st == "A" and ln.startswith("docker inspect --format")]
    assert len(inspected) == 1, inspected  # the launch's plan alone (a stop's plan reads no container)


def test_plan_render_is_plain_text():
    from console.ui.screens.actions import render_plan

    t = render_plan("stop", [PlannedCommand("A", "stop", "docker stop -t 30 glm53")])
    assert "1. [A] stop" in t.plain and "docker stop -t 30 glm53" in t.plain
