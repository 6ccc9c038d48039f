"""Launch hazards over SSH checked before launch, on the simulated stations: the
loginctl / systemd-analyze / docker image inspect shims print the real formats."""

from __future__ import annotations

import dataclasses

from console.service.actions import run_action
from console.station.checks import run_checks


def one(results, id_, station):
    hit = [r for r in results if r.id == id_ and r.station == station]
    assert hit, f"no {id_}@{station}"
    return hit[0]


async def test_clean_stations_pass_remove_ipc_because_the_user_lingers(sim):
    results = await run_checks(sim.config, only=["remove-ipc", "image-tag"])
    for st in ("A", "B"):
        r = one(results, "remove-ipc", st)
        assert r.status == "pass" and "lingers" in r.summary, r
    tag = one(results, "image-tag", "A,B")
    assert tag.status == "pass" and "names the same build everywhere" in tag.summary


async def test_fault_remove_ipc_fails_the_check_with_the_stations_own_evidence(sim_factory):
    h = await sim_factory(faults=["remove-ipc"])
    results = await run_checks(h.config, only=["remove-ipc"])
    a, b = one(results, "remove-ipc", "A"), one(results, "remove-ipc", "B")
    assert b.status == "pass"
    assert a.status == "fail"
    assert "RemoveIPC=yes (built-in default" in a.summary and "does not linger" in a.summary
    assert "head blocks forever" in a.summary
    assert "Linger=no" in a.evidence and "#RemoveIPC=yes" in a.evidence and "loginctl show-user" in a.evidence
    assert "sudo loginctl enable-linger" in a.fix and "RemoveIPC=no" in a.fix


async def test_the_launch_stops_at_the_preflight_and_names_remove_ipc(sim_factory):
    h = await sim_factory(faults=["remove-ipc"])
    result = await run_action(h.config, "launch")
    assert result.result != "ok"
    assert "preflight failed: remove-ipc@A" in result.summary, result.summary
    assert any(st == "A" and "does not linger" in line for st, line in result.evidence), result.evidence
    assert h.world.state("A")["containers"]["glm53"]["runs"] == []  # nothing was started


async def test_a_moving_tag_with_different_builds_fails_image_tag(sim_factory):
    h = await sim_factory()
    image = "vllm/vllm-openai:latest"
    for name, when in (("A", "2026-11-20"), ("B", "2026-12-01")):
        with h.world.edit(name) as st:
            st["pulled"] = {image: when}
    cfg = dataclasses.replace(h.config, overrides={**h.config.overrides, "image": image})
    results = await run_checks(cfg, only=["image-tag"])
    r = one(results, "image-tag", "A,B")
    assert r.status == "fail" and "moving tag (:latest) that names different builds" in r.summary, r
    assert "vllm/vllm-openai@sha256:" in r.summary and r.summary.count("@sha256:") == 2
    assert "docker image inspect" in r.evidence and "[A]" in r.evidence and "[B]" in r.evidence
    assert "docker pull vllm/vllm-openai@sha256:" in r.fix and "[overrides] image" in r.fix
    with h.world.edit("B") as st:
        st["pulled"] = {image: "2026-11-20"}  # B pulls A's build: one build everywhere
    r = one(await run_checks(cfg, only=["image-tag"]), "image-tag", "A,B")
    assert r.status == "pass" and "moving tag :latest" in r.summary


async def test_launched_past_the_check_the_head_blocks_on_shared_memory(sim_factory):
    from console.service.actions import ActionOptions

    h = await sim_factory(faults=["remove-ipc"])
    result = await run_action(h.config, "launch", ActionOptions(skip_checks=True), ready_timeout_s=6)
    assert result.result != "ok"
    assert "timed out after 6 s waiting for A to print 'Application startup complete.'" in result.summary
    from console.sim.engine import log_lines

    a = [line for _t, line in log_lines(h.world, "A", h.world.state("A"), "glm53")]
    assert any("No available shared memory broadcast block found in 60 seconds" in ln for ln in a)
    assert not any("Application startup complete" in ln for ln in a)


async def test_env_rung_says_it_used_its_own_diff_below_nccl_2_31(sim_factory):
    """The sim's image loads NCCL 2.30.7, which has no ncclras -D."""
    from console.doctor import DoctorOptions, run_doctor
    from tests.sim.test_doctor_sim import started

    h = await sim_factory(time_scale=0.005)
    started(h, ago=30)
    rep = await run_doctor(h.config, rungs=["env"], options=DoctorOptions(rdma_gpu=False))
    agree = next(r for r in rep.of("env") if "variables agree" in r.summary)
    assert "own diff of each container's environment: NCCL 2.30.7 on A: ncclras -D needs 2.31+" in agree.summary
