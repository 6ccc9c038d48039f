"""Severity from meaning (retries that succeed are no finding), Ray's own words, the kernel log as a
source, the most specific headline for an error no entry explains, and the leftovers of the earlier held-out set.

The lines are the engines' and the tools' own wordings (vLLM, Ray, huggingface_hub, NCCL, the kernel); the
public-report excerpts for each new id are in tests/fixtures/logs (test_diagnose_corpus.py)."""

from __future__ import annotations

from console.diagnosis import Diagnoser, has_problems
from console.diagnosis.engine import diagnose_lines
from console.diagnosis.text import message_of

HUB_RETRY = [
    "WARNING:huggingface_hub.utils._http:'(MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co', port=443): "
    "Max retries exceeded with url: /zai-org/GLM-5.3/resolve/main/config.json (Caused by ConnectTimeoutError("
    "<urllib3.connection.HTTPSConnection object at 0x7f>, 'Connection to huggingface.co timed out. (connect "
    "timeout=10)'))\"), '(Request ID: 8ba9b399)')' thrown while requesting HEAD "
    "https://huggingface.co/zai-org/GLM-5.3/resolve/main/config.json",
    "WARNING:huggingface_hub.utils._http:Retrying in 1s [Retry 1/5].",
]
LOADING = ["(Worker_TP0 pid=412) INFO 11-30 14:05:40 [default_loader.py:262] Loading safetensors checkpoint shards:"
           "   0% Completed | 0/40 [00:00<?, ?it/s]"]
GCS_RETRY = ["[2025-07-23 10:05:49,679 W 51000 51000] gcs_rpc_client.h:151: Failed to connect to GCS at address "
             "10.0.0.1:6379 within 5 seconds."]
RAY_UP = ["2025-07-23 10:06:02,114\tINFO scripts.py:1047 -- Ray runtime started."]


def ids(findings) -> list[str]:
    return [f.id for f in findings]


def test_hub_retries_that_lead_to_a_load_are_no_finding():
    """Fails before: a hub retry at WARNING level was no finding at all, and now it is one unless the weights
    then load (look ahead in the same batch, and in a later batch)."""
    assert "hub-unreachable" not in ids(diagnose_lines("a", HUB_RETRY + LOADING))
    d = Diagnoser()
    d.feed("a", HUB_RETRY)
    assert ids(d.ranked()) == ["hub-unreachable"] and d.ranked()[0].severity == "warning"
    assert d.feed("a", LOADING)  # the load came: the retries succeeded
    assert "hub-unreachable" not in ids(d.ranked())


def test_hub_retries_with_no_load_are_the_finding():
    findings = diagnose_lines("a", HUB_RETRY * 3)
    assert ids(findings)[:1] == ["hub-unreachable"] and has_problems(findings)


def test_a_final_hub_error_is_not_cleared_by_a_later_load():
    lines = ["OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the "
             "cached files and it looks like zai-org/GLM-5.3 is not the path to a directory containing a file named "
             "config.json."] + HUB_RETRY + LOADING
    assert ids(diagnose_lines("a", lines))[:1] == ["hub-unreachable"]


def test_ray_glog_w_retry_then_ray_up_is_no_finding():
    assert "ray-head-unreachable" not in ids(diagnose_lines("w", GCS_RETRY + RAY_UP))
    stuck = diagnose_lines("w", GCS_RETRY * 4)
    assert ids(stuck) == ["ray-head-unreachable"] and stuck[0].severity == "warning"


def test_ray_prefixes_are_not_the_message():
    assert message_of("(raylet, ip=10.0.0.2) [2024-01-01 10:00:00,123 E 12 34] node_manager.cc:100: boom") == "boom"
    assert message_of("(pid=123, ip=1.2.3.4) x") == "x"
    assert message_of("(autoscaler +1m) Warning: y") == "Warning: y"
    assert message_of("2022-03-30 17:22:35,502 WARNING node.py:1465 -- Unable to connect") == "Unable to connect"


def test_ray_object_store_on_tmp_is_shm_too_small_and_a_large_shm_is_not():
    small = ("(raylet) 2025-01-14 03:08:29,081\tWARNING services.py:2022 -- WARNING: The object store is using /tmp "
             "instead of /dev/shm because /dev/shm has only 67108864 bytes available. This will harm performance!")
    found = diagnose_lines("a", [small])
    assert ids(found) == ["shm-too-small"] and "64 MiB" in found[0].cause
    large = small.replace("67108864", "46198665216")
    assert not has_problems(diagnose_lines("a", [large]))


