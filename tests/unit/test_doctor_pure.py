"""The workbench's pure pieces: verdict classes, nccl-tests judgement, the report's verdict and JSON
contract, rung selection, override parsing and the launch command diff."""

from __future__ import annotations

import io

import pytest

from console.commands.doctor import print_report
from console.doctor.context import Countdown
from console.doctor.model import DoctorReport, RungResult
from console.doctor.relaunch import changes, diff, parse_set, with_env
from console.doctor.rungs import addresses, env, nccl, rdma
from console.doctor.runner import RUNG_IDS, select
from console.probes.nccl_tests import parse_nccl_info, parse_nccl_tests
from console.probes.rdma import parse_show_gids
from console.service.engines import LaunchSpec


def test_rdma_classes_on_their_edges():
    # a 400 Gb/s Station rail, NVIDIA's host-memory figure 220-230 Gb/s is the reference
    assert rdma.classify(220.0, 400, 220)[:2] == ("pass", "healthy")
    assert rdma.classify(176.0, 400, 220)[:2] == ("pass", "healthy")  # exactly 80 %
    assert rdma.classify(150.0, 400, 220)[:2] == ("warn", "degraded")
    assert rdma.classify(92.0, 400, 220)[:2] == ("fail", "degraded")  # slow-rail
    # a 200 Gb/s Spark port at 8-25 Gb/s is a stale port: reseat / power-cycle
    status, klass, nxt = rdma.classify(18.0, 200, 95)
    assert (status, klass) == ("fail", "stale port") and "power-cycle" in nxt
    assert rdma.classify(25.0, 200, 95)[1] == "stale port" and rdma.classify(26.0, 200, 95)[1] == "degraded"
    assert rdma.classify(190.0, 200, 0)[0] == "pass"  # no expected figure: the line rate


TABLE = """\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
        1024           256     float     sum      -1     22.1    0.05    0.05      0     22.2    0.05    0.05      0
  1073741824     268435456     float     sum      -1  24521.0   43.79   43.79      0  24766.2   43.36   43.36      0
# Avg bus bandwidth    : 16.5432
"""
IB = "a:1:1 [0] NCCL INFO Using network IB\na:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n"


def test_nccl_judgement():
    res, info = parse_nccl_tests(TABLE), parse_nccl_info(IB.splitlines())
    status, summary, _ = nccl.judge(res, info, True, 40.0, True, 90)
    assert status == "pass" and "43.79 GB/s at 1024 MiB" in summary and "average 16.54" in summary
    assert nccl.judge(res, info, True, 50.0, True, 90)[0] == "warn"  # below the expected figure
    assert nccl.judge(res, info, True, 100.0, True, 90)[0] == "fail"  # under half of it
    hang = nccl.judge(None, parse_nccl_info(["a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 - Init COMPLETE"]),
                      False, 40.0, True, 12)
    assert hang[0] == "fail" and hang[1] == "no result within 12 s: NCCL hangs after init"
    sock = parse_nccl_info(["a:1:1 [0] NCCL INFO Using network Socket"])
    assert "fell back to TCP sockets" in nccl.judge(res, sock, True, 40.0, True, 90)[1]
    # an IB completion error: the odd local GID (not IPv4-mapped) names the rank that cannot talk RoCE
    comp = parse_nccl_info([
        "a:1:2 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 198.18.0.2<50012> with "
        "status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:198.18.0.1 remoteGids::ffff:198.18.0.2",
        "b:1:2 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 198.18.0.1<50012> with "
        "status=12 opcode=0 len=0 vendor err 129 (Send) localGid fd00::2 remoteGids::ffff:198.18.0.1"])
    st, summary, nxt = nccl.judge(None, comp, True, 40.0, True, 90)
    assert st == "fail" and "local GID fd00::2" in summary and "GID index" in nxt


