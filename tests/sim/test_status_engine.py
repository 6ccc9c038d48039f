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
        # "stopped": the container of before the launch, read before the sim's start reached it
        return head if head["engine"] and head["engine"]["phase"] not in ("starting", "stopped") else None

    head = await until(head_phase, what="the head's engine phase past starting", timeout=20)
    assert head["api"]["healthy"] is False
    assert head["engine"]["phase"] in ("connecting", "loading", "loaded", "kv-cache", "graphs")
    assert set(head["engine"]) == {"phase", "load_pct", "transport", "fatal", "fatal_lines"}
    assert head["engine"]["fatal"] is None and head["engine"]["fatal_lines"] == []
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
    lines = got["stations"][1]["engine"]["fatal_lines"]
    assert lines[0] == got["stations"][1]["engine"]["fatal"] and all("\n" not in x for x in lines)
    rc = await asyncio.to_thread(main, ["status", "--config", str(h.config_path)])
    text = capsys.readouterr().out
    rows = [ln for ln in text.splitlines() if ln.startswith("      fatal: ")]
    # every fatal line of B's failed run on its own row (the log grows between two reads: never fewer)
    assert len(lines) >= 2 and all(any(r[13:53] == x[:40] for r in rows) for x in lines)


async def test_status_of_a_healthy_service_reads_no_log(sim_factory):
    h = await sim_factory(running=True, time_scale=0.005)
    async def healthy() -> dict | None:
        data = await collect_status(h.config)
        return data if data["stations"][0]["api"]["healthy"] is True else None

    data = await until(healthy, what="the head's API healthy", timeout=30)
    assert [st["engine"] for st in data["stations"]] == [None, None]


async def test_a_never_started_container_is_stopped_to_status_and_watch(sim_factory, capsys):
    """A created-but-never-started container was "starting" to ``status`` ("not answering
    yet: the engine is still starting") and "stopped" to ``watch --json``: one state, one word."""
    import io

    from console.commands.watch import watch

    h = await sim_factory(running=False)  # containers created, never started
    data = await collect_status(h.config)
    assert [st["container"]["state"] for st in data["stations"]] == ["created", "created"]
    assert [st["engine"]["phase"] for st in data["stations"]] == ["stopped", "stopped"]
    out = io.StringIO()
    await watch(h.config, out, as_json=True, logs=False, seconds=3.0, interval=0.5)
    last = {o["station"]: o for o in map(json.loads, out.getvalue().splitlines())}
    assert {n: o["engine"]["phase"] for n, o in last.items()} == {"A": "stopped", "B": "stopped"}
    rc = await asyncio.to_thread(main, ["status", "--config", str(h.config_path)])
    text = capsys.readouterr().out
    assert rc == 0 and "still starting" not in text
    assert "engine: stopped" in text and "the engine is stopped (container created" in text
