"""A simulated run's past is fixed when it starts: ending the oom fault's leftover process after the
OOM does not turn the failed run into a serving one (the demo showed a container "running" and an API
"healthy" under the same run the console had seen fail). The next start finds the memory free."""

from __future__ import annotations

import time

from console.sim import engine as sim_engine
from console.sim.world import World


def test_ending_the_leftover_after_the_oom_leaves_the_run_failed_and_the_next_start_serves(tmp_path):
    w = World.create(str(tmp_path), "glm53-nvfp4-2x-gb300-vllm", 2, ["oom"], 1.0)
    t0 = time.time() - 5000
    for name in reversed(w.names):
        sim_engine.start_container(w, name, at=t0 if name != w.names[0] else t0 + 5)
    failed = {n: sim_engine.container_status(w, n, w.state(n), "glm53")["state"] for n in w.names}
    assert failed == {"A": "exited", "B": "exited"}
    held = [n for n in w.names if any(g.get("held_pid") for g in w.state(n)["gpus"])]
    assert held, "the oom fault holds a GPU somewhere"
    for n in held:  # what the process list's "end" does (the kill shim)
        with w.edit(n) as st:
            for g in st["gpus"]:
                g.pop("held_mib", None)
                g.pop("held_pid", None)
    after = {n: sim_engine.container_status(w, n, w.state(n), "glm53")["state"] for n in w.names}
    assert after == failed  # the past did not change
    assert all(sim_engine.engine_phase(w, n, w.state(n)) == "dead" for n in w.names)
    t1 = time.time() - 3000
    for name in reversed(w.names):
        sim_engine.start_container(w, name, at=t1 if name != w.names[0] else t1 + 5)
    assert sim_engine.engine_phase(w, "A", w.state("A")) == "ready"
    lines = [ln for _, ln in sim_engine.log_lines(w, "A", w.state("A"), "glm53", now=time.time())]
    assert sum("OutOfMemoryError" in ln or "Engine core initialization failed" in ln for ln in lines) >= 1
    assert any("Application startup complete" in ln for ln in lines)
