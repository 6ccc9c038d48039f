"""What ``watch`` and ``status`` print, from a StationState (console/station/snapshot.py): the
keys, their order and their values are contracts (DESIGN.md), so they are spelled out here."""

from __future__ import annotations

import json

from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress
from console.probes.meminfo import HostMemory
from console.probes.nvidia_smi import ComputeApp, GpuReading
from console.station.messages import (
    AppsSample,
    ConnectionState,
    ContainerUpdate,
    EngineUpdate,
    GpuSample,
    HostMemSample,
)
from console.station.snapshot import status_dict, watch_json, watch_line
from console.station.state import StationState

LOST = GpuReading(0, "", "", None, None, None, None, None, error="Unable to determine the device handle for GPU0",
                  bus_id="00000000:01:00.0")
GOOD = GpuReading(1, "GPU-s1", "NVIDIA GB300", 236902, 256703, 40, 48, 310.0)
GB10 = GpuReading(0, "GPU-x", "NVIDIA GB10", None, None, 3, 35, 11.2)
GPU_KEYS = ["index", "name", "uuid", "memory_used_mib", "memory_total_mib", "util_pct", "temp_c", "power_w", "error"]


def live_b() -> StationState:
    s = StationState("B", rank=1, head=False, container="glm53")
    s.apply(ConnectionState("B", "live", last_sample_at=99.0))
    s.apply(GpuSample("B", [LOST, GOOD], 99.5))
    s.apply(ContainerUpdate("B", ContainerInfo("glm53", "running", started_at="2025-12-01T11:55:00Z"), at=90.0))
    s.apply(EngineUpdate("B", EngineProgress("loading", load_pct=60, transport="gdrdma"), at=95.0))
    return s


def test_watch_json_of_a_live_station():
    obj = watch_json(live_b(), 100.0)
    assert list(obj) == ["t", "station", "state", "sample_age_s", "gpus", "container", "engine", "error",
                         "ages_s", "gpus_age_s", "stale_sources",  # the contract's keys first; ages added
                         "rails", "xids", "kernel_log_error"]  # additions
    assert obj["t"] == 100.0 and obj["station"] == "B" and obj["state"] == "live" and obj["sample_age_s"] == 0.5
    assert [list(g) for g in obj["gpus"]] == [[*GPU_KEYS, "health"]] * 2  # health added
    assert obj["gpus"][0]["name"] is None and obj["gpus"][0]["uuid"] is None and obj["gpus"][0]["error"].startswith("Unable")
    assert obj["gpus"][1] == {"index": 1, "name": "NVIDIA GB300", "uuid": "GPU-s1", "memory_used_mib": 236902,
                              "memory_total_mib": 256703, "util_pct": 40, "temp_c": 48, "power_w": 310.0, "error": None,
                              "health": None}
    assert obj["container"] == {"name": "glm53", "state": "running", "exit_code": None,
                                "started_at": "2025-12-01T11:55:00Z"}
    assert obj["engine"] == {"phase": "loading", "load_pct": 60, "transport": "gdrdma", "fatal": None,
                             "fatal_lines": []}
    assert obj["error"] is None
    assert json.loads(json.dumps(obj))["state"] == "live"


def test_watch_json_of_a_station_never_reached():
    s = StationState("C", container="glm53")
    s.apply(ConnectionState("C", "unreachable", "no answer from 10.0.0.3:22"))
    obj = watch_json(s, 5.0)
    assert obj["sample_age_s"] is None and obj["gpus"] == [] and obj["error"] == "no answer from 10.0.0.3:22"
    assert obj["container"] == {"name": "glm53", "state": None, "exit_code": None, "started_at": None}
    assert obj["engine"] == {"phase": None, "load_pct": None, "transport": None, "fatal": None,
                             "fatal_lines": None}  # not read: null, never an empty list


