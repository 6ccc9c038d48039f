"""``status`` says why the API does not answer when the engine's own log says it: still loading
(expected) or failed at start-up — not a bare "not healthy (ConnectError)"."""

from __future__ import annotations

import asyncio
import json

from console.cli import main
from console.station.status import collect_status
from tests.waiting import until


async def test_status_while_loading_says_the_engine_is_still_starting(sim_factory, capsys):
    h = await sim_factory(running=True, time_scale=0.1)  # a 420 s load takes 42 s: still loading below

    async def head_phase() -> dict | None:
        head = (await collect_status(h.config))["stations"][0]
        return head if head["engine"] and head["engine"]["phase"] not in ("starting",) else None

    head = await until(head_phase, what="the head's engine phase past starting", timeout=20)
    assert head["api"]["healthy"] is False
    assert head["engine"]["phase"] in ("connecting", "loading", "loaded", "kv-cache", "graphs")
    assert set(head["engine"]) == {"phase", "load_pct", "transport", "fatal"} and head["engine"]["fatal"] is None
    rc = await asyncio.to_thread(main, ["status", "--config", str(h.config_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "not answering yet: the engine is still starting (" in out and "not healthy" not in out


async def test_status_of_a_failed_launch_names_the_failure(sim_factory, capsys):
    h = await sim_factory(running=True, faults=["oom@B"], time_scale=0.005)
    async def b_failed() -> dict | None:
        b = (await collect_status(h.config))["stations"][1]
        return b if b["engine"] and b["engine"]["phase"] == "failed" else None

    b = await until(b_failed, what="B's engine to fail", timeout=30)
    assert "out of memory" in b["engine"]["fatal"].lower()
    rc = await asyncio.to_thread(main, ["status", "--config", str(h.config_path), "--json"])
    got = json.loads(capsys.readouterr().out)
    assert rc == 0 and got["stations"][1]["engine"]["phase"] == "failed"


async def test_status_of_a_healthy_service_reads_no_log(sim_factory):
    h = await sim_factory(running=True, time_scale=0.005)
    async def healthy() -> dict | None:
        data = await collect_status(h.config)
        return data if data["stations"][0]["api"]["healthy"] is True else None

    data = await until(healthy, what="the head's API healthy", timeout=30)
    assert [st["engine"] for st in data["stations"]] == [None, None]
