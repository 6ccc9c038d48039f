"""Parsers of the NCCL workbench, on real outputs from public reports (each fixture names its source).

Where a report's excerpt stops before the part a test needs, the missing rows are written in the
tool's own print format (cited: the format string in the tool's source) and say so.
"""

from __future__ import annotations

import json

import pytest

from console.probes import ParseError
from console.probes.activity import (
    growth,
    parse_ethtool_stats,
    parse_gpu_activity,
    parse_rdma_statistic,
    spinning,
    split_gpu_sample,
)
from console.probes.docker_env import REDACTED, flag_value, ifname_matches, parse_inspect_json
from console.probes.kernel_log import parse_kernel_log, unreadable
from console.probes.nccl_tests import parse_nccl_info, parse_nccl_tests
from console.probes.perftest_lat import parse_lat
from console.probes.pyspy import parse_pyspy, summarise, wait_point

# --------------------------------------------------------------------------- nccl-tests

# https://github.com/NVIDIA/nccl-tests/issues/293 (NCCL 2.21.5, two A100 nodes over RoCE, mpirun)
NCCL_TESTS_293 = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   3595 on      test1 device  0 [0x81] NVIDIA A100-PCIE-40GB
#  Rank  1 Group  0 Pid   4017 on      test2 device  0 [0x81] NVIDIA A100-PCIE-40GB
test1:3595:3595 [0] NCCL INFO Bootstrap : Using eno1:192.168.160.111<0>
test1:3595:3595 [0] NCCL INFO cudaDriverVersion 12040
NCCL version 2.21.5+cuda12.4
test2:4017:4017 [0] NCCL INFO cudaDriverVersion 12040
test2:4017:4017 [0] NCCL INFO Bootstrap : Using eno1:192.168.160.112<0>
test1:3595:3609 [0] NCCL INFO Plugin Path : /hpcx-v2.18-gcc-mlnx_ofed-ubuntu22.04-cuda12-x86_64/nccl_rdma_sharp_plugin/lib/libnccl-net.so
test1:3595:3609 [0] NCCL INFO P2P plugin IBext_v8
"""

# https://github.com/NVIDIA/nccl/issues/1453 (mpirun --tag-output style: "[0]" before every row and
# glued to the root column)
TAGGED_1453 = """\
[0]      1048576        262144     float     sum      -1[0]    1626.5    0.64    1.24      0[0]    2302.3    0.46    0.87      0
[0]      2097152        524288     float     sum      -1[0]    2325.3    0.90    1.73      0[0]     416.7    5.03    9.65      0
[0]      4194304       1048576     float     sum      -1[0]     622.6    6.74   12.91      0[0]     625.8    6.70   12.85      0
"""

# https://github.com/NVIDIA/nccl-tests/issues/82 (broadcast_perf -c 0: a root column, no redop, "N/A")
BROADCAST_82 = """\
v100-gpu-1:14926:14926 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
NCCL version 2.9.6+cuda11.2
#       size         count    type    root     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2   float       0    45.82    0.00    0.00    N/A    38.17    0.00    0.00    N/A
"""

# https://github.com/NVIDIA/nccl-tests/issues/107 (old header: redop, no root column); the rows are
# written in that build's format (the report's excerpt stops at the header).
OLD_FORMAT_107 = """\
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
  1310720000     327680000     float     sum  2327493    0.56    0.56  0e+00  2325411    0.56    0.56  0e+00
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.563281
"""

# https://github.com/NVIDIA/nccl-tests/issues/284 (2 nodes, NCCL over sockets, a row cut off)
SOCKETS_284 = """\
agzen-master:3867861:3867877 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0
agzen-worker:475220:475232 [0] NCCL INFO Channel 01/0 : 1[0] -> 0[0] [send] via NET/Socket/0
agzen-master:3867861:3868235 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1
agzen-worker:475220:475337 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1
         128            32     float     sum
