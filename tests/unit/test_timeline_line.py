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
