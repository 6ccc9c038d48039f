"""``dgx-console watch`` over real SSH to the simulated stations: the NDJSON contract (DESIGN.md)
and the plain view, from the same station services as the TUI."""

from __future__ import annotations

import io
import json

from console.commands.watch import watch
from console.station.messages import CONN_STATES

STATION_KEYS = {"t", "station", "state", "sample_age_s", "gpus", "container", "engine", "error",
                "ages_s", "gpus_age_s", "stale_sources",  # the contract's keys, and every source's age
                "progress", "progress_since_s", "progress_why", "progress_evidence",  # progress truth: additions
                "rails", "xids", "kernel_log_error",  # additions
                "progress_stragglers", "progress_consequence", "progress_judged_in_s", "ras"}  # the RAS watch: additions
GPU_KEYS = {"index", "name", "uuid", "memory_used_mib", "memory_total_mib", "util_pct", "temp_c", "power_w", "error",
            "health"}


async def test_watch_json_is_ndjson_per_station_per_interval_with_logs(sim_factory):
    h = await sim_factory(running=True, faults=["gpu-lost@A", "station-unreachable@B"], time_scale=0.005)
    out = io.StringIO()
    await watch(h.config, out, as_json=True, logs=True, seconds=5.0, interval=0.5)  # B: 3 s connect timeout
    objs = [json.loads(line) for line in out.getvalue().splitlines()]
    stations = [o for o in objs if "state" in o]
    logs = [o for o in objs if "log" in o]
    assert {o["station"] for o in stations} == {"A", "B"}
    # the head's object also carries the flight recorder's news (here: A's lost GPU, a gpu-fault incident)
    assert all(set(o) - {"incidents", "stalls"} == STATION_KEYS and o["state"] in CONN_STATES for o in stations)
    assert any(n["event"] == "incident" and "gpu-fault on A" in n["text"] for o in stations
               for n in o.get("incidents", ()))
    assert all(isinstance(o["t"], float) for o in objs)
    a = [o for o in stations if o["station"] == "A"]
    assert a[-1]["state"] == "live" and a[-1]["sample_age_s"] < 3
    lost, good = a[-1]["gpus"]
    assert set(lost) == GPU_KEYS and lost["name"] is None and lost["error"].startswith("Unable to determine")
    assert good["name"] == "NVIDIA GB300" and good["error"] is None
    assert a[-1]["container"]["name"] == "glm53" and "phase" in a[-1]["engine"]
    b = [o for o in stations if o["station"] == "B"]
    assert b[-1]["state"] in ("connecting", "unreachable") and b[-1]["sample_age_s"] is None and b[-1]["gpus"] == []
    assert any(o["state"] == "unreachable" and "no answer" in o["error"] for o in b)
    assert logs and {o["station"] for o in logs} == {"A"} and all(set(o) == {"t", "station", "log"} for o in logs)
    assert any("vLLM API server version" in o["log"] for o in logs)


async def test_watch_plain_prints_one_line_per_station_each_interval(sim_factory):
    h = await sim_factory(running=True, time_scale=0.005)
    out = io.StringIO()
    await watch(h.config, out, seconds=2.0, interval=0.5)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 4 and {ln.split()[0] for ln in lines} == {"A", "B"}
    assert any(ln.split()[1] == "live" and "GPU1" in ln and "GiB" in ln and "container" in ln for ln in lines)


def test_watch_usage_errors_exit_2(tmp_path, capsys):
    from console.cli import main

    cfg = tmp_path / "c.toml"
    cfg.write_text('[[stations]]\nname = "A"\nhost = "127.0.0.1"\nrank = 0\n')
    assert main(["watch", "--seconds", "0", "--config", str(cfg)]) == 2
    assert main(["watch", "--interval", "-1", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "--seconds" in err and "--interval" in err and "Traceback" not in err
