"""The workbench's NCCL test buffers on the Spark profile (GB10, unified memory) are sized by the
stations' MemAvailable: room for a 400 MiB buffer over the floor gives ``-e 256M``, no room over the
floor is no test at all (the box could lock up), and the evidence says which station sized it."""

from __future__ import annotations

from console.doctor.buffers import NCCL_OVERHEAD_MIB, nccl_cap
from console.doctor.runner import DoctorOptions, run_doctor
from console.sim.engine import write_meminfo
from console.sim.world import BASE_HOST_USED_MIB

SPARK = "glm53-flash-nvfp4-2x-gb10-sglang"
FAST = DoctorOptions(nccl_timeout_s=20.0, counter_interval_s=1.0, rdma_latency=False)


def leave_available(h, station: str, mib: int) -> None:
    """Something on the station holds host memory until MemAvailable is ``mib`` (unified: the GPU's)."""
    with h.world.edit(station) as st:
        total = st["host_mem_total_mib"] - BASE_HOST_USED_MIB[True]
        next(g for g in st["gpus"] if g["serving"])["held_mib"] = total - mib
    write_meminfo(h.world, station, True)  # now, not at the sim server's next rewrite


async def test_the_sweep_is_sized_by_the_tightest_station(sim_factory):
    h = await sim_factory(profile=SPARK)
    floor = h.config.ui.memory_floor_mib
    leave_available(h, "A", floor + NCCL_OVERHEAD_MIB + 2 * 400)
    rep = await run_doctor(h.config, rungs=["nccl"], options=FAST)
    (r,) = rep.of("nccl")
    ev = "\n".join(r.evidence)
    assert " -e 256M " in ev and "largest buffer 256 MiB, sized by A's MemAvailable" in ev, ev[:2000]
    assert r.status != "skip"


async def test_no_room_over_the_floor_is_no_test(sim_factory):
    h = await sim_factory(profile=SPARK)
    leave_available(h, "B", h.config.ui.memory_floor_mib - 500)
    rep = await run_doctor(h.config, rungs=["nccl"], options=FAST)
    (r,) = rep.of("nccl")
    assert r.status == "skip" and "not run: B's MemAvailable" in r.summary and "lock up" in r.summary


def test_discrete_gpus_keep_the_full_sweep_and_unread_is_small():
    assert nccl_cap({"A": 100, "B": None}, 6144, unified=False).arg == "1G"
    unread = nccl_cap({"A": None, "B": None}, 6144, unified=True)
    assert unread.arg == "256M" and "not read on A, B" in unread.why
    roomy = nccl_cap({"A": 110_000, "B": 20_000}, 6144, unified=True)
    assert roomy.arg == "1G" and "B's MemAvailable" in roomy.why
