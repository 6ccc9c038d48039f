"""The gpu-errors check (and the checks reading what the pane shows: Xids, flaps) against the simulated stations: the ``gpu-errors`` check fails on the station whose
GPU nvidia-smi cannot read (the gpu-lost fault), with nvidia-smi's words, the kernel's Xid 79 and the
way out; the other station passes; ``check --json`` carries it."""

from __future__ import annotations

from console.station.checks import run_checks


async def test_gpu_lost_fails_the_gpu_errors_check_with_the_xid(sim_factory):
    h = await sim_factory(faults=["gpu-lost@A"])
    got = {r.station: r for r in await run_checks(h.config, only=["gpu-errors"])}
    a, b = got["A"], got["B"]
    assert a.status == "fail" and a.id == "gpu-errors"
    assert a.summary.startswith("GPU 0 (00000000:01:00.0): Unable to determine the device handle"), a.summary
    assert "kernel: Xid 79" in a.summary and "fallen off the bus" in a.summary
    assert "nvidia-smi -r -i 0" in a.fix and "reboot" in a.fix and "reseat" in a.fix
    assert "Xid" in a.evidence and "Unable to determine" in a.evidence
    assert b.status == "pass" and b.summary.startswith("every GPU answers nvidia-smi")


async def test_a_recent_xid_fails_the_check_as_the_pane_shows_it_every_run(sim_factory):
    """Every GPU answers, but the kernel logged Xid 48 and 79 this run (the pane's health box says so):
    the check fails too, with NVIDIA's meaning and action, and the same on every run."""
    h = await sim_factory(faults=["xid@B"])
    for _ in range(3):
        got = {r.station: r for r in await run_checks(h.config, only=["gpu-errors"])}
        a, b = got["A"], got["B"]
        assert b.status == "fail", b.summary
        assert "the kernel logged Xid 48, Xid 79 this run" in b.summary, b.summary
        assert "fallen off the bus" in b.summary and "fallen off the bus" in b.evidence and b.fix
        assert a.status == "pass" and "no Xid in the kernel log this run" in a.summary


async def test_recent_flaps_fail_rail_live_on_every_run(sim_factory):
    """The pane says "flapped N×" over ten minutes; two reads a second apart caught a flap only by luck
    (the exit code flipped run to run): the kernel's Link down lines of the window say it every run."""
    h = await sim_factory(faults=["rail-flap@B"])  # (the cable's fault: both ends flap)
    for _ in range(3):
        got = {r.station: r for r in await run_checks(h.config, only=["rail-live"])}
        assert {r.status for r in got.values()} == {"fail"}, [r.summary for r in got.values()]
        assert all("flapped" in r.summary or "down" in r.summary for r in got.values())
