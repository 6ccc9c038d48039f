"""A GPU in error (Pilot, the real app fed the messages a station's monitor posts): a GPU nvidia-smi
prints an error line for (gpu-lost) is a diagnosis finding with nvidia-smi's words and the way out, the
fleet row's state and last error — not "● live" with nothing — and it clears when the GPU answers again."""

from __future__ import annotations

import time

from textual.widgets import DataTable

from console.probes.nvidia_smi import GpuReading, error_reading
from console.station.messages import ConnectionState, GpuSample
from console.ui.widgets.diagnosis import DiagnosisPanel
from console.ui.widgets.fleet_table import FleetTable
from tests.ui.pair_app import pair_app
from tests.waiting import until

LOST = "Unable to determine the device handle for GPU00000000:01:00.0: Unknown Error"


def gb300(used=236902):
    return GpuReading(1, "GPU-1", "NVIDIA GB300", used, 256703, 0, 41, 165.4)


def fleet_text(app) -> str:
    table = app.dashboard.query_one(FleetTable)
    return "\n".join(" | ".join(str(c) for c in table.get_row_at(i)) for i in range(table.row_count))


async def test_a_lost_gpu_is_a_finding_and_the_fleet_rows_state_and_last_error(tmp_path):
    app = pair_app(tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        now = time.time()
        for name in ("A", "B"):
            app.post_message(ConnectionState(name, "live", last_sample_at=now))
            app.post_message(GpuSample(name, [gb300()], now))
        app.post_message(GpuSample("A", [error_reading(0, LOST), gb300()], now))
        panel = app.dashboard.query_one(DiagnosisPanel)
        await until(lambda: any(f.id == "gpu-errors" and f.station == "A" for f in panel.findings),
                    what="the gpu-errors finding on A", pilot=pilot,
                    detail=lambda: [(f.id, f.station) for f in panel.findings])
        f = next(f for f in panel.findings if f.id == "gpu-errors")
        assert f.severity == "error" and f.cause == f"a GPU in error: nvidia-smi says GPU 0: {LOST}"
        assert "nvidia-smi -r -i 0`" in f.remedy and "reboot" in f.remedy and "reseat" in f.remedy
        await pilot.press("f")
        await until(lambda: app.dashboard.query_one(FleetTable).row_count == 2, what="the fleet", pilot=pilot)
        rows = fleet_text(app).splitlines()
        a = next(r for r in rows if r.startswith("A "))
        assert "▲ gpu error" in a and f"GPU 0: {LOST}"[:60] in a, a
        b = next(r for r in rows if r.startswith("B "))
        assert "● live" in b
        app.post_message(GpuSample("A", [GpuReading(0, "GPU-0", "NVIDIA RTX PRO 6000", 1184, 97887, 1, 31, 22.5),
                                         gb300()], time.time()))
        await until(lambda: not any(f.id == "gpu-errors" for f in panel.findings), what="the finding cleared",
                    pilot=pilot)
        await until(lambda: "● live" in next(r for r in fleet_text(app).splitlines() if r.startswith("A ")),
                    what="A live again", pilot=pilot, detail=lambda: fleet_text(app))
        assert isinstance(app.dashboard.query_one(FleetTable), DataTable)


async def test_the_simulators_lost_gpu_is_a_finding_in_d_and_stays_on_a_short_pane(sim_factory):
    """The sim's gpu-lost fault over real SSH: nvidia-smi's error line reaches the state, ``d`` lists the
    gpu-errors finding for A with nvidia-smi's words, and at 120x35 (a short pane, where the display
    GPU's meter is left out for room) the lost GPU's row still shows: a GPU in error is never hidden."""
    from console.ui.app import ConsoleApp
    from tests.ui.pair_app import pane_text

    h = await sim_factory(faults=["gpu-lost"], running=True, time_scale=0.005)
    app = ConsoleApp(h.config, gpu_interval_ms=200)
    async with app.run_test(size=(120, 35)) as pilot:
        state = app.stations["A"]
        await until(lambda: state.gpus_in_error, what="A's GPU in error", pilot=pilot, timeout=40)
        await pilot.press("d")
        panel = app.dashboard.query_one(DiagnosisPanel)
        await until(lambda: any(f.id == "gpu-errors" and f.station == "A" for f in panel.findings),
                    what="the gpu-errors finding on A in d", pilot=pilot, timeout=20,
                    detail=lambda: [(f.id, f.station) for f in panel.findings])
        f = next(f for f in panel.findings if f.id == "gpu-errors" and f.station == "A")
        assert f.severity == "error" and "Unable to determine the device handle" in f.cause
        pane = app.panes["A"]
        assert pane.has_class("-short")
        await until(lambda: "GPU0 ✖ Unable to determine the device handle" in pane_text(app, "A"),
                    what="the lost GPU's row on the short pane", pilot=pilot,
                    detail=lambda: pane_text(app, "A")[:600])
        lost = next(m for m in pane.meters if m.index == 0)
        assert lost.display and lost.region.height > 0
