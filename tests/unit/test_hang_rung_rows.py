"""The doctor's hang rung reads the one capture and the one judgement: its rows are built from a
``HangEvidence`` (what ``h`` and ``hang-report`` show), so the verdict row is that capture's verdict,
a stack comparison that misses a station says so, a rate is over the measured time, and a kernel log
that was not read is never called clean."""

from __future__ import annotations

from console.doctor.context import DoctorContext
from console.doctor.evidence import HangEvidence, StationEvidence
from console.doctor.rungs.hang import rows
from console.doctor.verdict import judgement
from console.probes import pyspy
from tests.ui.pair_app import pair_config
from tests.unit.test_probes_doctor import PYSPY_COLLECTIVE


def _running(name: str) -> StationEvidence:
    ev = StationEvidence(name)
    ev.container = {"name": "glm53", "state": "running"}
    return ev


def _evidence(evs: dict[str, StationEvidence]) -> HangEvidence:
    cfg = pair_config()
    j = judgement(cfg, evs, 3.0)
    return HangEvidence(evs, j.verdict, j.findings, 0.0, 1.0, 3.0, True, j.covers, j.next_step, j.kind, j.stacks)


def _dumps() -> list[pyspy.ProcessDump]:
    return pyspy.parse_pyspy(PYSPY_COLLECTIVE)


def test_the_rows_say_what_the_capture_judged():
    a, b = _running("A"), _running("B")
    a.dumps = b.dumps = _dumps()
    for ev in (a, b):
        ev.kernel = {"status": "ok", "events": []}
        ev.counter_reads.first = {"rdma": {}, "nic": {"eth0": {"rx_vport_rdma_unicast_bytes": 0}}, "ev": [], "gpu": None}
        ev.counter_reads.second = {"rdma": {}, "nic": {"eth0": {"rx_vport_rdma_unicast_bytes": 0}}, "ev": [],
                                   "gpu": None}
        ev.counters = {"status": "ok", "interval_s": 3.0, "rdma_bytes_moved": 0, "retries_rising": {}, "frozen": True}
    hev = _evidence({"A": a, "B": b})
    got = rows(DoctorContext(pair_config(), {}), hev)
    first = got[0]
    assert first.summary == f"verdict: {hev.verdict}" and first.next == hev.next_step
    assert hev.kind == "stuck-collective" and first.status == "fail"
    stacks = next(r for r in got if r.summary.startswith("stacks: "))
    assert stacks.summary == f"stacks: {hev.stacks.text}" and stacks.status == "fail"
    assert {r.station for r in got if "a silent hang (software" in r.summary} == {"A", "B"}
    assert got[-1].cause and got[-1].summary.startswith("a silent hang: software, not the network")


def test_a_station_whose_stack_was_not_read_is_not_counted_with_the_others():
    a, b = _running("A"), _running("B")
    a.dumps = _dumps()
    b.pyspy = {"status": "not-read", "note": "not read: no answer within 60 s"}
    b.kernel = {"status": "not-read", "note": "not read: cut by the deadline (90 s)", "events": []}
    a.counter_reads.first = {"rdma": {}, "nic": {"eth0": {"rx_vport_rdma_unicast_bytes": 0}}, "ev": [], "gpu": None}
    a.counter_reads.second = {"rdma": {}, "nic": {"eth0": {"rx_vport_rdma_unicast_bytes": 36 * 10**9}}, "ev": [],
                              "gpu": None}
    a.counters = {"status": "ok", "interval_s": 10.0, "rdma_bytes_moved": 36 * 10**9, "retries_rising": {},
                  "frozen": False}
    got = rows(DoctorContext(pair_config(), {}), _evidence({"A": a, "B": b}))
    stacks = next(r for r in got if r.summary.startswith("stacks: "))
    assert "no stack from B: not read: no answer within 60 s" in stacks.summary and stacks.status == "warn"
    kernel_b = next(r for r in got if r.station == "B" and "kernel log" in r.summary)
    assert kernel_b.status == "skip" and "not read" in kernel_b.summary and "clean" not in kernel_b.summary
    rate = next(r for r in got if r.station == "A" and "RDMA traffic" in r.summary)
    assert "28.8 Gb/s" in rate.summary  # 36 GB over the 10 s measured, not the nominal 3 s
    assert not any(r.cause for r in got)


def test_an_unreachable_station_is_its_line_and_nothing_to_inspect_is_said():
    a, b = StationEvidence("A"), StationEvidence("B")
    a.error, b.container = "cannot connect: refused", {"name": "glm53", "state": "absent"}
    got = rows(DoctorContext(pair_config(), {}), _evidence({"A": a, "B": b}))
    assert [(r.station, r.status) for r in got] == [("A", "skip"), ("A,B", "skip")]
    assert "refused" in got[0].summary and "nothing to inspect" in got[1].summary