def test_report_verdict_cause_and_json_contract():
    rep = DoctorReport(order=RUNG_IDS)
    rep.results = [RungResult("links", "A", "pass", "ok"), RungResult("nccl", "A,B", "fail", "hang"),
                   RungResult("env", "B", "fail", "GID index 3 in use ...", ("show_gids",), "set 5", cause=True,
                              suggest=(("B", "NCCL_IB_GID_INDEX", "5"),)),
                   RungResult("rdma", "A->B", "warn", "degraded")]
    assert rep.verdict == "nccl" and rep.cause.id == "env" and rep.exit_code == 1
    assert rep.suggestions() == {"B": {"NCCL_IB_GID_INDEX": "5"}}
    d = rep.to_dict()
    assert set(d) >= {"rungs", "verdict"} and d["verdict"] == "nccl" and d["cause"]["station"] == "B"
    assert all(set(r) == {"id", "station", "status", "summary", "evidence", "next"} for r in d["rungs"])
    assert d["rungs"][2]["evidence"] == ["show_gids"]
    ok = DoctorReport(order=RUNG_IDS, results=[RungResult("links", "A", "warn", "x")])
    assert ok.verdict == "ok" and ok.exit_code == 0 and ok.cause is None


def test_rung_selection():
    assert [r.id for r in select(None)] == list(RUNG_IDS)
    assert [r.id for r in select(["hang", "4", "links"])] == ["links", "env", "hang"]  # ladder order
    assert [r.id for r in select(["1,2"])] == ["links", "rdma"]
    with pytest.raises(ValueError, match="unknown rung 'nope'"):
        select(["nope"])


SPEC = LaunchSpec("B", 1, "glm53", ("docker", "run", "-d", "--name", "glm53", "-e", "NCCL_DEBUG=INFO",
                                    "-e", "NCCL_IB_GID_INDEX=3", "--entrypoint", "vllm", "img@sha256:1", "serve"),
                  image="img@sha256:1")


def test_overrides_and_the_diff():
    o = parse_set(["B:NCCL_IB_GID_INDEX=5", "NCCL_NVLS_ENABLE=0", "-A:NCCL_IB_GID_INDEX"], ["A", "B"])
    assert o == {"B": {"NCCL_IB_GID_INDEX": "5", "NCCL_NVLS_ENABLE": "0"},
                 "A": {"NCCL_NVLS_ENABLE": "0", "NCCL_IB_GID_INDEX": None}}
    for bad, msg in (("C:NCCL_X=1", "no station named 'C'"), ("PATH=/x", "not an NCCL"),
                     ("NCCL_X=$(reboot)", "may hold"), ("NCCL_X", "expected NAME=VALUE")):
        with pytest.raises(ValueError, match=msg):
            parse_set([bad], ["A", "B"])
    new = with_env(SPEC, {"NCCL_IB_GID_INDEX": "5", "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV"})
    assert "NCCL_IB_GID_INDEX=5" in new.argv and "NCCL_IB_GID_INDEX=3" not in new.argv
    assert new.argv.index("NCCL_DEBUG_SUBSYS=INIT,NET,ENV") < new.argv.index("--entrypoint")  # before the image
    gone = with_env(SPEC, {"NCCL_IB_GID_INDEX": None})
    assert not any(a.startswith("NCCL_IB_GID_INDEX") for a in gone.argv)
    text = diff(SPEC, new)
    assert "-    -e NCCL_IB_GID_INDEX=3 \\" in text and "+    -e NCCL_IB_GID_INDEX=5 \\" in text
    assert changes(SPEC, new) == ["B: NCCL_IB_GID_INDEX 3 -> 5"]  # the debug variables are not "changes"


SHIFTED = """\
DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV
mlx5_0\t1\t0\tfe80:0000:0000:0000:5aa2:e1ff:feb1:f999\t              \tv1\tenp1s0f1np1
mlx5_0\t1\t3\tfd00:0000:0000:0000:0000:0000:0000:0002\t              \tv2\tenp1s0f1np1
mlx5_0\t1\t5\t0000:0000:0000:0000:0000:ffff:c612:0002\t198.18.0.2    \tv2\tenp1s0f1np1
"""


