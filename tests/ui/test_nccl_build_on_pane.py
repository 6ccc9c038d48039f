"""The NCCL each rank loaded, on its pane: a known-bad build is flagged with its report;
a good one adds nothing (Pilot, the real app; the test posts what the station's log tracker would)."""

from __future__ import annotations

from pair_app import pair_app
from rich.console import Console

from console.probes.engine_log import EngineLogTracker, EngineProgress
from console.station.messages import EngineUpdate
from tests.waiting import until


def _shown(pane) -> str:
    """The pane's status lines as drawn at its width (the clipped lines as the operator reads them)."""
    c = Console(width=pane.size.width, record=True, color_system=None)
    c.print(pane.query_one(".status").content)
    return c.export_text()


def test_the_tracker_records_the_first_version_a_run_names():
    t = EngineLogTracker()
    assert t.feed("(Worker_TP0 pid=412) INFO 08-31 09:50:46 [pynccl.py:63] vLLM is using nccl==2.27.3")
    t.feed("station-b:412:412 [0] NCCL INFO NCCL version 2.27.3+cuda12.9")
    assert t.progress.nccl_version == "2.27.3"
    assert t.progress.nccl_version_line == "vLLM is using nccl==2.27.3"
    t.feed("(APIServer pid=1) INFO 12-02 03:00:00 [api_server.py:1896] vLLM API server version 0.30.0")  # a new run
    assert t.progress.nccl_version is None


async def test_a_known_bad_nccl_is_flagged_on_its_pane_with_the_report():
    app = pair_app()
    async with app.run_test(size=(200, 50)) as pilot:
        app.post_message(EngineUpdate("A", EngineProgress(phase="loading", load_pct=30, transport="rdma",
                                                          nccl_version="2.30.7",
                                                          nccl_version_line="NCCL 2.30.7+cuda13.0")))
        app.post_message(EngineUpdate("B", EngineProgress(phase="loading", load_pct=30, transport="rdma",
                                                          nccl_version="2.27.3",
                                                          nccl_version_line="NCCL 2.27.3+cuda12.9")))
        a, b = app.panes["A"], app.panes["B"]
        await until(lambda: a.progress is not None and b.progress is not None, what="both phases", pilot=pilot)
        await until(lambda: "NCCL 2.27.3 loaded: known bad" in _shown(b),
                    what="B's warning", pilot=pilot)
        text = " ".join(_shown(b).split())
        assert "(silent wedge on ARM, marin-community/marin#8038); fix: an image with NCCL >= 2.29.3" in text, text
        assert "known bad" not in _shown(a)
