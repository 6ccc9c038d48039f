"""The NCCL workbench against the simulated stations (real SSH client, asyncssh server, shims that print
the real formats): each workbench fault makes its rung fail, the demo's nccl-timeout fault leads to the
rung that names the cause, the CLI keeps its JSON contract and exit codes, the debug relaunch fixes the
cause and restores the normal command."""

from __future__ import annotations

import asyncio
import io
import json
import time

import pytest

from console.cli import main
from console.commands.doctor import print_report
from console.doctor import DoctorOptions, RelaunchPlan, run_doctor
from console.doctor import store as doctor_store
from console.sim.engine import start_container
from tests.sim.leaks import cancel_when_under_way

FAST = DoctorOptions(nccl_timeout_s=20.0, counter_interval_s=1.0, rdma_latency=False)


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def started(h, ago: float = 0.0) -> None:
    """Workers first, then the head, ``ago`` seconds in the past (their timelines have played that far;
    never a start in the future: an action on the stations must find them as they are)."""
    now = time.time() - ago - 0.5
    names = h.world.names
    for i, name in enumerate(reversed(names[1:])):
        start_container(h.world, name, at=now + i * 0.1)
    start_container(h.world, names[0], at=now + 0.3)


def find(report, rung, status=None, text=""):
    hits = [r for r in report.of(rung) if (status is None or r.status == status) and text in r.summary]
    assert hits, f"no {rung} {status} result with {text!r}: {[(r.station, r.status, r.summary) for r in report.of(rung)]}"
    return hits[0]


async def test_nccl_timeout_leads_to_the_gid_index_on_b(sim_factory):
    h = await sim_factory(faults=["nccl-timeout"], time_scale=0.005)
    started(h)
    rep = await run_doctor(h.config, rungs=["links", "nccl", "env", "addresses", "hang", "relaunch"], options=FAST)
    assert rep.verdict == "nccl", rep.to_json()
    nccl = find(rep, "nccl", "fail", "IB completion error status=12")
    assert "local GID fd00::2" in nccl.summary and any("NCCL_IB_GID_INDEX set by environment to 3" in e
                                                       for e in nccl.evidence)
    cause = rep.cause
    assert (cause.id, cause.station) == ("env", "B")
    assert "GID index 3 in use" in cause.summary and "RoCE v2 GID of 198.18.0.2 on mlx5_0 is index 5" in cause.summary
    assert "NCCL_IB_GID_INDEX=5 on B" in cause.next
    assert find(rep, "env", "pass", "GID index 3 = the RoCE v2 GID of 198.18.0.1").station == "A"
    assert find(rep, "links", "warn", "RoCE v2 GID index 5").station == "B"
    stacks = find(rep, "hang", "fail", "stacks:")
    assert "B wait" in stacks.summary and "pynccl.py" in stacks.summary
    assert "local_ack_timeout_err" in find(rep, "hang", "fail", "retry counters rising").summary
    assert rep.suggestions() == {"B": {"NCCL_IB_GID_INDEX": "5"}}
    relaunch = find(rep, "relaunch", "skip")
    assert "--set B:NCCL_IB_GID_INDEX=5" in relaunch.summary and "not run" in relaunch.summary


@pytest.mark.parametrize("fault, rungs, rung, status, text", [
    ("nccl-env-diff", ["env"], "env", "fail", "NCCL_NET_GDR_LEVEL differs: A: (unset), B: LOC"),
    ("nccl-version-diff", ["env"], "env", "fail", "NCCL version differs: A 2.30.7, B 2.27.3"),
    # the host's 2.27.3 is a known-bad build on ARM (marin-community/marin#8038)
    ("nccl-version-diff", ["env"], "env", "fail", "NCCL 2.27.3 on B is a known-bad build: silent collective wedge"),
    ("mgmt-master", ["addresses"], "addresses", "fail", "is A's management address (eno1)"),
    ("socket-fallback", ["nccl"], "nccl", "fail", "fell back to TCP sockets"),
    ("kernel-errors", ["hang"], "hang", "fail", "kernel log since the start: Xid 119, link-down"),
])
async def test_each_workbench_fault_fails_its_rung(sim_factory, fault, rungs, rung, status, text):
    h = await sim_factory(faults=[fault], time_scale=0.005)
    started(h, ago=30)
    rep = await run_doctor(h.config, rungs=rungs, options=FAST)
    hit = find(rep, rung, status, text)
    assert hit.next and rep.exit_code == 1


