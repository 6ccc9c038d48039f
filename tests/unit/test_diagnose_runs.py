"""Findings belong to a container run: when a newer run of the container starts, the old run's log findings
leave the live list (and with it the pane's badge) for ``previous_runs``; they are not destroyed."""

from __future__ import annotations

from console.diagnosis import Diagnoser
from console.ui.widgets.diagnosis import past_run_title, station_badge

RUN1 = "2026-12-06T03:00:00.000000000Z"
RUN1_END = "2026-12-06T03:04:05.5Z"
RUN2 = "2026-12-06T03:10:00.000000000Z"
OOM = ["INFO loading weights", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB."]
SOCKET = ["NCCL INFO NET/Socket : Using [0]enP7s7:198.18.0.2<0>", "NCCL INFO Using network Socket",
          "NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0"]


def _live(d: Diagnoser) -> list[tuple[str, str]]:
    return [(f.id, f.station) for f in d.ranked()]


def test_run_1_findings_leave_the_live_list_when_run_2_starts():
    d = Diagnoser(nodes=2)
    assert d.note_run("B", RUN1) is False  # the first run seen: nothing ended
    d.feed("B", OOM)
    d.note_run("B", RUN1, RUN1_END)  # the run ended (exit 1): its findings are still the current ones
    d.note_exit("B", 1, "container glm53")
    assert ("cuda-oom", "B") in _live(d)
    assert station_badge(d.ranked(), "B") is not None

    assert d.note_run("B", RUN2) is True  # the operator restarted it
    assert _live(d) == []
    assert station_badge(d.ranked(), "B") is None
    [past] = d.previous_runs("B")
    assert [f.id for f in past.findings] == ["cuda-oom"]
    assert past.ended_seen and past.ended_at is not None and past.started_at is not None
    assert past.ended_at - past.started_at == 245.5
    assert past_run_title(past).startswith("previous run of B (ended ")
    assert past.to_dict()["findings"][0]["id"] == "cuda-oom"  # the JSON of a finding, unchanged inside

    # run 2 speaks for itself: a new OOM is live again, the line numbers go on after run 1's
    d.feed("B", OOM[1:])
    [f] = d.ranked()
    assert (f.id, f.station) == ("cuda-oom", "B") and f.evidence[0].line == 3


def test_a_run_whose_end_was_not_seen_ended_by_the_next_start():
    d = Diagnoser()
    d.note_run("B", RUN1)
    d.feed("B", OOM)
    d.note_run("B", RUN2)  # run 1 started, crashed and was restarted between two looks
    [past] = d.previous_runs()
    assert not past.ended_seen
    assert "ended by" in past_run_title(past)


def test_other_stations_checks_and_the_same_run_keep_their_findings():
    d = Diagnoser(nodes=2)
    d.note_run("A", RUN1)
    d.note_run("B", RUN1)
    d.feed("A", SOCKET)
    d.feed("B", OOM)
    d.add_check_results([_Check("rdma-link", "B", "fail", "no RDMA link", "", "fix the cable")])
    d.note_run("B", RUN1, RUN1_END)  # the same run read again (inspect after the exit): no new run
    assert d.previous_runs() == []
    d.note_run("B", RUN2)
    live = _live(d)
    assert ("cuda-oom", "B") not in live
    assert ("rdma-link", "B") in live  # a check speaks of the station, not of a run
    assert any(station == "A" for _id, station in live)  # A's container did not restart
    assert d.note_run("B", None) is False and d.note_run("B", "0001-01-01T00:00:00Z") is False  # removed
    assert d.note_run("B", RUN1) is False  # an older run read late changes nothing
    assert len(d.previous_runs("B")) == 1


class _Check:
    def __init__(self, id: str, station: str, status: str, summary: str, evidence: str, fix: str):
        self.id, self.station, self.status, self.summary, self.evidence, self.fix = (
            id, station, status, summary, evidence, fix)


def test_diagnose_station_keeps_an_earlier_runs_lines_out_of_the_findings(tmp_path, monkeypatch, capsys):
    """``docker logs`` holds every run of a container: after a restart, the crash of the run before is in
    the tail. ``diagnose --station`` says it under ``previous_runs`` (a key of its own: ``findings`` and
    ``sources`` keep their shape) and exits 0 on a current run that is healthy."""
    import json
    import os
    import stat

    from console.cli import main
    from tests.unit.test_diagnose_cli import write_config

    log = "\n".join([
        "2026-12-06T03:00:01.000000000Z INFO loading weights",
        "2026-12-06T03:00:09.000000000Z torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB.",
        "2026-12-06T03:10:00.500000000Z INFO Started server process [1]",
        "2026-12-06T03:10:04.000000000Z INFO:     Application startup complete.",
    ]) + "\n"
    state = ('{"Status":"running","Running":true,"ExitCode":0,"OOMKilled":false,'
             f'"StartedAt":"{RUN2}","FinishedAt":"0001-01-01T00:00:00Z"}}')
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "docker.out").write_text(log)
    for name, body in (("docker", f"if [ \"$1\" = inspect ]; then echo '{state}|img|sha256:1'; exit 0; fi\n"
                                  f"cat {tmp_path}/docker.out\n"), ("journalctl", "true\n")):
        script = bindir / name
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    rc = main(["diagnose", "--json", "--config", str(write_config(tmp_path)), "--station", "station-b"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["findings"] == []
    assert data["sources"][0]["lines"] == 4
    [past] = data["previous_runs"]
    assert past["station"] == "station-b" and past["ended_seen"] is False
    assert [f["id"] for f in past["findings"]] == ["cuda-oom"] and past["findings"][0]["evidence"][0]["line"] == 2

    rc = main(["diagnose", "--config", str(write_config(tmp_path)), "--station", "station-b"])
    out = capsys.readouterr().out
    assert rc == 0 and out.startswith("no findings (4 lines read)")
    assert "-- previous run of station-b (ended by " in out and "cuda-oom" in out
