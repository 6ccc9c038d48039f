"""The demo's timeline mixed two clocks: the simulated engine logged its phases in
engine seconds ("Loading weights took 239.40 seconds") while the console's start-up clock beside them
counts the wall seconds the demo took (time scale 0.1: 24 s). The engine's logged durations are the
wall seconds they took, so one line never reads two clocks."""

from __future__ import annotations

import re
import time

from console.sim.engine import container_status, start_container
from console.sim.world import World


def test_logged_durations_are_the_wall_seconds_they_took(tmp_path):
    world = World.create(tmp_path / "w", "glm53-nvfp4-2x-gb300-vllm", 2, [], 0.1)
    t0 = time.time()
    start_container(world, "B", at=t0)
    start_container(world, "A", at=t0 + 0.1)
    lines = container_status(world, "A", world.state("A"), "glm53", t0 + 10_000)["timeline"].lines
    start = next(ts for ts, ln in lines if "Loading safetensors checkpoint shards:   0%" in ln)
    end, said = next((ts, float(m.group(1))) for ts, ln in lines
                     if (m := re.search(r"Model loading took [\d.]+ GiB memory and ([\d.]+) seconds", ln)))
    assert abs(said - (end - 1.5 * 0.1 - start)) < 0.5, (said, end - start)
    graphs = next(int(m.group(1)) for _ts, ln in lines if (m := re.search(r"finished in (\d+) secs", ln)))
    assert graphs <= 20  # a tenth of the engine's ~100 s of capture (it said 100 before)
