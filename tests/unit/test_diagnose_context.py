"""Findings decided from context (what NCCL chose, nodes, profile), errors no entry explains, and the one
catalogue the launch, the tracker and the log pane share. Line formats are the real ones (tests/fixtures/logs
and shared/reference/command-outputs.md)."""

from __future__ import annotations

import pytest

from console.diagnosis import Diagnoser, diagnose_lines, engine, has_problems
from console import catalogue as cat
from console.catalogue.classify import DIAGNOSIS_ANCHORS, INDEX, classify
from console.probes.engine_log import EngineLogTracker


def fatal_of_line(line: str) -> tuple[str, str] | None:
    """What the launch's log follower reads of one line: the fatal finding, through the one classifier."""
    return classify([line]).line(0).fatal


H = "station-a:391:512 [0] NCCL INFO "
ANNOUNCE = H + "NET/Socket : Using [0]enp1s0f1np1:192.168.100.1<0>"
IB_CHOSEN = H + "Using network IB"
IB_CHANNEL = H + "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA"
SOCKET_CHOSEN = H + "Using network Socket"
SOCKET_CHANNEL = H + "Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0"
VERBS = H + "Failed to open libibverbs.so[.1]"
GDR_OFF = H + "NET/IB : GPU Direct RDMA Disabled for HCA 0 'rocep1s0f1'"


def ids(findings):
    return [f.id for f in findings]


def problems(findings):
    return [(f.id, f.severity) for f in findings if f.severity != "info"]


# ------------------------------------------------------------------ transport, decided from what NCCL chose

@pytest.mark.parametrize("lines", [
    [ANNOUNCE],  # the socket plugin's init line alone says nothing
    [ANNOUNCE, IB_CHOSEN],
    [ANNOUNCE, IB_CHANNEL],
    [ANNOUNCE, H + "Using network IBext_v8", H + "Channel 00/0 : 1[0] -> 0[0] [send] via NET/IBext_v10/0"],
])
def test_socket_plugin_announcement_is_no_fallback_when_nccl_picks_ib(lines):
    assert problems(diagnose_lines("a", lines)) == []


@pytest.mark.parametrize("decider", [SOCKET_CHOSEN, SOCKET_CHANNEL, H + "NCCL_IB_DISABLE set by environment to 1."])
def test_what_nccl_chose_decides_the_fallback(decider):
    f = diagnose_lines("a", [ANNOUNCE, decider])
    assert ids(f) == ["nccl-socket-fallback"] and f[0].severity == "warning"
    assert any("NET/Socket : Using" in e.text for e in f[0].evidence)  # the interface, as supporting evidence


def test_one_node_needs_no_network():
    single = [VERBS, ANNOUNCE, SOCKET_CHOSEN, H + "comm 0x4309e490 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0"]
    assert diagnose_lines("a", single) == []
    assert diagnose_lines("a", [VERBS, SOCKET_CHOSEN], nodes=1) == []  # a one-node profile says so too


def test_missing_verbs_is_an_error_across_stations_and_a_warning_when_unknown():
    d = Diagnoser()
    d.feed("a", [IB_CHOSEN, IB_CHANNEL])
    d.feed("b", ["b:1:2 [0] NCCL INFO Failed to open libibverbs.so[.1]", "b:1:2 [0] NCCL INFO Using network Socket"])
    r = d.ranked()
    assert [(f.id, f.station, f.severity) for f in r] == [("nccl-ib-missing", "b", "error"),
                                                           ("nccl-socket-fallback", "b", "warning")]
    alone = diagnose_lines("a", [VERBS])
    assert ids(alone) == ["nccl-ib-missing"] and alone[0].severity == "warning"
    assert "only if the stations talk over RDMA" in alone[0].cause
    assert diagnose_lines("a", [VERBS, H + "Using network IBext_v8"]) == []  # an external plugin found the HCAs


def test_gdr_disabled_depends_on_the_profile_and_on_the_channels():
    assert [(f.id, f.severity) for f in diagnose_lines("a", [IB_CHOSEN, GDR_OFF])] == [("nccl-gdr-disabled", "info")]
    assert diagnose_lines("a", [IB_CHOSEN, GDR_OFF], gpudirect_expected=True)[0].severity == "warning"
    assert diagnose_lines("a", [IB_CHOSEN, GDR_OFF, IB_CHANNEL], gpudirect_expected=True) == []
    socket_hca = H + "NET/Socket : GPU Direct RDMA Disabled for HCA 0 'enp1s0f0'"
    assert ids(diagnose_lines("a", [SOCKET_CHOSEN, socket_hca])) == ["nccl-socket-fallback"]