def test_placement_group_wordings_are_ray_resources():
    """Newer vLLM gives up with 'Cannot provide a placement group'; Ray's autoscaler warns it cannot schedule
    a GPU bundle: both read as unrecognised (or nothing) before."""
    newer = ("ValueError: Cannot provide a placement group of placement_group_specs=[{'GPU': 1.0, "
             "'node:10.0.0.1': 0.001}, {'GPU': 1.0}] within 1800 seconds. See `ray status` and `ray list nodes` to "
             "make sure the cluster has enough resources.")
    f = diagnose_lines("head", [newer])
    assert ids(f)[:1] == ["ray-resources"] and f[0].severity == "error"
    bundle = ("(autoscaler +1m2s) Warning: The following resource request cannot be scheduled right now: "
              "{'GPU': 1.0, 'node:10.0.0.2': 0.001}. This is likely due to all cluster resources being claimed by "
              "actors. Consider creating fewer actors or adding more nodes to this Ray cluster.")
    assert ids(diagnose_lines("head", [bundle]))[:1] == ["ray-resources"]


def test_ib_port_error_inside_a_vllm_tp_log_is_nccl_ib_error():
    line = ("(RayWorkerWrapper pid=5121, ip=10.0.0.2) spark-b:5121:5380 [0] NCCL WARN NET/IB : mlx5_0:1 Got async "
            "error event: port error")
    f = diagnose_lines("spark-b", [line])
    assert ids(f)[:1] == ["nccl-ib-error"] and "port error" in f[0].cause


def test_single_node_verbs_message_is_no_finding():
    """One node (every channel P2P/SHM) needs no verbs: the message must not raise nccl-ib-missing."""
    lines = [
        "node1:391:512 [0] NCCL INFO Failed to open libibverbs.so[.1]",
        "node1:391:512 [0] NCCL INFO NET/Socket : Using [0]eth0:172.17.0.2<0>",
        "node1:391:512 [0] NCCL INFO Using network Socket",
        "node1:391:512 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
        "node1:391:512 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC",
        "node1:391:512 [0] NCCL INFO comm 0x5 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
    ]
    assert not has_problems(diagnose_lines("node1", lines))


def test_headline_is_the_specific_error_line_not_the_wrapper():
    """Fails before: the first candidate ('WorkerProc failed to start.') was the headline."""
    lines = [
        "(EngineCore_DP0 pid=120905) ERROR 03-02 19:49:00 [multiproc_executor.py:783] WorkerProc failed to start.",
        "(EngineCore_DP0 pid=120905) ERROR 03-02 19:49:00 [multiproc_executor.py:783] Traceback (most recent call "
        "last):",
        "(EngineCore_DP0 pid=120905) ERROR 03-02 19:49:00 [multiproc_executor.py:783]   File \"/x/worker.py\", line "
        "754, in worker_main",
        "(EngineCore_DP0 pid=120905) ERROR 03-02 19:49:00 [multiproc_executor.py:783] torch.distributed."
        "DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1727, unhandled cuda error (run with NCCL_DEBUG=INFO "
        "for details), NCCL version 2.21.5",
    ]
    f = [x for x in diagnose_lines("a", lines) if x.id == "unrecognised-error"][0]
    assert "unhandled cuda error" in f.cause and "WorkerProc failed to start" not in f.cause
    assert "unhandled cuda error" in f.evidence[0].text


