"""The unified-memory guard on the Spark profile (GB10 pair, SGLang) with the simulator's
``unified-memory-low`` fault: while the head loads its weights and captures its graphs, MemAvailable
sinks under the floor and ``watch --json`` carries ``memory_guard`` on the head's line (phase,
MemAvailable, floor, the lock-up warning), never on the healthy worker's; once the engine serves it
is gone. The same station without the fault is never warned."""

from __future__ import annotations

from console.incidents.alert_point import ALERT_HOOKS, AlertEvent
from console.sim.engine import LOW_AVAILABLE_MIB
from console.station.memory_guard import GUARDED_PHASES
from tests.sim.test_progress_sim import watch_until

SPARK = "glm53-flash-nvfp4-2x-gb10-sglang"


async def test_the_floor_is_warned_during_the_start_up_and_clears_when_serving(sim_factory):
    h = await sim_factory(profile=SPARK, faults=["unified-memory-low"], time_scale=0.02)
    alerts: list[AlertEvent] = []
    ALERT_HOOKS.append(alerts.append)
    try:
        objs = await watch_until(h.config, 150.0, lambda o: any(x.get("memory_guard") for x in o) and any(
            x["station"] == "A" and (x.get("engine") or {}).get("phase") == "ready" and not x.get("memory_guard")
            for x in o), start=h.start_service)
    finally:
        ALERT_HOOKS.remove(alerts.append)
    warned = [o for o in objs if o.get("memory_guard")]
    assert warned, [(o["station"], (o.get("engine") or {}).get("phase")) for o in objs][-8:]
    assert {o["station"] for o in warned} == {"A"}  # the worker's memory is fine: no warning there
    g = warned[0]["memory_guard"]
    assert g["phase"] in ("loading", "loaded", "kv-cache", "graphs") and g["floor_mib"] == h.config.ui.memory_floor_mib
    assert g["available_mib"] <= LOW_AVAILABLE_MIB and "power cycle" in g["text"] and "under the floor" in g["text"]
    ready = [o for o in objs if o["station"] == "A" and (o.get("engine") or {}).get("phase") == "ready"]
    assert ready and not ready[-1].get("memory_guard")
    assert [a.kind for a in alerts] == ["memory-low", "memory-ok"] and alerts[0].stations == ("A",)


async def test_no_fault_no_warning(sim_factory):
    # a faster clock than the fault's test: nothing has to be seen to come and go, only that the guard
    # judged the start-up on fresh readings (the assertion below) and said nothing
    h = await sim_factory(profile=SPARK, time_scale=0.015)
    objs = await watch_until(h.config, 150.0, lambda o: any(
        x["station"] == "A" and (x.get("engine") or {}).get("phase") == "ready" for x in o), start=h.start_service)
    a = [o for o in objs if o["station"] == "A"]
    assert "ready" in {(o.get("engine") or {}).get("phase") for o in a}
    judged = [o for o in a if (o.get("engine") or {}).get("phase") in GUARDED_PHASES and o["ages_s"]["hostmem"] is not None]
    assert len(judged) >= 2, [((o.get("engine") or {}).get("phase"), o["ages_s"]["hostmem"]) for o in a]
    assert not any(o.get("memory_guard") for o in objs)