def test_gb10_capability_warning_is_normal_but_an_older_build_is_not():
    gb10 = ["(EngineCore_DP0 pid=120)     Found GPU0 NVIDIA GB10 which is of cuda capability 12.1.",
            "(EngineCore_DP0 pid=120)     Minimum and Maximum cuda capability supported by this version of PyTorch is",
            "(EngineCore_DP0 pid=120)     (8.0) - (12.0)"]
    f = diagnose_lines("a", gb10)
    assert [(x.id, x.severity) for x in f] == [("gpu-arch-unsupported", "info")] and not has_problems(f)
    old = ["NVIDIA GeForce RTX 5070 Ti with CUDA capability sm_120 is not compatible with the current PyTorch "
           "installation.", "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_80 sm_90."]
    f = diagnose_lines("a", old)
    assert [(x.id, x.severity) for x in f] == [("gpu-arch-unsupported", "error")] and "sm_120" in f[0].cause
    family = [old[0].replace("sm_120", "sm_121"), old[1].replace("sm_90.", "sm_90 sm_100 sm_120.")]
    assert not has_problems(diagnose_lines("a", family))


# ------------------------------------------------------------------ memory: when it ran out matters

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of 251.9 GiB"
W = "(Worker_TP0 pid=412) INFO 11-30 14:05:31 [gpu_model_runner.py:2602] "


def test_oom_while_loading_weights_means_they_do_not_fit():
    f = diagnose_lines("a", [W + "Starting to load model /models/GLM-5.3-NVFP4...",
                             "Loading safetensors checkpoint shards:  60% Completed | 30/50", OOM])[0]
    assert f.id == "cuda-oom" and "loading the weights" in f.cause
    assert "tensor parallelism" in f.fix and "quantization" in f.fix and "gpu-memory-utilization" not in f.fix
    sglang = diagnose_lines("a", ["[2026-11-30 14:05:21 TP0] Load weight begin. avail mem=117.30 GB", OOM])[0]
    assert "loading the weights" in sglang.cause
    frames = diagnose_lines("a", ["Traceback (most recent call last):",
                                  '  File "vllm/model_executor/model_loader/default_loader.py", line 381, in load_weights',
                                  OOM])[0]
    assert "loading the weights" in frames.cause


def test_oom_at_run_time_gets_the_run_time_fix():
    f = diagnose_lines("a", [W + "Starting to load model x...", W + "Model loading took 218.02 GiB memory", OOM])[0]
    assert "after the weights loaded" in f.cause and "--gpu-memory-utilization" in f.fix
    hit = fatal_of_line("RuntimeError: Failed to load model - not enough GPU memory.")
    assert hit is not None and hit[0] == "cuda-oom" and "tensor parallelism" in hit[1]


# ------------------------------------------------------------------ NCCL versions across stations

def test_nccl_versions_differing_between_stations():
    d = Diagnoser()
    d.feed("A", ["a:1:2 [0] NCCL INFO NCCL version 2.20.5+cuda12.4",
                 "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: "
                 "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600059 ms"])
    d.feed("B", ["NCCL version 2.19.3+cuda12.3"])
    r = d.ranked()
    assert r[0].id == "nccl-version-mismatch" and r[0].severity == "error"
    assert "2.20.5 on A" in r[0].cause and "2.19.3 on B" in r[0].cause
    assert {e.source for e in r[0].evidence} == {"A", "B"}
    assert next(f for f in r if f.id == "nccl-timeout").explained_by == f"nccl-version-mismatch@{r[0].station}"
    same = Diagnoser()
    same.feed("A", ["NCCL version 2.21.5+cuda12.4"])
    same.feed("B", ["b:1:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.1", "(RayWorkerWrapper pid=9) INFO 06-19 "
                    "06:19:29 pynccl.py:65] vLLM is using nccl==2.21.5"])
    assert same.ranked() == []  # the same NCCL built against another CUDA is the same protocol


def test_one_log_holding_two_hosts_with_different_versions():
    lines = ["h1:1:1 [0] NCCL INFO NCCL version 2.18.1+cuda12.1", "h2:2:2 [0] NCCL INFO NCCL version 2.18.3+cuda12.2"]
    f = diagnose_lines("mpirun.log", lines)
    assert ids(f) == ["nccl-version-mismatch"] and "processes of mpirun.log" in f[0].cause


# ------------------------------------------------------------------ never silent

TB = ["Exception in ModelRpcClient:",
      "Traceback (most recent call last):",
      '  File "/workspace/sglang/python/sglang/srt/managers/router/model_rpc.py", line 170, in exposed_step',
      "    self.forward_step()",
      '  File "/workspace/sglang/python/sglang/srt/managers/router/infer_batch.py", line 203, in prepare_for_extend',
      "    req_pool_indices_cpu = req_pool_indices.cpu().numpy()",
      "AttributeError: 'NoneType' object has no attribute 'cpu'"]


