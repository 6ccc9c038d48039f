"""The verdict over every station's evidence (console/doctor/verdict.py), from real-format outputs:
a container without SYS_PTRACE is said as such, a frozen equal count names the collective, RAS absent
says why, a rank gone is named."""

from __future__ import annotations

from console.doctor import evidence
from console.doctor.evidence import StationEvidence
from console.doctor.verdict import judge
from tests.ui.pair_app import pair_config
from tests.unit.test_probes_hang import fixture

# py-spy 0.3/0.4 inside a container started without --cap-add SYS_PTRACE (ptrace is refused even to root)
DENIED = ("=== PID 2657: VLLM::Worker_TP0\nPermission Denied: Try running again with elevated permissions by going "
          "'sudo env \"PATH=$PATH\" !!'\nNO-PY-SPY\n")
IN_ALLREDUCE = """=== PID 2657: VLLM::Worker_TP1
Process 2657: VLLM::Worker_TP1
Python v3.12.3 (/usr/bin/python3.12)

Thread 2657 (active): "MainThread"
    ncclAllReduce (libnccl.so.2)
    all_reduce (vllm/distributed/device_communicators/pynccl.py:156)
    forward (vllm/model_executor/layers/linear.py:1401)
"""


def station(name: str, pyspy: str, ras: str | None, running: bool = True) -> StationEvidence:
    ev = StationEvidence(name)
    ev.container = {"name": "glm53", "state": "running" if running else "exited", "exit_code": None if running else 137}
    if running:
        evidence._pyspy(ev, pyspy)
        evidence._flight_recorder(ev, "NO-FR-BUFFER\nNO-FR-PIPE\n")
        for n in (1, 2):
            evidence._ras_read(ev, ras, n)
    ev.counters = {"status": "ok", "interval_s": 3.0, "rdma_bytes_moved": 0, "retries_rising": {}, "frozen": True}
    return ev


def test_no_sys_ptrace_is_said_and_the_other_evidence_still_judges():
    evs = {"A": station("A", DENIED, fixture("ras_json_frozen_equal.json")),
           "B": station("B", IN_ALLREDUCE, fixture("ras_json_frozen_equal.json"))}
    assert evs["A"].pyspy["status"] == "permission-denied"
    assert evs["A"].pyspy["note"] == "py-spy: permission denied — launch with --cap-add SYS_PTRACE"
    assert evs["A"].flight_recorder["status"] == "not-enabled"
    verdict, findings = judge(pair_config(), evs, 3.0)
    assert "A: permission denied — launch with --cap-add SYS_PTRACE" in findings["pyspy"]
    assert verdict.startswith("every rank stuck in all_reduce (B in it by the stacks)"), verdict
    assert "none to blame" in verdict
    assert "RDMA counters frozen on both sides" in verdict
    assert findings["ras"].startswith("RAS: every rank at AllReduce op 1842, frozen over 3 s")


def test_ras_absent_says_why_and_a_gone_rank_is_named():
    refused = fixture("ras_connect_failed.txt")
    evs = {"A": station("A", IN_ALLREDUCE.replace("TP1", "TP0"), refused), "B": station("B", "", None, running=False)}
    assert evs["A"].ras["status"] == "unavailable" and "NCCL_RAS_ENABLE=0" in evs["A"].ras["note"]
    verdict, findings = judge(pair_config(), evs, 3.0)
    assert verdict.startswith("B (container exited, exit code 137) gone while A waits in all_reduce"), verdict
    assert findings["ras"].startswith("RAS not read: A: no RAS service answers")


def test_the_archive_masks_secrets_in_every_file():
    from console.commands.hang_report import members
    from console.config import masker
    from console.diagnosis import redact
    from console.doctor.evidence import HangEvidence

    cfg = pair_config()
    ev = station("A", IN_ALLREDUCE, fixture("ras_json_frozen_equal.json"))
    ev.logs = ["(APIServer pid=1) export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123 and --api-key sk-live-1234567890abcdef"]
    ev.raw["kernel.txt"] = "NVRM: Xid (PCI:0000:01:00): 79, HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123"
    mask = masker(cfg)
    files = members(HangEvidence({"A": ev}, "v", {"ras": "x"}, 0.0, 1.0, 3.0, True), lambda t: redact(mask(t)))
    assert {"evidence.json", "verdict.txt", "manifest.json", "stations/A/logs.txt", "stations/A/kernel.txt",
            "stations/A/ras-2.txt", "stations/A/pyspy.txt"} <= set(files)
    blob = b"".join(files.values())
    assert b"hf_abcdefghijklmnopqrstuvwxyz0123" not in blob and b"sk-live-1234567890abcdef" not in blob


def test_out_of_step_with_no_report_kept_still_judges():
    """A capture whose RAS reads say out of step but whose parsed reports were not kept (a half-kept
    capture, a station's archive read back) judges with ranks as numbers, never a crash."""
    evs = {n: station(n, IN_ALLREDUCE, fixture("ras_json_desync.json")) for n in ("A", "B")}
    for ev in evs.values():
        ev.ras_reports = []
    cfg = pair_config()
    verdict, _ = judge(cfg, evs, 3.0)
    assert "out of step" in verdict, verdict


# a worker still loading its weights (the simulator's and vLLM's loader frames)
LOADING = """=== PID 412: VLLM::Worker_TP1
Process 412: VLLM::Worker_TP1
Python v3.12.3 (/usr/bin/python3.12)

Thread 412 (active+gil): "MainThread"
    load_weights (vllm/model_executor/models/glm4_moe.py:651)
    load_model (vllm/model_executor/model_loader/default_loader.py:277)
    load_model (vllm/v1/worker/gpu_model_runner.py:2602)
"""
IDLE = """=== PID 411: VLLM::Worker_TP0
Process 411: VLLM::Worker_TP0
Python v3.12.3 (/usr/bin/python3.12)

Thread 411 (idle): "MainThread"
    dequeue (vllm/distributed/device_communicators/shm_broadcast.py:794)
"""


def test_ras_frozen_equal_while_a_rank_loads_its_weights_is_a_start_up_not_every_rank_stuck():
    """During a start-up RAS counts every rank at the same early op and the counts stand still (no
    collective runs while the weights load): the verdict says who is still loading, never "every rank
    stuck in the same collective", and its next step is to look again, not to restart."""
    evs = {"A": station("A", IDLE, fixture("ras_json_frozen_equal.json")),
           "B": station("B", LOADING, fixture("ras_json_frozen_equal.json"))}
    verdict, _findings, _covers, step = judge(pair_config(), evs, 3.0, full=True)
    assert verdict.startswith("still starting, not an NCCL hang yet: B loading the model's weights "
                              "(B at load_weights (glm4_moe.py:651))"), verdict
    assert "every rank stuck" not in verdict
    assert "capture again" in step
    # the same counts with a rank in a collective are judged as before: the start-up rule stays out
    evs["B"] = station("B", IN_ALLREDUCE, fixture("ras_json_frozen_equal.json"))
    verdict, _ = judge(pair_config(), evs, 3.0)
    assert "still starting" not in verdict