"""


def test_nccl_tests_rows_from_every_public_format():
    r = parse_nccl_tests(TAGGED_1453)
    assert [x.size for x in r.rows] == [1048576, 2097152, 4194304]
    assert r.rows[2].busbw == pytest.approx(12.91) and r.rows[2].ip_busbw == pytest.approx(12.85)
    b = parse_nccl_tests(BROADCAST_82)
    assert b.rows[0].wrong == "N/A" and b.rows[0].time_us == pytest.approx(45.82) and not b.wrong_rows
    o = parse_nccl_tests(OLD_FORMAT_107)
    assert o.rows[0].algbw == pytest.approx(0.56) and o.avg_busbw_gbytes == pytest.approx(0.563281)
    assert o.out_of_bounds == 0 and not o.wrong_rows


def test_nccl_tests_header_only_is_a_run_without_results():
    r = parse_nccl_tests(NCCL_TESTS_293)
    assert r.rows == [] and r.avg_busbw_gbytes is None and r.ranks == ("test1", "test2")
    s = parse_nccl_tests(SOCKETS_284 + "# Avg bus bandwidth    : 1.1\n")
    assert s.rows == []  # the cut row is not a row
    with pytest.raises(ParseError):
        parse_nccl_tests("mpirun: command not found\n")


def test_nccl_tests_failure_line_is_kept():
    text = NCCL_TESTS_293 + "test2: Test NCCL failure common.cu:1279 'remote process exited or there was a network error'\n"
    r = parse_nccl_tests(text)
    assert r.errors and "remote process exited" in r.errors[0]


def test_nccl_info_from_nccl_tests_293():
    info = parse_nccl_info(NCCL_TESTS_293.splitlines())
    assert info.version == "2.21.5"
    assert info.bootstrap == (("eno1", "192.168.160.111"), ("eno1", "192.168.160.112"))
    assert info.hosts == ("test1", "test2") and info.network is None


def test_nccl_info_sockets_and_gdr_ring_line():
    info = parse_nccl_info(SOCKETS_284.splitlines())
    assert info.transport == "socket"


# https://github.com/NVIDIA/nccl/issues/1814 (the GID index NCCL read and an IB completion error)
GID_1814 = """\
hostname-test:987:1347 [7] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.
hostname-test:987:1347 [7] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 29.87.88.182<55921> with status=12 opcode=1 len=0 vendor err 129 (Send) localGid ::ffff:29.87.4.221 remoteGids::ffff:29.87.88.182
"""
# shared/reference/command-outputs.md (NCCL_DEBUG=INFO lines of a healthy RoCE run and a fallback)
HEALTHY_IB = """\
station-a:412:530 [0] NCCL INFO Bootstrap : Using enp1s0f1np1:192.168.100.1<0>
station-a:412:530 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.1<0>
station-a:412:530 [0] NCCL INFO Using network IB
station-a:412:530 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'
station-a:412:530 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
station-a:412:530 [0] NCCL INFO comm 0x55d5c8a000 rank 0 nranks 2 cudaDev 0 nvmlDev 1 busId 1000 commId 0x8f - Init COMPLETE
"""


def test_nccl_info_gid_index_and_completion_error():
    info = parse_nccl_info(GID_1814.splitlines())
    assert info.gid_index == 3 and info.env == {"NCCL_IB_GID_INDEX": "3"}
    (err,) = info.completion_errors
    assert err.status == "12" and err.local_gid == "::ffff:29.87.4.221" and err.remote_gid == "::ffff:29.87.88.182"
    assert info.warnings


def test_nccl_info_healthy_roce():
    info = parse_nccl_info(HEALTHY_IB.splitlines())
    assert info.network == "IB" and info.transport == "gdrdma" and info.gdr_enabled
    assert info.ib_devices == ("mlx5_0:1/RoCE", "mlx5_1:1/RoCE")
    assert info.oob == ("enp1s0f1np1", "192.168.100.1") and info.init_complete


# --------------------------------------------------------------------------- py-spy

# https://github.com/vllm-project/vllm/issues/50835 (vLLM EngineCore waiting on its workers)
PYSPY_50835 = """\
Process 4085279: VLLM::EngineCore
Python v3.12.13 (/usr/bin/python3.12)

Thread 4085279 (idle): "MainThread"
    poll (zmq/sugar/poll.py:106)
    poll (zmq/sugar/socket.py:1062)
    recv (vllm/distributed/device_communicators/shm_broadcast.py:802)
    dequeue (vllm/distributed/device_communicators/shm_broadcast.py:794)
    get_response (vllm/v1/executor/multiproc_executor.py:387)
    _wait_for_response (vllm/v1/executor/multiproc_executor.py:95)
    result (vllm/v1/executor/multiproc_executor.py:90)