def test_a_traceback_no_entry_explains_is_named_with_its_type_message_and_first_lines():
    f = diagnose_lines("b", TB)
    assert ids(f) == ["unrecognised-error"] and f[0].severity == "warning"
    assert f[0].cause.endswith("AttributeError: 'NoneType' object has no attribute 'cpu'")
    ev = f[0].evidence[0]
    assert ev.line == len(TB) and "model_rpc.py" in ev.context[0]  # the first frames: where it started
    assert f[0].next_action and "Enter" in f[0].next_action and "bundle" in f[0].fix


@pytest.mark.parametrize("line", [
    "ERROR 05-01 01:51:54 [serving_chat.py:898] Something the catalogue has never seen.",
    "ERROR:    Exception in ASGI application",
    "2025-03-07 23:50:27,532 - __main__ - ERROR - the wrapper gave up",
    "misc/socket.cc:441 NCCL WARN socketFinalizeAccept: wrong type 4 != 3",
    "vllm-1 exited with code 1",
    "Segmentation fault (core dumped)",
])
def test_error_lines_of_every_kind_are_not_silent(line):
    assert ids(diagnose_lines("a", ["INFO fine", line])) == ["unrecognised-error"]


def test_specific_findings_explain_nearby_errors_and_rank_above_the_unknown():
    oom_tb = ["(Worker_TP1 pid=412) ERROR 11-30 14:07:02 [multiproc_executor.py:744] WorkerProc failed to start.",
              "Traceback (most recent call last):", '  File "gpu_worker.py", line 80, in init', OOM]
    assert ids(diagnose_lines("a", oom_tb)) == ["cuda-oom"]  # the ERROR line is explained by the OOM beside it
    dead = diagnose_lines("a", [*TB, "ERROR 11-30 14:05:21 [core.py:708] EngineCore failed to start."])
    assert ids(dead) == ["engine-dead", "unrecognised-error"]  # "see above" explains nothing: the cause is unknown
    mixed = diagnose_lines("a", [SOCKET_CHOSEN, *TB])
    assert ids(mixed) == ["nccl-socket-fallback", "unrecognised-error"]


def test_a_non_zero_container_exit_is_not_silent_unless_explained():
    d = Diagnoser()
    d.feed("B", ["INFO all fine"])
    assert not d.note_exit("B", 143, "container glm53")  # docker stop
    assert d.ranked() == []
    d.note_exit("B", 1, "container glm53")
    f = d.ranked()
    assert ids(f) == ["unrecognised-error"] and f[0].evidence[0].text == "container glm53 exited with code 1"
    d.feed("B", [OOM])
    assert ids(d.ranked()) == ["cuda-oom"]  # now the exit is explained
    d.note_exit("B", None)
    k = Diagnoser()
    k.note_exit("A", 137, "container glm53", oom_killed=True)
    assert "OOM killer" in k.ranked()[0].cause


def test_ray_dedup_suffix_counts_and_is_not_evidence():
    line = ("(RayWorkerWrapper pid=581, ip=10.225.128.18) ERROR 04-17 15:12:32 [worker_base.py:620] " + OOM
            + " [repeated 7x across cluster]")
    f = diagnose_lines("a", [line])[0]
    assert f.id == "cuda-oom" and f.count == 7 and not f.evidence[0].text.endswith("cluster]")


def test_illegal_memory_access_through_the_watchdog_is_not_a_timeout():
    lines = ["[rank0]:[E219 12:14:43.351647859 ProcessGroupNCCL.cpp:1595] [PG ID 2 PG GUID 3 Rank 0] Process group "
             "watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered",
             "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: "
             "WorkNCCL(SeqNum=90, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600059 ms"]
    f = diagnose_lines("a", lines)
    assert ids(f) == ["cuda-illegal-access", "nccl-timeout"] and "not a network timeout" in f[0].cause
    d = Diagnoser()  # the host's kernel log names the hardware behind it
    d.feed("A", lines[:1])
    d.feed("A kernel log", ["[93297.027938] NVRM: Xid (PCI:0000:43:00): 79, pid=0, GPU has fallen off the bus."])
    assert d.ranked()[0].id == "gpu-xid" and "Xid 79" in d.ranked()[0].cause


