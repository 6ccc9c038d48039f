"""Link checks against the simulated stations (real SSH client -> in-process asyncssh -> /bin/sh ->
shims), on both profiles and with every link fault the simulator knows."""

from __future__ import annotations

import json

import pytest

from console.cli import main
from console.station.checks import CHECK_IDS, run_checks
from tests.sim.leaks import cancel_when_under_way


def by(results, id_, station):
    hit = [r for r in results if r.id == id_ and r.station == station]
    assert hit, f"no {id_} for {station}"
    return hit[0]


def failing(results):
    return {(r.id, r.station) for r in results if r.status == "fail"}


async def test_healthy_station_pair_passes_every_check(sim):
    results = await run_checks(sim.config)
    assert {r.id for r in results} == set(CHECK_IDS)
    assert failing(results) == set()
    assert {r.status for r in results if r.id != "api-exposed"} == {"pass"}
    assert by(results, "api-exposed", "A").status == "warn"
    jumbo = by(results, "jumbo-ping", "B->A")
    assert "ping -M do -s 8972" in jumbo.evidence and "0% packet loss" in jumbo.evidence


async def test_healthy_spark_pair_uses_its_own_figures(sim_factory):
    h = await sim_factory(profile="glm53-flash-nvfp4-2x-gb10-sglang")
    results = await run_checks(h.config)
    assert failing(results) == set()
    assert "200000 Mb/s" in by(results, "link-speed", "A").summary
    assert "1472+28 = 1500" in by(results, "jumbo-ping", "A->B").summary  # the profile's MTU is 1500


@pytest.mark.parametrize("fault,expected", [
    ("mtu-mismatch", {("mtu-value", "B"), ("mtu-mismatch", "A<->B"), ("jumbo-ping", "A->B"), ("jumbo-ping", "B->A")}),
    ("link-down", {("link-down", "A"), ("link-down", "B"), ("jumbo-ping", "A->B"), ("jumbo-ping", "B->A"),
                   ("rdma-port-down", "A"), ("rdma-port-down", "B"), ("ssh-a-to-b", "A->B"),
                   ("rail-live", "A"), ("rail-live", "B")}),  # the rail strip's check
    ("clock-skew", {("clock-unsynced", "B"), ("clock-skew", "A<->B")}),
    ("rdma-port-down", {("rdma-port-down", "B")}),
    ("slow-rail", {("link-speed", "A"), ("link-speed", "B")}),
])
async def test_each_fault_fails_exactly_its_checks(sim_factory, fault, expected):
    h = await sim_factory(faults=[fault])
    results = await run_checks(h.config)
    assert failing(results) == expected


async def test_fault_evidence_is_the_tool_output(sim_factory):
    h = await sim_factory(faults=["mtu-mismatch", "clock-skew"])
    results = await run_checks(h.config, only=["jumbo-ping", "clock-skew"])
    assert "local error: message too long, mtu=1500" in by(results, "jumbo-ping", "B->A").evidence
    skew = by(results, "clock-skew", "A<->B")
    assert "ahead of A" in skew.summary and "date +%s.%N" in skew.evidence


async def test_unreachable_station_fails_reachable_skips_the_rest_and_never_hangs(sim_factory):
    from console.station.checks import overall

    h = await sim_factory(faults=["station-unreachable"])
    results = await run_checks(h.config)
    gate = by(results, "station-reachable", "B")
    assert gate.status == "fail" and "no answer" in gate.summary and gate.fix
    assert by(results, "station-reachable", "A").status == "pass"
    b = [r for r in results if "B" in r.station.replace("A->B", "") and r.id != "station-reachable"]
    assert b and all(r.status == "skip" and "unreachable" in r.summary for r in b)
    assert overall(results) == 1  # `check` exits 1: an unreachable station is not a pass
    assert by(results, "link-down", "A").status == "pass"
    assert by(results, "ssh-a-to-b", "A->B").status == "fail"  # A really cannot reach B's sshd


