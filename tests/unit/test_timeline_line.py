"""The station pane's one-line start-up summary says where a failed start stopped."""

from console.probes.engine_log import EngineProgress, TimelineEvent
from console.ui.widgets.station_pane import timeline_line

EVENTS = (TimelineEvent("engine-up", 100.0), TimelineEvent("weights-start", 130.0))


def test_loading_reads_as_the_phase_reached():
    line = timeline_line(EngineProgress(phase="loading", timeline=EVENTS)).plain
    assert line == "start-up +0:30 loading"


def test_a_failed_start_says_it_stopped_there():
    line = timeline_line(EngineProgress(phase="failed", timeline=EVENTS)).plain
    assert line == "start-up +0:30 loading → failed"


def test_no_events_no_line():
    assert timeline_line(EngineProgress(phase="failed")).plain == ""


def test_the_start_up_clock_ticks_while_a_phase_waits():
    """Issue 21 item 7: "start-up +0:00 NCCL init" never counted; the clock runs to now while the
    engine comes up, and the phase it waits in says for how long."""
    evs = (TimelineEvent("nccl-init", 100.0),)
    p = EngineProgress(phase="connecting", timeline=evs)
    assert timeline_line(p, now=100.0).plain == "start-up +0:00 NCCL init 0:00"
    assert timeline_line(p, now=145.0).plain == "start-up +0:45 NCCL init 0:45"
    assert timeline_line(p).plain == "start-up +0:00 NCCL init"  # no clock: the events alone
    done = EngineProgress(phase="failed", timeline=evs)
    assert timeline_line(done, now=500.0).plain == "start-up +0:00 NCCL init → failed"  # stopped: no clock