def test_sub_causes_carry_the_numbers_from_the_log():
    f = diagnose_lines("a", ["torch.distributed.DistNetworkError: The client socket has timed out after 600000ms "
                             "while trying to connect to (172.17.0.9, 46229)."])[0]
    assert f.id == "dist-store-timeout" and "172.17.0.9:46229" in f.cause
    f = diagnose_lines("a", ["torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. "
                             "1/4 clients joined."])[0]
    assert "1 of 4 ranks" in f.cause
    f = diagnose_lines("a", ["ValueError: User-specified max_model_len (32768) is greater than the derived "
                             "max_model_len (max_position_embeddings=4096 or model_max_length=None in model's "
                             "config.json). To allow overriding this maximum, set the env var "
                             "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"])[0]
    assert f.id == "max-model-len-too-large" and f.severity == "error" and "--max-model-len 4096" in f.fix
    draft = ("[2026-02-14 02:07:50] Warning: Target model's context_length (8192) is greater than the derived "
             "context_length (2048). This may lead to incorrect model outputs or CUDA errors.")
    assert diagnose_lines("a", [draft]) == []  # SGLang sizing a draft model: normal
    f = diagnose_lines("a", ["ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (524)"])[0]
    assert "--max-num-seqs 524" in f.fix


def test_model_and_dataset_refusals_are_told_apart():
    model = "Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.2-1B-Instruct/resolve/main/config.json."
    data = "HTTPError: 401 Client Error: Unauthorized for url: https://huggingface.co/api/datasets/skg/toxigen-data"
    assert ids(diagnose_lines("a", [model])) == ["model-access-denied"]
    assert ids(diagnose_lines("a", [data])) == ["gated-dataset"]


# ------------------------------------------------------------------ one catalogue for launch, tracker, log pane

@pytest.mark.parametrize("line,fid", [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB.", "cuda-oom"),
    ("RuntimeError: CUDA error: out of memory (cudaErrorMemoryAllocation)", "cuda-oom"),
    ("ValueError: Failed to load model - not enough GPU memory.", "cuda-oom"),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "kv-cache-too-small"),
    ("torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined.",
     "dist-store-timeout"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda-illegal-access"),
    ("RuntimeError: Failed to infer device type", "gpu-unavailable"),
    ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040).", "cuda-driver-too-old"),
    ("ERROR 04-08 19:59:10 engine.py:400] CUDA error: no kernel image is available for execution on the device",
     "gpu-arch-unsupported"),
    ('FileNotFoundError: No such file or directory: "/m/model-00001-of-00004.safetensors"', "checkpoint-shard-missing"),
])
def test_launch_tracker_and_diagnosis_agree_on_fatal_lines(line, fid):
    assert fatal_of_line(line)[0] == fid
    t = EngineLogTracker("vllm")
    t.feed_batch(["Loading safetensors checkpoint shards:  60% Completed | 30/50", line])
    assert t.progress.phase == "failed"
    assert diagnose_lines("a", [line])[0].id == fid


@pytest.mark.parametrize("line", [
    "station-b:412:530 [0] NCCL INFO NET/Socket : Using [0]enp1s0f1np1:198.18.0.2<0>",
    "[2025-01-06 02:58:44 TP0] Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.0980 -> 0.9446",
    "[2026-02-14 02:08:29] Ignore import error when loading sglang.srt.models.glm_ocr: No module named 'x'",
    "(APIServer pid=1) WARNING 07-15 04:35:18 [model.py:1540] Default vLLM sampling parameters have been overridden",
])
def test_healthy_lines_do_not_abort_a_launch_nor_fail_the_tracker(line):
    assert fatal_of_line(line) is None
    t = EngineLogTracker("vllm")
    t.feed_batch([line])
    assert t.progress.phase != "failed"


def test_every_anchor_is_found_through_its_key():
    for key, group in INDEX.keys.items():
        assert all(key in a.lower() for a in group), key
    covered = {a for group in INDEX.keys.values() for a in group}
    assert set(engine._ANCHOR_TABLE) == set(DIAGNOSIS_ANCHORS) and set(DIAGNOSIS_ANCHORS) <= covered


def classes(line: str) -> dict[str, str]:
    return {line[start:end]: kind for start, end, kind in cat.highlight(line)}



def test_highlight_patterns_come_from_the_catalogue():
    c = classes("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate")
    assert c["torch.OutOfMemoryError"] == "error" and c["out of memory"] == "error"
    assert classes("cudaErrorMemoryAllocation and not enough GPU memory").get("not enough GPU memory") == "error"
    assert classes("x NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA")["via NET/IB/0/GDRDMA"] == "transport"
    assert classes("INFO:     Application startup complete.")["Application startup complete."] == "ready"
    assert classes("x NCCL INFO Using network Socket")["Using network Socket"] == "warning"
    assert classes("INFO KV cache usage 12%") == {}


def test_highlighting_a_long_pathological_line_finishes():
    # the old `\w+(Error|Exception)\b` was quadratic in a long word; every catalogue pattern is linear
    for line in ("a" * 200_000, "Error " * 30_000, "x." * 100_000, "A" * 100_000 + "Error"):
        for rx, _kind in cat.HIGHLIGHTS:
            list(rx.finditer(line))