def test_kernel_lines_are_findings_of_the_station():
    """Fails before: no kernel source. Xid (decoded, its raw code in the evidence), an mlx5 link drop, a failed
    memory registration and the OOM killer; worker-died's guess becomes the OOM killer's evidence."""
    d = Diagnoser()
    d.feed("spark-b", ["(APIServer pid=1) ERROR 11-30 14:05:32 [multiproc_executor.py:229] Worker proc VllmWorker-0 "
                       "died unexpectedly (exit code: -9), shutting down executor."])
    d.feed_kernel("spark-b", [
        "Nov 30 14:05:00 spark-b kernel: [ 1.0] Linux version 6.11.0-1016-nvidia",  # not relevant: dropped
        "Nov 30 14:05:28 spark-b kernel: [68185.87] mlx5_core 0000:01:00.1 enp1s0f1np1: Link down",
        "Nov 30 14:05:29 spark-b kernel: [68186.01] infiniband mlx5_0: create_mkey_warn:158:(pid 0): async reg mr "
        "failed. status -121",
        "Nov 30 14:05:30 spark-b kernel: [68187.12] Out of memory: Killed process 412 (VLLM::Worker_TP) "
        "total-vm:131402388kB, anon-rss:118214712kB, file-rss:0kB, shmem-rss:0kB",
        "Nov 30 14:05:31 spark-b kernel: [68188.40] NVRM: Xid (PCI:0000:01:00): 119, pid=2757, name=VLLM::Worker_TP1, "
        "Timeout after 6s of waiting for RPC response from GPU0 GSP!",
    ])
    found = {f.id: f for f in d.ranked()}
    assert {"gpu-xid", "nccl-ib-error", "rdma-memreg-failed", "host-oom-kill", "worker-died"} <= set(found)
    for fid in ("gpu-xid", "nccl-ib-error", "rdma-memreg-failed", "host-oom-kill"):
        assert found[fid].station == "spark-b"
        assert found[fid].evidence[0].source == "spark-b kernel log" and found[fid].evidence[0].line is None
    assert "Xid 119" in found["gpu-xid"].cause and "): 119," in found["gpu-xid"].evidence[0].text
    assert "112.7 GiB" in found["host-oom-kill"].cause
    assert "OOM killer killed it" in found["worker-died"].cause
    assert not any(f.id == "unrecognised-error" for f in d.ranked())


def _events(*lines: str) -> list:
    from console.probes.kernel_log import parse_kernel_line

    return [ev for ln in lines if (ev := parse_kernel_line(ln)) is not None]


LINK_DOWN = "2023-11-14T22:13:25+0000 spark-b kernel: mlx5_core 0000:01:00.1 enp1s0f1np1: Link down"
XID_79 = ("2023-11-14T22:13:28+0000 spark-b kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=2757, name=x, "
          "GPU has fallen off the bus.")
BEFORE = "2023-11-14T20:00:00+0000 spark-b kernel: mlx5_core 0000:01:00.1 enp1s0f1np1: Link down"


def _station_running_since(started_at: str | None):
    from console.probes.docker import ContainerInfo
    from console.station.messages import ContainerUpdate
    from console.station.state import StationState

    st = StationState("B")
    if started_at is not None:
        st.apply(ContainerUpdate("B", ContainerInfo("glm53", "running", started_at=started_at), at=1.0))
    return st


def _read(st, *lines: str) -> list:
    from console.station.messages import KernelEvents

    st.apply(KernelEvents("B", _events(*lines), 2.0))
    return st.run_kernel_new()


def test_the_station_passes_each_kernel_event_of_the_run_once():
    """The health channel's follower reads an hour back when it (re)starts: the diagnosis gets each
    event of the container's run once, none from before the run; the Xids kept for the health pane
    follow the same one rule."""
    st = _station_running_since("2023-11-14T22:13:20Z")
    assert [e.text for e in _read(st, BEFORE, LINK_DOWN)] == [_events(LINK_DOWN)[0].text]
    assert _read(st, LINK_DOWN) == []  # read again after a restart: not fed twice
    assert [e.xid for e in _read(st, LINK_DOWN, XID_79)] == [79]
    assert _read(st, XID_79) == [] and [x.code for x in st.run_xids()] == [79]


def test_nothing_is_fed_while_no_container_runs_but_the_health_pane_keeps_the_xids():
    st = _station_running_since(None)
    assert _read(st, LINK_DOWN, XID_79) == []
    assert [x.code for x in st.run_xids()] == [79]


def test_engine_dead_names_the_error_before_it():
    """'The real cause is earlier': when the engine died after an error no entry explains, the top finding's
    cause quotes that error (the wrapper alone was the first thing read before)."""
    lines = [
        "[2025-03-04 10:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1999, in run_scheduler_process',
        "TypeError: '>' not supported between instances of 'NoneType' and 'int'",
    ]
    found = diagnose_lines("a", lines)
    assert found[0].id == "engine-dead" and "TypeError: '>' not supported" in found[0].cause
