"""Diagnoser behaviour: prefixes, version variants, tracebacks, sub-causes, correlation, live feeding."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.diagnosis import Diagnoser, diagnose_lines, has_problems
from console import catalogue as cat

SOCKET_MSG = "NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0"  # a channel over TCP: the fallback
ANNOUNCE = "NCCL INFO NET/Socket : Using [0]enp1s0f1np1:192.168.100.2<0>"  # the socket plugin's init: not one
WATCHDOG_EARLY = ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, "
                  "NumelOut=1, Timeout(ms)=600000) ran for 600059 milliseconds before timing out.")
WATCHDOG_LATE = ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=80078, OpType=BROADCAST, "
                 "NumelIn=5056, NumelOut=5056, Timeout(ms)=600000) ran for 600026 milliseconds before timing out.")
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 251.9 GiB"


def ids(findings):
    return [f.id for f in findings]


# ------------------------------------------------------------------ prefixes (match the message)

PREFIXES = [
    "(Worker_TP1 pid=1268) ERROR 11-30 14:05:21 [gpu_worker.py:301] ",  # vLLM 0.33
    "(VllmWorker-0 pid=88) ERROR 11-30 14:05:21 [gpu_worker.py:301] ",  # older vLLM
    "ERROR 07-01 13:54:43 multiproc_worker_utils.py:120] ",  # vLLM 0.5 (no brackets)
    "[rank0]:[E822 16:31:16.131931664 ProcessGroupNCCL.cpp:632] [Rank 0] ",  # PyTorch with timestamp
    "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] ",  # PyTorch without
    "station-a:391:512 [0] ",  # NCCL host:pid:tid [dev]
    "(RayWorkerVllm pid=1394) ",  # Ray
    "(EngineCore_DP0 pid=2301) (RayWorkerWrapper pid=2981, ip=169.254.28.198) ",  # nested Ray
    "[2026-04-08 14:05:21 TP0] ",  # SGLang
    "INFO:     ",  # uvicorn
    "\x1b[36m(RayWorkerVllm pid=5085)\x1b[0m ",  # ANSI colour
    "\x1b[0;36m(EngineCore_DP0 pid=738)\x1b[0;0m \x1b[31mERROR\x1b[0m \x1b[90m01-26 09:25:37\x1b[0m ",
    "eap-llm-server-on-arc  | ",  # docker compose
]


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("message,fid", [
    (WATCHDOG_EARLY, "nccl-timeout"),
    (SOCKET_MSG, "nccl-socket-fallback"),
    (OOM, "cuda-oom"),
    ("Worker proc VllmWorker-1 died unexpectedly (exit code: -9), shutting down executor.", "worker-died"),
    ("ValueError: Free memory on device cuda:0 (55.87/119.56 GiB) on startup is less than desired GPU memory "
     "utilization (0.87, 104.02 GiB).", "free-memory-at-startup"),
])
def test_prefix_does_not_matter(prefix, message, fid):
    findings = diagnose_lines("a", [prefix + message])
    assert ids(findings) == [fid]
    assert "\x1b" not in findings[0].evidence[0].text


def test_docker_timestamps_are_stripped_and_kept_for_ordering():
    lines = [
        "2026-11-30T14:05:21.123456789Z station-b:77:90 [0] " + SOCKET_MSG,
        "2026-11-30T14:06:00.000000001Z [rank0]:[E1130 14:06:00.131931664 ProcessGroupNCCL.cpp:632] " + WATCHDOG_EARLY,
    ]
    f = diagnose_lines("a", lines)
    assert ids(f) == ["nccl-socket-fallback", "nccl-timeout"]
    assert not f[0].evidence[0].text.startswith("2026-")
    assert f[0].first_ts == "2026-11-30T14:05:21.123456789Z"


# ------------------------------------------------------------------ version variants

@pytest.mark.parametrize("line", [
    "h:1:2 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 192.168.100.2<52301> with "
    "error 12, opcode 0, len 0, vendor err 129 (Recv)",  # 2.18-2.19
    "h:1:2 [0] transport/net_ib.cc:1697 NCCL WARN NET/IB : Got completion from peer 192.168.100.2<52301> with "
    "status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:192.168.100.1 remoteGids ::ffff:192.168.100.2",
    "h:1:2 [0] transport/net_ib.cc:2001 NCCL WARN NET/IB : Got completion from peer 192.168.100.2<52301> with "
    "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RDMA_WRITE(1) len=0 vendor err 129 (Send)",  # 2.28+
    "NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129",  # old
])
def test_ib_completion_error_formats(line):
    f = diagnose_lines("b", [line])
    assert ids(f) == ["nccl-ib-error"]
    assert "RETRY_EXC" in f[0].cause and "GID" in f[0].cause


def test_ib_completion_status_4_points_to_gpudirect():
    f = diagnose_lines("b", ["transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 4, opcode 1, "
                             "len 21938, vendor err 81"])
    assert "peermem" in f[0].cause


def test_watchdog_sub_causes():
    early = diagnose_lines("a", ["[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] " + WATCHDOG_EARLY])[0]
    late = diagnose_lines("a", ["[rank7]:[E816 01:45:40.183009389 ProcessGroupNCCL.cpp:607] [Rank 7] "
                                + WATCHDOG_LATE])[0]
    assert "never worked" in early.cause and "dgx-console doctor" in early.fix  # the workbench
    assert "under load" in late.cause and "NCCL version" in late.fix


@pytest.mark.parametrize("code,word", [(-9, "OOM killer"), (-6, "SIGABRT"), (-15, "SIGTERM")])
def test_worker_exit_codes(code, word):
    f = diagnose_lines("a", [f"ERROR 07-01 13:54:43 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 1159 "
                             f"died, exit code: {code}"])
    assert ids(f) == ["worker-died"] and word in f[0].cause


def test_kv_cache_estimate_is_in_the_fix():
    f = diagnose_lines("a", ["ValueError: To serve at least one request with the model's max seq len (202752), "
                             "(31.50 GiB KV cache is needed, which is larger than the available KV cache memory "
                             "(12.00 GiB). Based on the available memory, the estimated maximum model length is "
                             "77184. Try increasing `gpu_memory_utilization` or decreasing `max_model_len`"])
    assert f[0].id == "kv-cache-too-small" and "--max-model-len 77184" in f[0].fix


# ------------------------------------------------------------------ tracebacks

TRACEBACK = [
    "(EngineCore_DP0 pid=34) ERROR 11-30 14:05:21 [core.py:708] EngineCore failed to start.",
    "(EngineCore_DP0 pid=34) ERROR 11-30 14:05:21 [core.py:708] Traceback (most recent call last):",
    '(EngineCore_DP0 pid=34) ERROR 11-30 14:05:21 [core.py:708]   File "/usr/lib/vllm/v1/engine/core.py", line 699, in run',
    "(EngineCore_DP0 pid=34) ERROR 11-30 14:05:21 [core.py:708]     engine_core = EngineCoreProc(*args, **kwargs)",
    "(EngineCore_DP0 pid=34) ERROR 11-30 14:05:21 [core.py:708]                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '(EngineCore_DP0 pid=34) ERROR 11-30 14:05:21 [core.py:708]   File "/usr/lib/vllm/v1/worker/gpu_worker.py", line 80, in init',
    '(EngineCore_DP0 pid=34) ERROR 11-30 14:05:21 [core.py:708]     raise RuntimeError("CUDA out of memory while profiling")',
    "(EngineCore_DP0 pid=34) ERROR 11-30 14:05:21 [core.py:708] " + OOM,
]


def test_traceback_reports_exception_line_with_frames_as_context():
    f = diagnose_lines("a", TRACEBACK)
    oom = next(x for x in f if x.id == "cuda-oom")
    assert oom.count == 1  # the quoted `raise` source line is not evidence
    ev = oom.evidence[0]
    assert ev.line == len(TRACEBACK) and "torch.OutOfMemoryError" in ev.text
    assert any("gpu_worker.py" in c for c in ev.context)
    assert not any(set(c.split("] ")[-1].strip()) == {"^"} for c in ev.context)
    assert ids(f) == ["cuda-oom", "engine-dead"]


def test_tensor_size_mismatch_needs_weight_loading_context():
    msg = "RuntimeError: The size of tensor a (4096) must match the size of tensor b (2048) at non-singleton dimension 0"
    other = diagnose_lines("a", ["Traceback (most recent call last):", '  File "model.py", line 3, in forward', msg])
    assert ids(other) == ["unrecognised-error"]  # not the MTP head: an error no entry explains
    f = diagnose_lines("a", ["Traceback (most recent call last):",
                             '  File "vllm/model_executor/models/glm4_moe_mtp.py", line 300, in load_weights', msg])
    assert ids(f) == ["mtp-weight-mismatch"]


def test_tool_parser_mismatch_only_for_glm5_with_glm45():
    bad = ("(APIServer pid=1) INFO 11-30 14:00:01 [utils.py:253] non-default args: {'model': "
           "'/models/GLM-5.3-NVFP4', 'tool_call_parser': 'glm45', 'enable_auto_tool_choice': True}")
    assert ids(diagnose_lines("a", [bad])) == ["tool-parser-mismatch"]
    assert diagnose_lines("a", [bad.replace("glm45", "glm47")]) == []
    ok = bad.replace("'tool_call_parser': 'glm45'", "'tool_call_parser': 'glm47', 'reasoning_parser': 'glm45'")
    assert diagnose_lines("a", [ok]) == []  # glm45 is the right *reasoning* parser for GLM-5.x
    assert diagnose_lines("a", ["vllm serve /models/GLM-5.3-NVFP4 --tool-call-parser glm47 --reasoning-parser glm45"]) == []
    assert ids(diagnose_lines("a", ["vllm serve /models/GLM-5.3-NVFP4 --tool-call-parser glm45"])) == ["tool-parser-mismatch"]
    assert diagnose_lines("a", [bad.replace("GLM-5.3", "GLM-4.5-Air")]) == []


# ------------------------------------------------------------------ correlation and ranking

@dataclass
class Check:
    id: str
    station: str
    status: str
    summary: str
    evidence: str
    fix: str


def test_other_stations_socket_fallback_ranks_above_head_watchdog():
    d = Diagnoser()
    d.feed("station-a", ["INFO starting", "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] " + WATCHDOG_EARLY])
    d.feed("station-b", ["b:1:2 [0] NCCL INFO Using network Socket", "b:1:2 [0] " + ANNOUNCE, "b:1:2 [0] " + SOCKET_MSG])
    r = d.ranked()
    assert [(f.id, f.station) for f in r] == [("nccl-socket-fallback", "station-b"), ("nccl-timeout", "station-a")]
    assert r[1].explained_by == "nccl-socket-fallback@station-b"
    assert r[0].count == 3  # one finding: the channel, the network chosen and the interface announced


def test_link_check_failure_ranks_first_and_is_replaced_on_rerun():
    d = Diagnoser()
    d.feed("station-a", ["[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] " + WATCHDOG_EARLY])
    d.feed("station-b", [SOCKET_MSG])
    d.add_check_results([Check("mtu-mismatch", "station-b", "fail", "MTU 1500 on B, 9000 on A",
                               "ip -o link: mtu 1500", "ip link set enp1s0f1np1 mtu 9000"),
                         Check("link-down", "station-a", "pass", "up", "", "")])
    r = d.ranked()
    assert ids(r) == ["mtu-mismatch", "nccl-socket-fallback", "nccl-timeout"]
    assert r[0].evidence[0].source == "check" and r[0].evidence[0].line is None
    d.add_check_results([Check("mtu-mismatch", "station-b", "pass", "9000 both", "", "")])
    assert ids(d.ranked()) == ["nccl-socket-fallback", "nccl-timeout"]


def test_worker_died_ranks_above_engine_dead():
    f = diagnose_lines("a", [
        "ERROR 11-08 11:01:30 [core.py:502] EngineCore encountered a fatal error.",
        "ERROR 11-08 11:01:29 [multiproc_executor.py:135] Worker proc VllmWorker-3 died unexpectedly, shutting down.",
    ])
    assert ids(f) == ["worker-died", "engine-dead"]
    assert f[1].explained_by == "worker-died@a"


def test_gb10_gdr_disabled_is_info_unless_gpudirect_expected():
    line = "spark-a:2981:2981 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'rocep1s0f1'"
    f = diagnose_lines("a", [line])
    assert ids(f) == ["nccl-gdr-disabled"] and f[0].severity == "info" and not has_problems(f)
    assert diagnose_lines("a", [line], gpudirect_expected=True)[0].severity == "warning"


def test_init_started_but_never_completed_is_a_hang_at_end_of_input():
    lines = ["h:1:2 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START"]
    assert diagnose_lines("a", lines + ["INFO waiting"] * 10) == []
    f = diagnose_lines("a", lines + ["INFO waiting"] * 300)
    assert ids(f) == ["nccl-hang"] and f[0].evidence[0].line == 1
    ok = lines + ["h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"]
    assert diagnose_lines("a", ok + ["INFO serving"] * 300) == []
    restarted = ok + ["INFO restart"] * 5 + lines + ["INFO waiting"] * 300  # an old run completed, the new one not
    assert ids(diagnose_lines("a", restarted)) == ["nccl-hang"]


def test_secrets_never_reach_evidence():
    f = diagnose_lines("a", ["HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123 OSError: [Errno 98] Address already in use",
                             "Authorization: Bearer sk-live-123456 401 Client Error: Unauthorized for url: "
                             "https://huggingface.co/datasets/cais/hle/resolve/main/data.parquet"])
    text = " ".join(e.text for x in f for e in x.evidence)
    assert ids(f) == ["port-in-use", "gated-dataset"]
    assert "hf_abcdef" not in text and "sk-live" not in text


# ------------------------------------------------------------------ live feeding

def test_incremental_feed_matches_one_shot_and_counts_lines_across_calls():
    lines = ["INFO ok"] * 5 + ["b:1:2 [0] " + SOCKET_MSG] + ["INFO ok"] * 3 + [OOM]
    d = Diagnoser()
    changes = [d.feed("s", [x]) for x in lines]
    assert changes == [False] * 5 + [True] + [False] * 3 + [True]
    assert d.feed("s", ["b:1:2 [0] " + SOCKET_MSG]) is False  # only the count changed
    live = {(f.id, f.first_seen_line, f.count) for f in d.ranked()}
    assert live == {("cuda-oom", 10, 1), ("nccl-socket-fallback", 6, 2)}
    assert d.lines_seen("s") == 11
    assert {(f.id, f.first_seen_line) for f in diagnose_lines("s", lines)} == {("cuda-oom", 10), ("nccl-socket-fallback", 6)}


def test_feed_across_batch_boundary_keeps_traceback_context():
    d = Diagnoser()
    d.feed("a", TRACEBACK[:4])
    d.feed("a", TRACEBACK[4:])
    oom = next(f for f in d.ranked() if f.id == "cuda-oom")
    assert oom.evidence[0].line == len(TRACEBACK) and any("core.py\", line 699" in c for c in oom.evidence[0].context)


def test_evidence_is_capped_but_count_is_not():
    f = diagnose_lines("a", ["b:1:2 [0] " + SOCKET_MSG] * 50)
    assert f[0].count == 50 and len(f[0].evidence) == 5


# ------------------------------------------------------------------ noise never yields a finding

HEALTHY_WORDS = ["INFO", "DEBUG", "NCCL", "Using", "network", "IB", "NET/IB", "GPU", "Direct", "RDMA", "Enabled",
                 "Init", "COMPLETE", "Channel", "via", "GDRDMA", "KV", "cache", "memory", "Available", "usage:",
                 "tokens/s", "throughput:", "Running:", "reqs", "(APIServer", "pid=1)", "[rank0]:", "200", "OK",
                 "POST", "/v1/chat/completions", "Decode", "batch,", "#running-req:", "SpecDecoding", "metrics:",
                 "acceptance", "Loading", "safetensors", "checkpoint", "shards:", "Graph", "capturing", "finished",
                 "Watchdog", "timeout", "socket", "Error", "error", "failed", "shared", "worker", "engine", "died"]


# Hypothesis seeds text with the string constants of the code under test: a line that *is* a catalogue
# phrase ("Traceback (most recent call last)", "Segmentation fault") is not noise, so those are left out.
_PHRASES = (*cat.ANCHORS, *cat.GENERIC_ANCHORS, "ERROR", "CRITICAL", "FATAL")


def _noise(line: str) -> bool:
    return not any(p in line for p in _PHRASES)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=200).filter(_noise), min_size=1, max_size=40))
def test_random_text_never_yields_a_finding(lines):
    assert diagnose_lines("noise", lines) == []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(HEALTHY_WORDS), max_size=25).map(" ".join), min_size=1, max_size=40))
def test_shuffled_log_vocabulary_never_yields_a_finding(lines):
    d = Diagnoser()
    d.feed("noise", lines)
    d.finish()
    assert d.ranked() == []


def test_healthy_formats_from_engines_reference_stay_clean():
    """Normal startup and serving lines (vLLM 0.33 prefixes, NCCL INFO over RoCE, GB10's GDR notice,
    periodic throughput and MTP stats, SGLang decode stats, uvicorn) give no error or warning."""
    p = "(Worker_TP0 pid=391) INFO 11-30 14:05:21 [gpu_worker.py:301] "
    lines = [
        "(APIServer pid=1) INFO 11-30 14:00:01 [utils.py:253] non-default args: {'model': '/models/GLM-5.3-NVFP4', "
        "'tool_call_parser': 'glm47', 'tensor_parallel_size': 2, 'api_key': ['sk-x']}",
        p + "Resolved architecture: GlmMoeDsaForCausalLM",
        p + "Using max model len 98304",
        p + "Starting to load model /models/GLM-5.3-NVFP4...",
        "Loading safetensors checkpoint shards:  33% Completed | 16/48 [01:02<02:04,  3.89s/it]",
        p + "Loading weights took 412.31 seconds",
        p + "Model loading took 218.4 GiB memory and 415.220114 seconds",
        "station-a:391:512 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.1<0>",
        "station-a:391:512 [0] NCCL INFO Using network IB",
        "station-a:391:512 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
        "station-a:391:512 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
        "station-a:391:512 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
        "station-a:391:512 [0] NCCL INFO comm 0x5d1c rank 0 nranks 2 cudaDev 0 nvmlDev 1 busId 1000 commId 0x9a - Init COMPLETE",
        "spark-a:2981:2981 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'rocep1s0f1'",
        p + "Available KV cache memory: 18.40 GiB",
        p + "GPU KV cache size: 412,160 tokens, Maximum concurrency for 98,304 tokens per request: 4.19x",
        "Capturing CUDA graphs (decode, FULL): 100%|██████████| 35/35 [00:09<00:00,  3.61it/s]",
        p + "Graph capturing finished in 11 secs, took 1.42 GiB",
        p + "init engine (profile, create kv cache, warmup model) took 88.02 s",
        "(APIServer pid=1) INFO 11-30 14:09:01 [api_server.py:1885] Starting vLLM server on http://0.0.0.0:8000",
        "(APIServer pid=1) INFO:     Started server process [1]",
        "(APIServer pid=1) INFO:     Waiting for application startup.",
        "(APIServer pid=1) INFO:     Application startup complete.",
        "(APIServer pid=1) INFO 11-30 14:10:01 [loggers.py:123] Engine 000: Avg prompt throughput: 512.3 tokens/s, "
        "Avg generation throughput: 98.1 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.5%, "
        "Prefix cache hit rate: 41.0%",
        "(APIServer pid=1) INFO 11-30 14:10:01 [metrics.py:88] SpecDecoding metrics: Mean acceptance length: 2.61, "
        "Accepted throughput: 60.12 tokens/s, Drafted throughput: 92.40 tokens/s, Accepted: 601 tokens, Drafted: 924 "
        "tokens, Per-position acceptance rate: 0.812, 0.554, 0.301, 0.120, Avg Draft acceptance rate: 65.0%",
        "(APIServer pid=1) INFO:     192.168.100.1:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
        "[2026-04-08 14:05:21 TP0] Load weight end. type=GlmMoeDsaForCausalLM, dtype=torch.bfloat16, avail mem=31.20 GB",
        "[2026-04-08 14:05:21 TP0] max_total_num_tokens=262144, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=8, context_len=202752, available_gpu_mem=16.89 GB",
        "[2026-04-08 14:05:21 TP0] Decode batch, #running-req: 5, #token: 20800, token usage: 0.29, cuda graph: True, "
        "gen throughput (token/s): 144.95, #queue-req: 0",
        "[2026-04-08 14:05:22 TP0] The server is fired up and ready to roll!",
    ]
    d = Diagnoser()
    for i in range(0, len(lines), 7):
        d.feed("a", lines[i:i + 7])
    d.finish()
    # GB10's "GPU Direct RDMA Disabled" is info at most, and no finding at all next to GDRDMA channels
    assert [(f.id, f.severity) for f in d.ranked()] == []


def test_the_oom_fix_points_to_the_process_list_first():
    """A leftover process holding the GPU is the usual OOM on a desk: the fix names the process list (P)."""
    oom = next(x for x in diagnose_lines("a", TRACEBACK) if x.id == "cuda-oom")
    assert oom.fix.startswith("first see who else holds the GPU's memory: the process list (P in the console)")
