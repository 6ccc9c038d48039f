"""The continuous NCCL RAS watch (pure): each read compared with the one before gives healthy /
suspect / stuck / unknown with the stations behind; it feeds the progress judge (out-of-step,
peer-down, stuck in one collective) without a request in flight, and keeps the rank that fell behind
as the cause when another then dies. Reads in NCCL's ``-f json`` shape (src/ras/client_support.cc)."""

from __future__ import annotations

import json

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
    RasSample,
    ServingUpdate,
)
from console.station.progress import job_ras, judge_all, service
from console.station.ras_monitor import ras_target
from console.station.ras_watch import FROZEN_BUSY_S, RAS_LATE_S
from console.station.snapshot import progress_json
from console.station.state import Stations, StationState
from console.ui.widgets.progress_banner import HINT, banner_text
from console.vocabulary import ConnState, EnginePhase, Progress, RasState

T0 = 1_800_000_000.0
W = 30.0
HOSTS = {0: "198.18.0.1", 1: "198.18.0.2"}


def ras_json(ops: dict[int, int], missing: dict[int, bool] | None = None) -> str:
    """``ncclras -f json``: ``ops`` rank -> AllReduce count; ``missing`` rank -> considered dead."""
    ranks = [{"rank": r, "host": HOSTS[r], "pid": 1000 + r, "cuda_dev": 0,
              "status": {"init_state": 0, "async_error": 0, "finalize_called": False, "abort_flag": False},
              "collective_counts": {"Broadcast": 1, "AllGather": 4, "AllReduce": n}} for r, n in sorted(ops.items())]
    miss = [{"rank": r, "host": HOSTS[r], "pid": 1000 + r, "cuda_dev": 0,
             "status": {"unresponsive": True, "considered_dead": dead}} for r, dead in (missing or {}).items()]
    return json.dumps({"nccl_version": "2.30.7", "communicators": [
        {"hash": "0x8f3e21c4d7a9b001", "size": 2, "ranks": ranks, "missing_ranks": miss}]})


def fleet(busy: bool = False) -> Stations:
    states = []
    for name, rank in (("A", 0), ("B", 1)):
        s = StationState(name, rank=rank, head=rank == 0)
        s.apply(ConnectionState(name, ConnState.LIVE, last_sample_at=T0))
        s.apply(GpuSample(name, [GpuReading(0, "GPU-0", "NVIDIA GB10", 1000, 120000, 2, 40, 20.0)], T0 - 60))
        s.apply(ContainerUpdate(name, ContainerInfo("glm53", "running", started_at="2027-01-01T00:00:00Z"), T0 - 300))
        s.apply(EngineUpdate(name, EngineProgress(phase=EnginePhase.READY, headless=rank == 1), T0 - 300))
        s.apply(LogBatch(name, ["line"], at=T0 - 300))
        states.append(s)
    f = Stations(states, head="A")
    gpus(f, T0, 100 if busy else 0)
    poll(f, T0, 5000.0)
    return f


def gpus(f: Stations, at: float, util: int) -> None:
    for s in f.values():
        s.apply(GpuSample(s.name, [GpuReading(0, "GPU-0", "NVIDIA GB10", 1000, 120000, util, 40, 22.0)], at))


def poll(f: Stations, at: float, tokens: float, running: float = 0) -> None:
    f.apply(ServingUpdate(ServingSnapshot(url="u", healthy=True, status="ok", running=running, waiting=0,
                                          gen_tokens_total=tokens, updated_at=at, polled_at=at), at=at))


def read(f: Stations, at: float, text: str, on: str = "A") -> None:
    f.apply(RasSample(on, text, at))


def verdicts(f: Stations, now: float):
    v = judge_all(f.values(), f.head, now, W)
    return v, service(v, f.head_name)


def test_counts_that_advance_are_healthy_even_a_step_apart_mid_read() -> None:
    f = fleet()
    read(f, T0, ras_json({0: 100, 1: 100}))
    read(f, T0 + 4, ras_json({0: 200, 1: 199}))  # caught mid-step: not a straggler
    view = job_ras(f.values(), T0 + 4.5)
    assert view.state == RasState.HEALTHY and view.behind == ()
    per, svc = verdicts(f, T0 + 4.5)
    assert svc.state == Progress.IDLE and not svc.alarm


def test_a_desync_without_traffic_is_out_of_step_on_the_second_frozen_read_and_names_the_rank_behind() -> None:
    f = fleet(busy=True)
    read(f, T0, ras_json({0: 700, 1: 700}))
    read(f, T0 + 4, ras_json({0: 757, 1: 756}))  # the spread appears while counts still moved
    assert job_ras(f.values(), T0 + 4.2).state == RasState.HEALTHY
    assert verdicts(f, T0 + 4.2)[1].state == Progress.IDLE  # no request: the counter alone says idle
    read(f, T0 + 8, ras_json({0: 757, 1: 756}))  # frozen with the spread: out of step
    view = job_ras(f.values(), T0 + 8.2)
    assert view.state == RasState.STUCK and view.behind == ("B",) and view.since == T0 + 4
    per, svc = verdicts(f, T0 + 8.2)
    assert per["A"].state == per["B"].state == Progress.OUT_OF_STEP
    assert svc.alarm and svc.station == "B" and svc.stragglers == ("B",) and svc.consequence == ()
    assert "B 1 op behind" in svc.words
    banner = banner_text(svc, T0 + 8.2).plain
    assert banner.startswith("⚠ OUT-OF-STEP since ") and HINT in banner
    doc = progress_json(per["A"], T0 + 8.2)
    assert doc["progress"] == "out-of-step" and doc["progress_stragglers"] == ["B"]
    assert view.json(T0 + 8.2)["state"] == "stuck" and view.json(T0 + 8.2)["behind"] == ["B"]


