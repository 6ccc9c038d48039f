"""Snapshots of the hang evidence screen at 200x50, 120x35, 80x24: the desync of the simulated
stations (B one all-reduce behind A), from fixed outputs in the real formats -- py-spy --native as the
sim prints it, the RAS JSON and flight recorder fixtures of tests/fixtures/hang -- judged by the real
verdict code. No clock, no live capture."""

from __future__ import annotations

import base64
import json
import pickle
import time

import pytest
from textual.app import App

from console.doctor import evidence
from console.doctor.evidence import HangEvidence, StationEvidence
from console.doctor.verdict import judge
from console.probes import proc_tasks
from console.ui.screens.hang_evidence import HangEvidenceScreen
from tests.ui.pair_app import pair_config
from tests.ui.snap_settle import settle
from tests.unit.test_probes_hang import fixture

SIZES = [(200, 50), (120, 35), (80, 24)]
T0 = 1764590400.0

PYSPY_A = """=== PID 2657: VLLM::Worker_TP0
Process 2657: VLLM::Worker_TP0
Python v3.12.3 (/usr/bin/python3.12)

Thread 2657 (active): "MainThread"
    0x7f3c2e1b4a10 (libcuda.so.580.95.05)
    ncclAllReduce (libnccl.so.2)
    all_reduce (vllm/distributed/device_communicators/pynccl.py:156)
    all_reduce (vllm/distributed/device_communicators/cuda_communicator.py:88)
    _all_reduce_out_place (vllm/distributed/parallel_state.py:514)
    forward (vllm/model_executor/layers/linear.py:1401)
    execute_model (vllm/v1/worker/gpu_model_runner.py:2317)
"""
PYSPY_B = """=== PID 2657: VLLM::Worker_TP1
Process 2657: VLLM::Worker_TP1
Python v3.12.3 (/usr/bin/python3.12)

Thread 2657 (idle): "MainThread"
    __poll (libc.so.6)
    acquire_read (vllm/distributed/device_communicators/shm_broadcast.py:570)
    dequeue (vllm/distributed/device_communicators/shm_broadcast.py:640)
    worker_busy_loop (vllm/v1/executor/multiproc_executor.py:802)
"""
GPU = "1, GPU-x, NVIDIA GB300, 236902, 284208, 100, 61, 118.40\n"
# the engine threads as the simulated stations print them: A spins in the collective (R), B sleeps
TASKS = """=== PID 2657: VLLM::Worker_TP{rank}
--- TID 2657
stat 2657 (VLLM::Worker_TP) {state} 1 2657 2657 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0
wchan {wchan}
stack
--- TID 2664
stat 2664 (pt_nccl_watchdg) S 1 2657 2657 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0
wchan hrtimer_nanosleep
stack
[<0>] hrtimer_nanosleep+0xa5/0x140
--- TID 2665
stat 2665 (nccl-proxy) S 1 2657 2657 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0
wchan do_epoll_wait
stack
[<0>] ep_poll+0x2ad/0x310
"""


def _fr_text(name: str, rank: int) -> str:
    blob = base64.b64encode(pickle.dumps(json.loads(fixture(name)), protocol=2)).decode()
    return f"=== FR /tmp/nccl_trace_rank_{rank} 1764590399\n{blob}\n"


def desync_evidence(config) -> HangEvidence:
    evs = {}
    for name, rank, py in (("A", 0, PYSPY_A), ("B", 1, PYSPY_B)):
        ev = StationEvidence(name)
        ev.container = {"name": "glm53", "state": "running", "exit_code": None, "started_at": None, "note": ""}
        evidence._pyspy(ev, py)
        evidence._flight_recorder(ev, _fr_text(f"fr_rank{rank}.json", rank))
        for n in (1, 2):
            evidence._ras_read(ev, fixture("ras_json_desync.json"), n)
        evidence._gpus(ev, GPU)
        evidence._gpus(ev, GPU)
        ev.kernel = {"status": "ok", "note": "", "events": []}
        ev.counters = {"status": "ok", "interval_s": 3.0, "rdma_bytes_moved": 0, "retries_rising": {}, "frozen": True}
        ev.tasks = proc_tasks.tasks_json(TASKS.format(rank=rank, state="R" if rank == 0 else "S",
                                                      wchan="0" if rank == 0 else "futex_wait_queue"))
        ev.logs = ["(EngineCore_DP0 pid=263) WARNING shm_broadcast.py:801] No available shared memory broadcast "
                   "block found in 60 seconds."]
        evs[name] = ev
    verdict, findings, covers, nxt = judge(config, evs, 3.0, True)
    return HangEvidence(evs, verdict, findings, T0, 4.2, 3.0, True, covers, nxt,
                        stragglers=evidence.stragglers(config, evs, 3.0))


class Host(App):
    def __init__(self) -> None:
        super().__init__()
        self.config = pair_config()

    def on_mount(self) -> None:
        self.push_screen(HangEvidenceScreen(self.config, desync_evidence(self.config), autostart=False))


@pytest.fixture(autouse=True)
def _utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_the_fixed_desync_verdict():
    ev = desync_evidence(pair_config())
    assert ev.verdict.startswith("ranks out of step: A at op 6650, B at op 6649 (B idle in its loop")
    assert ev.verdict.endswith("not with the others: B (the cause; the others wait for it)"), ev.verdict
    assert ev.next_step.startswith("1) keep the evidence first")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_hang_evidence(snap_compare, size):
    assert snap_compare(Host(), terminal_size=size, run_before=settle)
