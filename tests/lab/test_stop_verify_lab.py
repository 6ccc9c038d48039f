"""The verified stop through real OpenSSH sshd in network namespaces: a station whose memory does
not come back after ``docker stop`` is caught (exit 1) with the fix; the other comes back clean."""

from __future__ import annotations

import dataclasses
import json

from test_launch_lab import api_for, run_action, state  # tests/lab is on sys.path (pytest prepend mode)

from console.config import ApiSettings


def add_fault(lab, station: str, fault: str) -> None:
    """The shims read world.json on every call: a fault added now applies to the next command."""
    path = lab.world.root / "world.json"
    meta = json.loads(path.read_text())
    meta["faults"].setdefault(station, []).append(fault)
    path.write_text(json.dumps(meta))


async def test_memory_that_does_not_come_back_is_caught_over_real_ssh(lab):
    runner, url = await api_for(lab)
    try:
        cfg = dataclasses.replace(lab.config(), api=ApiSettings(url=url))
        res = await run_action(cfg, "launch", [], skip_checks=True)
        assert res.result == "ok", (res.summary, res.evidence)
        assert [e.event for e in res.timeline["A"]][-1] == "first-token"
        add_fault(lab, "B", "memory-not-released")
        res = await run_action(cfg, "stop", [])
        assert res.result == "failed" and res.exit_code == 1
        assert res.verified["A"].clean, res.verified["A"].findings
        ids = [f["id"] for f in res.verified["B"].findings]
        assert "stop-memory-leak" in ids and "stop-compute-process" in ids
        assert state(lab, "B") == "exited"  # docker said "stopped"; the memory says otherwise
    finally:
        await runner.cleanup()
