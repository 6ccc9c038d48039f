"""``copy`` against the simulated stations (in-process SSH server, the simulator's station-to-station
``ssh`` over the rail, the host's rsync): a checkpoint copies and verifies, a rail that is down refuses
the copy (nothing claimed), and it runs once the rail is back; a full destination is refused."""

from __future__ import annotations

import os

import pytest

from console.service.copy import CopyKind, CopyResultKind, plan_copy, run_copy

pytestmark = pytest.mark.skipif(not any(os.access(os.path.join(d, "rsync"), os.X_OK)
                                        for d in os.environ.get("PATH", "").split(os.pathsep)),
                                reason="rsync is not installed")


def _dirs(sim, sub: str = "copytest"):
    md = sim.config.profile.model_dir
    return f"{md}/{sub}", sim.world.fs_dir("A") / md.lstrip("/") / sub, sim.world.fs_dir("B") / md.lstrip("/") / sub


async def _copy(sim, path: str):
    plan, t = await plan_copy(sim.config, CopyKind.CHECKPOINT, path)
    try:
        return await run_copy(plan, t)
    finally:
        await t.close()


async def test_copy_over_the_simulated_rail_verifies_and_resumes_after_the_rail_comes_back(sim_factory):
    sim = await sim_factory()
    path, src, dst = _dirs(sim)
    src.mkdir(parents=True)
    (src / "model-00001.safetensors").write_bytes(os.urandom(2_000_000))
    (src / "config.json").write_text("{}")
    sim.world.set_faults("B", ["link-down"])
    down = await _copy(sim, path)
    assert down.result == CopyResultKind.REFUSED and not dst.exists()
    assert down.detail == "B not reached over the rail (198.18.0.2) from A: ssh: connect to host 198.18.0.2 port 22: No route to host"
    sim.world.set_faults("B", [])
    up = await _copy(sim, path)
    assert up.result == CopyResultKind.OK and up.differences == [] and up.plan.rail_ip == sim.config.station("B").rail_ip
    assert (dst / "model-00001.safetensors").read_bytes() == (src / "model-00001.safetensors").read_bytes()


async def test_a_full_destination_is_refused_in_the_simulator_too(sim_factory):
    sim = await sim_factory()
    path, src, dst = _dirs(sim)
    src.mkdir(parents=True)
    with open(src / "huge.safetensors", "wb") as fh:
        fh.truncate(8 * 10**12)  # sparse; the simulated disk is 4 TB
    plan, t = await plan_copy(sim.config, CopyKind.CHECKPOINT, path)
    await t.close()
    assert any(r.startswith("not enough space on B") for r in plan.refused), plan.refused
    assert not dst.exists()
