"""Next steps go to the right tool: an NCCL timeout, a hang, an IB error or a failed
connection points to the workbench (i / n, `dgx-console doctor`), not to the link checks that pass for
a collective hang; "i investigate" is a key the diagnosis panel shows; a toast never covers the
panel's Cause and Fix; the panel opens on the first (root-cause) finding."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from textual.widgets import OptionList, Static

from console.diagnosis import Diagnoser
from console.station.messages import LogBatch
from console.ui.screens.doctor import DoctorScreen
from console.ui.widgets.diagnosis import DiagnosisPanel
from tests.ui.pair_app import pair_app
from tests.waiting import until

ROOT = Path(__file__).resolve().parents[2]
WATCHDOG = ("[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600059 "
            "milliseconds before timing out.")
SOCKET = "station-b:391:512 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0"
IB_ERROR = ("station-a:412:530 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
            "198.18.0.2<54321> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:198.18.0.1")


def _plain(widget: Static) -> str:
    r = widget.render()
    return r.plain if hasattr(r, "plain") else str(r)


def test_timeouts_hangs_and_ib_errors_point_to_the_workbench_not_the_checks():
    d = Diagnoser()
    d.feed("A", ["INFO start", WATCHDOG, IB_ERROR])
    found = {f.id: f for f in d.ranked()}
    assert {"nccl-timeout", "nccl-ib-error"} <= set(found), list(found)
    for fid in ("nccl-timeout", "nccl-ib-error"):
        f = found[fid]
        assert "dgx-console doctor" in f.fix and "dgx-console check" not in f.fix, f.fix
        assert f.next_action and "press i" in f.next_action and "press k" not in f.next_action


def test_diagnose_text_names_the_workbench(tmp_path):
    log = tmp_path / "a.log"
    log.write_text(WATCHDOG + "\n")
    res = subprocess.run([sys.executable, "-m", "console.cli", "diagnose", str(log)], capture_output=True,
                         text=True, cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                         timeout=120)
    assert "nccl-timeout" in res.stdout and "dgx-console doctor" in res.stdout, res.stdout
    assert "validate-rdma" not in res.stdout


async def test_the_panel_opens_on_the_root_cause_shows_i_and_no_toast_covers_it():
    app = pair_app()
    async with app.run_test(size=(120, 35)) as pilot:
        app.post_message(LogBatch("A", ["INFO start", WATCHDOG]))
        app.post_message(LogBatch("B", [SOCKET]))
        await until(lambda: len(app._notifications) > 0, what="the diagnosis toast", pilot=pilot)
        await pilot.press("d")
        panel = app.dashboard.query_one(DiagnosisPanel)
        olist = panel.query_one(OptionList)
        await until(lambda: olist.option_count >= 2 and len(app._notifications) == 0,
                    what="the panel's findings and no toast over them", pilot=pilot,
                    detail=lambda: (olist.option_count, len(app._notifications)))
        assert olist.highlighted == 0 and panel.selected is panel.findings[0]  # the root cause first
        keys = _plain(panel.query_one("#diag-keys", Static))
        assert "i investigate" in keys and "Enter log line" in keys
        assert panel.query_one("#diag-keys").region.height == 1  # on screen at 120x35
        await pilot.press("down")
        assert olist.highlighted == 1
        await pilot.press("d", "d")  # closed and opened again: on the root cause again
        await until(lambda: olist.highlighted == 0, what="the first finding highlighted", pilot=pilot)
        await pilot.press("down")
        detail = _plain(panel.query_one("#diag-detail", Static))
        assert "nccl-timeout" in detail and "press i to investigate" in detail
        await pilot.press("i")
        await until(lambda: isinstance(app.screen, DoctorScreen), what="the workbench", pilot=pilot)