"""
# https://github.com/LMCache/LMCache/issues/4759 (a dump script's separator, then a vLLM process)
PYSPY_4759 = """\
    _bootstrap (threading.py:1032)
Thread 87 (idle): "SessionManager-cleanup-thread-ed0ee3650c50"
    wait (threading.py:359)
    wait (threading.py:655)
    _run_loop (lmcache/v1/periodic_thread.py:366)
----- pid 1 (vllm) -----
Process 1: /usr/bin/python3 /usr/local/bin/vllm serve deepseek-ai/DeepSeek-V4-Flash-0731 --tensor-parallel-size 2
Python v3.12.3 (/usr/bin/python3.12)

Thread 1 (idle): "MainThread"
    select (selectors.py:468)
"""
# A worker inside an NCCL all-reduce, written in py-spy's dump format (src/dump.rs: "Thread {id}
# ({status}): \\"{name}\\"", frames "    {function} ({file}:{line})"); older py-spy printed hex ids.
PYSPY_COLLECTIVE = """\
=== PID 2757: VLLM::Worker_TP1
Process 2757: VLLM::Worker_TP1
Python v3.12.3 (/usr/bin/python3.12)

Thread 0x7F1E0B1FF740 (active): "MainThread"
    synchronize (torch/cuda/streams.py:105)
    all_reduce (vllm/distributed/device_communicators/pynccl.py:134)
    __init__ (vllm/distributed/device_communicators/pynccl.py:128)
    worker_main (vllm/v1/executor/multiproc_executor.py:718)
"""


def test_pyspy_engine_core_is_idle_in_its_loop():
    (d,) = parse_pyspy(PYSPY_50835)
    assert d.pid == 4085279 and d.cmdline == "VLLM::EngineCore" and d.python == "3.12.13"
    assert d.main.status == "idle" and d.main.frames[0].function == "poll" and d.main.frames[0].line == 106
    assert wait_point(d).kind == "idle"


def test_pyspy_separator_and_leading_fragment():
    dumps = parse_pyspy(PYSPY_4759)
    assert [d.pid for d in dumps] == [1]
    assert dumps[0].cmdline.startswith("/usr/bin/python3 /usr/local/bin/vllm serve")


def test_pyspy_collective_and_summary():
    (w,) = parse_pyspy(PYSPY_COLLECTIVE)
    assert w.main.id == "0x7F1E0B1FF740" and w.main.status == "active"
    p = wait_point(w)
    assert p.kind == "collective" and p.frame.function == "all_reduce"
    both = summarise({"A": parse_pyspy(PYSPY_COLLECTIVE.replace("TP1", "TP0")), "B": [w]})
    assert both.verdict == "same-collective" and "all_reduce" in both.text
    one = summarise({"A": parse_pyspy(PYSPY_50835), "B": [w]})
    assert one.verdict == "one-elsewhere" and "B waits in all_reduce" in one.text
    gone = summarise({"B": [w]}, missing={"A": "container exited (code 1)"})
    assert gone.verdict == "rank-missing" and "A (container exited" in gone.text


def test_pyspy_error_is_kept_per_process():
    text = "=== PID 2345: vllm serve\nError: Failed to find python version from target process\n"
    (d,) = parse_pyspy(text)
    assert d.error.startswith("Failed to find python version") and wait_point(d).kind == "unknown"
    with pytest.raises(ParseError):
        parse_pyspy("bash: py-spy: command not found\n")


# --------------------------------------------------------------------------- ib_write_lat

# Header block: https://github.com/jcxue/RDMA-Tutorial/issues/8 (ib_write_lat over RoCE). The table
# rows use perftest's REPORT_FMT_LAT (src/perftest_parameters.h; the report's excerpt ends at the header).
LAT_HEADER = """\
---------------------------------------------------------------------------------------
                    RDMA_Write Latency Test
 Dual-port       : OFF\t\tDevice         : mlx4_0
 Number of qps   : 1\t\tTransport type : IB
 Connection type : RC\t\tUsing SRQ      : OFF
 Mtu             : 1024[B]
 Link type       : Ethernet
 GID index       : 1
 Max inline data : 220[B]
 rdma_cm QPs\t : OFF
 Data ex. method : Ethernet
