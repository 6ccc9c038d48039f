"""A crash while watched shows its reason on the pane that watched: the real app over
real SSH to the simulated stations; B's container starts and dies (OOM, exit 1) between two looks."""

from __future__ import annotations

import time

from console.sim.engine import start_container
from console.ui.app import ConsoleApp
from tests.sim.station_procs import events_watching
from tests.ui.pair_app import pane_text
from tests.waiting import until


async def test_the_oom_line_and_its_diagnosis_reach_the_watching_pane(sim_factory):
    h = await sim_factory(faults=["oom@B"], time_scale=0.005)
    app = ConsoleApp(h.config, gpu_interval_ms=200)
    async with app.run_test(size=(200, 50)) as pilot:
        state = app.stations["B"]
        await until(lambda: state.conn.live and state.container is not None
                    and events_watching(h.world, "B"), what="B watched", pilot=pilot, timeout=40)
        start_container(h.world, "B", at=time.time() - 3)  # started and died since the last look
        pane = app.panes["B"]
        await until(lambda: any("OutOfMemoryError" in ln for ln in pane.log_pane.lines), what="the OOM line in B's log",
                    pilot=pilot, timeout=30, detail=lambda: list(pane.log_pane.lines)[-3:])
        await until(lambda: any(f.station == "B" and f.id == "cuda-oom" for f in app.diagnoser.ranked()),
                    what="the diagnosis of B's crash", pilot=pilot, timeout=20,
                    detail=lambda: [(f.station, f.id) for f in app.diagnoser.ranked()])
        await until(lambda: "diagnosis:" in pane_text(app, "B"), what="B's diagnosis badge", pilot=pilot, timeout=10)
        assert state.container.state == "exited" and state.container.exit_code == 1
        assert state.engine.phase == "failed" and "OutOfMemoryError" in state.engine.fatal
        # read at once after the death, the run's every fatal line is kept and shown, not only the first
        fatal = state.engine.fatal_lines
        assert len(fatal) >= 2 and "OutOfMemoryError" in fatal[0], fatal
        assert any("Engine core initialization failed" in x for x in fatal), fatal
        # one ✖ row per fatal line (the diagnosis badge's own ✖ is not one of them)
        await until(lambda: fatal_rows(pane_text(app, "B")) == len(fatal), what="every fatal line on B's pane",
                    pilot=pilot, timeout=10, detail=lambda: (fatal, pane_text(app, "B")))


def fatal_rows(text: str) -> int:
    return sum(1 for ln in text.splitlines() if ln.lstrip().startswith("✖"))
