"""The pure parts of a launch: fatal-line detection on real engine lines (the classifier the log follower
uses), docker times."""

from __future__ import annotations

import pytest

from console.catalogue.classify import classify
from console.probes.docker import parse_time, split_timestamp
from console.service.follow import most_telling
from console.service.steps import ActionResult, Step


def fatal_of_line(line: str) -> tuple[str, str] | None:
    """What the launch's log follower reads of one line: the fatal finding, through the one classifier."""
    return classify([line]).line(0).fatal

KV = ("ValueError: To serve at least one request with the models's max seq len (98304), (35.49 GiB KV cache is "
      "needed, which is larger than the available KV cache memory (11.45 GiB). Based on the available memory, the "
      "estimated maximum model length is 31710. Try increasing `gpu_memory_utilization` or decreasing "
      "`max_model_len` when initializing the engine.")


@pytest.mark.parametrize("line, fid", [
    (KV, "kv-cache-too-small"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity", "cuda-oom"),
    ("(APIServer pid=1) ERROR 11-30 14:16:15 [multiproc_executor.py:229] Worker proc VllmWorker-0 died "
     "unexpectedly (exit code: -9), shutting down executor.", "worker-died"),
    ("[rank0]:[E1130 14:16:32.131931664 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
     "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000)", "nccl-timeout"),
    ("torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined.",
     "dist-store-timeout"),
    ("(APIServer pid=1) ERROR 11-30 14:16:15 [core_client.py:692] Engine core initialization failed. See root "
     "cause above. Failed core proc(s): {'EngineCore_DP0': 1}", "engine-dead"),
    ("[2026-04-08 14:05:21 TP0] Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
     "max_mamba_cache_size=0, mamba_ratio=5, resulting max_num_reqs=0", "state-cache-too-small"),
])
def test_fatal_lines(line, fid):
    hit = fatal_of_line(line)
    assert hit is not None and hit[0] == fid


def test_a_cause_on_another_station_beats_the_consequence_seen_first():
    # worker-dies on B: A prints "Engine core initialization failed. See root cause above." and may be
    # read first; the launch must name B's dead worker (CI once reported A: engine-dead)
    assert most_telling(["engine-dead", "worker-died"]) == 1
    assert most_telling(["cuda-oom", "nccl-timeout"]) == 0
    assert most_telling(["engine-dead", "engine-dead"]) == 0


def test_the_fix_comes_from_the_diagnosis_catalogue():
    pytest.importorskip("console.diagnosis")
    fid, fix = fatal_of_line(KV)
    assert fid == "kv-cache-too-small" and "31710" in fix


@pytest.mark.parametrize("line", [
    "station-b:412:530 [0] NCCL INFO NET/Socket : Using [0]enp1s0f1np1:198.18.0.2<0>",  # transport: judged later
    "station-b:412:530 [0] NCCL INFO Failed to open libibverbs.so[.1]",
    "(Worker_TP0 pid=412) INFO 11-30 14:15:00 [gpu_worker.py:298] Available KV cache memory: 11.45 GiB",
    "INFO:     Application startup complete.",
    "[2026-04-08 14:05:21 TP0] max_running_requests is capped to 9 by the mamba state cache",
])
def test_healthy_or_transport_lines_do_not_abort(line):
    assert fatal_of_line(line) is None


def test_docker_times_and_stamps():
    assert parse_time("2026-11-30T14:17:29.603093123Z") == pytest.approx(1796048249.603093123, abs=1e-5)
    assert parse_time("0001-01-01T00:00:00Z") is None
    assert parse_time("garbage") is None
    assert split_timestamp("2026-11-30T14:17:29.603093000Z INFO:     Started") == (
        "2026-11-30T14:17:29.603093000Z", "INFO:     Started")
    assert split_timestamp("no stamp here") == (None, "no stamp here")


def test_result_json_shape_and_exit_code():
    r = ActionResult("stop", [Step("A", "stop", "ok", 1.0, 2.5, "glm53 exited")], "failed", "socket")
    doc = r.to_json()
    assert doc == {"steps": [{"station": "A", "action": "stop", "status": "ok", "started_at": "1970-01-01T00:00:01.000Z",
                              "finished_at": "1970-01-01T00:00:02.500Z", "detail": "glm53 exited"}],
                   "result": "failed", "transport": "socket", "verified": {}}
    assert r.exit_code == 1 and ActionResult("stop").exit_code == 0
    # launch adds the timeline (contract: DESIGN.md), stop and restart the verification
    assert set(ActionResult("launch").to_json()) == {"steps", "result", "transport", "timeline"}
    assert set(ActionResult("restart").to_json()) == {"steps", "result", "transport", "timeline", "verified"}
