"""Unattended ``watch --json`` on the simulated stations with ``[alerts]`` pointing at a real HTTP
receiver on 127.0.0.1: a wedge is detected, captured, written to the ledger and alerted (with the
bundle's path) by the same recorder the TUI runs; a GPU fallen off the bus is a ``gpu-fault``
incident and alert; the alerts and openings are lines on stderr too (a unit's journal)."""

from __future__ import annotations

import dataclasses
import io
import json

from console.config.alerts import AlertSettings
from console.incidents.store import Ledger
from console.sim.engine import container_status
from tests.receiver import Receiver
from tests.sim.test_incidents_sim import window
from tests.sim.test_progress_sim import watch_until, wedge_time

TOKEN = "s3cr3t-hook-token-42"


def with_alerts(config, rx: Receiver, **kw):
    return dataclasses.replace(config, alerts=AlertSettings(webhook=f"{rx.base}/hook/{TOKEN}", **kw))


async def watch_json(config, seconds: float, stop_when, start=None) -> tuple[list[dict], str]:
    """``watch --json`` until ``stop_when(objects)``; its objects and its stderr."""
    log = io.StringIO()
    return await watch_until(config, seconds, stop_when, start=start, log=log), log.getvalue()


def news(objs: list[dict]) -> list[dict]:
    return [n for o in objs for n in o.get("incidents", ())]


HANG_KINDS = ("wedge", "stuck")  # the same hang, named by the token freeze (wedge) or the RAS watch (stuck)


def the_hang(rx: Receiver, frozen_at: float | None) -> tuple[dict, object] | None:
    """The alert and ledger row of the incident that began at the freeze (a loaded machine may read a
    start-up phase stuck first: an incident of its own, earlier), or None while there is none."""
    if frozen_at is None:
        return None
    rows = {r.id: r for r in Ledger().incidents() if r.kind in HANG_KINDS and abs(r.start - frozen_at) < 10}
    sent = [a for r in rx.got if (a := r.json())["kind"] in HANG_KINDS and a["incident"] in rows]
    return (sent[0], rows[sent[0]["incident"]]) if sent else None


def freeze_seen(h) -> float | None:
    st = container_status(h.world, "A", h.world.state("A"), "glm53")
    if st["state"] != "running" or st["timeline"].wedge_at is None:
        return None
    return float(st["started_at"]) + st["timeline"].wedge_at


async def test_watch_alone_detects_captures_ledgers_and_alerts_a_wedge(sim_factory):
    h = await sim_factory(faults=["wedge"], time_scale=0.005)
    with Receiver() as rx:
        cfg = with_alerts(window(h.config), rx)

        def hang_alerted_and_captured(objs: list[dict]) -> bool:
            got = the_hang(rx, freeze_seen(h))
            return got is not None and any(n["event"] in ("captured", "capture-failed") and n["id"] == got[0]["incident"]
                                           for n in news(objs))

        objs, log = await watch_json(cfg, 120.0, hang_alerted_and_captured, start=h.start_service)
        frozen_at = await wedge_time(h)
        got = the_hang(rx, frozen_at)
        assert got is not None, ([r.json() for r in rx.got], Ledger().incidents(), log[-2000:])
        sent, row = got
        assert sent["event"] == "open" and sent["incident"] == row.id
        assert [n["event"] for n in news(objs) if n["id"] == row.id].count("captured") == 1, news(objs)
        assert "A" in sent["stations"] and sent["next_step"]
        assert ("wedged" if row.kind == "wedge" else "stuck") in sent["verdict"], sent["verdict"]
        assert sent["bundle"] == row.bundle  # the path the capture wrote, known when the alert went out
        assert set(row.action.split(", ")) == {"alerted", "captured"}
        assert "incident: incident" in log and f"alert: alert {row.kind} (open)" in log and "sent to webhook" in log
        assert TOKEN not in log and TOKEN not in json.dumps(objs)


async def test_a_gpu_fallen_off_the_bus_is_a_gpu_fault_incident_and_alert(sim_factory):
    h = await sim_factory(running=True, faults=["gpu-lost@A"], time_scale=0.005)
    with Receiver() as rx:
        cfg = with_alerts(window(h.config, capture=False), rx, kinds=("gpu-fault",))
        objs, log = await watch_json(cfg, 60.0, lambda o: bool(rx.got))
        (sent,) = [r.json() for r in rx.got]
        assert sent["kind"] == "gpu-fault" and sent["stations"] == ["A"] and "GPU 0" in sent["verdict"]
        assert "Unable to determine" in sent["verdict"] and sent["bundle"] is None
        (row,) = Ledger().incidents()
        assert row.kind == "gpu-fault" and row.action == "alerted" and row.end is None
        assert not any(n["event"] in ("capturing", "captured") for n in news(objs))  # a GPU is read live
