"""The health incidents (console/incidents/conditions.py) from real station messages applied to the
real ``StationState``s: a rail down opens ``rail`` and its return closes it, a GPU in error opens
``gpu-fault``, a station unreachable for less than the hold is no incident, and a station not read
(stale, unreachable) never closes what it said last."""

from __future__ import annotations

import time

from console.config import parse_config
from console.incidents.conditions import HOLD_S, ConditionDetector
from console.incidents.detector import Closed, Opened
from console.probes.nvidia_smi import GpuReading
from console.probes.rails import RailReading
from console.station.messages import ConnectionState, GpuSample, RailsSample
from console.station.state import Stations
from console.vocabulary import ConnState
from tests.two_stations import stations_toml

CFG = parse_config(stations_toml(rail=False), "c.toml")


def gpu(i: int, error: str | None = None) -> GpuReading:
    return GpuReading(i, f"GPU-{i}", None if error else "NVIDIA GB300", 1000, 280000, 5, 40, 100.0, error)


def live(stations: Stations, t: float, *, a_gpu_error: str | None = None, b_rail_up: bool = True) -> None:
    for name in "AB":
        stations.apply(ConnectionState(name, ConnState.LIVE, last_sample_at=t))
        stations.apply(GpuSample(name, [gpu(0, a_gpu_error if name == "A" else None), gpu(1)], t))
        up = b_rail_up or name == "A"
        stations.apply(RailsSample(name, {"enp1s0f1np1": RailReading("enp1s0f1np1", "up" if up else "down", up,
                                                                     400000 if up else None, 9000, 2)}, t))


def kinds(events) -> list[tuple[str, str]]:
    return [(type(e).__name__, e.kind) for e in events]


def test_a_rail_down_opens_rail_and_its_return_closes_it():
    st, det, t = Stations.for_config(CFG), ConditionDetector(), time.time()
    live(st, t)
    assert det.step(st, t) == []
    live(st, t + 1, b_rail_up=False)
    (ev,) = det.step(st, t + 1)
    assert isinstance(ev, Opened) and ev.kind == "rail" and ev.stations == ("B",)
    assert "B rail enp1s0f1np1 down" in ev.verdict and "cable" in ev.next_step
    live(st, t + 2, b_rail_up=False)
    assert det.step(st, t + 2) == []  # one incident while it lasts
    live(st, t + 3)
    assert kinds(det.step(st, t + 3)) == [("Closed", "rail")]


def test_a_gpu_in_error_is_a_gpu_fault_and_not_read_is_not_clear():
    st, det, t = Stations.for_config(CFG), ConditionDetector(), time.time()
    live(st, t, a_gpu_error="Unable to determine the device handle for GPU00000000:01:00.0: Unknown Error")
    (ev,) = det.step(st, t)
    assert ev.kind == "gpu-fault" and ev.stations == ("A",) and "A GPU 0: Unable to determine" in ev.verdict
    # A's samples stop: its GPU is not read now, so the fault is not over
    assert det.step(st, t + 60) == []
    st.apply(ConnectionState("A", ConnState.STALE, "no GPU sample for 60 s", last_sample_at=t))
    assert [e for e in det.step(st, t + 61) if isinstance(e, Closed)] == []
    live(st, t + 62)  # read again, and clean
    assert kinds(det.step(st, t + 62)) == [("Closed", "gpu-fault")]


def test_unreachable_only_after_the_hold_and_it_keeps_the_rail_open_meanwhile():
    st, det, t = Stations.for_config(CFG), ConditionDetector(), time.time()
    live(st, t, b_rail_up=False)
    assert kinds(det.step(st, t)) == [("Opened", "rail")]
    st.apply(ConnectionState("B", ConnState.UNREACHABLE, "no answer within 10 s"))
    assert det.step(st, t + 1) == []  # within the hold; the rail is not read, so not clear either
    hold = HOLD_S["unreachable"]
    (ev,) = det.step(st, t + 1 + hold)
    assert ev.kind == "unreachable" and ev.stations == ("B",) and "no answer within 10 s" in ev.verdict
    live(st, t + 2 + hold)
    assert sorted(kinds(det.step(st, t + 2 + hold))) == [("Closed", "rail"), ("Closed", "unreachable")]


def test_a_blip_shorter_than_the_hold_is_no_incident():
    st, det, t = Stations.for_config(CFG), ConditionDetector(), time.time()
    live(st, t)
    st.apply(ConnectionState("A", ConnState.UNREACHABLE, "connection lost"))
    assert det.step(st, t + 1) == []
    live(st, t + 5)
    assert det.step(st, t + 5) == [] and det.step(st, t + 30) == []
