"""One line counter: the station's state owns its log buffer, the log view renders it and the diagnosis
numbers its lines by it, so a finding's "line N" is line N of the pane (the jump from the diagnosis lands
on the quoted text), even after the bounded buffer dropped its oldest lines."""

from __future__ import annotations

from console.station.messages import LogBatch
from tests.ui.pair_app import pair_app
from tests.waiting import until

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
       "of 79.10 GiB of which 1.20 GiB is free.")


async def test_a_findings_line_is_the_same_text_in_the_pane_after_the_front_was_dropped():
    app = pair_app(extra="[ui]\nlog_lines = 100\n")  # the smallest buffer the config allows
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        state = app.stations["A"]
        log = app.panes["A"].log_pane.log_widget
        assert app.panes["A"].log_pane.buffer is state.log  # the pane keeps no buffer of its own
        # Lines the state held before the diagnosis saw any: a counter of the diagnosis's own would
        # start again at 1 and name another line; the buffer's counter is the only one.
        state.apply(LogBatch("A", [f"read earlier {i}" for i in range(40)]))
        app.post_message(LogBatch("A", [f"filler {i}" for i in range(150)]))
        app.post_message(LogBatch("A", ["INFO before the failure", OOM, *(f"after {i}" for i in range(20))]))
        await until(lambda: state.log.total == 212, what="every batch in A's buffer", pilot=pilot)
        assert state.log.first == 113  # bounded: the first 112 lines are gone
        app.refresh_diagnosis()
        finding = next(f for f in app.diagnoser.ranked() if f.id == "cuda-oom")
        ev = next(e for e in finding.evidence if e.source == "A")
        assert ev.line == 192 and state.log.line(192) == OOM

        app.post_message(LogBatch("A", [f"later {i}" for i in range(60)]))  # more of the front dropped
        await until(lambda: state.log.first == 173, what="the front dropped again", pilot=pilot)
        await pilot.press("d")  # the diagnosis: Enter on the finding jumps to its line in the pane
        await pilot.press("enter")
        await until(lambda: log.marked == ev.line, what="the jump to the finding's line", pilot=pilot)
        assert log.lines[log.index_of(ev.line)] == OOM
