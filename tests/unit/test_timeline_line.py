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
    """Before, "start-up +0:00 NCCL init" never counted; the clock runs to now while the
    engine comes up, and the phase it waits in says for how long."""
    evs = (TimelineEvent("nccl-init", 100.0),)
    p = EngineProgress(phase="connecting", timeline=evs)
    assert timeline_line(p, now=100.0).plain == "start-up +0:00 NCCL init 0:00"
    assert timeline_line(p, now=145.0).plain == "start-up +0:45 NCCL init 0:45"
    assert timeline_line(p).plain == "start-up +0:00 NCCL init"  # no clock: the events alone
    done = EngineProgress(phase="failed", timeline=evs)
    assert timeline_line(done, now=500.0).plain == "start-up +0:00 NCCL init → failed"  # stopped: no clock


def test_attaching_to_a_running_engine_says_so_and_backlog_lines_keep_their_docker_times():
    """A console that attaches to an engine already up never says "start-up +0:00": a backlog whose
    lines carry docker timestamps keeps the real start-up times, and events of a run whose start was
    not read say "attached (start not seen, container up 62 min)"."""
    from console.catalogue.classify import classify
    from console.probes.engine_log import EngineLogTracker

    run = ["INFO vLLM API server version 0.30.0",
           "(Worker_TP0 pid=412) INFO [default_loader.py:268] Loading weights took 239.40 seconds",
           "(Worker_TP0 pid=412) INFO [gpu_model_runner.py:2677] Model loading took 218.00 GiB and 240.1 seconds"]
    stamps = ["2026-12-06T01:00:00.000000000Z", "2026-12-06T01:04:00.000000000Z", "2026-12-06T01:04:07.500000000Z"]
    seen = EngineLogTracker("vllm")
    assert seen.feed_stamped(classify(run), stamps)
    p = seen.progress
    assert not p.attached and p.timeline and p.timeline[-1].at - p.timeline[0].at > 1
    line = timeline_line(p, now=p.timeline[-1].at + 3600).plain
    assert line.startswith("start-up +") and not line.startswith("start-up +0:00")
    late = EngineLogTracker("vllm")  # the tail began after the run's first line
    late.feed_stamped(classify(run[1:]), stamps[1:])
    assert late.progress.attached
    shown = timeline_line(late.progress, now=10_000.0, container_started=10_000.0 - 3723).plain
    assert shown.startswith("attached (start not seen, container up ") and "start-up" not in shown
    assert "container up 62 min)" in shown
    assert timeline_line(late.progress).plain.startswith("attached (start not seen) ")
