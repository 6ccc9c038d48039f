"""The app owns the stations' states and routes each message one way: applied once to the state,
then the pane, the fleet table and the diagnosis redraw from it (Pilot, the real app, no services:
the test posts what the station services would)."""

from __future__ import annotations

from pair_app import pair_app, pane_text

from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress
from console.probes.nvidia_smi import GpuReading
from console.station.messages import ConnectionState, ContainerUpdate, EngineUpdate, GpuSample
from console.ui.widgets.diagnosis import DiagnosisPanel
from console.ui.widgets.fleet_table import FleetTable
from tests.waiting import until


def _gpus(used: int) -> list[GpuReading]:
    return [GpuReading(0, "GPU-d", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 1184, 97887, 1, 31, 22.5),
            GpuReading(1, "GPU-s", "NVIDIA GB300", used, 256703, 37, 41, 165.4)]


async def test_panes_fleet_and_diagnosis_render_the_apps_states():
    app = pair_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        assert all(app.panes[n].state is app.stations[n] for n in ("A", "B"))  # one state per station
        app.post_message(ConnectionState("A", "live", last_sample_at=100.0))
        app.post_message(GpuSample("A", _gpus(120 * 1024), 100.0))
        app.post_message(ContainerUpdate("B", ContainerInfo("glm53", "exited", exit_code=137)))
        app.post_message(EngineUpdate("B", EngineProgress("ready", transport="rdma")))
        app.post_message(ConnectionState("B", "unreachable", "no answer from 127.0.0.2:22"))
        a, b = app.stations["A"], app.stations["B"]
        await until(lambda: a.conn.live and b.conn.down and b.engine is not None,
                    what="the states", pilot=pilot)
        await until(lambda: "120.0/250.7 GiB" in pane_text(app, "A"), what="A's meter", pilot=pilot)
        assert "no answer from 127.0.0.2:22" in pane_text(app, "B")
        summary = str(app.dashboard.query_one(DiagnosisPanel).query_one("#diag-summary").content)
        assert "B" in summary and "unreachable" in summary  # whose log cannot be read: from the states
        await pilot.press("f")  # the fleet table reads the states, not the panes
        table = app.dashboard.query_one(FleetTable)
        await until(lambda: table.row_count == 2, what="the fleet rows", pilot=pilot)
        row_a = [c.plain for c in table.get_row("A")]
        assert "120/251 GiB" in " ".join(row_a) and "● live" in row_a
        row_b = " ".join(c.plain for c in table.get_row("B"))
        assert "unreachable" in row_b and "no answer from 127.0.0.2:22" in row_b
        app.post_message(ConnectionState("B", "live", last_sample_at=101.0))
        await until(lambda: "unreachable" not in str(
            app.dashboard.query_one(DiagnosisPanel).query_one("#diag-summary").content),
            what="B's log readable again", pilot=pilot)


async def test_the_head_engine_reaches_an_open_chat_without_probing_screens():
    from console.ui.screens.chat import ChatScreen

    app = pair_app()
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.pause()
        app.post_message(EngineUpdate("B", EngineProgress("graphs")))  # a worker's phase is not the API's
        await pilot.press("c")
        await until(lambda: isinstance(app.screen, ChatScreen), what="the chat", pilot=pilot)
        chat = app.screen
        assert chat.head_engine is None and app.head_engine is None
        app.post_message(EngineUpdate("A", EngineProgress("kv-cache")))
        await until(lambda: chat.head_engine is not None and chat.head_engine.phase == "kv-cache",
                    what="the phase", pilot=pilot)
        assert app.head_engine is app.stations["A"].engine