def test_the_rank_that_fell_behind_stays_the_cause_when_the_watchdog_then_kills_the_head() -> None:
    f = fleet(busy=True)
    read(f, T0, ras_json({0: 757, 1: 756}))
    read(f, T0 + 4, ras_json({0: 757, 1: 756}))
    # the head's container exits (the watchdog); its RAS service with it: the watch reads on B
    a = f["A"]
    a.apply(ContainerUpdate("A", ContainerInfo("glm53", "exited", exit_code=1), T0 + 60))
    assert ras_target(f) == ("B", "glm53")
    read(f, T0 + 62, ras_json({1: 756}, missing={0: False}), on="B")
    read(f, T0 + 70, ras_json({1: 756}, missing={0: True}), on="B")
    view = job_ras(f.values(), T0 + 70.5)
    assert view.state == RasState.STUCK and view.cause == ("B",) and view.missing == ("A",)
    assert "B fell behind" in view.words and "A (dead)" in view.words and "consequence" in view.words
    per, svc = verdicts(f, T0 + 70.5)
    assert per["B"].state == Progress.OUT_OF_STEP  # B is not "ready · idle": its partner is dead
    assert svc.state == Progress.OUT_OF_STEP and svc.station == "B"
    assert svc.stragglers == ("B",) and svc.consequence == ("A",)


def test_a_rank_gone_without_a_straggler_before_is_peer_down() -> None:
    f = fleet()
    f["A"].apply(ContainerUpdate("A", ContainerInfo("glm53", "exited", exit_code=1), T0 + 10))
    per, svc = verdicts(f, T0 + 11)  # before any RAS read: the container alone says it
    assert per["B"].state == Progress.PEER_DOWN and per["B"].alarm and per["B"].consequence == ("A",)
    assert "A's engine is gone (container exited (1))" in per["B"].words
    assert svc.state == Progress.PEER_DOWN
    read(f, T0 + 12, ras_json({1: 40}, missing={0: True}), on="B")
    assert verdicts(f, T0 + 12.5)[0]["B"].state == Progress.PEER_DOWN


def test_a_clean_stop_of_a_peer_is_not_peer_down() -> None:
    f = fleet()
    f["A"].apply(ContainerUpdate("A", ContainerInfo("glm53", "exited", exit_code=0), T0 + 10))
    assert verdicts(f, T0 + 11)[0]["B"].state != Progress.PEER_DOWN


def test_every_rank_frozen_in_one_collective_is_stuck_only_with_busy_gpus_over_two_intervals() -> None:
    idle = fleet(busy=False)
    for k in range(4):
        read(idle, T0 + 4 * k, ras_json({0: 757, 1: 757}))
    assert job_ras(idle.values(), T0 + 12.5).state == RasState.HEALTHY  # an idle engine launches nothing
    f = fleet(busy=True)
    read(f, T0, ras_json({0: 700, 1: 700}))
    read(f, T0 + 4, ras_json({0: 757, 1: 757}))
    read(f, T0 + 8, ras_json({0: 757, 1: 757}))
    gpus(f, T0 + 8, 100)
    assert job_ras(f.values(), T0 + 8.2).state == RasState.SUSPECT  # frozen 4 s: not yet
    assert not verdicts(f, T0 + 8.2)[1].alarm
    read(f, T0 + 4 + FROZEN_BUSY_S + 0.5, ras_json({0: 757, 1: 757}))
    gpus(f, T0 + 4 + FROZEN_BUSY_S + 0.5, 100)
    per, svc = verdicts(f, T0 + 4 + FROZEN_BUSY_S + 0.6)
    assert svc.state == Progress.STUCK and svc.station is None  # every rank equal: no culprit
    assert "every rank stuck in one collective" in svc.words and "AllReduce op 757" in svc.words


def test_no_report_or_a_late_read_is_unknown_with_why() -> None:
    f = fleet()
    assert job_ras(f.values(), T0).words == "RAS not read yet"
    read(f, T0, "Connecting to 127.0.0.1:28028: Connection refused\nFailed to connect to the NCCL RAS service!\n")
    view = job_ras(f.values(), T0 + 1)
    assert view.state == RasState.UNKNOWN and "no RAS service answers on this station" in view.words
    f.apply(RasSample("A", "", T0 + 4, error="ChannelRefused: no channel"))
    assert "the read failed: ChannelRefused" in job_ras(f.values(), T0 + 5).words
    read(f, T0 + 8, ras_json({0: 1, 1: 1}))
    assert job_ras(f.values(), T0 + 8 + RAS_LATE_S + 1).state == RasState.UNKNOWN
    assert "last read" in job_ras(f.values(), T0 + 8 + RAS_LATE_S + 1).words


