"""A station whose nvidia-smi prints hostile numbers (the ``smi-garbage`` fault: nan, inf, -inf, a
400-digit number, negative values in every numeric cell of the GPU, health and compute-app queries):
the station's service stays up and its readings say unknown; ``status`` prints, with no traceback, and
``status --json`` is strict JSON (no NaN / Infinity token)."""

from __future__ import annotations

import json

from test_monitor import Collector

from console.station.messages import ConnectionState, GpuSample
from console.station.monitor import StationService
from tests.sim.test_hostile_log_sim import run_cli
from tests.waiting import until


def _strict(text: str):
    def refuse(token: str):
        raise ValueError(f"not strict JSON: {token}")
    return json.loads(text, parse_constant=refuse)


async def test_the_service_stays_up_and_the_readings_say_unknown(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01, faults=["smi-garbage"])
    sink = Collector()
    svc = StationService(sim.config, sim.config.station("B"), sink, gpu_interval_ms=200)
    svc.start()
    try:
        await until(lambda: len([m for m in sink.of(GpuSample, "B") if m.gpus]) >= 10, what="ten GPU rounds",
                    timeout=30, detail=lambda: (svc.state, sink.messages[-3:]))
        states = [m.state for m in sink.of(ConnectionState, "B")]
        assert "error" not in states, states
        for m in sink.of(GpuSample, "B"):
            for g in m.gpus:
                for v in (g.memory_used_mib, g.memory_total_mib, g.util_pct, g.temp_c, g.power_w):
                    assert v is None, g
    finally:
        await svc.stop()


async def test_status_prints_and_its_json_is_strict(sim_factory, capsys):
    sim = await sim_factory(n=2, time_scale=0.01, faults=["smi-garbage"])
    rc, out, err = await run_cli(capsys, "status", "--config", str(sim.config_path))
    assert "Traceback" not in out + err and rc in (0, 1), (rc, err)
    rc, out, err = await run_cli(capsys, "status", "--json", "--config", str(sim.config_path))
    assert "Traceback" not in err, err
    doc = _strict(out)
    assert "NaN" not in out and "Infinity" not in out and doc["stations"]
