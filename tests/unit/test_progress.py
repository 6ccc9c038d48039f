"""The progress judge: every state, the edge of the window W, a counter reset, a missing
counter, and what busy GPUs at idle or high power read as. Pure: states fed with the messages the
monitor posts, a clock passed in."""

from __future__ import annotations

import math

import pytest

from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress
from console.probes.nvidia_smi import GpuReading
from console.serving.metrics import ServingSnapshot
from console.station.messages import (
    ConnectionState,
    ContainerUpdate,
    EngineUpdate,
    GpuSample,
    LogBatch,
    LogMarker,
    ServingUpdate,
)
from console.station.progress import judge, judge_look, service
from console.station.snapshot import progress_json
from console.station.state import StationState
from console.vocabulary import ConnState, EnginePhase, Progress
from tests.waiting import until

T0 = 1_800_000_000.0
W = 30.0


def gpu(util: int, power: float, name: str = "NVIDIA GB300") -> GpuReading:
    return GpuReading(0, "GPU-0", name, 1000, 280000, util, 50, power)


def station(phase: EnginePhase = EnginePhase.READY, *, head: bool = True, name: str = "A") -> StationState:
    s = StationState(name, rank=0 if head else 1, head=head)
    s.apply(ConnectionState(name, ConnState.LIVE, last_sample_at=T0))
    s.apply(GpuSample(name, [gpu(2, 110.0)], T0))  # seen idle: its idle power is 110 W
    s.apply(ContainerUpdate(name, ContainerInfo("glm53", "running", started_at="2027-01-01T00:00:00Z"), T0))
    s.apply(EngineUpdate(name, EngineProgress(phase=phase), T0))
    s.apply(LogBatch(name, ["line"], at=T0))
    return s


def poll(s: StationState, at: float, tokens: float | None, running: float | None = 4, waiting: float = 0,
         status: str = "ok") -> None:
    s.apply(ServingUpdate(ServingSnapshot(url="u", healthy=status == "ok", status=status, running=running,
                                          waiting=waiting, gen_tokens_total=tokens, updated_at=at,
                                          polled_at=at), at=at))


def samples(s: StationState, at: float, util: int, power: float) -> None:
    s.apply(GpuSample(s.name, [gpu(util, power)], at))


def test_tokens_moving_with_requests_running_is_progressing() -> None:
    s = station()
    for k in range(10):
        poll(s, T0 + 2 * k, 1000.0 + 300 * k)
        samples(s, T0 + 2 * k, 85, 720.0)
    v = judge(s, s, T0 + 18.5, W)
    assert v.state == Progress.PROGRESSING and v.since == T0 and "4 running" in v.words
    assert any("busy at high power" in e and "the counter says which" in e for e in v.evidence)


def test_counter_frozen_with_requests_running_is_wedged_from_the_edge_of_w() -> None:
    s = station()
    poll(s, T0, 5000.0)
    poll(s, T0 + 2, 5100.0)  # the last move
    for k in range(2, 20):
        poll(s, T0 + 2 * k, 5100.0)
        samples(s, T0 + 2 * k, 100, 118.0)
    assert judge(s, s, T0 + 2 + W - 0.1, W).state == Progress.PROGRESSING  # just inside the window
    v = judge(s, s, T0 + 2 + W, W)  # at the edge: wedged, since the last move
    assert v.state == Progress.WEDGED and v.since == T0 + 2 and v.alarm
    assert "4 running" in v.words and "5,100" in v.words
    assert "generation tokens 5,100, last moved 0:30 ago" in v.evidence
    assert "/health answers 200" in v.evidence  # a 200 that is not read as healthy
    assert any("spinning kernel (busy at idle power, idle 110 W)" in e for e in v.evidence)
    assert progress_json(v, T0 + 40)["progress"] == "wedged" and progress_json(v, T0 + 40)["progress_since_s"] == 38.0


