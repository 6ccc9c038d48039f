"""A launch reads the station's one log stream: during a launch from the console (its monitors run) and
from the command line (no monitor), each station's container log is followed by exactly one
``docker logs -f``, counted where it matters: the commands the simulated stations' sshd received."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter

from test_actions_cli import cli, config_path
from textual.widgets import Button

from console.service import gates
from console.ui.app import ConsoleApp
from console.ui.screens.actions import ActionProgressScreen, ConfirmActionScreen
from tests.waiting import until


def follows(sim, since: int) -> Counter[str]:
    """Per station, the ``docker logs -f`` commands the stations received after entry ``since``."""
    out: Counter[str] = Counter()
    for station, command in list(sim.server.command_log)[since:]:
        words = command.split()
        if "docker logs " in command and ("-f" in words or "--follow" in words):
            out[station] += 1
    return out


async def test_a_launch_in_the_console_reads_the_monitors_stream_not_a_second_one(sim_factory, monkeypatch):
    # the launch's preflight gate runs for real, over a few of the checks: all 50 took half of this test's
    # minute on a loaded machine, and no check reads a container's log (the preflight has tests of its own)
    monkeypatch.setattr(gates, "run_checks", functools.partial(
        gates.run_checks, only=("station-reachable", "image-mismatch", "gpu-holders")))
    sim = await sim_factory(n=2, time_scale=0.01)
    cfg = dataclasses.replace(sim.config, connect_timeout_s=20.0, command_timeout_s=60.0)
    app = ConsoleApp(cfg, gpu_interval_ms=200, clock=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await until(lambda: all(app.stations[n].conn.state == "live" for n in ("A", "B")), what="both live",
                    timeout=60, pilot=pilot)
        mark = len(sim.server.command_log)
        await pilot.press("L")
        await until(lambda: isinstance(app.screen, ConfirmActionScreen) and bool(app.screen.query("#yes")),
                    what="the confirmation", timeout=60, pilot=pilot)
        app.screen.query_one("#yes", Button).press()  # (a click can land before the first layout)
        await until(lambda: isinstance(app.screen, ActionProgressScreen) and app.screen.result is not None,
                    what="the launch's result", timeout=180, pilot=pilot)
        screen = app.screen
        res = screen.result
        assert res is not None and res.result == "ok", res.summary
        assert [st.detail.split(",")[0] for st in res.steps if st.action == "checks"] == ["5 checks"], res.steps
        assert follows(sim, mark) == {"A": 1, "B": 1}  # the monitors' streams, and nothing else
        # what the launch read came from those streams: its markers, its timeline at the lines' times
        assert [e for st, e, _d in screen.timeline if st == "A"][-1] == "first-token"
        assert "engine-up" in [e.event for e in res.timeline["B"]] and res.transport == "gdrdma"
        # ... and the operator's log view shows the same run, once
        lines = app.panes["A"].log_pane.lines
        assert sum("Application startup complete." in ln for ln in lines) == 1


async def test_a_launch_and_a_restart_on_the_command_line_follow_each_log_once(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01)
    cfg = config_path(sim)
    mark = len(sim.server.command_log)
    rc, _out, err = await cli("launch", "--config", cfg, "--yes", "--json", "--skip-checks")
    assert rc == 0, err
    assert follows(sim, mark) == {"A": 1, "B": 1}
    mark = len(sim.server.command_log)
    rc, _out, err = await cli("restart", "--config", cfg, "--yes", "--json")
    assert rc == 0, err
    assert follows(sim, mark) == {"A": 1, "B": 1}
