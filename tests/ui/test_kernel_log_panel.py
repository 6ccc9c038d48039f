"""The live diagnosis panel reads each station's kernel log (the real app over real SSH to the
simulated stations). B's container runs with the ``kernel-errors`` fault: an mlx5 link drop and an Xid 119
after the start reach the diagnosis as B's findings, named from B's kernel log."""

from __future__ import annotations

from console.ui.app import ConsoleApp
from tests.waiting import until


async def test_kernel_errors_reach_the_live_diagnosis(sim_factory):
    h = await sim_factory(faults=["kernel-errors@B"], running=True, time_scale=0.005)
    app = ConsoleApp(h.config, gpu_interval_ms=200)
    async with app.run_test(size=(200, 50)) as pilot:
        def xid():
            return next((f for f in app.diagnoser.ranked() if f.id == "gpu-xid" and f.station == "B"), None)

        f = await until(xid, what="B's Xid from its kernel log", pilot=pilot, timeout=60,
                        detail=lambda: [(f.station, f.id) for f in app.diagnoser.ranked()])
        assert f.evidence[0].source == "B kernel log" and "Xid 119" in f.cause
        assert any(x.id == "nccl-ib-error" and x.station == "B" for x in app.diagnoser.ranked())
        # one reader of each station's kernel log: the health channel's journalctl -k -f (no job of its own)
        assert not any(name.startswith("kernel-log") for name in app.jobs.jobs)