async def test_clock_skew_is_named_by_the_first_rung(sim_factory):
    """The ladder never mentioned clock skew (the lab's verdict under it was rdma)."""
    h = await sim_factory(faults=["clock-skew"], time_scale=0.005)
    rep = await run_doctor(h.config, rungs=["links", "rdma"], options=FAST)
    skew = find(rep, "links", "fail", "clock-skew: B is")
    assert "ahead of A" in skew.summary and "NTP" in skew.next
    assert find(rep, "links", "fail", "clock-unsynced").station == "B"
    assert rep.verdict == "links"


async def test_stale_rail_is_a_stale_port_in_both_directions(sim_factory):
    h = await sim_factory(faults=["stale-rail"])
    rep = await run_doctor(h.config, rungs=["rdma"], options=DoctorOptions(rdma_gpu=False))
    stale = [r for r in rep.of("rdma") if ", stale port (" in r.summary]
    assert {r.station for r in stale} == {"A->B", "B->A"} and all("mlx5_0 host" in r.summary for r in stale)
    assert "power-cycle" in stale[0].next and "reseat" in stale[0].next
    assert find(rep, "rdma", "pass", "mlx5_1 host memory").summary  # the twin port is healthy
    assert find(rep, "rdma", "warn", "mlx5_0 latency").summary  # p99 far above 10 us


async def test_mtu_mismatch_hangs_nccl_tests_and_the_timeout_is_the_finding(sim_factory):
    h = await sim_factory(faults=["mtu-mismatch"])
    t0 = time.monotonic()
    rep = await run_doctor(h.config, rungs=["nccl"], options=DoctorOptions(nccl_timeout_s=4.0))
    hit = find(rep, "nccl", "fail", "no result within 4 s: NCCL hangs after init")
    assert "MTU" in hit.next and any("Init COMPLETE" in e for e in hit.evidence)
    assert time.monotonic() - t0 < 60


async def test_collective_hang_both_ranks_in_one_all_reduce(sim_factory):
    h = await sim_factory(faults=["collective-hang"], time_scale=0.05)
    started(h, ago=24)  # ready after ~21 s, hung 30 engine-seconds (1.5 s) later; the watchdog ends A at ~53 s
    rep = await run_doctor(h.config, rungs=["nccl", "hang"], options=FAST)
    assert find(rep, "nccl", "pass").status == "pass"  # nccl-tests fine: not the network
    stacks = find(rep, "hang", "fail", "same collective: all_reduce at")
    assert "pynccl.py" in stacks.summary
    assert find(rep, "hang", "warn", "a silent hang").station in ("A", "B")
    assert find(rep, "hang", "warn", "no memory traffic in both samples")
    # the rung concludes, as the cause, and its next step moves on (never back to rungs 1-3)
    assert rep.verdict == "hang" and rep.cause is not None
    assert rep.cause.summary.startswith("a silent hang: software, not the network") and "nccl pass" in rep.cause.summary
    out = io.StringIO()
    print_report(rep, out)
    text = out.getvalue()
    assert "cause: hang A,B: a silent hang: software, not the network" in text
    assert "next: The collective will not complete by itself" in text and "restart the whole service" in text


async def test_a_cancelled_run_leaves_no_task_behind(sim_factory):
    """Cancelled as nccl-tests starts (the caller's cancel, not the stop key): the stream is closed and
    waited for, the run's facts and commands cancelled and waited for, and the cancel propagates."""
    h = await sim_factory(faults=["mtu-mismatch"])  # nccl-tests hangs after init: it streams until cancelled

    def run(under_way: asyncio.Event):
        def progress(rung: str, text: str) -> None:
            if text.startswith("all_reduce_perf across"):
                under_way.set()
        return run_doctor(h.config, rungs=["nccl"], options=DoctorOptions(nccl_timeout_s=60.0), on_progress=progress)

    assert await cancel_when_under_way(run) == []


async def test_healthy_pair_passes_every_rung(sim_factory):
    h = await sim_factory(time_scale=0.005)
    started(h, ago=30)
    rep = await run_doctor(h.config, options=DoctorOptions(nccl_timeout_s=20, counter_interval_s=1.0))
    bad = [(r.id, r.station, r.summary) for r in rep.results if r.status == "fail"]
    assert not bad and rep.verdict == "ok" and rep.exit_code == 0
    assert find(rep, "nccl", "pass", "over IB").summary and find(rep, "hang", "pass", "idle in its loop")
    assert find(rep, "rdma", "pass", "gpu memory").summary  # GB300: GPUDirect runs too


