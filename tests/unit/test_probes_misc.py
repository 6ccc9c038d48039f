"""Clock, perftest, nccl-tests, env file and disk parsers on real formats."""

import pytest

from console.probes import ParseError
from console.probes.clock import ClockReading, parse_clock_sync, parse_epoch, skew
from console.probes.disk import parse_df, parse_model_config, parse_sha256sum, parse_shards
from console.probes.envfile import parse_env
from console.probes.nccl_tests import parse_nccl_tests
from console.probes.perftest import find_error, is_ready, parse_bw

CHRONY_OK = """Reference ID    : A9FEA97B (169.254.169.123)
Stratum         : 4
System time     : 0.000022151 seconds slow of NTP time
Last offset     : -0.000005040 seconds
Leap status     : Normal
"""


def test_clock_sync_forms():
    c = parse_clock_sync(CHRONY_OK)
    assert c.source == "chrony" and c.synchronised and c.offset_s == pytest.approx(-0.000022151)
    bad = parse_clock_sync(CHRONY_OK.replace("Normal", "Not synchronised"))
    assert not bad.synchronised
    assert parse_clock_sync("yes\n").synchronised and not parse_clock_sync("no\n").synchronised
    with pytest.raises(ParseError):
        parse_clock_sync("Failed to query server: Connection refused")


def test_skew_corrected_for_round_trip():
    assert parse_epoch("1764511866.123456789\n") == pytest.approx(1764511866.123456789)
    a = ClockReading(sent=100.0, remote=100.05, received=100.1)  # in sync with us
    b = ClockReading(sent=100.0, remote=102.65, received=100.3)  # 2.5 s ahead, slower round trip
    s, unc = skew(a, b)
    assert s == pytest.approx(2.5) and unc == pytest.approx(0.2)


PERF = """---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF\t\tDevice         : mlx5_0
 Number of qps   : 1\t\tTransport type : IB
 Mtu             : 1024[B]
 Link type       : Ethernet
 GID index       : 3
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      882805           0.00               92.57                0.176554
---------------------------------------------------------------------------------------
"""


def test_perftest_table_and_header():
    r = parse_bw(PERF)
    assert r.bw_avg_gbps == pytest.approx(92.57) and r.rows[0].iterations == 882805
    assert r.header["GID index"] == "3" and r.header["Link type"] == "Ethernet" and r.header["Device"] == "mlx5_0"
    assert r.error is None
    assert is_ready("* Waiting for client to connect... *")


@pytest.mark.parametrize("line,kind", [
    ("Couldn't connect to 198.18.0.2:18515", "connect"),
    ("Failed to modify QP 1234 to RTR", "qp-rtr"),
    ("Couldn't allocate MR with error=524", "mr"),
])
def test_perftest_errors(line, kind):
    assert find_error("junk\n" + line + "\n")[0] == kind
    assert parse_bw(line + "\n").error == kind


def test_perftest_nothing_is_a_parse_error():
    with pytest.raises(ParseError):
        parse_bw("hello\n")


def test_nccl_tests():
    text = """#  Rank  0 Group  0 Pid 548419 on spark-fb97 device  0 [000f:01:00] NVIDIA GB10
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
  4294967296     536870912     float    none      -1  96986.7   44.28   22.14       0  95610.9   44.92   22.46       0
# Avg bus bandwidth    : 21.4033
"""
    r = parse_nccl_tests(text)
    assert r.rows[0].busbw == pytest.approx(22.14) and r.avg_busbw_gbytes == pytest.approx(21.4033)


def test_env_file():
    env = parse_env('# GLM env\nexport RANK="1"\nexport HEAD_IP=198.18.0.1  # head\nNETDEV=\'enp1s0f1np1\'\n\n')
    assert env == {"RANK": "1", "HEAD_IP": "198.18.0.1", "NETDEV": "enp1s0f1np1"}
    with pytest.raises(ParseError):
        parse_env('export RANK="1\n')
    with pytest.raises(ParseError):
        parse_env("echo hello\n")


def test_disk_and_checkpoint():
    d = parse_df("Mounted on            1B-blocks         Avail\n/models    3936818876416 2180413652992\n")
    assert d.mount == "/models" and d.avail_bytes == 2180413652992
    s = parse_shards("9280000000 model-00001-of-00050.safetensors\n9280000000 model-00002-of-00050.safetensors\n")
    assert s.count == 2 and s.total_bytes == 18560000000
    mc = parse_model_config('{"architectures": ["GlmMoeDsaForCausalLM"], '
                            '"quantization_config": {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}}')
    assert mc.architectures == ("GlmMoeDsaForCausalLM",) and mc.quantization == "MIXED_PRECISION"
    with pytest.raises(ParseError):
        parse_model_config("{not json")
    sums = parse_sha256sum("a" * 64 + "  /models/x/config.json\n")
    assert sums == {"config.json": "a" * 64}