def test_wedge_counts_from_when_requests_began_not_from_an_old_idle_counter() -> None:
    s = station()
    poll(s, T0, 5000.0, running=0)
    poll(s, T0 + 100, 5000.0, running=0)  # an idle hour: the counter does not move
    assert judge(s, s, T0 + 100, W).state == Progress.IDLE
    poll(s, T0 + 102, 5000.0, running=2)  # requests come; their first token is not out yet
    assert judge(s, s, T0 + 110, W).state == Progress.PROGRESSING
    v = judge(s, s, T0 + 132, W)
    assert v.state == Progress.WEDGED and v.since == T0 + 102


def test_a_counter_reset_is_movement_not_a_wedge() -> None:
    s = station()
    poll(s, T0, 90000.0)
    poll(s, T0 + 25, 90000.0)
    poll(s, T0 + 27, 12.0)  # the engine restarted: the counter starts again
    poll(s, T0 + 40, 12.0)
    v = judge(s, s, T0 + 40, W)
    assert v.state == Progress.PROGRESSING
    assert judge(s, s, T0 + 27 + W, W).state == Progress.WEDGED


@pytest.mark.parametrize("value", [None, math.nan])
def test_no_counter_to_read_is_unknown_with_the_reason(value) -> None:
    s = station()
    poll(s, T0, value)
    v = judge(s, s, T0 + 100, W)
    assert v.state == Progress.UNKNOWN and "no generation-token counter" in v.words
    assert progress_json(v, T0 + 100)["progress_since_s"] is None


def test_no_poll_yet_and_a_silent_api_are_unknown() -> None:
    s = station()
    assert "no /metrics read" in judge(s, s, T0 + 5, W).words
    poll(s, T0, 10.0)
    v = judge(s, s, T0 + 45, W)  # the counter's last read is older than the window
    assert v.state == Progress.UNKNOWN and "last read 0:45 ago" in v.words


def test_no_request_is_idle() -> None:
    s = station()
    poll(s, T0, 77.0, running=0, waiting=0)
    poll(s, T0 + 60, 77.0, running=0, waiting=0)
    v = judge(s, s, T0 + 60, W)
    assert v.state == Progress.IDLE and v.since == T0 and not v.alarm


def test_waiting_requests_with_none_running_and_a_frozen_counter_are_wedged() -> None:
    s = station()
    poll(s, T0, 77.0, running=0, waiting=3)
    poll(s, T0 + W, 77.0, running=0, waiting=3)
    assert judge(s, s, T0 + W, W).state == Progress.WEDGED


def test_silent_start_up_with_busy_gpus_is_stuck_in_its_phase() -> None:
    s = station(EnginePhase.CONNECTING)
    s.apply(LogBatch("A", ["NCCL INFO comm 0x1 rank 0 nranks 2 - Init COMPLETE", LogMarker("m")], at=T0 + 5))
    for k in range(40):
        samples(s, T0 + 5 + 4 * k, 100, 117.0)
        s.apply(LogBatch("A", [LogMarker("reconnected")], at=T0 + 5 + 4 * k))  # markers are not lines
    assert judge(s, s, T0 + 5 + W - 1, W).state == Progress.PROGRESSING
    v = judge(s, s, T0 + 5 + 130, W)
    assert v.state == Progress.STUCK and v.since == T0 + 5
    assert v.words == "stuck in NCCL init / first collective for 2:10"
    assert any("spinning kernel" in e for e in v.evidence)


def test_silent_start_up_with_idle_gpus_is_unknown_not_stuck() -> None:
    s = station(EnginePhase.CONNECTING)
    samples(s, T0 + 60, 3, 112.0)
    v = judge(s, s, T0 + 60, W)
    assert v.state == Progress.UNKNOWN and "GPUs not busy" in v.words


def test_a_log_line_stamped_earlier_dates_the_silence() -> None:
    s = station(EnginePhase.CONNECTING)
    s.apply(LogBatch("A", ["old line"], at=T0 + 100, stamps=["2027-01-15T08:00:00.5Z"]))  # backlog, read late
    stamp = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    assert s.progress.log_line_at == pytest.approx(stamp + 0.5)


