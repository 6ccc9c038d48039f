"""Parsers on the real output formats of shared/reference/command-outputs.md."""

import pytest

from console.probes import ParseError
from console.probes.docker import parse_event, parse_inspect, split_timestamp
from console.probes.engine_log import EngineLogTracker
from console.probes.meminfo import parse_meminfo
from console.probes.nccl_transport import transport_of_lines, worse
from console.probes.nvidia_smi import GpuRounds, parse_compute_apps, parse_gpus

GB300_STATION = """\
0, GPU-3a1f2c3d-0000-1111-2222-333344445555, NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 1184, 97887, 1, 31, 22.50
1, GPU-9b8c7d6e-aaaa-bbbb-cccc-ddddeeeeffff, NVIDIA GB300, 236902, 284208, 0, 41, 165.41
"""

GB10 = "0, GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901, NVIDIA GB10, [N/A], [N/A], 0, 35, 11.17\n"

EIGHT = "".join(
    f"{i}, GPU-0000000{i}-1111-2222-3333-444455556666, NVIDIA RTX PRO 6000 Blackwell Server Edition, "
    f"{80000 + i}, 97887, {90 + i % 5}, {60 + i}, 299.{i}0\n" for i in range(8)
)


def test_station_with_two_gpus_gb300_is_device_1():
    gpus = parse_gpus(GB300_STATION)
    assert [g.index for g in gpus] == [0, 1]
    gb300 = gpus[1]
    assert gb300.name == "NVIDIA GB300"
    assert gb300.memory_used_mib == 236902 and gb300.memory_total_mib == 284208
    assert gb300.util_pct == 0 and gb300.temp_c == 41 and gb300.power_w == pytest.approx(165.41)
    assert gpus[0].name.startswith("NVIDIA RTX PRO 6000")


def test_gb10_unified_memory_fields_are_none_not_zero():
    (g,) = parse_gpus(GB10)
    assert g.memory_used_mib is None and g.memory_total_mib is None
    assert g.util_pct == 0 and g.temp_c == 35 and g.power_w == pytest.approx(11.17)


def test_gb10_with_units_and_not_supported():
    text = "0, GPU-1, NVIDIA GB10, Not Supported, [Not Supported], 0 %, 35, 11.17 W\n"
    (g,) = parse_gpus(text)
    assert g.memory_used_mib is None and g.memory_total_mib is None and g.util_pct == 0 and g.power_w == 11.17


def test_eight_gpus_on_one_station():
    gpus = parse_gpus(EIGHT)
    assert len(gpus) == 8
    assert gpus[7].memory_used_mib == 80007 and gpus[7].util_pct == 92 and gpus[7].temp_c == 67


def test_discrete_gpu_with_units_and_header():
    text = ("index, uuid, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%], temperature.gpu, "
            "power.draw [W]\n0, GPU-x, NVIDIA H100 80GB HBM3, 1024 MiB, 81559 MiB, 3 %, 40, 70.1 W\n")
    (g,) = parse_gpus(text)
    assert g.name == "NVIDIA H100 80GB HBM3" and g.memory_used_mib == 1024 and g.memory_total_mib == 81559


