"""validate-rdma verdicts from parsed perftest output (pure)."""

from __future__ import annotations

import json

from console.probes.perftest import parse_bw
from console.station.rdma import RdmaRun, gpu_index, judge, overall, to_json

TABLE = """ #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      882805           0.00               {bw}                0.176554
"""


def run(**kw) -> RdmaRun:
    base = dict(rail="mlx5_0", memory="host", server="B", client="A", line_gbps=400.0, expected_gbps=(220.0, 230.0))
    return RdmaRun(**{**base, **kw})


def test_bandwidth_against_the_expected_figure():
    ok = judge(run(), parse_bw(TABLE.format(bw="226.40")))
    assert ok.status == "pass" and ok.gbps_avg == 226.4 and "57% of the 400 Gb/s line rate" in ok.summary
    low = judge(run(), parse_bw(TABLE.format(bw="150.00")))
    assert low.status == "warn" and low.fix
    bad = judge(run(), parse_bw(TABLE.format(bw="92.57")))
    assert bad.status == "fail" and bad.id == "rdma-bandwidth"


def test_errors_map_to_ids():
    assert judge(run(), parse_bw("Couldn't connect to 198.18.0.2:18515\n")).id == "rdma-connect"
    assert judge(run(), parse_bw(" Failed to modify QP 265 to RTR\n")).id == "rdma-qp"
    mr = judge(run(memory="gpu"), parse_bw("Couldn't allocate MR with error=524\n"))
    assert mr.id == "rdma-mr" and mr.status == "fail" and "nvidia-peermem" in mr.fix


def test_gpu_index_by_name_and_json():
    text = "0, NVIDIA RTX PRO 6000 Blackwell Workstation Edition\n1, NVIDIA GB300\n"
    assert gpu_index(text, "NVIDIA GB300") == 1 and gpu_index(text, "NVIDIA GB10") is None
    r = judge(run(), parse_bw(TABLE.format(bw="226.40")))
    data = json.loads(to_json([r]))
    assert data["result"] == "ok" and data["runs"][0]["gbps_avg"] == 226.4
    assert overall([]) == 1  # nothing measured is not a pass


def test_no_rdma_device_is_said_so_never_a_timeout():
    """``ib_write_bw``'s immediate "Did not detect devices" read as a timeout (firewall, wrong IP)."""
    out = " Did not detect devices \n If device exists, check if driver is up\n"
    r = judge(run(), parse_bw(out))
    assert r.id == "rdma-no-device" and r.status == "fail"
    assert "no RDMA device (ib_write_bw: Did not detect devices" in r.summary
    assert "firewall" not in r.summary and "Not a network or firewall problem" in r.fix


def test_roce_mtu_from_the_link_mtu_and_the_header():
    from console.probes.perftest import active_mtu, header_fields, roce_mtu

    assert (roce_mtu(9000), roce_mtu(1500), roce_mtu(4200)) == (4096, 1024, 4096)
    assert active_mtu(header_fields(" Mtu             : 1024[B]\n Link type       : Ethernet\n")) == 1024
