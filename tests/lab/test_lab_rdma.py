"""validate-rdma through real sshd: the perftest server is a long-lived session on B whose pid the
console kills; the rail's real carrier decides whether the client can connect."""

from __future__ import annotations

import subprocess

from console.station.rdma import validate_rdma


def alive_in_ns(lab, name: str, pid: int) -> bool:
    r = subprocess.run(["ip", "netns", "pids", lab.ns[name]], capture_output=True, text=True)
    return str(pid) in r.stdout.split()


async def test_healthy_lab_rdma_validation_and_cleanup(lab):
    runs = await validate_rdma(lab.config(), gpu=False)
    # both rails, both ways (A->B and B->A, as the workbench tests them)
    assert sorted((r.rail, r.client, r.server) for r in runs) == [
        ("mlx5_0", "A", "B"), ("mlx5_0", "B", "A"), ("mlx5_1", "A", "B"), ("mlx5_1", "B", "A")]
    assert all(r.status == "pass" for r in runs)
    for r in runs:  # every perftest server the console started is gone, on whichever station it ran
        assert r.server_pid and not alive_in_ns(lab, r.server, r.server_pid)


async def test_lab_rail_down_connect_error_and_server_killed(lab):
    lab.rail_down("A")
    runs = await validate_rdma(lab.config(), gpu=False)
    first = runs[0]
    assert first.status == "fail" and first.id == "rdma-port-down"  # the real carrier is gone
    conn = [r for r in runs if r.id == "rdma-connect"]
    assert conn and "Couldn't connect to" in conn[0].summary  # the OOB address is on the cut rail
    assert all(r.server_pid and not alive_in_ns(lab, r.server, r.server_pid) for r in conn)