def test_watch_json_error_is_nvidia_smis_while_live():
    s = live_b()
    s.apply(GpuSample("B", [], 100.0, error="NVML: Driver/library version mismatch"))
    assert watch_json(s, 100.0)["error"] == "NVML: Driver/library version mismatch"
    assert len(watch_json(s, 100.0)["gpus"]) == 2  # the last readings stay


def test_watch_line():
    line = watch_line(live_b(), 100.0)
    assert line == ("B    live              age   0.5 s  GPU0 NO READING  GPU1 231.3/250.7 GiB 40%  "
                    "container running  engine loading weights 60%  NCCL GPUDirect RDMA")
    s = StationState("C")
    s.apply(ConnectionState("C", "stale", "no sample for 4 s"))
    assert watch_line(s, 1.0) == "C    stale             age     -  (no sample for 4 s)"
    gb10 = StationState("D")
    gb10.apply(GpuSample("D", [GB10], 1.0, error=None))
    gb10.apply(GpuSample("D", [], 1.5, error="nvidia-smi: failed"))
    assert watch_line(gb10, 2.0) == "D    connecting        age   0.5 s  GPU0 n/a/n/a GiB 3%  (nvidia-smi: failed)"


STATUS_KEYS = ["name", "rank", "reachable", "error", "gpus", "host_memory", "container", "engine",
               "rails"]  # rails added


def test_status_of_a_reachable_station():
    s = live_b()
    s.apply(HostMemSample("B", HostMemory(507904, 482000), 99.0))
    d = status_dict(s)
    assert list(d) == STATUS_KEYS
    assert d["reachable"] is True and d["rank"] == 1
    assert d["error"] == "GPU0: Unable to determine the device handle for GPU0"
    assert all("process_memory_mib" not in g for g in d["gpus"])  # no unified GPU, no processes read
    assert d["host_memory"] == {"total_mib": 507904, "available_mib": 482000}
    assert list(d["container"]) == ["name", "state", "started_at", "exit_code", "image", "image_id"]
    assert d["engine"] == {"phase": "loading", "load_pct": 60, "transport": "gdrdma", "fatal": None,
                             "fatal_lines": []}


def test_status_of_an_unreachable_station_is_its_connections_words():
    s = StationState("C", rank=2, container="glm53")
    s.apply(ConnectionState("C", "unreachable", "C: no answer within 12 s"))
    assert status_dict(s) == {"name": "C", "rank": 2, "reachable": False, "error": "C: no answer within 12 s",
                              "gpus": [], "host_memory": None, "container": {"name": "glm53", "state": None},
                              "engine": None, "rails": []}


def test_status_of_gb10_counts_the_processes_and_joins_every_sources_error():
    s = StationState("A", container="glm53")
    s.apply(ConnectionState("A", "live"))
    s.apply(GpuSample("A", [GB10, GpuReading(1, "", "", None, None, None, None, None, error="GPU is lost")], 1.0))
    s.apply(AppsSample("A", [ComputeApp("GPU-x", 7, "python", 92672), ComputeApp("GPU-x", 8, "p", 100)], 1.0))
    s.apply(HostMemSample("A", None, 1.0, error="meminfo: no MemTotal"))
    d = status_dict(s)
    named, lost = d["gpus"]
    assert named["process_memory_mib"] == 92772 and isinstance(named["process_memory_mib"], int)
    assert list(named) == [*GPU_KEYS, "process_memory_mib", "health"] and "process_memory_mib" not in lost
    assert d["error"] == "GPU1: GPU is lost; meminfo: no MemTotal" and d["host_memory"] is None
    s2 = StationState("A")
    s2.apply(ConnectionState("A", "live"))
    s2.apply(GpuSample("A", [GB10], 1.0))
    s2.apply(AppsSample("A", [], 1.0))
    assert status_dict(s2)["gpus"][0]["process_memory_mib"] == 0


