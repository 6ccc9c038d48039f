"""validate-rdma against the simulated stations: perftest server/client over the real SSH path,
the verdicts per fault, and the server process cleaned up on success, failure and cancel."""

from __future__ import annotations

import asyncio

from console.remote import cmdlines as rc
from console.remote.session import make_transport
from console.station.rdma import overall, validate_rdma


async def _alive(cfg, station: str, pid: int) -> bool:
    t = make_transport(cfg.station(station), cfg.connect_timeout_s, cfg.command_timeout_s)
    try:
        res = await t.run(rc.pid_alive(pid))
        return res.stdout.strip() == "alive"
    finally:
        await t.close()


async def test_healthy_station_pair_host_and_gpu_memory_on_both_rails(sim):
    events = []
    runs = await validate_rdma(sim.config, on_event=lambda k, d: events.append((k, d)))
    assert [(r.rail, r.memory) for r in runs] == [("mlx5_0", "host"), ("mlx5_0", "gpu"), ("mlx5_1", "host"),
                                                  ("mlx5_1", "gpu")]
    assert all(r.status == "pass" and 200 <= r.gbps_avg <= 235 for r in runs)
    assert overall(runs) == 0
    assert "--use_cuda=1 --use_cuda_dmabuf" in runs[1].evidence  # the GB300 is GPU 1 next to the RTX PRO
    assert "env CUDA_DEVICE_ORDER=PCI_BUS_ID ib_write_bw" in runs[1].evidence  # ... in nvidia-smi order
    assert "Waiting for client to connect" in runs[0].evidence
    assert [k for k, _ in events].count("server-stopped") == 4
    for r in runs:
        assert not await _alive(sim.config, "B", r.server_pid)


async def test_spark_pair_host_memory_only(sim_factory):
    h = await sim_factory(profile="glm53-flash-nvfp4-2x-gb10-sglang")
    runs = await validate_rdma(h.config)
    assert {r.memory for r in runs} == {"host"} and len(runs) == 2
    assert all(r.status == "pass" and r.line_gbps == 200 for r in runs)


async def test_gpu_memory_without_gpudirect_is_an_mr_error(sim_factory):
    h = await sim_factory(profile="glm53-flash-nvfp4-2x-gb10-sglang")
    runs = await validate_rdma(h.config, gpu=True)
    gpu = [r for r in runs if r.memory == "gpu"]
    assert gpu and all(r.status == "fail" and r.id == "rdma-mr" and "error=524" in r.summary for r in gpu)


async def test_slow_rail_fails_on_bandwidth(sim_factory):
    h = await sim_factory(faults=["slow-rail"])
    runs = await validate_rdma(h.config, gpu=False)
    assert all(r.status == "fail" and r.id == "rdma-bandwidth" and r.gbps_avg < 100 for r in runs)
    assert "of the 400 Gb/s line rate" in runs[0].summary


async def test_port_down_is_reported_before_perftest(sim_factory):
    h = await sim_factory(faults=["rdma-port-down"])
    runs = await validate_rdma(h.config, gpu=False)
    first = runs[0]
    assert first.rail == "mlx5_0" and first.status == "fail" and first.id == "rdma-port-down"
    assert "PORT_DOWN" in first.evidence and first.server_pid is None


async def test_connect_error_cleans_up_the_waiting_server(sim_factory):
    h = await sim_factory(faults=["link-down"])
    runs = await validate_rdma(h.config, gpu=False)
    conn = [r for r in runs if r.id == "rdma-connect"]
    assert conn and "Couldn't connect to" in conn[0].summary
    assert conn[0].server_pid and not await _alive(h.config, "B", conn[0].server_pid)


async def test_cancel_cleans_up_the_server(sim):
    ready = asyncio.Event()
    seen: dict = {}

    def on_event(kind, detail):
        if kind == "server-ready":
            seen["pid"] = detail["pid"]
            ready.set()

    task = asyncio.create_task(validate_rdma(sim.config, on_event=on_event, gpu=False))
    await asyncio.wait_for(ready.wait(), 30)
    assert await _alive(sim.config, "B", seen["pid"])
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    assert not await _alive(sim.config, "B", seen["pid"])


async def test_server_that_never_gets_ready_times_out_and_is_killed(sim, monkeypatch):
    import console.station.rdma as rdma

    monkeypatch.setattr(rdma, "READY_TIMEOUT_S", 1.5)
    tool = sim.world.root / "bin" / "ib_write_bw"
    tool.write_text("#!/bin/sh\nexec sleep 300\n")  # a server that hangs before printing anything
    runs = await validate_rdma(sim.config, gpu=False)
    first = runs[0]
    assert first.status == "fail" and first.id == "rdma-timeout" and "never became ready" in first.summary
    assert first.server_pid and not await _alive(sim.config, "B", first.server_pid)
