"""The NCCL workbench in the lab: real sshd in network namespaces, real ip/ping between them.

Real here: the links rung (real ping/ip on the veth rail), the addresses rung (the namespaces' real
interfaces and routes: the management link is the SSH side), the MTU half of the environment diff
(real ``ip link``). Through files the lab writes: the kernel log (``fs/var/log/kern.log`` read by
the journalctl shim) and the RDMA hardware counters (``hw_counters`` read by the rdma shim).
Simulated behind the real sshd: docker inspect, show_gids, py-spy.
"""

from __future__ import annotations

import time

import pytest

from console.doctor import DoctorOptions, run_doctor
from console.sim.engine import start_container
from console.sim.launch import launch_args

OPTS = DoctorOptions(counter_interval_s=1.0, rdma_latency=False)


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def start(lab, master: str | None = None) -> None:
    """Both containers running with the launch command (the master address replaced when asked)."""
    now = time.time()
    for name in ("B", "A"):
        args = launch_args(lab.world, name)
        if master is not None:
            args[args.index("--master-addr") + 1] = master
        start_container(lab.world, name, at=now, args=args)


def one(report, rung, station, text=""):
    hits = [r for r in report.of(rung) if r.station == station and text in r.summary]
    assert hits, [(r.station, r.status, r.summary) for r in report.of(rung)]
    return hits[0]


async def test_links_env_and_addresses_over_real_sshd(lab):
    start(lab)
    rep = await run_doctor(lab.config(), rungs=["links", "env", "addresses"], options=OPTS)
    bad = [(r.id, r.station, r.summary) for r in rep.results if r.status == "fail"]
    assert not bad
    ping = one(rep, "links", "A->B", "jumbo ping mlx5_0")
    assert ping.status == "pass" and "8972" in ping.evidence[0] and "bytes from" in ping.evidence[0]
    a = one(rep, "addresses", "A")
    assert a.status == "pass" and f"SSH host {lab.mgmt['A']} (mgmt0)" in a.evidence[0]
    assert f"head address (--master-addr) {lab.rail['A']} = A's enp1s0f1np1" in a.summary
    assert "mgmt0" in a.evidence[1]  # the real `ip -o -4 addr show` of the namespace
    assert one(rep, "env", "A,B", "rail MTU 9000 at both ends").status == "pass"


async def test_management_address_as_master_and_mtu_difference_are_real(lab):
    start(lab, master=lab.mgmt["A"])
    lab.set_mtu("B", 1500)
    rep = await run_doctor(lab.config(), rungs=["env", "addresses"], options=OPTS)
    hit = one(rep, "addresses", "B", "management address")
    assert hit.status == "fail" and hit.cause
    assert f"--master-addr {lab.mgmt['A']} is A's management address (mgmt0)" in hit.summary
    mtu = one(rep, "env", "A,B", "rail MTU differs")
    assert mtu.status == "fail" and "A 9000, B 1500" in mtu.summary and "mtu 1500" in "".join(mtu.evidence)
    assert rep.cause is not None and rep.cause.id == "env"


async def test_hang_rung_reads_the_labs_kernel_log_and_counters(lab):
    start(lab)
    kern = lab.world.station_dir("B") / "fs" / "var/log/kern.log"
    kern.parent.mkdir(parents=True, exist_ok=True)
    kern.write_text(f"{time.time() + 1:.3f} mlx5_core 0000:01:00.1 enp1s0f1np1: Link down\n"
                    f"{time.time() + 2:.3f} mlx5_core 0000:01:00.1 enp1s0f1np1: Link up\n")
    hw = lab.world.station_dir("B") / "fs" / "sys/class/infiniband/mlx5_0/ports/1/hw_counters"
    hw.mkdir(parents=True, exist_ok=True)
    (hw / "out_of_sequence").write_text("7\n")

    def on_progress(rung: str, text: str) -> None:
        if rung == "hang" and "first sample taken" in text:  # between the two reads
            (hw / "out_of_sequence").write_text("19\n")

    rep = await run_doctor(lab.config(), rungs=["hang"], options=OPTS, on_progress=on_progress)
    k = one(rep, "hang", "B", "kernel log")
    assert k.status == "fail" and "link-down" in k.summary and "Link down" in k.evidence[0]
    c = one(rep, "hang", "B", "retry counters rising")
    assert c.status == "fail" and "mlx5_0 out_of_sequence +12" in c.summary
    assert one(rep, "hang", "A", "kernel log clean").status == "pass"
