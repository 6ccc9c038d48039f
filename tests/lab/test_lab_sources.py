"""One source going wrong while the connection is fine, over real OpenSSH
sshd in network namespaces, the console's real ``watch --json --logs`` as a subprocess:

- a hung ``nvidia-smi`` (no output, hangup ignored) makes the station stale *by its GPU samples' age*,
  named, while host memory keeps arriving; no hung tool is left on the station afterwards, and the
  station is live again within seconds of the tool answering;
- a driver failure in the running loop (NVML's error, exit) clears within 5 s of the tool answering;
- a container that dies seconds after its start shows its fatal line on the console that watched.
"""

from __future__ import annotations

import time

import psutil
from watching import Watch

from console.sim.engine import start_container
from console.sim.world import hold_memory
from tests.sim.station_procs import hung_procs, station_procs

DETECT_S = 8.0  # the GPU samples' stale limit (3 s) and the watch interval, with room for a loaded machine
RECOVER_S = 5.0


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def _live_with_gpus(w: Watch, station: str, after: float, timeout: float) -> dict:
    return w.wait(lambda: next((s for s in w.samples if s["station"] == station and s["t"] >= after
                                and s["state"] == "live" and s["gpus"] and not any(g["error"] for g in s["gpus"])),
                               None), timeout, f"{station} live with GPU numbers")


def test_a_hung_nvidia_smi_is_the_gpu_sources_problem_and_leaves_nothing_behind(lab):
    w = Watch(lab.config_path())
    try:
        _live_with_gpus(w, "A", 0, 60)
        _live_with_gpus(w, "B", 0, 60)
        usual = 3  # B's nvidia-smi loops while all is well: the GPUs, their processes, the health rows
        w.wait(lambda: True if len(_alive(station_procs(lab.world, "B"))) == usual else None, 30,
               "B's three nvidia-smi loops")
        t0 = time.time()
        lab.set_faults("B", ["smi-hang"])
        stale = w.wait(lambda: next((s for s in w.samples if s["station"] == "B" and s["t"] >= t0
                                     and s["state"] == "stale" and "gpus" in s["stale_sources"]), None),
                       30, "B stale by its GPU samples")
        assert stale["t"] - t0 <= DETECT_S, stale["t"] - t0
        assert "nvidia-smi not answering" in (stale["error"] or "") and "SSH fine" in stale["error"], stale["error"]
        # the other sources go on: host memory keeps arriving while the GPU tool hangs
        later = w.wait(lambda: next((s for s in w.samples if s["station"] == "B" and s["t"] >= stale["t"] + 6), None),
                       30, "B six seconds into the hang")
        assert later["state"] == "stale" and later["ages_s"]["hostmem"] is not None
        assert later["ages_s"]["hostmem"] < 5.0, later["ages_s"]
        assert "hostmem" not in later["stale_sources"]
        a_during = w.between("A", t0, later["t"])
        assert a_during and all(s["state"] == "live" for s in a_during)  # the other station undisturbed
        hung = _alive(hung_procs(lab.world, "B"))
        assert 0 < len(hung) <= usual, (hung, usual)  # the GPU streams' own tools, never one more per retry
        t1 = time.time()
        lab.set_faults("B", [])
        back = _live_with_gpus(w, "B", t1, 30)
        assert back["t"] - t1 <= RECOVER_S, back["t"] - t1
        # nothing piled up: B runs no more nvidia-smi than it did before the hang
        w.wait(lambda: True if len(_alive(station_procs(lab.world, "B"))) <= usual else None, 15,
               f"B back to its {usual} nvidia-smi processes")
    finally:
        lab.set_faults("B", [])
        w.stop()


def test_a_driver_failure_in_the_running_loop_clears_within_seconds(lab):
    w = Watch(lab.config_path())
    try:
        _live_with_gpus(w, "B", 0, 60)
        t0 = time.time()
        lab.set_faults("B", ["smi-fail"])
        failed = w.wait(lambda: next((s for s in w.samples if s["station"] == "B" and s["t"] >= t0 and s["error"]
                                      and "NVML" in s["error"]), None), 30, "B's NVML failure")
        assert failed["t"] - t0 <= DETECT_S
        t1 = time.time()
        lab.set_faults("B", [])
        back = _live_with_gpus(w, "B", t1, 40)
        assert back["t"] - t1 <= RECOVER_S, back["t"] - t1  # was 20-30 s: the stream's growing restart delay
    finally:
        lab.set_faults("B", [])
        w.stop()


def test_a_container_that_dies_seconds_after_its_start_shows_its_reason(lab):
    with lab.world.edit("B") as st:  # the oom fault's cause: a leftover process holding GPU memory
        hold_memory(lab.world.profile, st, 2)
    w = Watch(lab.config_path())
    try:
        _live_with_gpus(w, "B", 0, 60)
        time.sleep(4)  # the console is watching: B's docker events have looked at least once
        t0 = time.time()
        start_container(lab.world, "B", at=time.time() - 60)  # it started and died (OOM) since the last look
        got = w.wait(lambda: next((s for s in w.samples if s["station"] == "B" and s["t"] >= t0
                                   and s["container"]["state"] == "exited" and s["engine"]["phase"] == "failed"),
                                  None), 30, "B exited with its engine failed")
        assert got["container"]["exit_code"] == 1 and "OutOfMemoryError" in (got["engine"]["fatal"] or "")
        w.wait(lambda: True if any("OutOfMemoryError" in ln for ln in w.logs.get("B", [])) else None, 30,
               "B's OOM line in the watched log")
    finally:
        lab.set_faults("B", [])
        w.stop()
