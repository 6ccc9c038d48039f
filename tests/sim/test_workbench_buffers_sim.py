"""The workbench's NCCL test buffers on the Spark profile (GB10, unified memory) are sized by the
stations' MemAvailable: room for a 400 MiB buffer over the floor gives ``-e 256M``, no room over the
floor is no test at all (the box could lock up), and the evidence says which station sized it. perftest
is not started either on a station with no room over the floor."""

from __future__ import annotations

from console.doctor.buffers import NCCL_OVERHEAD_MIB, nccl_cap
from console.doctor.runner import DoctorOptions, run_doctor
from console.sim.engine import write_meminfo
from console.sim.world import BASE_HOST_USED_MIB
from console.station.rdma import FLOOR_ID, PERFTEST_MIB, overall, room_words, validate_rdma

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


async def test_perftest_is_not_started_on_a_station_under_the_floor(sim_factory):
    h = await sim_factory(profile=SPARK)
    leave_available(h, "B", h.config.ui.memory_floor_mib + PERFTEST_MIB - 300)
    runs = await validate_rdma(h.config)
    assert runs and all(r.id == FLOOR_ID and r.status == "skip" for r in runs), [(r.id, r.summary) for r in runs]
    assert "not run: B's MemAvailable" in runs[0].summary and "lock up" in runs[0].summary
    assert "A's" not in runs[0].summary  # the roomy station is not named
    assert overall(runs) == 1  # nothing about the rails was proved
    assert not any("ib_write_bw" in r.evidence for r in runs)  # no perftest was started


def test_perftest_room_names_only_the_short_stations_and_unread_is_no_refusal():
    floor = 6144
    assert room_words({"A": floor + PERFTEST_MIB, "B": None}, floor) == ""
    said = room_words({"A": 100_000, "B": floor}, floor)
    assert said.startswith("B's MemAvailable is 6.0 GiB") and "A's" not in said