def test_status_failure_after_the_station_answered_replaces_the_other_errors():
    s = StationState("A", container="glm53")
    s.apply(ConnectionState("A", "live"))
    s.apply(GpuSample("A", [], 1.0, error="nvidia-smi failed: boom"))
    d = status_dict(s, "docker inspect: not JSON state: 'x'")
    assert d["reachable"] is True and d["error"] == "docker inspect: not JSON state: 'x'"
    assert d["container"] == {"name": "glm53", "state": None}
    assert status_dict(s)["error"] == "nvidia-smi failed: boom"


def test_watch_json_says_which_source_is_late_and_every_sources_age():
    """A hung nvidia-smi while the rest answers: ``stale``, the why names the GPU samples
    and their age; ``ages_s`` has every source's own age; only the late source is stale."""
    s = live_b()
    s.apply(HostMemSample("B", HostMemory(507904, 400000), 111.0))
    s.apply(ConnectionState("B", "stale", "nvidia-smi not answering; SSH fine", last_sample_at=111.0, late="gpus"))
    obj = watch_json(s, 111.5)
    assert obj["state"] == "stale" and obj["sample_age_s"] == 12.0
    assert obj["error"] == "GPU samples stale 12 s: nvidia-smi not answering; SSH fine"
    assert obj["ages_s"] == {"gpus": 12.0, "apps": None, "hostmem": 0.5, "container": 21.5, "engine": 16.5,
                             "logs": None, "serving": None, "health": None, "rails": None}
    assert obj["gpus_age_s"] == 12.0 and obj["stale_sources"] == ["gpus"]
    assert "GPU samples stale 12 s: nvidia-smi not answering; SSH fine" in watch_line(s, 111.5)


def failed_b(lines: tuple[str, ...]) -> StationState:
    """B after a failed run whose log gave ``lines`` as its fatal lines (the first is ``fatal``)."""
    s = live_b()
    s.apply(EngineUpdate("B", EngineProgress("failed", transport="gdrdma", fatal=lines[0], fatal_lines=lines), at=96.0))
    return s


THREE = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (rank 1)",
         "RuntimeError: NCCL error: remote process exited or there was a network error\x1b[31m",
         "Engine core proc EngineCore_0 died unexpectedly,\nshutting down client.")


def test_every_fatal_line_beside_the_first_in_watch_and_status_json():
    """``fatal`` stays the first line (the contract); ``fatal_lines`` carries all three, sanitized: the
    escape sequence gone, the newline a space."""
    s = failed_b(THREE)
    for eng in (watch_json(s, 100.0)["engine"], status_dict(s)["engine"]):
        assert eng["fatal"] == THREE[0]
        assert eng["fatal_lines"] == [THREE[0], "RuntimeError: NCCL error: remote process exited or there was a "
                                      "network error", "Engine core proc EngineCore_0 died unexpectedly, shutting "
                                      "down client."]
        assert json.loads(json.dumps(eng))["fatal_lines"][2].endswith("client.")


def test_status_plain_view_lists_every_fatal_line_each_on_its_line_and_caps_them():
    from console.commands.status import FATAL_SHOWN, engine_words, fatal_rows

    eng = status_dict(failed_b(THREE))["engine"]
    rows = fatal_rows(eng)
    assert engine_words(eng, with_fatal=False) == "failed, NCCL over GPUDirect RDMA"
    assert [r.split("fatal: ", 1)[1][:24] for r in rows] == ["torch.OutOfMemoryError: ", "RuntimeError: NCCL error",
                                                              "Engine core proc EngineC"]
    assert all("\n" not in r and "\x1b" not in r for r in rows)
    many = dict(eng, fatal_lines=[f"line {i} " + "x" * 300 for i in range(FATAL_SHOWN + 3)])
    rows = fatal_rows(many)
    assert len(rows) == FATAL_SHOWN + 1 and rows[-1] == "      (+3 more fatal lines: dgx-console diagnose)"
    assert rows[0].endswith("chars]") and len(rows[0]) < 200  # clipped, with its mark
    assert fatal_rows(dict(eng, fatal_lines=[], fatal="only the first")) == ["      fatal: only the first"]
