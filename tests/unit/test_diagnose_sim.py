"""Cross-check with the simulated stations: each injected fault is named first in the two-station
diagnosis (the simulator's logs follow engines.md; recognition itself is proven by the public corpus)."""

from __future__ import annotations

import time

import pytest

from console.diagnosis import Diagnoser, has_problems

world_mod = pytest.importorskip("console.sim.world")
engine_mod = pytest.importorskip("console.sim.engine")
if not hasattr(world_mod.World, "create") or not all(hasattr(engine_mod, a) for a in ("log_lines", "start_container")):
    pytest.skip("simulator API changed", allow_module_level=True)

VLLM = "glm53-nvfp4-2x-gb300-vllm"
SGLANG = "glm53-flash-nvfp4-2x-gb10-sglang"


def diagnose_world(tmp_path, profile: str, faults: list[str]):
    w = world_mod.World.create(str(tmp_path), profile, 2, faults, 1.0)
    t0 = time.time() - 5000  # long enough ago for every timeline to have played out
    for name in reversed(w.names):  # workers first, head last
        engine_mod.start_container(w, name, at=t0 if name != w.names[0] else t0 + 5)
    d = Diagnoser(gpudirect_expected=w.profile.link.gpudirect)
    for name in w.names:
        d.feed(name, [line for _, line in engine_mod.log_lines(w, name, w.state(name), "glm53", now=time.time())])
    d.finish()
    return w, d.ranked()


@pytest.mark.parametrize("profile,fault,expected,where", [
    (VLLM, "oom", "cuda-oom", 1),
    (VLLM, "kv-too-small", "kv-cache-too-small", 0),
    (VLLM, "worker-dies", "worker-died", 1),
    (VLLM, "socket-fallback", "nccl-ib-missing", 1),
    (VLLM, "nccl-timeout", "nccl-timeout", 0),
    (SGLANG, "oom", "cuda-oom", 1),
    (SGLANG, "socket-fallback", "nccl-ib-missing", 1),
])
def test_fault_is_named_first(tmp_path, profile, fault, expected, where):
    w, findings = diagnose_world(tmp_path, profile, [fault])
    assert findings[0].id == expected and findings[0].station == w.names[where], \
        [(f.id, f.station) for f in findings]


@pytest.mark.parametrize("profile", [VLLM, SGLANG])
def test_healthy_simulated_launch_has_no_problem(tmp_path, profile):
    _, findings = diagnose_world(tmp_path, profile, [])
    assert not has_problems(findings), [(f.id, f.severity) for f in findings]
