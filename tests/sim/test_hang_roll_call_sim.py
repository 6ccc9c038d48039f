"""The roll call over 2, 4 and 8 simulated stations: ranks grouped by where they stopped, the rank not
with the others named as the cause; all ranks equal name no culprit; a rank that died after another
fell behind is the consequence, the one behind the cause. Every verdict ends in a next step."""

from __future__ import annotations

import asyncio
import json

import pytest

from console.cli import main
from tests.sim.test_hang_report_sim import started


async def _report(h, tmp_path, capsys) -> dict:
    rc = await asyncio.to_thread(main, ["hang-report", "--config", str(h.config_path), str(tmp_path / "h.tgz"),
                                        "--json", "--interval", "1"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0, data
    return data


@pytest.mark.parametrize("n", [4, 8])
async def test_desync_names_the_one_rank_not_with_the_majority(sim_factory, tmp_path, capsys, n):
    h = await sim_factory(n=n, faults=["desync"], time_scale=0.05)
    started(h, ago=30)
    data = await _report(h, tmp_path, capsys)
    v = data["verdict"]
    assert v.startswith("ranks out of step: "), v
    assert "not with the others: B (the cause" in v, v
    others = [x for x in h.world.names if x != "B"]
    assert all(x not in v.split("not with the others: ")[1] for x in others), v
    assert "restart the whole service" in data["next_step"]
    assert set(data["finding_stations"]["ras"]["covers"]) <= set(h.world.names)


async def test_every_rank_equal_names_no_culprit(sim_factory, tmp_path, capsys):
    h = await sim_factory(n=4, faults=["collective-hang"], time_scale=0.05)
    started(h, ago=30, flight_recorder=False)
    data = await _report(h, tmp_path, capsys)
    v = data["verdict"]
    assert v.startswith("every rank stuck in all_reduce") and "none to blame" in v, v
    assert "RAS: every rank at AllReduce op" in v and "not with the others" not in v, v
    assert data["next_step"]


async def test_a_rank_dead_after_another_fell_behind_is_the_consequence(sim_factory, tmp_path, capsys):
    h = await sim_factory(faults=["desync"], time_scale=0.05)
    started(h, ago=75)  # out of step since ~22.5 s; A's watchdog ended it at ~53 s
    data = await _report(h, tmp_path, capsys)
    v = data["verdict"]
    assert v.startswith("B fell behind (the cause"), v
    assert "A (" in v and "the consequence" in v, v
    assert "read the gone rank's last log lines" in data["next_step"]


async def test_a_hung_tool_is_its_own_line_and_the_deadline_holds(sim_factory, tmp_path, capsys):
    """nvidia-smi hangs on a station: its GPU line is "not read" (cut by the deadline), and RAS, the
    flight recorder and py-spy of every station still judge."""
    h = await sim_factory(faults=["desync", "smi-hang"], time_scale=0.05)
    started(h, ago=30)
    rc = await asyncio.to_thread(main, ["hang-report", "--config", str(h.config_path), str(tmp_path / "h.tgz"),
                                        "--json", "--interval", "1", "--deadline", "8"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0, data
    assert data["verdict"].startswith("ranks out of step: A at op "), data["verdict"]
    gpu_errors = [e for s in data["stations"].values() for e in s["gpus"].get("errors", [])]
    assert any(e.startswith("not read: ") for e in gpu_errors), data["stations"]
    assert all(s["ras"]["status"] == "ok" for s in data["stations"].values())
    assert any("cut by the deadline (8 s)" in e for e in gpu_errors), gpu_errors  # the whole capture's deadline


async def test_a_parser_that_breaks_is_that_sources_line(sim_factory, tmp_path, capsys, monkeypatch):
    """Whatever a parser does with a station's answer, the CLI says it as that source's line (exit 0),
    never a traceback, and the other sources still judge."""
    from console.probes import flight_recorder as fr

    def boom(*_a, **_k):
        raise RuntimeError("an answer no parser foresaw")

    monkeypatch.setattr(fr, "parse_dump", boom)
    h = await sim_factory(faults=["desync"], time_scale=0.05)
    started(h, ago=30)
    data = await _report(h, tmp_path, capsys)
    a = data["stations"]["A"]
    assert a["flight_recorder"]["status"] == "not-read", a["flight_recorder"]
    assert "RuntimeError: an answer no parser foresaw" in a["flight_recorder"]["note"]
    assert a["ras"]["status"] == "ok" and data["verdict"].startswith("ranks out of step")