def test_a_spread_on_the_first_read_is_only_suspect() -> None:
    f = fleet()
    read(f, T0, ras_json({0: 757, 1: 756}))
    view = job_ras(f.values(), T0 + 0.5)
    assert view.state == RasState.SUSPECT and "one read" in view.words
    per, _svc = verdicts(f, T0 + 0.5)
    assert not per["A"].alarm and any(e.startswith("RAS suspect:") for e in per["A"].evidence)


def test_nothing_to_watch_while_no_engine_serves() -> None:
    f = fleet()
    for s in f.values():
        s.apply(EngineUpdate(s.name, EngineProgress(phase=EnginePhase.LOADING), T0))
    assert ras_target(f) is None
    assert job_ras(f.values(), T0).words == "RAS not watched: no engine serving"


def test_a_fresh_console_on_requests_in_flight_says_unknown_until_it_can_judge() -> None:
    f = fleet()
    # a new fleet: the first read already has 4 requests running and the counter never moves
    g = Stations([StationState(n, rank=r, head=r == 0) for n, r in (("A", 0), ("B", 1))], head="A")
    for name, s in f.items():
        for msg in (ConnectionState(name, ConnState.LIVE, last_sample_at=T0),
                    ContainerUpdate(name, ContainerInfo("glm53", "running"), T0 - 300),
                    EngineUpdate(name, EngineProgress(phase=EnginePhase.READY), T0 - 300),
                    GpuSample(name, s.gpus, T0)):
            g[name].apply(msg)
    for k in range(0, 16):
        poll(g, T0 + 2 * k, 5100.0, running=4)
    per, svc = verdicts(g, T0 + 5)
    assert svc.state == Progress.UNKNOWN and "judged after 0:30" in svc.words and svc.judged_at == T0 + W
    assert progress_json(svc, T0 + 5)["progress_judged_in_s"] == 25.0
    assert verdicts(g, T0 + W)[1].state == Progress.WEDGED  # then the frozen counter is the verdict
    h = Stations([StationState("A")], head="A")  # a counter that moves: progressing at once
    for msg in (ConnectionState("A", ConnState.LIVE, last_sample_at=T0), ContainerUpdate("A", ContainerInfo(
            "glm53", "running"), T0), EngineUpdate("A", EngineProgress(phase=EnginePhase.READY), T0),
            GpuSample("A", f["A"].gpus, T0)):
        h["A"].apply(msg)
    poll(h, T0, 5100.0, running=4)
    poll(h, T0 + 1, 5200.0, running=4)
    assert verdicts(h, T0 + 1.5)[1].state == Progress.PROGRESSING


def test_a_peer_found_down_when_the_console_starts_is_left_to_ras() -> None:
    f = fleet()
    g = Stations([StationState("A", rank=0), StationState("B", rank=1, head=False)], head="A")
    for name in ("A", "B"):
        g[name].apply(ConnectionState(name, ConnState.LIVE, last_sample_at=T0))
        g[name].apply(GpuSample(name, f[name].gpus, T0))
    g["A"].apply(ContainerUpdate("A", ContainerInfo("glm53", "exited", exit_code=1), T0))  # an old run, perhaps
    g["B"].apply(ContainerUpdate("B", ContainerInfo("glm53", "running"), T0))
    g["B"].apply(EngineUpdate("B", EngineProgress(phase=EnginePhase.READY), T0))
    assert verdicts(g, T0 + 1)[0]["B"].state != Progress.PEER_DOWN
    read(g, T0 + 1, ras_json({1: 40}, missing={0: True}), on="B")  # RAS: A is gone from this job
    assert verdicts(g, T0 + 1.5)[0]["B"].state == Progress.PEER_DOWN


def test_a_restart_starts_the_watch_over_the_old_jobs_counts_prove_nothing_about_the_new_one() -> None:
    # the old job frozen at op 38, then a rank restarts and the new job's first read lands on op 38 too:
    # compared with the old job's reads it would be "frozen since before the restart" (a stuck incident
    # older than the service it is about); a new run is a new job, read afresh
    f = fleet(busy=True)
    for k in range(3):
        read(f, T0 + 4 * k, ras_json({0: 38, 1: 38}))
        gpus(f, T0 + 4 * k, 100)
    assert job_ras(f.values(), T0 + 8.1).state == RasState.STUCK
    f["A"].apply(ContainerUpdate("A", ContainerInfo("glm53", "running", started_at="2027-01-01T00:10:00Z"), T0 + 10))
    assert job_ras(f.values(), T0 + 10.1).state == RasState.UNKNOWN  # not read since the new run began
    read(f, T0 + 12, ras_json({0: 38, 1: 38}))
    gpus(f, T0 + 12, 100)
    first = job_ras(f.values(), T0 + 12.1)
    assert first.state != RasState.STUCK and (first.since is None or first.since >= T0 + 10), first
