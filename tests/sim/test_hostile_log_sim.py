"""Hostile station log lines (the simulator's ``hostile-log`` fault: OSC 52/0, CSI clear, DCS/APC,
NUL/BEL/C1, bidi overrides, Rich markup, an unterminated OSC, a 300,000-character line) through the
real SSH path into ``dgx-console diagnose --station``: the finding among them is found, its evidence is
printed as one clean, shortened line, ``--json`` keeps the text, nothing else leaks."""

from __future__ import annotations

import asyncio
import json
import re

from console.cli import main
from console.sim.timelines import HOSTILE_LOG_LINES
from tests.waiting import until

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


async def run_cli(capsys, *argv):
    def call():
        try:
            return main(list(argv))
        except SystemExit as exc:
            return exc.code

    rc = await asyncio.wait_for(asyncio.to_thread(call), 120)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


async def test_diagnose_prints_hostile_station_lines_clean(sim_factory, capsys):
    sim = await sim_factory(n=2, faults=["hostile-log@B"], running=True, time_scale=0.005)
    last: list = []

    async def diagnosed() -> tuple | None:  # B's log holds the hostile block
        last[:] = await run_cli(capsys, "diagnose", "--config", str(sim.config_path), "--station", "B")
        return tuple(last) if "gloo-interface" in last[1] else None

    rc, out, err = await until(diagnosed, what="the gloo-interface finding on B", timeout=60,
                               detail=lambda: f"{last[1][-500:]} {last[2][-500:]}" if last else "no run")
    assert rc == 1
    assert not CONTROL.search(out) and not CONTROL.search(err)
    assert "cHduZWQgY2xpcGJvYXJk" not in out and "owned terminal title" not in out
    assert "Traceback" not in err
    evidence = [ln for ln in out.splitlines() if "Unable to resolve hostname" in ln]
    assert evidence and all(len(ln) < 1000 for ln in out.splitlines())

    rc, out, err = await run_cli(capsys, "diagnose", "--config", str(sim.config_path), "--station", "B", "--json")
    data = json.loads(out)
    f = next(f for f in data["findings"] if f["id"] == "gloo-interface")
    assert any("Unable to resolve hostname" in e["text"] for e in f["evidence"])
    assert not CONTROL.search(out)  # JSON escapes what it keeps


async def test_hostile_lines_fed_from_a_file_and_stdin(tmp_path, capsys, monkeypatch):
    import io
    import sys

    log = tmp_path / "hostile.log"
    log.write_text("\n".join(HOSTILE_LOG_LINES) + "\n" + "B" * 2_000_000 + "\n")  # and a 2 MB line
    rc, out, err = await run_cli(capsys, "diagnose", str(log))
    assert rc == 1 and "gloo-interface" in out
    assert not CONTROL.search(out + err) and "owned terminal title" not in out
    monkeypatch.setattr(sys, "stdin", io.StringIO(log.read_text()))
    rc, out, err = await run_cli(capsys, "diagnose", "-")
    assert rc == 1 and not CONTROL.search(out + err)