async def test_a_cancelled_pass_leaves_no_command_running(sim):
    """Cancelled once the first check is in (the others' commands in flight): every command of the
    pass is cancelled and waited for, and the cancel propagates."""
    left = await cancel_when_under_way(lambda under_way: run_checks(sim.config, on_result=lambda r: under_way.set()))
    assert left == []


async def test_only_runs_the_named_checks(sim):
    results = await run_checks(sim.config, only=["link-speed", "jumbo-ping@A->B"])
    assert [(r.id, r.station) for r in results] == [("link-speed", "A"), ("link-speed", "B"), ("jumbo-ping", "A->B")]


async def test_env_file_mismatch_is_found_and_secrets_redacted(sim):
    env = sim.world.station_dir("B") / "fs"
    path = next(env.rglob("glm53.env"))
    path.write_text(path.read_text().replace('RANK="1"', 'RANK="0"') + 'export HF_TOKEN="hf_secretvalue"\n')
    results = await run_checks(sim.config, only=["env-mismatch"])
    r = by(results, "env-mismatch", "A,B")
    assert r.status == "fail" and "B: RANK=0, expected 1" in r.summary
    assert "hf_secretvalue" not in r.evidence and "HF_TOKEN=<redacted>" in r.evidence


async def test_checkpoint_and_model_config_differences(sim):
    cfg = next((sim.world.station_dir("B") / "fs").rglob("config.json"))
    cfg.write_text(cfg.read_text().replace("MIXED_PRECISION", "NVFP4"))
    results = await run_checks(sim.config, only=["checkpoint-mismatch", "model-config"])
    assert by(results, "checkpoint-mismatch", "A,B").status == "fail"
    mc = by(results, "model-config", "B")
    assert mc.status == "fail" and "quantization NVFP4, expected MIXED_PRECISION" in mc.summary
    assert by(results, "model-config", "A").status == "pass"


async def test_check_cli_json_contract_and_exit_codes(sim, capsys):
    import asyncio

    # the fixture's server runs in this test's loop; the CLI runs its own loop in a thread
    rc = await asyncio.to_thread(main, ["check", "--json", "--config", str(sim.config_path)])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"checks"}
    for c in data["checks"]:
        assert set(c) == {"id", "station", "status", "summary", "evidence", "fix"}
        assert c["status"] in ("pass", "fail", "warn", "skip")


async def test_output_nobody_understands_fails_with_its_evidence(sim):
    tool = sim.world.root / "bin" / "show_gids"
    tool.write_text("#!/bin/sh\necho 'show_gids: mlx5_0: no such device' >&2\nexit 1\n")
    results = await run_checks(sim.config, only=["roce-gid"])
    r = by(results, "roce-gid", "A")
    assert r.status == "fail" and r.summary == "show_gids failed on A: show_gids: mlx5_0: no such device"
    assert "$ show_gids mlx5_0" in r.evidence and "(exit status 1)" in r.evidence and r.fix


async def test_missing_tool_names_the_package(sim):
    (sim.world.root / "bin" / "show_gids").unlink()  # not on this host either
    results = await run_checks(sim.config, only=["roce-gid"])
    r = by(results, "roce-gid", "B")
    assert r.status == "fail" and r.summary == "show_gids not found on B"
    assert "mlnx-tools" in r.fix and "(exit status 127)" in r.evidence


async def test_absent_checkpoint_needs_free_disk(sim):
    import shutil

    mdir = next((sim.world.station_dir("B") / "fs").rglob("config.json")).parent
    shutil.rmtree(mdir)
    results = await run_checks(sim.config, only=["disk-space", "checkpoint-mismatch", "model-config"])
    disk = by(results, "disk-space", "B")
    assert disk.status == "pass" and "checkpoint needs 464 GB" in disk.summary  # df of the nearest parent
    assert by(results, "checkpoint-mismatch", "A,B").summary == "checkpoint incomplete or absent on B"
    assert by(results, "model-config", "B").status == "fail"
