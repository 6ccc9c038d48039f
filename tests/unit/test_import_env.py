"""import-env: the tutorial's ~/glm53.env files become a config that loads, without secrets."""

from __future__ import annotations

import pytest

from console.cli import main
from console.config import load_config
from console.config.envfile_import import ImportEnvError, config_from_envs

A_ENV = """# ~/glm53.env on Station A
export NETDEV="cx8r1"
export RDMA_DEV="mlx5_0"
export LOCAL_IP="192.168.100.10"
export PEER_IP="192.168.100.11"
export RANK="0"
export HF_TOKEN="hf_s3cr3t_value"
export VLLM_API_KEY="sk-never-copied"
export MAX_NUM_SEQS=32
"""
B_ENV = """NETDEV=cx8r2
NCCL_IB_HCA==mlx5_1:1
LOCAL_IP=192.168.100.11
HEAD_IP=192.168.100.10
RANK="1"
"""
VLLM = "glm53-nvfp4-2x-gb300-vllm"


def test_one_file_gives_both_stations_and_says_what_it_assumed():
    imp = config_from_envs([("a.env", A_ENV)], VLLM, {"A": "station-a"})
    a, b = imp.config["stations"]
    assert a == {"name": "A", "host": "station-a", "rank": 0, "rail_netdev": "cx8r1", "rdma_device": "mlx5_0",
                 "rail_ip": "192.168.100.10"}
    assert b["rank"] == 1 and b["rail_ip"] == "192.168.100.11" and b["rail_netdev"] == "cx8r1"
    assert b["host"] == "192.168.100.11"
    assert any("station B: no env file given" in n for n in imp.notes)
    assert imp.config["overrides"] == {"max_num_seqs": 32}
    assert imp.config["api"] == {"api_key_env": "VLLM_API_KEY"}


def test_secret_values_never_reach_the_config_or_the_notes():
    imp = config_from_envs([("a.env", A_ENV)], VLLM)
    text = repr(imp.config) + repr(imp.notes)
    assert "hf_s3cr3t_value" not in text and "sk-never-copied" not in text
    assert any("HF_TOKEN not copied" in n for n in imp.notes)


def test_two_files_each_station_keeps_its_own_devices():
    imp = config_from_envs([("b.env", B_ENV), ("a.env", A_ENV)], VLLM, {"A": "a", "B": "b"})
    a, b = imp.config["stations"]
    assert (a["rail_netdev"], a["rdma_device"]) == ("cx8r1", "mlx5_0")
    assert (b["rail_netdev"], b["rdma_device"], b["rail_ip"]) == ("cx8r2", "mlx5_1", "192.168.100.11")
    assert not any("no env file given" in n for n in imp.notes)


def test_per_end_ip_names():
    env = 'RANK=0\nNETDEV=cx8r1\nRDMA_DEVICE=mlx5_0\nA_IP=10.0.0.1\nB_IP=10.0.0.2\n'
    a, b = config_from_envs([("a.env", env)], VLLM).config["stations"]
    assert (a["rail_ip"], b["rail_ip"]) == ("10.0.0.1", "10.0.0.2")


@pytest.mark.parametrize("text, msg", [
    ("NETDEV=cx8r1\nLOCAL_IP=1.2.3.4\n", 'no RANK="N" line'),
    ("RANK=0\nNETDEV=cx8r1\n", r"station A \(rank 0\): no rail IPv4 found"),
    ("RANK=0\nthis is not an env line\n", "env file line 2"),
])
def test_bad_files_are_one_clear_line(text, msg):
    with pytest.raises(ImportEnvError, match=msg):
        config_from_envs([("x.env", text)], VLLM)


def test_same_rank_twice_is_refused():
    with pytest.raises(ImportEnvError, match="RANK=0 appears in two env files"):
        config_from_envs([("a.env", A_ENV), ("a2.env", A_ENV)], VLLM)


def test_cli_writes_a_config_that_loads_and_refuses_to_overwrite(tmp_path, capsys):
    (tmp_path / "a.env").write_text(A_ENV)
    (tmp_path / "b.env").write_text(B_ENV)
    out = tmp_path / "imported.toml"
    rc = main(["import-env", str(tmp_path / "a.env"), str(tmp_path / "b.env"), "--out", str(out),
               "--host", "A=station-a", "--host", "B=station-b", "--user", "nvidia"])
    assert rc == 0
    cfg = load_config(str(out))
    assert [(s.name, s.host, s.rank, s.user) for s in cfg.stations] == [
        ("A", "station-a", 0, "nvidia"), ("B", "station-b", 1, "nvidia")]
    assert cfg.head.rail_ip == "192.168.100.10" and cfg.overrides["max_num_seqs"] == 32
    assert "hf_s3cr3t_value" not in out.read_text() and "sk-never-copied" not in out.read_text()
    assert main(["import-env", str(tmp_path / "a.env"), "--out", str(out)]) == 2
    assert "exists (use --force" in capsys.readouterr().err
    assert main(["import-env", str(tmp_path / "a.env"), "--host", "C=x"]) == 2
    assert "--host for unknown station(s): C" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["/bin/ls", "/dev/zero", "DIR", "FIFO"])
def test_binary_files_devices_and_directories_are_one_line(tmp_path, capsys, target):
    import os

    if target == "DIR":
        target = str(tmp_path)
    elif target == "FIFO":
        target = str(tmp_path / "fifo")
        os.mkfifo(target)
    assert main(["import-env", target]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and target in err and "Traceback" not in err


def test_hostile_env_values_never_reach_a_config(tmp_path, capsys):
    env = tmp_path / "glm53.env"
    env.write_text('RANK="0"\nNETDEV="$(touch /tmp/pwned)"\nLOCAL_IP="-oProxyCommand=touch /tmp/x"\n'
                   'PEER_IP="198.18.0.2"\n')
    assert main(["import-env", str(env)]) == 2
    err = capsys.readouterr().err
    assert "does not load" in err and len(err.strip().splitlines()) == 1


def test_out_is_never_written_through_a_symlink(tmp_path, capsys):
    env = tmp_path / "glm53.env"
    env.write_text('RANK="0"\nNETDEV="enp1s0f1np1"\nRDMA_DEVICE="mlx5_0"\nLOCAL_IP="198.18.0.1"\nPEER_IP="198.18.0.2"\n')
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "out.toml"
    link.symlink_to(victim)
    assert main(["import-env", str(env), "--out", str(link), "--force"]) == 2
    assert "is a symlink" in capsys.readouterr().err and victim.read_text() == "precious\n"


def test_ssh_to_a_peer_ends_its_options_before_the_host():
    import shlex

    from console.remote.cmdlines.links import ssh_peer

    words = shlex.split(ssh_peer("-oProxyCommand=touch /tmp/pwned"))
    assert words[words.index("--") + 1] == "-oProxyCommand=touch /tmp/pwned"  # a host name, not an option
