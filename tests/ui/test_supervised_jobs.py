"""The app's long-lived jobs never die silently (Pilot, the real app against the simulated stations):
an unexpected exception in a station's service is that station's ``error`` state on its pane, with the
reason and the retry, and the service comes back; an unexpected exception in the serving poll is on the
serving panel and the poll goes on; a serving monitor that dies is a notice and it restarts. Each
fault is injected where the outside world meets the console (a transport's stream, the HTTP
transport), except the last: the monitor's own loop catches everything it calls, so it is the job
itself that fails there."""

from __future__ import annotations

import io
import json

import httpx
from rich.console import Console

from console.remote import cmdlines
from console.remote.transport import new_transport
from console.serving.metrics import ServingMonitor
from console.ui.app import SERVING_JOB, ConsoleApp
from console.ui.widgets.serving_panel import ServingPanel
from tests import waiting
from tests.ui.pair_app import pane_text

INTERVAL_MS = 200


async def until(pilot, cond, what: str, seen=None, timeout: float = 60.0) -> None:
    """The suite's one wait (tests/waiting.py), positional for these tests' many calls."""
    await waiting.until(cond, what=what, pilot=pilot, timeout=timeout, detail=seen)


class GpuStreamBreaks:
    """A station's real SSH session whose GPU stream raises what no code expects while ``broken``."""

    def __init__(self, inner) -> None:
        self.inner, self.station = inner, inner.station
        self.broken, self.broke = True, 0

    async def run(self, command: str, timeout: float | None = None, input: str | None = None):
        return await self.inner.run(command, timeout=timeout, input=input)

    def stream(self, command: str):
        if command == cmdlines.gpu_query(INTERVAL_MS) and self.broken:
            self.broke += 1
            return self._broken()
        return self.inner.stream(command)

    async def _broken(self):
        raise RuntimeError("injected: the GPU stream broke")
        yield  # (an async generator, as a stream is)

    async def close(self) -> None:
        await self.inner.close()


class Api:
    """The API behind an httpx transport: healthy, except that while ``broken`` its metrics call raises."""

    def __init__(self) -> None:
        self.broken = True
        self.metrics_calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/metrics":
            self.metrics_calls += 1
            if self.broken:
                raise RuntimeError("injected: the metrics call broke")
            return httpx.Response(200, text='vllm:num_requests_running{model_name="glm53"} 0\n')
        if path == "/v1/models":
            return httpx.Response(200, text=json.dumps({"data": [{"id": "glm53"}]}))
        if path == "/version":
            return httpx.Response(200, text=json.dumps({"version": "0.30.0"}))
        return httpx.Response(200, text="")


class Noted(ConsoleApp):
    """The app, with the notices it showed kept for the test."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.notices: list[str] = []

    def notify(self, message, **kw) -> None:
        self.notices.append(str(message))
        super().notify(message, **kw)


def serving_text(app: ConsoleApp) -> str:
    panel = app.dashboard.query_one(ServingPanel)
    console = Console(width=100, record=True, file=io.StringIO(), color_system=None)
    console.print(panel.content)
    return console.export_text()


async def test_a_station_stream_that_raises_is_its_error_state_and_the_service_comes_back(sim_factory):
    h = await sim_factory(running=True, time_scale=0.005)
    a = h.config.station("A")
    flaky = GpuStreamBreaks(new_transport(a, h.config.connect_timeout_s, h.config.command_timeout_s))
    app = ConsoleApp(h.config, gpu_interval_ms=INTERVAL_MS, transports={"A": flaky})
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: app.panes["A"].conn_state == "error", "A's error state",
                    lambda: (app.stations["A"].conn.state, app.stations["A"].conn.detail))
        text = pane_text(app, "A")
        assert "error" in text and "RuntimeError: injected: the GPU stream broke (r: retry now)" in text
        assert app.stations["A"].conn.next_try_at is not None  # the restart is due, and shown
        flaky.broken = False
        await pilot.press("r")  # what the pane offers: retry now (else the restart comes at its time)
        await until(pilot, lambda: app.panes["A"].conn_state == "live" and app.stations["A"].gpus, "A live again",
                    lambda: (app.stations["A"].conn.state, app.stations["A"].conn.detail))
        assert flaky.broke >= 1 and app.services["A"].restarts == flaky.broke
        assert app.services["B"].restarts == 0


async def test_a_serving_poll_that_raises_is_on_the_serving_panel_and_the_poll_goes_on(sim_factory):
    h = await sim_factory()
    api = Api()
    app = ConsoleApp(h.config, gpu_interval_ms=INTERVAL_MS, serving_transport=httpx.MockTransport(api))
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: "injected" in serving_text(app), "the failed poll on the panel",
                    lambda: serving_text(app))
        assert "no metrics yet: /metrics: cannot parse (RuntimeError: injected: the metrics call broke)" \
            in serving_text(app)
        api.broken = False
        await until(pilot, lambda: "updated" in serving_text(app), "the next poll", lambda: serving_text(app))
        assert "● healthy" in serving_text(app) and "injected" not in serving_text(app)
        assert app.jobs[SERVING_JOB].restarts == 0  # the monitor carried on: nothing had to restart


async def test_a_serving_monitor_that_dies_is_a_notice_and_it_restarts(sim_factory, monkeypatch):
    real_run = ServingMonitor.run
    runs: list[int] = []

    async def dies_once(self: ServingMonitor) -> None:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("injected: the monitor broke")
        await real_run(self)

    monkeypatch.setattr(ServingMonitor, "run", dies_once)
    h = await sim_factory()
    api = Api()
    api.broken = False
    app = Noted(h.config, gpu_interval_ms=INTERVAL_MS, serving_transport=httpx.MockTransport(api))
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: app.notices, "the notice", lambda: app.jobs[SERVING_JOB].state)
        assert app.notices[0] == "serving monitor failed (RuntimeError: injected: the monitor broke); restarting in 1 s"
        await until(pilot, lambda: "● healthy" in serving_text(app), "the restarted monitor's poll",
                    lambda: serving_text(app))
        job = app.jobs[SERVING_JOB]
        assert len(runs) == 2 and job.restarts == 1 and job.state == "running"
    assert job.state == "stopped"  # the app's exit stopped it
