"""DiagnosisPanel in a tiny app: ranked list, the highlighted finding's evidence and fix, live updates."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import OptionList, Static

from console.diagnosis import Diagnoser
from console.ui.widgets.diagnosis import DiagnosisPanel, station_badge
from tests.waiting import until

WATCHDOG = ("[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600059 "
            "milliseconds before timing out.")
SOCKET = "station-b:391:512 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0"


class PanelApp(App):
    def __init__(self) -> None:
        super().__init__()
        self.selected = []

    def compose(self) -> ComposeResult:
        yield DiagnosisPanel()

    def on_diagnosis_panel_finding_selected(self, msg: DiagnosisPanel.FindingSelected) -> None:
        self.selected.append(msg.finding)


def text_of(widget: Static) -> str:
    r = widget.render()
    return r.plain if hasattr(r, "plain") else str(r)


async def test_panel_shows_ranked_findings_evidence_and_fix():
    d = Diagnoser()
    d.feed("station-a", ["INFO start", WATCHDOG])
    d.feed("station-b", [SOCKET, SOCKET])
    app = PanelApp()
    async with app.run_test(size=(120, 40)) as pilot:
        panel = app.query_one(DiagnosisPanel)
        assert text_of(panel.query_one("#diag-summary", Static)) == "No findings"
        panel.update_findings(d.ranked())
        await pilot.pause()
        olist = panel.query_one(OptionList)
        assert olist.option_count == 2
        assert "nccl-socket-fallback" in str(olist.get_option_at_index(0).prompt)
        detail = text_of(panel.query_one("#diag-detail", Static))
        assert "station-b:1" in detail and "via NET/Socket" in detail
        assert "NCCL_IB_HCA" in detail  # the fix
        assert "1 error" in text_of(panel.query_one("#diag-summary", Static))

        olist.focus()
        await pilot.press("down")
        detail = text_of(panel.query_one("#diag-detail", Static))
        assert "nccl-timeout" in detail and "station-a:2" in detail
        assert "Likely explained by  nccl-socket-fallback@station-b" in detail

        # a new root cause arrives: the highlight stays on the finding the operator was reading
        d.add_check_results([type("R", (), dict(id="mtu-mismatch", station="station-b", status="fail",
                                                summary="MTU 1500 on B, 9000 on A", evidence="mtu 1500",
                                                fix="ip link set enp1s0f1np1 mtu 9000"))()])
        panel.update_findings(d.ranked())
        await pilot.pause()
        assert olist.option_count == 3
        assert panel.selected.id == "nccl-timeout"
        assert "mtu-mismatch" in str(olist.get_option_at_index(0).prompt)

        await pilot.press("enter")
        await pilot.pause()
        assert [f.id for f in app.selected] == ["nccl-timeout"]

        panel.update_findings([])
        await pilot.pause()
        assert olist.option_count == 0 and text_of(panel.query_one("#diag-summary", Static)) == "No findings"


async def test_station_badge():
    d = Diagnoser()
    d.feed("station-b", [SOCKET])
    d.feed("station-a", ["INFO fine"])
    assert station_badge(d.ranked(), "station-a") is None
    badge = station_badge(d.ranked(), "station-b")
    assert badge is not None and badge.plain == "diagnosis: ▲ 1 warning (d)"
    assert any("yellow" in str(span.style) for span in badge.spans)


async def test_next_step_is_a_key_to_press_and_log_text_is_sanitized():
    from console.diagnosis.engine import diagnose_lines
    from console.ui.widgets.diagnosis import render_detail

    socket = diagnose_lines("station-b", [SOCKET])[0]
    detail = render_detail(socket).plain
    assert "Next  press k to run the link checks and RDMA validation now" in detail
    assert "dgx-console check" not in detail  # a command to type elsewhere is the CLI's wording, not the TUI's
    assert "dgx-console check" in socket.fix  # ... which diagnose --json keeps
    oom = diagnose_lines("B", ["Loading safetensors checkpoint shards:  60% Completed | 30/50",
                               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB."])[0]
    text = render_detail(oom).plain
    assert "tensor parallelism" in text and "lower --gpu-memory-utilization headroom" not in text
    hostile = diagnose_lines("x", ["RuntimeError: boom \x1b]52;c;ZWNobyBwd25lZA==\x07 \x1b[31mred\x1b[0m"])[0]
    rendered = render_detail(hostile).plain
    assert "\x1b" not in rendered and "\x07" not in rendered and "RuntimeError: boom" in rendered

    app = PanelApp()
    async with app.run_test(size=(120, 40)) as pilot:
        panel = app.query_one(DiagnosisPanel)
        panel.update_findings([hostile, socket])
        await pilot.pause()
        assert "\x1b" not in text_of(panel.query_one("#diag-detail", Static))


async def test_no_findings_is_never_said_while_a_station_is_down():
    d = Diagnoser()
    d.feed("A", ["INFO start"])
    app = PanelApp()
    async with app.run_test(size=(120, 30)) as pilot:
        panel = app.query_one(DiagnosisPanel)
        panel.update_findings(d.ranked())
        panel.set_unread({"B": "unreachable"})
        await pilot.pause()
        summary = text_of(panel.query_one("#diag-summary", Static))
        assert summary == "No findings in the logs read — B's log not read (unreachable)"
        d.feed("A", [WATCHDOG])
        panel.update_findings(d.ranked())
        panel.set_unread({"B": "unreachable", "C": "error"})
        await pilot.pause()
        summary = text_of(panel.query_one("#diag-summary", Static))
        assert summary.startswith("1 finding: 1 error") and "logs of B, C not read (unreachable, error)" in summary
        panel.set_unread({})
        await pilot.pause()
        assert "not read" not in text_of(panel.query_one("#diag-summary", Static))


async def test_the_dashboard_tells_the_diagnosis_which_station_is_down():
    from console.station.messages import ConnectionState
    from tests.ui.pair_app import pair_app

    app = pair_app()
    async with app.run_test(size=(160, 40)) as pilot:
        app.post_message(ConnectionState("A", "live"))
        app.post_message(ConnectionState("B", "unreachable", "no answer from 127.0.0.2 within 3 s"))
        await until(lambda: app.stations["B"].conn.state == "unreachable", what="B unreachable", pilot=pilot)
        await pilot.press("d")

        def summary() -> str | None:
            found = app.screen.query("#diag-summary")
            return text_of(found.first(Static)) if found else None

        down = "No findings in the logs read — B's log not read (unreachable)"
        await until(lambda: summary() == down, what="the summary naming B", pilot=pilot, detail=summary)
        app.post_message(ConnectionState("B", "live"))
        await until(lambda: summary() == "No findings",
                    what="the summary once B is back", pilot=pilot, detail=summary)


async def test_findings_that_arrive_while_the_panel_goes_away_are_dropped():
    """The app's diagnosis timer can fire while the app shuts down, its children already removed: the
    update is dropped instead of failing the app on its way out (seen: NoMatches '#diag-summary')."""
    d = Diagnoser()
    d.feed("station-a", ["INFO start", WATCHDOG])
    app = PanelApp()
    async with app.run_test(size=(120, 40)) as pilot:
        panel = app.query_one(DiagnosisPanel)
        await panel.query_one("#diag-summary", Static).remove()
        await pilot.pause()
        assert panel.update_findings(d.ranked()) is None  # no NoMatches
        await panel.remove()
        assert panel.update_findings(d.ranked()) is None  # not mounted: nothing done
