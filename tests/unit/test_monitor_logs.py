"""Log continuity in the station service's log stream, without I/O: the ``--since`` boundary
(inclusive in docker: moby's readers skip only entries before T) is de-duplicated by timestamp and
content, giant lines are clipped with a marker, and the interruption marker lands before the resumed
lines."""

from console.config import parse_config
from console.station.logstream import LOG_LINE_CAP
from console.station.messages import LogBatch, LogMarker
from console.station.monitor import StationService, dead_after_s, stale_after_s

CONFIG = '[[stations]]\nname = "A"\nhost = "127.0.0.1"\nrank = 0\n'


def service():
    posted = []
    cfg = parse_config(CONFIG, "x.toml")
    return StationService(cfg, cfg.stations[0], posted.append), posted


def lines_of(posted):
    return [ln for m in posted if isinstance(m, LogBatch) for ln in m.lines]


def test_resume_skips_exactly_the_replayed_boundary_lines():
    svc, posted = service()
    first = ["2026-12-01T07:17:08.000000001Z one", "2026-12-01T07:17:09.500000000Z two",
             "2026-12-01T07:17:09.500000000Z two",  # the same text twice at one instant: both are real
             "2026-12-01T07:17:09.500000000Z three"]
    for ln in first:
        svc.logs.ingest(ln)
    assert svc.logs.last_ts == "2026-12-01T07:17:09.500000000Z"
    svc.logs.begin_read()  # docker logs --since 2026-12-01T07:17:09.500000000Z repeats the boundary
    for ln in ["2026-12-01T07:17:09.500000000Z two", "2026-12-01T07:17:09.500000000Z two",
               "2026-12-01T07:17:09.500000000Z three", "2026-12-01T07:17:09.500000000Z four",
               "2026-12-01T07:17:41.000000000Z five"]:
        svc.logs.ingest(ln)
    svc.logs.flush()
    assert lines_of(posted) == ["one", "two", "two", "three", "four", "five"]


def test_a_new_line_identical_to_the_boundary_after_it_is_kept():
    svc, posted = service()
    svc.logs.ingest("2026-12-01T07:17:09.5Z tick")
    svc.logs.begin_read()
    svc.logs.ingest("2026-12-01T07:17:09.500000000Z tick")  # the replay (same instant, shorter form)
    svc.logs.ingest("2026-12-01T07:17:10.000000000Z tick")  # a later, real line
    svc.logs.flush()
    assert lines_of(posted) == ["tick", "tick"]


def test_giant_line_is_kept_up_to_the_cap_with_a_marker():
    svc, posted = service()
    svc.logs.ingest("2026-12-01T07:17:09.5Z " + "x" * (3 * LOG_LINE_CAP))
    svc.logs.flush()
    (line,) = lines_of(posted)
    assert line.startswith("x" * LOG_LINE_CAP) and line.endswith(f"[+{2 * LOG_LINE_CAP:,} chars]")


def test_interruption_marker_comes_before_the_lines_that_follow():
    svc, posted = service()
    svc.logs.ingest("2026-12-01T07:17:08Z before")
    svc.logs.interrupted(1796000000.0)
    svc.logs.begin_read()
    svc.logs.mark_gap()
    svc.logs.ingest("2026-12-01T07:17:40Z after")
    svc.logs.flush()
    out = lines_of(posted)
    assert out[0] == "before" and isinstance(out[1], LogMarker) and out[2] == "after"
    assert out[1].startswith("— A: stream interrupted ") and out[1].endswith(" —")


def test_stale_and_dead_limits_follow_the_interval():
    # a read older than its interval + 2 s is stale (never under 3 s)
    assert stale_after_s(1.0) == 3.0 and stale_after_s(0.2) == 3.0 and stale_after_s(2.0) == 4.0
    assert stale_after_s(10.0) == 12.0
    assert dead_after_s(1.0) == 6.0 and dead_after_s(10.0) == 24.0
