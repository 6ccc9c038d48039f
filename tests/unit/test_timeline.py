"""The start-up timeline's log markers (vLLM and SGLang formats of shared/reference/engines.md,
old and new), its durations and the comparison with the last launches, and the stop's judgement."""

from __future__ import annotations

from console.catalogue.classify import match_timeline
from console.probes.engine_log import EngineLogTracker, TimelineEvent
from console.probes.meminfo import HostMemory
from console.probes.nvidia_smi import ComputeApp, GpuReading
from console.service import history, stop_verify
from console.service.fit_inputs import MemoryReading

V = "(Worker_TP0 pid=412) INFO 11-30 14:10:31 [gpu_model_runner.py:2677] "
VLLM_LINES = [
    (0.0, "(APIServer pid=1) INFO 11-30 14:05:21 [api_server.py:1896] vLLM API server version 0.30.0"),
    (4.0, "station-a:412:530 [0] NCCL INFO comm 0x55d5c8a000 rank 0 nranks 2 cudaDev 0 nvmlDev 1 busId 1000 "
          "commId 0x8f3e21c4d7a9b001 - Init COMPLETE"),
    (5.0, V + "Starting to load model /models/GLM-5.3-NVFP4..."),
    (245.0, V + "Model loading took 218.00 GiB memory and 239.400000 seconds"),
    (300.0, "(Worker_TP0 pid=412) INFO 11-30 14:15:00 [gpu_worker.py:298] \x1b[1;36mAvailable KV cache memory: "
            "11.23 GiB\x1b[0m"),
    (300.5, "(EngineCore_DP0 pid=263) INFO 11-30 14:15:01 [kv_cache_utils.py:1087] GPU KV cache size: 193,664 tokens"),
    (400.0, V + "Graph capturing finished in 101 secs, took 1.21 GiB"),
]


def test_vllm_startup_lines_make_the_timeline_in_order_with_the_logs_figures():
    t = EngineLogTracker("vllm")
    for at, line in VLLM_LINES:
        t.feed(line, at=1000.0 + at)
    tl = t.progress.timeline
    assert [e.event for e in tl] == ["engine-up", "nccl-init", "weights-start", "weights-end", "kv-cache",
                                     "cuda-graphs"]
    by = {e.event: e for e in tl}
    assert (by["weights-end"].value("gib"), by["weights-end"].value("seconds")) == (218.0, 239.4)
    assert by["kv-cache"].detail == "11.23 GiB, 193,664 tokens" and by["kv-cache"].at == 1300.0  # first line's time
    assert by["cuda-graphs"].detail == "101 s, 1.21 GiB"
    assert history.durations(tl) == {"weights": 239.4, "kv-cache": 55.0, "cuda-graphs": 101.0}
    assert t.progress.phase == "graphs"  # the phase tracking is unchanged


def test_older_and_sglang_wordings():
    assert match_timeline("Model loading took 14.9935 GiB and 3.251049 seconds") == (
        "weights-end", {"gib": 14.9935, "seconds": 3.251049})
    assert match_timeline("[2026-04-08 14:05:21 TP0] Load weight end. type=GlmMoeDsaForCausalLM, dtype=torch.bfloat16, "
                          "avail mem=26.5 GB, mem usage=90.50 GB.") == ("weights-end", {"gib": 90.5})
    assert match_timeline("[2026-04-08 14:05:21 TP0] KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, "
                          "V size: 8.23 GB") == ("kv-cache", {"tokens": 367404, "k": 8.23, "v": 8.23})
    assert match_timeline("KV Cache is allocated. #tokens: 264000, KV size: 3.93 GB")[1] == {"tokens": 264000,
                                                                                          "gib": 3.93}
    assert match_timeline("Capture cuda graph end. Time elapsed: 12.34 s. mem usage=0.42 GB.")[1] == {"seconds": 12.34}
    assert match_timeline("[2026-04-08 14:05:21 TP0] Init torch distributed ends. mem usage=0.45 GB")[0] == "nccl-init"
    assert match_timeline("Engine 000: Avg prompt throughput: 0.0 tokens/s, GPU KV cache usage: 1.0%") is None
    t = EngineLogTracker("sglang")
    t.feed("[2026-04-08 14:05:21 TP0] KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB", 1.0)
    assert t.progress.timeline[0].detail == "16.46 GiB, 367,404 tokens"


def test_a_new_run_starts_a_new_timeline():
    t = EngineLogTracker("vllm")
    for at, line in VLLM_LINES[:4]:
        t.feed(line, at)
    t.feed(VLLM_LINES[0][1], 900.0)
    assert [e.event for e in t.progress.timeline] == ["engine-up"] and t.progress.timeline[0].at == 900.0