---------------------------------------------------------------------------------------
"""
LAT_TABLE = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
             "99% percentile[usec]   99.9% percentile[usec] \n"
             " 2       1000          1.61           5.70         1.65     \t       1.67        \t0.11   \t\t1.99    "
             " \t\t5.70   \n")
LAT_OLD = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n 2       1000          0.90           6.03         0.92\n"


def test_ib_write_lat_current_and_old_formats():
    r = parse_lat(LAT_HEADER + LAT_TABLE)
    assert r.header["GID index"] == "1" and r.header["Link type"] == "Ethernet"
    assert r.typical_us == pytest.approx(1.65) and r.p99_us == pytest.approx(1.99)
    assert r.last.get("p99.9") == pytest.approx(5.70)
    old = parse_lat(LAT_OLD)
    assert old.typical_us == pytest.approx(0.92) and old.p99_us is None
    err = parse_lat(LAT_HEADER + "Failed to modify QP 265 to RTR\n Unable to Connect the HCA's through the link\n")
    assert err.error == "qp-rtr" and not err.rows


# --------------------------------------------------------------------------- kernel log

KERNEL = [
    # https://github.com/pop-os/pop/issues/3363 (journalctl short, uptime in brackets)
    "Sep 19 16:18:04 bubz kernel: [68185.875295] nvidia 0000:07:00.0: PCIe Bus Error: severity=Correctable, "
    "type=Data Link Layer, (Transmitter ID)",
    # https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1150
    "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149",
    # https://github.com/bigstack-oss/cubecos/issues/733 (mlx5 port flapping)
    "Mar 27 15:37:34 cc1 kernel: mlx5_core 0000:01:00.1 eth1: Link up",
    # https://github.com/Dasharo/coreboot/pull/815 (dmesg -T)
    "[Fri Aug 29 20:09:52 2025] pcieport 0000:00:1d.3: AER: Correctable error message received from 0000:06:00.0",
    # https://github.com/leptonai/gpud/pull/1174 (kmsg)
    "NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained ECC error",
    # https://github.com/hirschmann/nbfc/issues/181 (a localized month: still found by its message)
    "jan. 29 20:50:17 kevin kernel: pcieport 0000:00:1c.5: AER: Corrected error received: id=00e5",
    "Sep 19 16:18:04 bubz kernel: usb 1-2: new high-speed USB device number 3 using xhci_hcd",
]


def test_kernel_log_lines_from_public_reports():
    evs = parse_kernel_log("\n".join(KERNEL))
    assert [e.kind for e in evs] == ["aer", "xid", "link-up", "aer", "xid", "aer"]
    assert evs[1].xid == 45 and evs[1].device == "0000:dc:00"
    assert evs[2].device == "eth1" and evs[2].severity == "info"
    assert evs[4].xid == 94 and evs[4].severity == "error"
    assert evs[0].severity == "warning"


def test_kernel_log_iso_times_and_since():
    text = ("2026-11-20T10:00:01+0000 station-b kernel: mlx5_core 0000:01:00.1 enp1s0f1np1: Link down\n"
            "2026-11-20T10:00:03,512000+00:00 mlx5_core 0000:01:00.1 enp1s0f1np1: Link up\n")
    evs = parse_kernel_log(text)
    assert [e.kind for e in evs] == ["link-down", "link-up"] and evs[0].device == "enp1s0f1np1"
    assert evs[1].time - evs[0].time == pytest.approx(2.512)
    assert [e.kind for e in parse_kernel_log(text, since=evs[1].time - 0.1)] == ["link-up"]
    assert unreadable("No journal files were opened due to insufficient permissions.")
    assert unreadable("dmesg: read kernel buffer failed: Operation not permitted")


# --------------------------------------------------------------------------- docker inspect

# Env entries: https://github.com/mark-ramsey-ri/vllm-dgx-spark/issues/1 (a DGX Spark vLLM container)
SPARK_ENV = ["_CUDA_COMPAT_PATH=/usr/local/cuda/compat", "CUDA_VERSION=13.0.2.006",
             "GLOO_SOCKET_IFNAME=enp1s0f1np1", "HF_TOKEN=[secret]", "NCCL_DEBUG_SUBSYS=INIT,NET",
             "NCCL_DEBUG=INFO", "NCCL_IB_DISABLE=0", "NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1"]


def _inspect(env, args, state="running"):
    return json.dumps([{"Id": "3f1c", "Name": "/glm53", "Path": "vllm", "Args": args,
                        "State": {"Status": state, "StartedAt": "2026-11-20T10:00:00.5Z", "ExitCode": 0},
                        "Image": "sha256:9b1d", "Config": {"Image": "vllm/vllm-openai:v0.30.0", "Env": env}}],
                      indent=4)


def test_docker_inspect_env_and_command_line():
    rt = parse_inspect_json("glm53", _inspect(SPARK_ENV, ["serve", "/models/x", "--master-addr", "198.18.0.1"]))
    assert rt.running and rt.image_id == "sha256:9b1d" and rt.argv[:2] == ("vllm", "serve")
    assert rt.env["HF_TOKEN"] == REDACTED  # never the value
    sel = rt.selected_env()
    assert "CUDA_VERSION" not in sel and sel["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"
    assert sel["GLOO_SOCKET_IFNAME"] == "enp1s0f1np1"
    assert flag_value(rt.argv, "--master-addr") == "198.18.0.1"
    assert parse_inspect_json("glm53", "[]\nError: No such object: glm53\n") is None


def test_ifname_rules_of_nccl():
    assert ifname_matches("enp1s0f1np1", "enp1s0f1np1") is True
    assert ifname_matches("enp1", "enp1s0f1np1") is True  # prefix
    assert ifname_matches("=enp1", "enp1s0f1np1") is False  # exact
    assert ifname_matches("^lo,docker", "enp1s0f1np1") is None  # only excludes: NCCL decides
    assert ifname_matches("^enp", "enp1s0f1np1") is False
    assert ifname_matches("mlx5_0:1,mlx5_1:1", "mlx5_1") is True


# --------------------------------------------------------------------------- counters and GPU activity


def test_rdma_statistic_and_ethtool_counters():
    # iproute2 `rdma statistic show link` prints name/value pairs on one (wrapped) line
    a = parse_rdma_statistic("link mlx5_0/1 rx_write_requests 0 rx_read_requests 0 out_of_sequence 0 "
                             "local_ack_timeout_err 2\n    packet_seq_err 0 duplicate_request 0\n")
    b = parse_rdma_statistic("link mlx5_0/1 rx_write_requests 0 rx_read_requests 0 out_of_sequence 0 "
                             "local_ack_timeout_err 9\n    packet_seq_err 0 duplicate_request 0\n")
    assert growth(a["mlx5_0/1"], b["mlx5_0/1"]) == {"local_ack_timeout_err": 7}
    s = parse_ethtool_stats("NIC statistics:\n     rx_vport_rdma_unicast_bytes: 1200\n"
                            "     tx_vport_rdma_unicast_bytes: 88\n")
    assert s["tx_vport_rdma_unicast_bytes"] == 88
    with pytest.raises(ParseError):
        parse_rdma_statistic("")


def test_gpu_activity_rows_and_spin():
    first = parse_gpu_activity("0, NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 1, 0\n1, NVIDIA GB300, 100, 0\n"
                               "Unable to determine the device handle for GPU00000000:02:00.0: Unknown Error\n")
    second = parse_gpu_activity("0, NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 0, 0\n1, NVIDIA GB300, 99, 1\n")
    assert [g.index for g in first] == [0, 1]
    assert spinning([first, second], "NVIDIA GB300") == [1]
    assert spinning([parse_gpu_activity("0, NVIDIA GB10, 96, [N/A]\n")]) == []


def test_one_gpu_sample_is_both_the_gpu_query_and_the_activity():
    """The capture's one nvidia-smi (the query and the memory's utilization as one more column): each
    row split into the query's row and the activity's; an error line stays the query's (a GPU in error)."""
    from console.probes.nvidia_smi import parse_gpus

    text = ("0, GPU-a, NVIDIA GB300, 1000, 190000, 97, 50, 300.5, 2\n"
            "1, GPU-b, NVIDIA GB300, [N/A], 190000, 0, 40, [N/A], 0\n"
            "Unable to determine the device handle for GPU0000:01:00.0: Unknown Error\n")
    query, activity = split_gpu_sample(text)
    gpus = parse_gpus(query)
    assert [(g.index, g.util_pct, g.power_w, g.error is None) for g in gpus] == [
        (0, 97, 300.5, True), (1, 0, None, True), (2, None, None, False)]
    assert spinning([parse_gpu_activity(activity)], "NVIDIA GB300") == [0]
    assert split_gpu_sample("") == ("", "")
