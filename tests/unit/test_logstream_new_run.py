"""A new container's log starts on a marker line: after a restart or a launch the
log view shows where the new run begins, below the old run's last lines read in the same read."""

from __future__ import annotations

from console.config import parse_config
from console.probes.docker import ContainerInfo
from console.station.logstream import LogStream
from console.station.messages import LogBatch, LogMarker

CFG = parse_config('[[stations]]\nname = "A"\nhost = "127.0.0.1"\nrank = 0\n', "x.toml")
OLD = ContainerInfo("glm53", "running", started_at="2026-12-01T07:17:10.000000000Z")
NEW = ContainerInfo("glm53", "running", started_at="2026-12-01T07:17:30.000000000Z")


def stamp(second: int) -> str:
    return f"2026-12-01T07:17:{second:02d}.000000000Z"


def test_a_new_run_starts_on_a_marker_after_the_old_runs_last_lines():
    owner: list[LogBatch] = []
    s = LogStream(CFG.stations[0], None, 100, on_batches=owner.extend)  # type: ignore[arg-type]
    s.mark_run(OLD)  # the first run read: nothing to mark
    s.ingest(stamp(11) + " old run 1")
    s.flush()
    s.mark_run(OLD)  # the same run read again (a resume): no marker
    s.ingest(stamp(12) + " old run 2")
    s.mark_run(NEW)  # restarted: the --since read holds the old run's tail, then the new run
    s.ingest(stamp(13) + " old run 3")
    s.ingest(stamp(30) + " new run 1")
    s.ingest(stamp(31) + " new run 2")
    s.flush()
    lines = [ln for b in owner for ln in b.lines]
    markers = [i for i, ln in enumerate(lines) if isinstance(ln, LogMarker)]
    assert markers == [3], lines
    assert lines[:3] == ["old run 1", "old run 2", "old run 3"] and lines[4:] == ["new run 1", "new run 2"]
    assert "A: container glm53 started" in lines[3] and "new run" in lines[3]