async def test_cli_json_contract_exit_codes_and_usage(sim_factory, capsys):
    h = await sim_factory(faults=["gid-mismatch"], time_scale=0.005)
    started(h, ago=30)
    rc = await _cli(["doctor", "--config", str(h.config_path), "--json", "--rung", "env", "--rung", "5"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["verdict"] == "env" and out["cause"]["station"] == "B"
    assert {r["id"] for r in out["rungs"]} == {"env", "addresses"}
    assert all(set(r) == {"id", "station", "status", "summary", "evidence", "next"} for r in out["rungs"])
    assert all(isinstance(r["evidence"], list) for r in out["rungs"])
    for argv, msg in ((["--rung", "nope"], "unknown rung"), (["--set", "B:NCCL_IB_GID_INDEX=5"], "--rung relaunch"),
                      (["--rung", "relaunch", "--set", "Z:NCCL_X=1"], "no station named"),
                      (["--rung", "relaunch"], "without --yes"), (["--nccl-timeout", "0"], "seconds > 0")):
        assert await _cli(["doctor", "--config", str(h.config_path)] + argv) == 2
        assert msg in capsys.readouterr().err


async def _cli(argv):
    import asyncio

    return await asyncio.to_thread(main, argv)


async def test_debug_relaunch_fixes_b_and_restores_the_normal_command(sim_factory, capsys):
    h = await sim_factory(faults=["nccl-timeout"], time_scale=0.005)
    started(h)
    rc = await _cli(["doctor", "--config", str(h.config_path), "--rung", "relaunch", "--set",
                     "B:NCCL_IB_GID_INDEX=5", "--yes", "--json", "--timeout", "60"])
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert "-    -e NCCL_IB_GID_INDEX=3 \\" in cap.err and "+    -e NCCL_IB_GID_INDEX=5 \\" in cap.err  # shown first
    (r,) = out["rungs"]
    assert rc == 0 and r["status"] == "pass" and "B: NCCL_IB_GID_INDEX 3 -> 5" in r["summary"], (r, cap.err[-3000:])
    assert "ready in" in r["summary"] and "normal command back: failed" in r["summary"]  # still the real cause
    (t,) = out["tries"]
    assert t["result"] == "ready" and "GID 5" in t["nccl"]["B"] and "GID 3" in t["nccl"]["A"]
    # the normal command is back: B runs with index 3 again (and hangs, as before the try)
    args = h.world.state("B")["containers"]["glm53"]["runs"][-1]["args"]
    assert "NCCL_IB_GID_INDEX=3" in args and "NCCL_IB_GID_INDEX=5" not in args
    assert doctor_store.tries(h.config)[-1]["try"] == 1


async def test_relaunch_keep_leaves_the_try_serving(sim_factory):
    h = await sim_factory(faults=["nccl-timeout"], time_scale=0.005)
    started(h)
    plan = RelaunchPlan({"B": {"NCCL_IB_GID_INDEX": "5"}}, restore=False)
    rep = await run_doctor(h.config, rungs=["relaunch"], options=DoctorOptions(relaunch=plan, ready_timeout_s=60))
    (r,) = rep.of("relaunch")
    assert r.status == "pass" and "kept" in r.summary, (r.summary, r.evidence)
    assert any(e.startswith("--- B: normal launch") for e in r.evidence)
    args = h.world.state("B")["containers"]["glm53"]["runs"][-1]["args"]
    assert "NCCL_IB_GID_INDEX=5" in args


async def test_the_bundle_carries_the_last_report(sim_factory):
    from console.commands.bundle import build_bundle

    h = await sim_factory(faults=["gid-mismatch"], time_scale=0.005)
    started(h, ago=30)
    rep = await run_doctor(h.config, rungs=["env"], options=FAST)
    doctor_store.save_report(h.config, rep.to_dict())
    import asyncio

    members, manifest = await asyncio.to_thread(build_bundle, h.config, 50, False)
    data = json.loads(members["doctor.json"])
    assert data["report"]["verdict"] == "env" and manifest["doctor"]["verdict"] == "env"
    assert json.loads(members["manifest.json"])["doctor"]["included"] is True