def test_garbage_is_a_clear_parse_error():
    with pytest.raises(ParseError, match="NVIDIA-SMI has failed because it couldn't communicate"):
        parse_gpus("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    with pytest.raises(ParseError, match="no GPU rows"):
        parse_gpus("x, GPU-1, NVIDIA GB10, 1, 2, 3, 4, 5\n")
    assert parse_gpus("") == []


# A Station's display GPU fell off the bus: its line is an error, the GB300's row is fine
# (shared/reference/command-outputs.md; NVIDIA/nvidia-container-toolkit#846).
FELL_OFF = """\
Unable to determine the device handle for GPU00000000:01:00.0: Unknown Error
1, GPU-9b8c7d6e-aaaa-bbbb-cccc-ddddeeeeffff, NVIDIA GB300, 236902, 284208, 0, 41, 165.41
"""
# JosephKJ/OWOD#81 (space after GPU, 4-digit domain).
LOST = ("0, GPU-0000, NVIDIA RTX PRO 6000 Blackwell Server Edition, 80000, 97887, 90, 60, 299.00\r\n"
        "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to recover "
        "this GPU\r\n"
        "2, GPU-2222, NVIDIA RTX PRO 6000 Blackwell Server Edition, 80002, 97887, 92, 62, 299.20\r\n")


def test_one_broken_gpu_line_keeps_the_good_gpu():
    gpus = parse_gpus(FELL_OFF)
    assert [g.index for g in gpus] == [0, 1]
    broken, gb300 = gpus
    assert not broken.ok and broken.bus_id == "00000000:01:00.0"
    assert broken.error == "Unable to determine the device handle for GPU00000000:01:00.0: Unknown Error"
    assert broken.memory_used_mib is None and broken.name == ""
    assert gb300.ok and gb300.name == "NVIDIA GB300" and gb300.memory_used_mib == 236902


def test_a_lost_gpu_between_good_ones_with_crlf():
    gpus = parse_gpus(LOST)
    assert [g.index for g in gpus] == [0, 1, 2]
    assert gpus[0].ok and gpus[2].ok and gpus[2].memory_used_mib == 80002
    assert not gpus[1].ok and "GPU is lost" in gpus[1].error and gpus[1].bus_id == "0000:02:00.0"


@pytest.mark.parametrize("value", ["[GPU requires reset]", "[Unknown Error]", "ERR!"])
def test_nvml_error_in_a_field_is_a_gpu_in_error_not_a_number(value):
    text = (f"0, GPU-1, NVIDIA GB300, {value}, 284208, {value}, 41, 165.41\n"
            "1, GPU-2, NVIDIA GB300, 1000, 284208, 3, 40, 160.00\n")
    bad, good = parse_gpus(text)
    assert bad.name == "NVIDIA GB300" and bad.memory_used_mib is None and bad.util_pct is None
    assert not bad.ok and value in bad.error and "memory.used" in bad.error
    assert bad.memory_total_mib == 284208 and bad.temp_c == 41
    assert good.ok and good.memory_used_mib == 1000


def test_not_supported_and_plain_na_are_missing_values_not_errors():
    text = "0, GPU-1, NVIDIA GB10, N/A, [N/A], 0, 35, [Not Supported]\n"
    (g,) = parse_gpus(text)
    assert g.ok and g.memory_used_mib is None and g.memory_total_mib is None and g.power_w is None


def test_a_truncated_row_is_that_gpu_in_error():
    gpus = parse_gpus(GB300_STATION.splitlines()[0] + "\n1, GPU-9b8c, NVIDIA GB300, 2369\n")
    assert gpus[0].ok and not gpus[1].ok and gpus[1].index == 1 and "2369" in gpus[1].error


def test_rounds_of_a_streaming_query_with_a_broken_gpu():
    from console.probes.nvidia_smi import GpuRounds

    rounds = GpuRounds(expected=2)
    lines = FELL_OFF.splitlines() * 3
    got = [r for r in (rounds.feed(ln) for ln in lines) if r is not None]
    assert len(got) == 3
    for r in got:
        assert [g.index for g in r] == [0, 1] and not r[0].ok and r[1].ok
    # a GPU that vanished from the enumeration: the round closes when an index repeats
    rounds = GpuRounds(expected=2)
    row = GB300_STATION.splitlines()[1]
    assert rounds.feed(row) is None
    assert [g.index for g in rounds.feed(row)] == [1]
    with pytest.raises(ParseError, match="NVIDIA-SMI has failed"):
        rounds.feed("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


def test_compute_apps_gb10():
    apps = parse_compute_apps("GPU-1b2c3d4e, 114687, /usr/local/bin/python, 19135\n"
                              "GPU-1b2c3d4e, 114688, /usr/bin/python3, [N/A]\n")
    assert apps[0].pid == 114687 and apps[0].used_memory_mib == 19135
    assert apps[1].used_memory_mib is None
    assert parse_compute_apps("") == []
    # one broken row does not hide the others
    mixed = parse_compute_apps("GPU-1, 11, python, 100\nUnable to determine the device handle for GPU 0000:02:00.0: "
                               "Unknown Error\nGPU-3, 33, python, 300\n")
    assert [a.pid for a in mixed] == [11, 33]


def test_meminfo_spark():
    text = ("MemTotal:       126564856 kB\nMemFree:         3318000 kB\nMemAvailable:   28117828 kB\n"
            "Buffers:            1234 kB\nCached:         20456788 kB\n")
    m = parse_meminfo(text)
    assert m.total_mib == 126564856 // 1024 and m.available_mib == 28117828 // 1024
    assert m.cached_mib == 20456788 // 1024 and m.used_mib == m.total_mib - m.available_mib
    with pytest.raises(ParseError):
        parse_meminfo("nothing here\n")


def test_docker_inspect_running_exited_absent():
    fmt = ('{"Status":"running","Running":true,"OOMKilled":false,"ExitCode":0,'
           '"StartedAt":"2026-11-30T14:10:14.548831000Z","FinishedAt":"0001-01-01T00:00:00Z"}'
           '|vllm/vllm-openai:v0.30.0-aarch64|sha256:4c68')
    info = parse_inspect("glm53", fmt)
    assert info.state == "running" and info.image == "vllm/vllm-openai:v0.30.0-aarch64"
    exited = parse_inspect("glm53", fmt.replace('"running"', '"exited"').replace('"ExitCode":0', '"ExitCode":137')
                           .replace('"OOMKilled":false', '"OOMKilled":true'))
    assert exited.state == "exited" and exited.exit_code == 137 and exited.oom_killed
    gone = parse_inspect("glm53", "", exit_status=1)
    assert gone.state == "absent"
    with pytest.raises(ParseError):
        parse_inspect("glm53", "not json|x|y")


def test_docker_events_and_timestamps():
    ev = parse_event("start|glm53|1796047812")
    assert ev and ev.status == "start" and ev.name == "glm53" and ev.time == 1796047812
    assert parse_event("garbage") is None
    ts, rest = split_timestamp("2026-11-30T14:10:14.788831000Z INFO:     Application startup complete.")
    assert ts == "2026-11-30T14:10:14.788831000Z" and rest == "INFO:     Application startup complete."
    assert split_timestamp("plain line") == (None, "plain line")


NCCL_GDR = [
    "station-a:412:530 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.1<0>",
    "station-a:412:530 [0] NCCL INFO Using network IB",
    "station-a:412:530 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
    "station-a:412:530 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
]
NCCL_SOCKET = [
    "spark-b:99:120 [0] NCCL INFO Failed to open libibverbs.so[.1]",
    "spark-b:99:120 [0] NCCL INFO NET/Socket : Using [0]enp1s0f0np0:169.254.102.149<0>",
    "spark-b:99:120 [0] NCCL INFO Using network Socket",
    "spark-b:99:120 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
]


def test_nccl_transport_verdicts():
    assert transport_of_lines(NCCL_GDR) == "gdrdma"
    assert transport_of_lines(NCCL_SOCKET) == "socket"
    gb10 = ["spark:1:2 [0] NCCL INFO Using network IB",
            "spark:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'rocep1s0f1'",
            "spark:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0"]
    assert transport_of_lines(gb10) == "rdma"
    assert transport_of_lines(["(APIServer pid=1) INFO hello"]) == "unknown"
    assert worse("gdrdma", "socket") == "socket" and worse("rdma", "gdrdma") == "rdma"


def test_engine_log_tracker_vllm_head_to_ready():
    t = EngineLogTracker("vllm", head=True)
    seq = [
        "(APIServer pid=1) INFO 11-30 14:05:21 [api_server.py:1896] vLLM API server version 0.30.0",
        *NCCL_GDR,
        "(Worker_TP0 pid=412) INFO 11-30 14:05:31 [gpu_model_runner.py:2602] Starting to load model x...",
        "Loading safetensors checkpoint shards:  34% Completed | 17/50 [01:21<02:38, 4.79s/it]",
        "(Worker_TP0 pid=412) INFO 11-30 14:09:31 [gpu_model_runner.py:2677] Model loading took 218.02 GiB memory and 240.1 seconds",
        "(Worker_TP0 pid=412) INFO 11-30 14:10:31 [gpu_worker.py:298] Available KV cache memory: 11.45 GiB",
        "Capturing CUDA graphs (decode, FULL):  40%| 14/35",
        "INFO:     Application startup complete.",
    ]
    phases = []
    for line in seq:
        t.feed(line)
        phases.append(t.progress.phase)
    assert phases[0] == "starting" and "loading" in phases and "loaded" in phases
    assert t.progress.load_pct == 100 and t.progress.weights_gib == pytest.approx(218.02)
    assert phases[-2] == "graphs" and phases[-1] == "ready"
    assert t.progress.transport == "gdrdma"


def test_rounds_of_an_unknown_gpu_count_are_learnt_from_the_first_repeat():
    """The first GPU read failed (nvidia-smi hung at connect): the loop's rounds must not be one GPU each."""
    rows = GB300_STATION.splitlines()
    rounds = GpuRounds(expected=None)
    got = [r for line in rows * 3 if (r := rounds.feed(line)) is not None]
    assert [[g.index for g in r] for r in got] == [[0, 1]] * 3 and rounds.expected == 2  # (the 1st at the repeat)


def test_engine_log_tracker_fatal_and_sglang_ready():
    t = EngineLogTracker("vllm")
    t.feed("Loading safetensors checkpoint shards:  60% Completed | 30/50")
    assert t.feed("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB.")
    assert t.progress.phase == "failed" and "OutOfMemoryError" in t.progress.fatal
    s = EngineLogTracker("sglang")
    s.feed("[2026-11-30 14:05:21 TP0] Load weight begin. avail mem=117.30 GB")
    s.feed("INFO:     Application startup complete.")
    assert s.progress.phase != "ready"  # SGLang is ready only when it says so
    s.feed("[2026-11-30 14:13:11 TP0] The server is fired up and ready to roll!")
    assert s.progress.phase == "ready"
    ansi = EngineLogTracker("vllm")
    ansi.feed("\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO:     Application startup complete.")
    assert ansi.progress.phase == "ready"


def test_an_sglang_worker_without_cuda_graphs_serves_once_its_scheduler_is_up():
    """A worker rank (no API, no "fired up" line) run with --disable-cuda-graph stayed
    "allocating KV cache" for as long as it served. SGLang's scheduler prints its limits once its model
    runner is up: from there the worker serves; the head still waits for its own ready line."""
    from console.station.messages import EngineUpdate
    from console.station.state import StationState

    lines = ["[2026-11-30 14:05:21 TP1] server_args=ServerArgs(model_path='/models/x', disable_cuda_graph=True)",
             "[2026-11-30 14:05:30 TP1] Load weight begin. avail mem=117.30 GB",
             "[2026-11-30 14:09:30 TP1] Load weight end. type=GlmMoeDsaForCausalLM, mem usage=90.50 GB.",
             "[2026-11-30 14:09:35 TP1] KV Cache is allocated. #tokens: 305121, KV size: 3.93 GB",
             "[2026-11-30 14:09:36 TP1] max_total_num_tokens=305121, chunked_prefill_size=8192, max_prefill_tokens="
             "16384, max_running_requests=2, context_len=65536, available_gpu_mem=17.20 GB"]
    worker, head = EngineLogTracker("sglang", head=False), EngineLogTracker("sglang", head=True)
    for ln in lines[:-1]:
        worker.feed(ln)
    assert worker.progress.phase == "kv-cache"
    worker.feed(lines[-1])
    assert worker.progress.phase == "ready"
    s = StationState("B", rank=1, head=False, container="glm53")
    s.apply(EngineUpdate("B", worker.progress))
    assert s.engine_label == "serving (worker)"
    head.feed_batch([ln.replace("TP1", "TP0") for ln in lines])
    assert head.progress.phase != "ready"  # the head serves when it says so


def test_engine_log_anchors_cover_every_marker():
    from console import catalogue as cat
    from console.catalogue.classify import INDEX, classify

    phase_lines = ["Loading safetensors checkpoint shards:  2% Completed | 1/50", "Starting to load model x",
                   "Load weight begin.", "Model loading took 1 GiB", "Available KV cache memory: 1 GiB",
                   "KV Cache is allocated.", "Capturing CUDA graphs (decode, FULL)", "Capture cuda graph begin.",
                   "Graph capturing finished in 3 secs", "headless multiproc executor", "INFO:     Shutting down",
                   "NCCL INFO Using network IB", "NET/IB : Using [0]mlx5_0:1/RoCE"]
    for text in (*cat.READY_MARKERS.values(), *cat.RESET_MARKERS, *phase_lines):
        batch = classify([text])  # a marker line, or an NCCL line the batch's text tells of
        assert 0 in batch.marks or batch.holds_any(cat.NCCL_WORDS, 0, 1), text
    scanned = {a for group in INDEX.keys.values() for a in group}
    assert set(cat.FATAL_ANCHORS) | set(cat.STARTUP_ANCHORS) <= scanned  # fatal lines and markers: one scan
    for key, group in INDEX.keys.items():  # a line holding an anchor holds its key: nothing is missed
        assert all(key in a.lower() for a in group), key
    t = EngineLogTracker("vllm")
    assert not t.feed_batch(["(APIServer pid=1) INFO 11-30 14:05:21 [loggers.py:123] Engine 000: Avg prompt "
                             "throughput: 0.0 tokens/s, Running: 16 reqs"] * 100)
    assert t.feed_batch(["noise"] * 50 + ["Loading safetensors checkpoint shards:  40% Completed | 20/50"])
    assert t.progress.phase == "loading" and t.progress.load_pct == 40
    n = EngineLogTracker("vllm")  # an NCCL line with no marker of its own: the ranks are connecting
    assert n.feed_batch(["noise", "spark-a:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE", "noise"])
    assert n.progress.phase == "connecting"


def test_the_line_after_an_nvml_failure_is_not_a_gpu():
    """nvidia-smi's driver/library mismatch prints "NVML library version: 580.95" after the failure:
    one error, never a GPU row in error made of that line."""
    out = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95\n"
    rounds = GpuRounds(1)
    with pytest.raises(ParseError, match="Driver/library version mismatch"):
        rounds.feed(out.splitlines()[0])
    assert rounds.feed(out.splitlines()[1]) is None
    with pytest.raises(ParseError, match="Driver/library version mismatch"):
        parse_gpus(out)
