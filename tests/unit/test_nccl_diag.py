"""NCCL's own diagnostics: the ``NCCL DIAG`` reports of NCCL_RUN_DIAGNOSTICS=1 and of
``ncclras -D``, parsed from NVIDIA's documented examples (tests/fixtures/nccl_diag/README.md cites them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.probes import nccl_diag as nd

FIX = Path(__file__).parent.parent / "fixtures" / "nccl_diag"


def lines(name: str) -> list[str]:
    return (FIX / name).read_text().splitlines()


def test_active_report_all_ok():
    [r] = nd.parse_diag(lines("active_ok.txt"))
    assert r.name == "NCCL Diagnostics" and not r.issues and r.checks() == ["p2p"]
    assert r.completed == "NCCL diagnostics completed in 245.3 ms across 8 ranks"
    assert r.summary() == "NCCL Diagnostics: 1 OK (p2p)"


def test_active_report_partial_p2p_in_a_vllm_log():
    [r] = nd.parse_diag(["(Worker_TP0 pid=412) INFO unrelated line", *lines("active_p2p_partial.txt")])
    assert [i.check for i in r.issues] == ["p2p"]
    assert r.summary() == "NCCL Diagnostics: p2p: only 52/56 GPU-to-GPU peer accesses passed verification"


def test_ras_report_all_ok_names_its_origin_and_checks():
    [r] = nd.parse_diag(lines("ras_ok.txt"))
    assert r.name == "RAS Diagnostics" and r.origin == "node042:12345" and not r.issues
    assert r.checks() == ["GPU inventory", "CUDA driver version", "ECC", "NVLink", "NCCL environment"]


def test_ras_env_mismatch_groups_ranks_by_value():
    [r] = nd.parse_diag(lines("ras_env_mismatch.txt"))
    texts = [i.text for i in r.issues]
    assert "NCCL_DEBUG=INFO on rank(s) {0,1,2,3}" in texts and "NCCL_DEBUG=WARN on rank(s) {4,5,6,7}" in texts
    assert r.summary() == ("RAS Diagnostics: 1 OK (GPU inventory); NCCL environment: mismatch across 8 ranks in "
                           "comm 0x1234 for NCCL_DEBUG")


def test_busy_cut_short_and_no_report():
    assert nd.busy((FIX / "ras_busy.txt").read_text()) and nd.parse_diag(lines("ras_busy.txt")) == []
    [r] = nd.parse_diag(lines("ras_ok.txt")[:3])  # the tail of a log: no completion line
    assert r.completed is None and r.summary().endswith("(report cut short)")
    assert nd.parse_diag(["ncclras: unknown option", "NCCL INFO NCCL version 2.30.7"]) == []


@pytest.mark.parametrize("version,has", [("2.31.2", True), ("2.32.6", True), ("2.30.7", False), (None, False)])
def test_diagnostics_need_nccl_2_31(version, has):
    assert nd.has_diagnostics(version) is has


# --- the env rung's use of them (console/doctor/rungs/env_ras.py) and the relaunch's summary
def test_env_rung_asks_ncclras_only_on_2_31_everywhere():
    from console.doctor.rungs.env_ras import why_not

    assert why_not({"A": "2.31.2", "B": "2.32.6"}) is None
    assert why_not({"A": "2.31.2", "B": "2.30.7"}) == "NCCL 2.30.7 on B: ncclras -D needs 2.31+"
    assert why_not({"A": None}) == "the NCCL version of A is not in its log"


def test_env_rung_results_from_a_ras_report():
    from console.doctor.rungs.env_ras import ras_results

    [r] = nd.parse_diag(lines("ras_env_mismatch.txt"))
    out = ras_results("A,B", r, "[A] $ docker exec glm53 ncclras -D\n...")
    fail = next(x for x in out if x.status == "fail")
    assert fail.summary == ("ncclras -D (NCCL's RAS diagnostics): NCCL environment: mismatch across 8 ranks in comm "
                            "0x1234 for NCCL_DEBUG") and fail.cause
    assert "NCCL_DEBUG=WARN on rank(s) {4,5,6,7}" in fail.evidence[1] and "same NCCL_*" in fail.next
    ok = next(x for x in out if x.status == "pass")
    assert ok.summary.startswith("ncclras -D (NCCL's RAS diagnostics): GPU inventory consistent across ranks")
    [good] = ras_results("A,B", nd.parse_diag(lines("ras_ok.txt"))[0], "ev")
    assert good.status == "pass" and "NVLink, NCCL environment consistent" in good.summary


def test_the_debug_relaunch_offers_run_diagnostics_and_reads_its_lines():
    from console.doctor.relaunch import OVERRIDE_CHOICES, nccl_summary, parse_set
    from console.remote.cmdlines.nccl import NCCL_LOG_PATTERN

    assert "NCCL_RUN_DIAGNOSTICS" in OVERRIDE_CHOICES and "NCCL DIAG" in NCCL_LOG_PATTERN
    assert parse_set(["NCCL_RUN_DIAGNOSTICS=1"], ["A", "B"]) == {"A": {"NCCL_RUN_DIAGNOSTICS": "1"},
                                                                 "B": {"NCCL_RUN_DIAGNOSTICS": "1"}}
    text = nccl_summary(["host:1:1 [0] NCCL INFO NCCL version 2.31.2+cuda13.0", *lines("active_p2p_partial.txt")])
    assert "NCCL 2.31.2" in text and "NCCL Diagnostics: p2p: only 52/56 GPU-to-GPU peer accesses" in text
