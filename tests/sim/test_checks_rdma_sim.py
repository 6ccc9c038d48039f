"""validate-rdma against the simulated stations: perftest server/client over the real SSH path,
the verdicts per fault, and the server process cleaned up on success, failure and cancel."""

from __future__ import annotations

import asyncio
import gc

from console.remote import cmdlines as rc
from console.remote.session import make_transport
from console.station.rdma import overall, validate_rdma
from tests.sim.leaks import cancel_when_under_way, tasks_left


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
    # both directions, as the workbench's RDMA rung (A->B, then B->A)
    assert [(r.rail, r.client, r.server, r.memory) for r in runs] == [
        (rail, c, s, m) for rail in ("mlx5_0", "mlx5_1") for c, s in (("A", "B"), ("B", "A")) for m in ("host", "gpu")]
    assert "mlx5_0 host memory B->A: " in runs[2].summary
    assert all(r.status == "pass" and 200 <= r.gbps_avg <= 235 for r in runs)
    assert overall(runs) == 0
    assert "--use_cuda=1 --use_cuda_dmabuf" in runs[1].evidence  # the GB300 is GPU 1 next to the RTX PRO
    assert "env CUDA_DEVICE_ORDER=PCI_BUS_ID ib_write_bw" in runs[1].evidence  # ... in nvidia-smi order
    assert "Waiting for client to connect" in runs[0].evidence
    assert [k for k, _ in events].count("server-stopped") == 8
    for r in runs:
        assert not await _alive(sim.config, r.server, r.server_pid)


async def test_spark_pair_host_memory_only(sim_factory):
    h = await sim_factory(profile="glm53-flash-nvfp4-2x-gb10-sglang")
    runs = await validate_rdma(h.config)
    assert {r.memory for r in runs} == {"host"} and len(runs) == 4
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
    seen: dict = {}

    def run(under_way: asyncio.Event):
        def on_event(kind, detail):
            if kind == "server-ready":
                seen["pid"] = detail["pid"]
                under_way.set()
        return validate_rdma(sim.config, on_event=on_event, gpu=False)

    assert await cancel_when_under_way(run, limit=30) == []  # the server's stream and waiters: ended, awaited
    assert not await _alive(sim.config, "B", seen["pid"])


class ServerStreamBreaks:
    """B's real session, but the perftest server's stream raises what no code expects."""

    def __init__(self, inner) -> None:
        self.inner, self.station = inner, inner.station

    async def run(self, command: str, timeout: float | None = None, input: str | None = None):
        return await self.inner.run(command, timeout=timeout, input=input)

    def stream(self, command: str):
        return self._broken() if "ib_write_bw" in command else self.inner.stream(command)

    async def _broken(self):
        raise RuntimeError("injected: the server's stream broke")
        yield  # (an async generator, as a stream is)

    async def close(self) -> None:
        await self.inner.close()


async def test_a_server_stream_that_raises_is_a_verdict_and_its_error_is_retrieved(sim, monkeypatch):
    """The perftest server's follower dies of an unexpected error: the run ends with a verdict, the
    follower is awaited (no "Task exception was never retrieved" later) and nothing is left running."""
    import console.station.rdma as rdma

    monkeypatch.setattr(rdma, "READY_TIMEOUT_S", 5.0)
    loop = asyncio.get_running_loop()
    unretrieved: list[dict] = []
    loop.set_exception_handler(lambda _loop, context: unretrieved.append(context))
    cfg = sim.config
    tr = {s.name: make_transport(s, cfg.connect_timeout_s, cfg.command_timeout_s) for s in cfg.stations}
    tr["B"] = ServerStreamBreaks(tr["B"])
    before = asyncio.all_tasks()
    try:
        runs = await validate_rdma(cfg, tr, gpu=False)
    finally:
        await asyncio.gather(*(t.close() for t in tr.values()))
    assert runs and runs[0].status == "fail" and "never became ready" in runs[0].summary
    assert tasks_left(before) == []
    gc.collect()  # a task whose exception nobody retrieved reports it when it is collected
    try:
        assert not [c for c in unretrieved if "never retrieved" in str(c.get("message"))], unretrieved
    finally:
        loop.set_exception_handler(None)


async def test_server_that_never_gets_ready_times_out_and_is_killed(sim, monkeypatch):
    import console.station.rdma as rdma

    monkeypatch.setattr(rdma, "READY_TIMEOUT_S", 1.5)
    tool = sim.world.root / "bin" / "ib_write_bw"
    tool.write_text("#!/bin/sh\nexec sleep 300\n")  # a server that hangs before printing anything
    runs = await validate_rdma(sim.config, gpu=False)
    first = runs[0]
    assert first.status == "fail" and first.id == "rdma-timeout" and "never became ready" in first.summary
    assert first.server_pid and not await _alive(sim.config, "B", first.server_pid)


async def test_an_mtu_mismatch_is_named_even_when_the_bandwidth_passes(sim_factory):
    """Under an MTU mismatch validate-rdma said nothing about MTU. perftest's RoCE path MTU
    (1024 B where 9000-byte rails allow 4096 B) says an end has a smaller MTU; both rail MTUs are read."""
    h = await sim_factory(faults=["mtu-mismatch"])
    runs = await validate_rdma(h.config, gpu=False)
    first = runs[0]
    assert first.id == "rdma-mtu" and first.status in ("warn", "fail"), first.summary
    assert "RoCE MTU 1024 B, not the 4096 B" in first.summary and "MTU mismatch" in first.summary
    assert "B enp1s0f1np1 1500" in first.summary and "A enp1s0f1np1 9000" in first.summary
    assert "ip link set dev" in first.fix
    healthy = await validate_rdma((await sim_factory()).config, gpu=False)
    assert all(r.id == "rdma-bandwidth" and "MTU" not in r.summary for r in healthy)
