"""A dead or stopped head shows no live serving numbers: once the head's
container is stopped or exited, whatever still answers on its port (a 503 with /metrics, kept-alive
connections) is not its engine: the Serving box says stopped, its figures are the last ones from
while the container ran, dimmed, with their age, and a new container starts with none until its
own engine answers."""

from __future__ import annotations

import time
from dataclasses import replace

from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress
from console.serving.metrics import ServingSnapshot
from console.station.aspects import Aspect
from console.station.messages import ContainerUpdate, EngineUpdate, ServingUpdate
from console.station.state import StationState
from console.ui import clock
from console.ui.widgets.serving_panel import ServingPanel
from tests.ui.pair_app import pair_app
from tests.ui.test_chat_serving_panel import text_of
from tests.waiting import until

RUN1, RUN2 = "2026-12-01T23:00:00Z", "2026-12-01T23:30:00Z"


def snap(at: float, ttft: float, status: str = "ok") -> ServingSnapshot:
    return ServingSnapshot(url="http://h:8000", healthy=status == "ok", status=status, model="glm-5.3",
                           version="0.30.0", engine="vllm", running=2, waiting=0, kv_usage=0.2, gen_tok_s=90.0,
                           ttft_p50_s=ttft, itl_p50_s=0.012, spec_accept_rate=0.7, spec_mean_len=2.4,
                           updated_at=at, polled_at=at)


def test_the_state_keeps_a_stopped_containers_last_figures_and_clears_them_for_a_new_one():
    s = StationState("A", container="glm53")
    s.apply(ContainerUpdate("A", ContainerInfo("glm53", "running", started_at=RUN1), at=100.0))
    s.apply(ServingUpdate(snap(110.0, 0.25), at=110.0))
    assert s.serving_shown.ttft_p50_s == 0.25 and s.serving_off is None
    assert s.apply(ContainerUpdate("A", ContainerInfo("glm53", "exited", started_at=RUN1, exit_code=0),
                                   at=112.0)) >= {Aspect.CONTAINER}
    # the port still answers (503, /metrics moving): not this container's engine
    s.apply(ServingUpdate(snap(114.0, 0.31, "unhealthy"), at=114.0))
    assert s.serving_off == "container exited (0)"
    assert s.serving_shown.ttft_p50_s == 0.25 and s.serving_shown.updated_at == 110.0
    # a new container: no figures until its own engine answers
    s.apply(ContainerUpdate("A", ContainerInfo("glm53", "running", started_at=RUN2), at=200.0))
    s.apply(ServingUpdate(snap(114.0, 0.31, "unreachable"), at=201.0))  # the monitor keeps its old values
    assert s.serving_off is None and s.serving_shown.ttft_p50_s is None and s.serving_shown.updated_at is None
    assert s.serving_shown.model == "glm-5.3"
    s.apply(ServingUpdate(snap(230.0, 0.05), at=230.0))
    assert s.serving_shown.ttft_p50_s == 0.05
    # events of the same run (docker events repeat the inspect) keep it
    s.apply(ContainerUpdate("A", ContainerInfo("glm53", "running", started_at=RUN2), at=231.0))
    assert s.serving_shown.ttft_p50_s == 0.05


async def test_the_serving_box_of_a_stopped_head_shows_no_live_numbers(monkeypatch):
    now = [time.time()]
    monkeypatch.setattr(clock, "now", lambda: now[0])
    app = pair_app()
    async with app.run_test(size=(200, 50)) as pilot:
        t = now[0]
        post = app.post_message
        post(ContainerUpdate("A", ContainerInfo("glm53", "running", started_at=RUN1), at=t - 60))
        post(EngineUpdate("A", EngineProgress("ready", transport="gdrdma"), at=t - 30))
        post(ServingUpdate(snap(t, 0.25), at=t))
        panel = app.panes["A"].query_one(ServingPanel)
        await until(lambda: "● healthy" in text_of(panel.content), what="serving", pilot=pilot)
        assert "250 ms" in text_of(panel.content) and "updated 0 s ago" in text_of(panel.content)
        # a verified clean stop: the container exited, the engine stopped; the port still answers 503
        now[0] = t + 8
        post(ContainerUpdate("A", ContainerInfo("glm53", "exited", started_at=RUN1, exit_code=0), at=t + 2))
        post(EngineUpdate("A", EngineProgress("stopped", transport="gdrdma"), at=t + 2))
        post(ServingUpdate(snap(t + 8, 0.31, "unhealthy"), at=t + 8))
        await until(lambda: "○ container exited (0)" in text_of(panel.content),
                    what="the Serving box stopped", pilot=pilot, detail=lambda: text_of(panel.content))
        out = text_of(panel.content)
        assert "unhealthy" not in out and "updated 0 s ago" not in out and "310 ms" not in out
        assert "250 ms" in out and "last figures from before the stop, 8 s ago" in out
        assert panel.has_class("-starting") and not panel.has_class("-down")
        now[0] = t + 12
        post(ServingUpdate(snap(t + 12, 0.33, "unhealthy"), at=t + 12))
        await until(lambda: "12 s ago" in text_of(panel.content), what="the age to grow", pilot=pilot,
                    detail=lambda: text_of(panel.content))
        assert "330 ms" not in text_of(panel.content)
        # a new container: nothing of the old run shows; its own engine's answer does
        post(ContainerUpdate("A", ContainerInfo("glm53", "running", started_at=RUN2), at=t + 13))
        post(EngineUpdate("A", EngineProgress("loading", load_pct=10), at=t + 13))
        post(ServingUpdate(replace(snap(t + 12, 0.33, "unreachable"), healthy=False), at=t + 14))
        await until(lambda: "250 ms" not in text_of(panel.content) and "○ container" not in text_of(panel.content),
                    what="the old figures cleared", pilot=pilot, detail=lambda: text_of(panel.content))
        assert panel.snapshot.ttft_p50_s is None and " ms" not in text_of(panel.content)  # every figure a dash
        now[0] = t + 40
        post(ServingUpdate(snap(t + 40, 0.05), at=t + 40))
        await until(lambda: "50.0 ms" in text_of(panel.content) and "● healthy" in text_of(panel.content),
                    what="the new engine's figures", pilot=pilot, detail=lambda: text_of(panel.content))


def test_a_healthy_answer_is_shown_as_it_is_whatever_the_container_says():
    """Something answers healthy on the port while the named container is not running (an engine
    started by hand): what it says is shown, not hidden behind "container exited"."""
    s = StationState("A", container="glm53")
    s.apply(ContainerUpdate("A", ContainerInfo("glm53", "created"), at=100.0))
    s.apply(ServingUpdate(snap(110.0, 0.25), at=110.0))
    assert s.serving_off is None and s.serving_shown.ttft_p50_s == 0.25
