"""The kernel log as a diagnosis source through the real SSH path. The simulator's ``worker-dies``
fault kills the worker with -9 and leaves the OOM killer's lines in its kernel log; ``kernel-errors`` leaves
an mlx5 link drop and an Xid. ``dgx-console diagnose --station`` reads them since the container started."""

from __future__ import annotations

import json

from tests.sim.test_hostile_log_sim import run_cli
from tests.waiting import until


async def test_worker_dies_oom_killer_from_the_kernel_log(sim_factory, capsys):
    sim = await sim_factory(n=2, faults=["worker-dies@B", "kernel-errors@B"], running=True, time_scale=0.005)
    last: list = []

    async def diagnosed() -> dict | None:
        last[:] = await run_cli(capsys, "diagnose", "--json", "--config", str(sim.config_path), "--station", "B")
        try:
            data = json.loads(last[1])
        except ValueError:
            return None
        ids = {f["id"] for f in data["findings"]}
        return data if {"worker-died", "host-oom-kill", "gpu-xid"} <= ids else None

    data = await until(diagnosed, what="worker-died, host-oom-kill and gpu-xid on B", timeout=90,
                       detail=lambda: f"{last[1][-800:]} {last[2][-400:]}" if last else "no run")
    by_id = {f["id"]: f for f in data["findings"]}
    assert by_id["host-oom-kill"]["station"] == "B"
    assert by_id["host-oom-kill"]["evidence"][0]["source"] == "B kernel log"
    assert "OOM killer killed it" in by_id["worker-died"]["cause"]
    assert "Xid 119" in by_id["gpu-xid"]["cause"] and "): 119," in by_id["gpu-xid"]["evidence"][0]["text"]
    assert any("Link down" in e["text"] for e in by_id["nccl-ib-error"]["evidence"])
    assert data["sources"][0]["kernel"]["error"] is None and data["sources"][0]["kernel"]["lines"] >= 4
