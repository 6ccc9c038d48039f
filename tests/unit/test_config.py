import subprocess
import sys

import pytest

from console.config import (
    ConfigError,
    builtin_profiles,
    find_config,
    load_config,
    load_profile,
    parse_config,
    save_config,
)

GOOD = """\
profile = "glm53-nvfp4-2x-gb300-vllm"

[api]
api_key_env = "DGX_API_KEY"

[[stations]]
name = "A"
host = "station-a"
rank = 0
rail_netdev = "enp1s0f1np1"
rdma_device = "mlx5_0"
rail_ip = "198.18.0.1"

[[stations]]
name = "B"
host = "station-b"
user = "nvidia"
port = 2222
rank = 1
"""


def test_good_config_parses_with_roles():
    cfg = parse_config(GOOD, "x.toml")
    assert [s.name for s in cfg.stations] == ["A", "B"]
    assert cfg.head.name == "A" and cfg.head.role == "API host"
    assert [w.name for w in cfg.workers] == ["B"]
    assert cfg.station("B").port == 2222 and cfg.station("B").user == "nvidia"
    assert cfg.api_url() == "http://station-a:8000"
    assert cfg.profile.gpu.weights_gib == 218.0


def test_api_key_comes_from_env_not_file(monkeypatch):
    cfg = parse_config(GOOD, "x.toml")
    monkeypatch.delenv("DGX_API_KEY", raising=False)
    assert cfg.api_key() is None
    monkeypatch.setenv("DGX_API_KEY", "sekrit")
    assert cfg.api_key() == "sekrit"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD.replace("port = 2222", 'port = "2222"'), "x.toml:18: stations[1].port: must be integer"),
        (GOOD.replace("port = 2222", "port = 70000"), "x.toml:18: stations[1].port: must be 1..65535"),
        (GOOD.replace('user = "nvidia"', 'usr = "nvidia"'), "x.toml:17: stations[1].usr: unknown field"),
        (GOOD.replace('rank = 1', 'rank = 0'), "x.toml:19: stations[1].rank: ranks must be 0..1"),
        (GOOD.replace('name = "B"', 'name = "A"'), "x.toml:15: stations[1].name: duplicate station name 'A'"),
        (GOOD.replace('host = "station-b"\n', ''), "x.toml:14: stations[1].host: required field is missing"),
        (GOOD.replace('glm53-nvfp4-2x-gb300-vllm', 'nope'), "x.toml:1: profile: unknown profile 'nope'"),
        (GOOD.replace('[api]', '[api]\nurl = 5'), "x.toml:4: api.url: must be string"),
        (GOOD.replace('api_key_env = "DGX_API_KEY"', 'api_key = "x"'), "x.toml:4: api.api_key: put the key in an env"),
        (GOOD + "\nbogus = 1\n", "x.toml:"),
        (GOOD.replace('rank = 0', 'rank = '), "x.toml:9: invalid TOML"),
    ],
)
def test_invalid_config_names_file_line_and_field(text, expected):
    with pytest.raises(ConfigError) as ei:
        parse_config(text, "x.toml")
    msg = str(ei.value)
    assert msg.startswith(expected), msg
    assert "\n" not in msg


def test_no_stations_is_an_error():
    with pytest.raises(ConfigError, match="stations: at least one"):
        parse_config('profile = "glm53-nvfp4-2x-gb300-vllm"\n', "x.toml")


def test_any_number_of_stations():
    text = "".join(f'[[stations]]\nname = "S{i}"\nhost = "h{i}"\nrank = {i}\n' for i in range(8))
    cfg = parse_config(text, "x.toml")
    assert len(cfg.stations) == 8 and cfg.head.name == "S0" and len(cfg.workers) == 7


def test_builtin_profiles_carry_the_published_figures():
    assert set(builtin_profiles()) >= {"glm53-nvfp4-2x-gb300-vllm", "glm53-flash-nvfp4-2x-gb10-sglang"}
    st = load_profile("glm53-nvfp4-2x-gb300-vllm")
    assert st.engine == "vllm" and st.link.speed_mbps == 400000 and st.link.mtu == 9000
    assert st.gpu.loaded_gib == pytest.approx(231.35)
    assert {r.concurrency: r.total_tok_s for r in st.reference_bench}[16] == 607.8
    sp = load_profile("glm53-flash-nvfp4-2x-gb10-sglang")
    assert sp.engine == "sglang" and sp.gpu.unified_memory and sp.gpu.weights_gib == 90.5
    assert sp.link.speed_mbps == 200000


def test_save_and_load_round_trip(tmp_path):
    cfg = parse_config(GOOD, "x.toml")
    path = tmp_path / "out.toml"
    save_config(cfg, path)
    again = load_config(str(path))
    assert again.stations == cfg.stations
    assert again.profile.name == cfg.profile.name
    assert again.api.api_key_env == "DGX_API_KEY"


def test_lookup_order_cwd_then_xdg(tmp_path, monkeypatch):
    xdg = tmp_path / "xdg"
    (xdg / "dgx-console").mkdir(parents=True)
    (xdg / "dgx-console" / "config.toml").write_text(GOOD)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert find_config(None) == xdg / "dgx-console" / "config.toml"
    (work / "dgx-console.toml").write_text(GOOD)
    assert find_config(None) == work / "dgx-console.toml"
    assert find_config(str(tmp_path / "explicit.toml")) == tmp_path / "explicit.toml"


def test_missing_config_everywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="no config found"):
        find_config(None)


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "console", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=60)


def test_cli_invalid_config_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace("port = 2222", 'port = "2222"'))
    r = _cli("status", "--config", str(bad))
    assert r.returncode == 2
    assert r.stderr.strip() == f"dgx-console: {bad}:18: stations[1].port: must be integer, got '2222'"
    assert "Traceback" not in r.stderr


def test_cli_missing_config_file_exit_2(tmp_path):
    r = _cli("status", "--config", str(tmp_path / "nope.toml"))
    assert r.returncode == 2 and "file not found" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_cli_parses_only_the_named_subcommand_and_says_the_rest_once():
    # only the subcommand named is imported to parse; --version, help and a typo still see every one
    from console.cli import _command_modules

    assert _command_modules(["--config", "x.toml", "validate-rdma", "--json"]) == ["validate_rdma"]
    assert len(_command_modules(["--version"])) > 10 and len(_command_modules(["stauts"])) > 10
    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.count("dgx-console") == 1, r.stdout
    r = _cli("stauts")
    assert r.returncode == 2 and "did you mean 'status'" in r.stderr and "'watch'" in r.stderr


def test_cli_bad_usage_exit_2():
    r = _cli("status", "--bogus")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    r = _cli("demo", "--fault", "no-such-fault")
    assert r.returncode == 2 and "unknown fault" in r.stderr and "Traceback" not in r.stderr
    r = _cli("--theme", "no-such-theme", "demo")
    assert r.returncode == 2 and "unknown theme" in r.stderr


def test_cli_config_before_or_after_subcommand(tmp_path):
    missing = tmp_path / "nope.toml"
    for args in (("--config", str(missing), "status"), ("status", "--config", str(missing))):
        r = _cli(*args)
        assert r.returncode == 2 and str(missing) in r.stderr and "file not found" in r.stderr
