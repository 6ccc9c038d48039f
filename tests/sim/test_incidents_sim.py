"""The flight recorder on the simulated stations, through ``watch --json``: a wedge and a stuck
start-up are each captured once (a bundle with the hang evidence and the window reaching back before
the freeze, a ledger row), a second console skips, and stall-cycle's freezes are counted as stalls."""

from __future__ import annotations

import dataclasses
import json
import tarfile

from console.incidents.replay import read_window, replay_lines
from console.incidents.store import Ledger
from tests.sim.test_progress_sim import watch_until, wedge_time

W = 5.0


def window(config, w: float = W, capture: bool = True):
    return dataclasses.replace(config, ui=dataclasses.replace(config.ui, progress_window_s=w),
                               incidents=dataclasses.replace(config.incidents, capture=capture,
                                                             capture_deadline_s=30.0))


def news(objs: list[dict]) -> list[dict]:
    return [n for o in objs for n in o.get("incidents", ())]


def bundle_members(path: str) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


async def test_a_wedge_is_captured_once_with_the_window_before_the_freeze(sim_factory):
    h = await sim_factory(faults=["wedge"], time_scale=0.005)
    objs = await watch_until(window(h.config), 120.0, lambda o: any(n["event"] in ("captured", "capture-failed")
                                                                    for n in news(o)), start=h.start_service)
    frozen_at = await wedge_time(h)
    events = [n["event"] for n in news(objs)]
    assert events.count("incident") == 1 and events.count("captured") == 1, news(objs)
    rows = Ledger().incidents()
    assert len(rows) == 1
    row = rows[0]
    # the same hang, named by whichever judge sees it first: the token freeze (wedge, after the window) or the
    # RAS watch (every rank frozen in one collective with busy GPUs: stuck); on a loaded machine either wins
    assert row.kind in ("wedge", "stuck") and row.action == "captured" and "A" in row.stations and row.bundle
    assert abs(row.start - frozen_at) < 10
    got = bundle_members(row.bundle)
    assert {"incident.json", "window.ndjson", "verdict.txt", "evidence.json", "manifest.json"} <= set(got)
    samples = [json.loads(x) for x in got["window.ndjson"].decode().splitlines()]
    kinds = {s["kind"] for s in samples}
    assert {"gpu", "serving"} <= kinds
    first_watch = min(o["t"] for o in objs if "station" in o)
    assert min(s["t"] for s in samples) <= first_watch + 2  # everything seen before the freeze is there
    serving = [s for s in samples if s["kind"] == "serving" and s["t"] < frozen_at]
    assert serving and max(s["gen_tokens"] or 0 for s in serving) > 0  # the tokens moving before it froze
    assert json.loads(got["incident.json"])["id"] == row.id
    # the window played back through the same state and judge as watch --json says the wedge again
    played = replay_lines(*[read_window(row.bundle)[0]], W, 1.0)
    assert {o["station"] for o in played} == {"A", "B"} and all(o["replay"] for o in played)
    assert any(o["station"] == "A" and o["progress"] == "wedged" for o in played), \
        [(o["station"], o["progress"], o["progress_why"]) for o in played][-6:]


async def test_a_second_console_on_the_same_pair_skips(sim_factory):
    h = await sim_factory(faults=["init-hang"], time_scale=0.005)
    led = Ledger()
    # another console (a live process: this one's parent) has opened the incident already
    import os

    from console.incidents import store
    from console.incidents.recorder import service_key
    real = store.owner_words
    store.owner_words = lambda: f"{os.uname().nodename} pid {os.getppid()}"
    try:
        import time
        led.open_incident(service_key(h.config), "stuck", time.time() + 2, ["A", "B"], "stuck", "restart")
    finally:
        store.owner_words = real
    objs = await watch_until(window(h.config), 60.0, lambda o: any(n["event"] == "skipped" for n in news(o)),
                             start=h.start_service)
    events = [n["event"] for n in news(objs)]
    assert "skipped" in events and "captured" not in events and "capturing" not in events, news(objs)
    assert len(led.incidents()) == 1


async def test_stall_cycle_freezes_are_stalls_not_incidents(sim_factory):
    h = await sim_factory(faults=["stall-cycle"], time_scale=0.005)
    objs = await watch_until(window(h.config, w=20.0), 90.0, lambda o: any(n["event"] == "stall" for n in news(o)),
                             start=h.start_service)
    ev = news(objs)
    assert [n["event"] for n in ev].count("stall") >= 1 and not any(n["event"] == "incident" for n in ev), ev
    stall = Ledger().stalls()[0]
    assert 5 <= stall.seconds <= 17 and stall.running == 4 and set(stall.stations) == {"A", "B"}
    assert any("stall" in (o.get("stalls") or "") for o in objs)
    assert not any(o.get("progress") == "wedged" for o in objs)


async def test_a_stuck_start_up_is_one_incident_captured_once(sim_factory):
    h = await sim_factory(faults=["init-hang"], time_scale=0.005)
    objs = await watch_until(window(h.config), 120.0, lambda o: any(n["event"] in ("captured", "capture-failed")
                                                                    for n in news(o)), start=h.start_service)
    events = [n["event"] for n in news(objs)]
    assert events.count("incident") == 1 and events.count("captured") == 1, news(objs)
    (row,) = Ledger().incidents()
    assert row.kind == "stuck" and set(row.stations) == {"A", "B"} and row.action == "captured"
    assert "window.ndjson" in bundle_members(row.bundle)