def test_gid_description_and_launch_addresses():
    rows = parse_show_gids(SHIFTED)
    assert env.describe_gid(rows, "mlx5_0", 3) == ("index 3 is the RoCE v2 GID of an IPv6 address "
                                                   "(fd00:0000:0000:0000:0000:0000:0000:0002)")
    assert "IPv4 198.18.0.2" in env.describe_gid(rows, "mlx5_0", 5)
    assert env.describe_gid(rows, "mlx5_0", 7) == "index 7 does not exist on mlx5_0"
    assert addresses.master_of(["vllm", "serve", "m", "--master-addr", "198.19.0.1"]) == ("198.19.0.1", "--master-addr")
    assert addresses.master_of(["python3", "-m", "sglang.launch_server", "--dist-init-addr", "198.18.0.1:20000"]) \
        == ("198.18.0.1", "--dist-init-addr")
    script = "until ray start --block --address=198.18.0.1:6379 --node-ip-address=198.18.0.2; do sleep 5; done"
    assert addresses.master_of(["bash", "-c", script]) == ("198.18.0.1", "ray --address")
    assert addresses.node_ip_of(["bash", "-c", script]) == "198.18.0.2"


def test_every_verdict_has_a_cause_line_and_a_cancel_is_never_ok():
    """A cancelled run says "cancelled", never "verdict: ok"; every verdict (a named cause,
    a symptom only, a cancel, all passing) ends on a cause line and a next step."""
    def printed(rep):
        out = io.StringIO()
        print_report(rep, out)
        return out.getvalue()

    cancelled = DoctorReport(order=RUNG_IDS, cancelled=True,
                             results=[RungResult("links", "A", "pass", "ok"),
                                      RungResult("rdma", "A,B", "skip", "cancelled after 12.0 s")])
    assert cancelled.verdict == "cancelled" and cancelled.to_dict()["verdict"] == "cancelled"
    text = printed(cancelled)
    assert "verdict: ok" not in text and "verdict: cancelled" in text
    assert "cause: none: the run was cancelled in rdma" in text and "next: Run the ladder again" in text
    symptom = DoctorReport(order=RUNG_IDS, results=[RungResult("nccl", "A,B", "fail", "no result within 90 s",
                                                               (), "Read the NCCL lines")])
    assert "cause: not named by a rung; the first failure is nccl A,B: no result within 90 s" in printed(symptom)
    assert symptom.to_dict()["conclusion"]["next"] == "Read the NCCL lines"
    ok = DoctorReport(order=RUNG_IDS, results=[RungResult("links", "A", "pass", "ok")])
    assert "verdict: ok\ncause: none found: no rung failed (1 rungs ran)\n  next: If the service" in printed(ok)


def test_a_long_rung_counts_its_steps_and_the_time_left():
    """8 stations were 2.5 min of rdma with no count: N of M, and the time left from the
    steps done so far."""
    now = [100.0]
    steps = Countdown(4, clock=lambda: now[0])
    assert steps.step("mlx5_0 host memory A -> B") == "1 of 4: mlx5_0 host memory A -> B"
    now[0] += 20
    assert steps.step("x") == "2 of 4: x (about 60 s left)"
    steps.skip(1)
    now[0] += 20
    assert steps.step("y") == "3 of 3: y (about 20 s left)"


def test_a_ladder_skipped_for_want_of_channels_concludes_not_measured_not_none_found():
    """Every rung skipped for an SSH channel shortage proved nothing: the conclusion says "not measured",
    while the verdict and the exit code keep the contract (no rung failed: "ok", 0)."""
    short = "A->B mlx5_0 host memory: not measured: no SSH channel on B (the console's limit, not the network)"
    rep = DoctorReport(order=RUNG_IDS, results=[RungResult("rdma", "A->B", "skip", short),
                                                RungResult("nccl", "A,B", "skip", "nccl-tests not measured: no channel")])
    cause, nxt = rep.conclusion()
    assert cause.startswith("not measured:") and "none found" not in cause and "rdma, nccl" in cause
    assert "Rerun" in nxt
    assert rep.verdict == "ok" and rep.exit_code == 0 and rep.to_dict()["conclusion"]["cause"] == cause
    part = DoctorReport(order=RUNG_IDS, results=[RungResult("links", "A", "pass", "ok"),
                                                 RungResult("rdma", "A->B", "skip", short)])
    cause, _ = part.conclusion()
    assert cause.startswith("none found where measured") and "not measured for want of an SSH channel: rdma" in cause
    clean = DoctorReport(order=RUNG_IDS, results=[RungResult("links", "A", "pass", "ok"),
                                                  RungResult("hang", "A", "skip", "the service is not serving")])
    assert clean.conclusion()[0].startswith("none found: no rung failed")