def _ev(event: str, at: float, **vals: float) -> TimelineEvent:
    return TimelineEvent(event, at, "", tuple(vals.items()))


def test_the_comparison_names_last_time_and_where_it_is_slower():
    previous = [{"A": {"weights": 238.0, "ready": 400.0}}, {"A": {"weights": 240.0, "ready": 410.0}}]
    lines = history.compare({"A": {"weights": 242.0, "ready": 600.0}}, previous)
    assert lines == ["A: weights 4m02s (last time 4m00s) · start to /health 200 10m00s (last time 6m50s), slower "
                     "than the last 2 (median 6m45s)"]
    assert history.compare({"A": {"weights": 3.0}, "B": {}}, []) == ["A: weights 3.0s"]


def test_history_keeps_records_per_service_and_the_last_baseline(tmp_path):
    h = history.LaunchHistory(tmp_path / "x" / "launches.jsonl")
    assert h.last_baseline("k") is None and h.previous_durations("k") == []
    h.append({"key": "k", "result": "ok", "stations": {"A": {"durations": {"weights": 1.0}, "baseline": {"gpu_used_mib": 5}}}})
    h.append({"key": "other", "result": "ok", "stations": {"A": {"baseline": {"gpu_used_mib": 9}}}})
    h.append({"key": "k", "result": "failed", "stations": {"A": {"durations": {"weights": 9.0}, "baseline": None}}})
    (tmp_path / "x" / "launches.jsonl").open("a").write("not json\n")
    assert h.last_baseline("k") == {"A": {"gpu_used_mib": 5}}
    assert h.previous_durations("k") == [{"A": {"weights": 1.0}}]  # failed launches are not a reference
    bad = history.LaunchHistory(tmp_path / "file-not-dir" / "x.jsonl")
    (tmp_path / "file-not-dir").write_text("")
    assert "not saved" in (bad.append({"key": "k"}) or "")


GB300 = GpuReading(1, "GPU-b", "NVIDIA GB300", 0, 256703, 0, 30, 100.0)


def test_a_clean_station_and_each_kind_of_miss():
    clean = stop_verify.judge("A", "glm53", "exited", MemoryReading("A", [GB300]), {"gpu_used_mib": 0, "pids": []},
                              False, "closed", "127.0.0.1:8000")
    assert clean.clean and clean.to_json()["memory"]["judged_against"] == "pre-launch baseline"
    held = GpuReading(1, "GPU-b", "NVIDIA GB300", 236900, 256703, 0, 30, 100.0)
    v = stop_verify.judge("B", "glm53", "running", MemoryReading("B", [held], [ComputeApp("GPU-b", 2346, "python3",
                                                                                          236900)]),
                          None, False)
    assert [f["id"] for f in v.findings] == ["stop-container-running", "stop-compute-process", "stop-memory-leak"]
    assert "no baseline recorded" in v.findings[-1]["cause"] and "sudo kill 2346" in v.findings[1]["fix"]
    port = stop_verify.judge("A", "glm53", "exited", MemoryReading("A", [GB300]), None, False, "open", "h:8000")
    assert [f["id"] for f in port.findings] == ["stop-port-open"] and "sport = :8000" in port.findings[0]["fix"]


def test_a_process_that_was_there_before_the_launch_is_not_ours():
    app = ComputeApp("GPU-b", 4242, "python3", 120000)
    gpu = GpuReading(1, "GPU-b", "NVIDIA GB300", 120000, 256703, 0, 30, 100.0)
    v = stop_verify.judge("B", "glm53", "exited", MemoryReading("B", [gpu], [app]),
                          {"gpu_used_mib": 120000, "pids": [4242]}, False)
    assert v.clean and "already there before the launch: pid 4242" in v.notes


def test_gb10_leak_is_judged_on_host_memory_that_nvidia_smi_does_not_show():
    gb10 = GpuReading(0, "GPU-a", "NVIDIA GB10", None, None, 0, 30, 11.0)
    base = {"host_total_mib": 123904, "host_available_mib": 118704, "pids": []}
    ok = stop_verify.judge("B", "glm53", "exited", MemoryReading("B", [gb10], [], HostMemory(123904, 117000)), base,
                           True)
    assert ok.clean
    leak = stop_verify.judge("B", "glm53", "exited", MemoryReading("B", [gb10], [], HostMemory(123904, 12000)), base,
                             True)
    assert [f["id"] for f in leak.findings] == ["stop-memory-leak"]
    assert "nvidia-smi shows no process" in leak.findings[0]["cause"] and "drop_caches" in leak.findings[0]["fix"]
    unknown = stop_verify.judge("B", "glm53", "exited", MemoryReading("B", error="nvidia-smi: not found"), base, True)
    assert not unknown.clean and unknown.findings[0]["id"] == "stop-unverified"
