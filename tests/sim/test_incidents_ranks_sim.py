"""The flight recorder for the ranks' incidents, end to end on the simulated stations through
``watch --json``: ``desync`` (B falls behind: out of step) and a rank killed by its watchdog (the
service's other rank reads ``peer-down``: a ``rank-death`` incident) are each opened once, captured
once (the bundle holds the ranks' threads and the RAS straggler list), kept in the ledger, and closed
when the service is restarted without the fault."""

from __future__ import annotations

import json
import time

from console.incidents.store import Ledger
from console.sim.engine import start_container, stop_container
from tests.sim.test_hang_report_sim import _args, started
from tests.sim.test_incidents_sim import bundle_members, news, window
from tests.sim.test_progress_sim import watch_until


def _restart_without_faults(h) -> None:
    """The operator's restart: both containers stopped, the fault gone, the workers then the head started."""
    now = time.time()
    for name in h.world.names:
        h.world.set_faults(name, [])
        stop_container(h.world, name, at=now)
    for i, name in enumerate(reversed(h.world.names)):
        start_container(h.world, name, at=now + 0.1 + i * 0.1, args=_args(h, name, True))


def _run(h, seconds: float):
    """watch --json until the incident ended (the restart once it is captured); the objects."""
    restarted = []

    def stop_when(objs: list[dict]) -> bool:
        ev = [n["event"] for n in news(objs)]
        if ("captured" in ev or "capture-failed" in ev) and not restarted:
            _restart_without_faults(h)
            restarted.append(time.time())
        return "ended" in ev

    return watch_until(window(h.config), seconds, stop_when), restarted


def _evidence(row) -> dict:
    got = bundle_members(row.bundle)
    assert {"incident.json", "window.ndjson", "evidence.json", "verdict.txt"} <= set(got)
    return {"evidence": json.loads(got["evidence.json"]), "incident": json.loads(got["incident.json"]),
            "files": set(got)}


async def test_out_of_step_ranks_are_one_incident_captured_kept_and_closed(sim_factory):
    h = await sim_factory(faults=["desync"], time_scale=0.05)
    started(h, ago=15)  # ready ~6 s from now, out of step 1.5 s later, A's watchdog ~31 s after that
    run, restarted = _run(h, 150.0)
    objs = await run
    ev = news(objs)
    events = [n["event"] for n in ev]
    assert events.count("incident") == 1 and events.count("captured") == 1 and events.count("ended") == 1, ev
    assert events.index("incident") < events.index("captured") < events.index("ended")
    (row,) = Ledger().incidents()
    assert row.kind == "out-of-step" and row.end is not None and row.end > row.start, row
    # the restart ended it; the ledger says what was done: captured, and what the console saw of the
    # restart by then (the engine stopped, or started again; the container's poll may not have come yet)
    words = row.action.split(", ")
    assert "B" in row.stations and words[0] == "captured" and set(words[1:]) <= {"stopped", "restarted"}, row
    assert restarted and row.end >= restarted[0] - 1
    got = _evidence(row)
    lag = got["evidence"]["stragglers"]
    assert lag["status"] == "ok" and [r["station"] for r in lag["ranks"]] == ["B"], lag
    tasks = got["evidence"]["stations"]["B"]["tasks"]
    assert tasks["status"] == "ok" and any("Worker_TP1" in p["cmdline"] for p in tasks["processes"]), tasks
    assert "stations/B/tasks.txt" in got["files"]
    req = got["incident"]["requests"]
    assert req["status"] in ("ok", "stale", "not-read") and ("age_s" in req or req["note"].startswith("not read"))
    assert Ledger().get(row.id) == row  # kept: read back the same


async def test_a_rank_killed_by_its_watchdog_is_a_rank_death_incident(sim_factory):
    h = await sim_factory(faults=["desync"], time_scale=0.05)
    started(h, ago=62)  # A ended by its watchdog ~8 s ago: B's engine runs, its peer is gone
    run, restarted = _run(h, 150.0)
    objs = await run
    ev = news(objs)
    events = [n["event"] for n in ev]
    assert events.count("incident") == 1 and events.count("captured") == 1 and events.count("ended") == 1, ev
    opened = next(n for n in ev if n["event"] == "incident")
    assert "rank-death" in opened["text"], opened
    (row,) = Ledger().incidents()
    assert row.kind == "rank-death" and row.end is not None and "captured" in row.action, row
    assert row.next_step.startswith("a rank of the job is gone")
    got = _evidence(row)
    a, b = got["evidence"]["stations"]["A"], got["evidence"]["stations"]["B"]
    assert a["tasks"]["status"] == "not-running" and b["tasks"]["status"] == "ok", (a["tasks"], b["tasks"]["note"])
    lag = got["evidence"]["stragglers"]
    assert lag["status"] == "ok" and [m["station"] for m in lag["missing"]] == ["A"], lag
    assert any(o.get("progress") == "peer-down" for o in objs)