def test_a_worker_of_a_serving_engine_is_judged_by_the_heads_counter() -> None:
    head, worker = station(), station(head=False, name="B")
    poll(head, T0, 10.0)
    poll(head, T0 + W, 10.0)
    samples(worker, T0 + W, 100, 120.0)
    v = judge(worker, head, T0 + W, W)
    assert v.state == Progress.WEDGED and any(e.startswith("B GPU0 100 %") for e in v.evidence)


def test_not_live_stopped_and_failed() -> None:
    s = station()
    s.apply(ConnectionState("A", ConnState.UNREACHABLE, "no route", last_sample_at=T0))
    assert judge(s, s, T0 + 1, W).state == Progress.UNKNOWN
    s = station()
    s.apply(ContainerUpdate("A", ContainerInfo("glm53", "exited", exit_code=0), T0 + 1))
    assert judge(s, s, T0 + 2, W).state == Progress.IDLE
    s = station(EnginePhase.FAILED)
    assert "failed" in judge(s, s, T0 + 2, W).words


def test_the_service_is_wedged_or_stuck_when_a_station_is_else_the_heads_word() -> None:
    head, worker = station(), station(EnginePhase.CONNECTING, head=False, name="B")
    poll(head, T0, 10.0, running=0)
    poll(head, T0 + 38, 10.0, running=0)
    samples(worker, T0 + 40, 100, 115.0)
    verdicts = {s.name: judge(s, head, T0 + 40, W) for s in (head, worker)}
    assert verdicts["A"].state == Progress.IDLE and verdicts["B"].state == Progress.STUCK
    svc = service(verdicts, "A")
    assert svc.state == Progress.STUCK and svc.station == "B"
    assert service({"A": verdicts["A"]}, "A").state == Progress.IDLE


async def test_the_one_judge_stores_every_verdict_and_the_services_on_the_fleet() -> None:
    """``ProgressJudge``: one tick judges every station and the service once and stores them on the
    fleet (what the dashboard, watch and status read); ``soon`` makes the job tick at once."""
    import asyncio

    from console.station.progress import ProgressJudge
    from console.station.state import Stations
    from console.station.verdict import NOT_JUDGED

    a, b = station(), station(head=False, name="B")
    fleet = Stations([a, b], head="A")
    poll(a, T0, 5000.0)
    poll(a, T0 + 2, 5100.0)
    for k in range(2, 20):
        poll(a, T0 + 2 * k, 5100.0)
    judge_ = ProgressJudge(fleet, W, every_s=3600.0)
    assert fleet.judged is NOT_JUDGED and fleet.judged.service is None
    j = judge_.tick(T0 + 2 + W)
    assert fleet.judged is j and j.at == T0 + 2 + W
    assert j.stations["A"].state == Progress.WEDGED and j.stations["B"].state == Progress.WEDGED
    assert j.service == service(j.stations, "A") and j.service.alarm  # drawn from the stations' verdicts

    said: list = []
    job = asyncio.create_task(judge_.run(said.append, lambda: T0 + 3 + W))
    judge_.soon()  # a new read: judged now, not in an hour
    await until(lambda: said, what="the tick soon() asked for", timeout=10)
    job.cancel()
    assert said[0] is fleet.judged and said[0].at == T0 + 3 + W


def test_one_look_is_no_wedge_however_late_it_is_judged() -> None:
    # status reads the counter twice (1.5 s apart), then RAS: on a slow machine it judges after W has
    # passed since the first read, but the reads only show the counter frozen for 1.5 s
    s = station()
    poll(s, T0, 537.0)
    poll(s, T0 + 1.5, 537.0)
    v = judge_look(s, s, T0 + W + 1, W, 1.5, True)
    assert v.state == Progress.UNKNOWN and "no token moved in a 1.5 s look" in v.words, v
    # reads that do span W with the counter frozen are a wedge, as the live judge says
    poll(s, T0 + W + 1, 537.0)
    assert judge_look(s, s, T0 + W + 2, W, W + 1, True).state == Progress.WEDGED
