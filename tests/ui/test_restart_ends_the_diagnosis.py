"""After a crash and a restart, the crash's finding is no current fault: the real app over real SSH to the
simulated stations; B's container dies of the oom fault (CUDA out of memory, exit 1), the operator ends the
leftover process and starts the service again; B's new run serves. The badge goes, ``d`` keeps the OOM under
"previous run of B (ended ...)"."""

from __future__ import annotations

import time

from console.sim.engine import start_container
from console.ui.app import ConsoleApp
from console.ui.widgets.diagnosis import DiagnosisPanel
from tests.sim.station_procs import events_watching
from tests.ui.pair_app import pane_text
from tests.waiting import until


async def test_a_restart_moves_the_crash_finding_to_previous_run(sim_factory):
    h = await sim_factory(faults=["oom@B"], time_scale=0.005)
    app = ConsoleApp(h.config, gpu_interval_ms=200)
    async with app.run_test(size=(200, 50)) as pilot:
        state = app.stations["B"]
        await until(lambda: state.conn.live and state.container is not None
                    and events_watching(h.world, "B"), what="B watched", pilot=pilot, timeout=40)
        start_container(h.world, "B", at=time.time() - 3)  # started and died of the OOM since the last look
        await until(lambda: any(f.station == "B" and f.id == "cuda-oom" for f in app.diagnoser.ranked()),
                    what="the diagnosis of B's crash", pilot=pilot, timeout=30,
                    detail=lambda: [(f.station, f.id) for f in app.diagnoser.ranked()])
        await until(lambda: "diagnosis:" in pane_text(app, "B"), what="B's diagnosis badge", pilot=pilot, timeout=10)
        crashed = state.container.started_at

        h.world.set_faults("B", [])  # the operator ends the leftover process and restarts the service
        with h.world.edit("B") as st:
            for g in st["gpus"]:
                g.pop("held_mib", None)
                g.pop("held_pid", None)
        h.start_service(gap_s=0.2)
        await until(lambda: state.container.state == "running" and state.container.started_at != crashed,
                    what="B's new run", pilot=pilot, timeout=30, detail=lambda: state.container)
        head = app.stations["A"]
        await until(lambda: state.engine is not None and state.engine.phase == "ready"  # a worker: headless
                    and head.engine is not None and head.engine.phase in ("ready", "serving"),
                    what="the new run up", pilot=pilot, timeout=60, detail=lambda: (state.engine, head.engine))
        await until(lambda: "diagnosis:" not in pane_text(app, "B"), what="B's badge gone", pilot=pilot,
                    timeout=10, detail=lambda: pane_text(app, "B"))
        assert not any(f.station == "B" and f.id == "cuda-oom" for f in app.diagnoser.ranked())

        await pilot.press("d")
        panel = app.dashboard.query_one(DiagnosisPanel)
        await until(lambda: panel.previous, what="the previous run in d", pilot=pilot, timeout=5)
        [run] = panel.previous
        assert run.station == "B" and run.ended_seen  # the crash was seen: its own end time
        assert "cuda-oom" in [f.id for f in run.findings]
        assert not any(f.station == "B" and f.id == "cuda-oom" for f in panel.findings)
        listed = [str(o.prompt) for o in panel.query_one("#diag-list").options]
        title = next(i for i, t in enumerate(listed) if "previous run of B (ended " in t)
        assert any("cuda-oom" in t for t in listed[title + 1:]), listed
        assert not any("cuda-oom" in t for t in listed[:title]), listed
