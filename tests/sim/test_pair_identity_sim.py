"""``pair-identity`` on the simulated pair: two stations pass (machine-id, GPU UUIDs and host keys
differ, the neighbour entry read without ``dev`` as iproute2 6.1 prints it); a "pair" whose worker
is the head again (same machine-id and GPU UUIDs) is refused with the reasons, and ``check`` fails."""

from __future__ import annotations

from console.remote.cmdlines.identity import MACHINE_ID
from console.station.checks import run_checks
from console.vocabulary import CheckStatus


async def test_two_machines_pass_and_the_neighbour_entry_without_dev_is_read(sim_factory):
    h = await sim_factory()
    (r,) = await run_checks(h.config, only=["pair-identity"])
    assert r.status == CheckStatus.PASS, (r.summary, r.evidence)
    assert "machine-id, GPU UUIDs, host keys differ" in r.summary
    assert '"lladdr"' in r.evidence and '"dev"' not in r.evidence  # the 6.1 shape went through the parser


async def test_one_machine_under_two_names_is_refused(sim_factory):
    h = await sim_factory()
    w = h.world
    head_fs, worker_fs = w.fs_dir("A"), w.fs_dir("B")
    (worker_fs / MACHINE_ID.lstrip("/")).write_text((head_fs / MACHINE_ID.lstrip("/")).read_text())
    uuids = [g["uuid"] for g in w.state("A")["gpus"]]
    with w.edit("B") as st:
        for g, u in zip(st["gpus"], uuids, strict=False):
            g["uuid"] = u
    (r,) = await run_checks(h.config, only=["pair-identity"])
    assert r.status == CheckStatus.FAIL and r.station == "A<->B"
    assert "same machine" in r.summary and "same /etc/machine-id" in r.summary and "same GPU UUID" in r.summary
    assert "host key" not in r.summary  # the sim's stations offer their own keys: that mark says two
    assert "second machine" in r.fix
