"""Hostile config files: every bad file, document and field value is one line naming the file, the
line and the field (exit 2 from the CLI), never a traceback; nothing odd is accepted (a netdev with
``$( )``, a rail_ip that ssh/ping would read as an option, NaN timeouts, names docker refuses).
A hypothesis property over random bytes, random TOML documents and random values per field."""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from console.cli import main
from console.config import (
    CONTAINER_NAME,
    STATION_NAME,
    Config,
    ConfigError,
    check_host,
    load_config,
    parse_config,
)
from console.sanitize import is_clean

GOOD: dict = {
    "profile": "glm53-nvfp4-2x-gb300-vllm",
    "connect_timeout_s": 3.0,
    "api": {"url": "http://127.0.0.1:8000", "timeout_s": 5.0},
    "ui": {"refresh_ms": 1000},
    "overrides": {"max_num_seqs": 32, "extra_env": {"NCCL_IB_TC": "106"}},
    "stations": [
        {"name": "A", "host": "127.0.0.1", "rank": 0, "port": 2222, "user": "nvidia", "rail_netdev": "enp1s0f1np1",
         "rdma_device": "mlx5_0", "rail_ip": "198.18.0.1", "container": "glm53"},
        {"name": "B", "host": "station-b", "rank": 1, "rail_netdev": "enp1s0f1np1", "rdma_device": "mlx5_0",
         "rail_ip": "198.18.0.2"},
    ],
}


def good_text(**changes) -> str:
    import copy

    d = copy.deepcopy(GOOD)
    for path, value in changes.items():
        *head, last = path.split("__")
        node = d
        for part in head:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        node[last] = value
    return tomli_w.dumps(d)


def one_line_error(exc: ConfigError) -> str:
    msg = str(exc)
    assert "\n" not in msg and "\r" not in msg and is_clean(msg), repr(msg)
    return msg


def refuse(text: str, *expect: str) -> str:
    with pytest.raises(ConfigError) as ei:
        parse_config(text, "x.toml")
    msg = one_line_error(ei.value)
    for e in expect:
        assert e in msg, msg
    return msg


def test_good_config_still_parses():
    cfg = parse_config(good_text(), "x.toml")
    assert [s.name for s in cfg.stations] == ["A", "B"]


@pytest.mark.parametrize(("field", "value", "expect"), [
    ("stations__0__container", "bad name", "stations[0].container: must match [a-zA-Z0-9][a-zA-Z0-9_.-]*"),
    ("stations__0__container", "-it", "stations[0].container"),
    ("stations__0__container", "a/b", "stations[0].container"),
    ("stations__0__rail_netdev", "en" + "$(touch /tmp/pwn)" * 2, "stations[0].rail_netdev: must be a network interface"),
    ("stations__0__rail_netdev", "a/b", "stations[0].rail_netdev"),
    ("stations__0__rail_netdev", "eth0:1", "stations[0].rail_netdev"),
    ("stations__0__rail_netdev", "eth 0", "stations[0].rail_netdev"),
    ("stations__0__rail_netdev", "sixteen-chars-xx", "stations[0].rail_netdev"),
    ("stations__0__rail_ip", "-oProxyCommand=touch /tmp/pwned", "stations[0].rail_ip: must be an IPv4 or IPv6"),
    ("stations__0__rail_ip", "198.18.0.300", "stations[0].rail_ip"),
    ("stations__0__host", "-oProxyCommand=touch /tmp/pwned", "stations[0].host: must not start with '-'"),
    ("stations__0__host", "a b", "stations[0].host"),
    ("stations__0__host", "[/]", "stations[0].host"),
    ("stations__0__user", "-l", "stations[0].user"),
    ("stations__0__user", "root;id", "stations[0].user"),
    ("stations__0__name", "[/]", "stations[0].name: must be 1-32 letters"),
    ("stations__0__name", "a b", "stations[0].name"),
    ("stations__0__name", "\x1b]0;t\x07", "stations[0].name"),
    ("stations__0__port", 0, "stations[0].port: must be 1..65535"),
    ("stations__0__port", 65536, "stations[0].port: must be 1..65535"),
    ("stations__0__rdma_device", "../../etc", "stations[0].rdma_device"),
    ("stations__0__known_hosts", "a\x00b", "stations[0].known_hosts: must be a path"),
    ("api__timeout_s", math.nan, "api.timeout_s: must be a number of seconds > 0"),
    ("api__timeout_s", math.inf, "api.timeout_s"),
    ("api__timeout_s", -1, "api.timeout_s"),
    ("api__timeout_s", 0, "api.timeout_s"),
    ("connect_timeout_s", math.nan, "connect_timeout_s: must be a number of seconds > 0"),
    ("command_timeout_s", -math.inf, "command_timeout_s"),
    ("api__url", "http://[::1", "api.url: is not a valid URL"),
    ("api__url", "http://127.0.0.1:99999", "api.url"),
    ("api__url", "garbage", "api.url: must start with http:// or https://"),
    ("api__url", "http://x\x1b]0;t\x07", "api.url"),
    ("api__api_key_env", "A B", "api.api_key_env"),
    ("ui__refresh_ms", 10**30, "ui.refresh_ms: must be <= 60000"),
    ("ui__log_lines", -5, "ui.log_lines"),
    ("overrides__extra_env", {"BAD NAME": "x"}, "overrides.extra_env"),
    ("overrides__extra_env", {"HF_TOKEN": "a\nb"}, "overrides.extra_env.HF_TOKEN: must be one line"),
    ("overrides__extra_env", {"X": [1]}, "overrides.extra_env.X: must be a string or a number"),
    ("overrides__secret_env", "MY_VAR", "overrides.secret_env: must be a list"),
    ("overrides__image", "-v/:/host", "overrides.image: must be a non-empty word not starting with '-'"),
    ("overrides__nccl_ib_gid_index", 999, "overrides.nccl_ib_gid_index"),
    ("overrides__max_num_seqs", math.nan, "overrides.max_num_seqs: must be a finite number"),
])
def test_bad_field_values_are_refused_with_file_line_and_field(field, value, expect):
    msg = refuse(good_text(**{field: value}), expect)
    assert msg.startswith("x.toml:"), msg
    assert msg.split(":")[1].isdigit(), f"no line number: {msg}"


def test_host_rules():
    assert check_host("station-a") is None and check_host("198.18.0.1") is None and check_host("::1") is None
    assert check_host("fe80::1%eth0") is None
    assert check_host("-oProxyCommand=x") and check_host("a;b") and check_host("")


@pytest.mark.parametrize("text,expect", [
    ("a = " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply"),
    ("a = " + "{b = " * 3000 + "1" + "}" * 3000 + "\n", "invalid TOML"),
    ("[stations\n", "invalid TOML"),
    ("\x00", "invalid TOML"),
])
def test_broken_toml_is_one_line(text, expect):
    refuse(text, expect)


def write(p: Path, data: bytes | str) -> Path:
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


def cli(*argv: str) -> tuple[int, str]:
    import io
    from contextlib import redirect_stderr

    err = io.StringIO()
    with redirect_stderr(err):
        try:
            rc = main(list(argv))
        except SystemExit as exc:
            rc = int(exc.code or 0)
    return rc, err.getvalue()


def test_files_that_are_not_small_utf8_regular_files(tmp_path):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    cases = {
        str(write(tmp_path / "latin1.toml", good_text().encode() + b"# caf\xe9\n")): "not UTF-8 text",
        str(write(tmp_path / "bin.toml", b"\x7fELF\x00\x01")): "binary file",
        str(write(tmp_path / "big.toml", b"# x\n" * 300_000)): "larger than 1 MB",
        str(tmp_path): "is a directory",
        "/dev/zero": "is a device",
        str(fifo): "is a FIFO",  # opened non-blocking: never waits for a writer
        str(tmp_path / "missing.toml"): "file not found",
    }
    for path, expect in cases.items():
        with pytest.raises(ConfigError) as ei:
            load_config(path)
        assert expect in one_line_error(ei.value), (path, str(ei.value))
        rc, err = cli("status", "--config", path)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and expect in err, (path, err)
        assert "Traceback" not in err


def test_binary_known_hosts_and_api_key_file_fail_at_load_naming_the_field(tmp_path):
    kh = write(tmp_path / "kh", b"\x00\xff\xfe binary")
    key = write(tmp_path / "key", b"\xff\xfe\x00\x00")
    cfg = write(tmp_path / "c.toml", good_text(stations__0__known_hosts=str(kh)))
    with pytest.raises(ConfigError) as ei:
        load_config(str(cfg))
    msg = one_line_error(ei.value)
    assert "stations[0].known_hosts" in msg and "binary" in msg and f"{cfg}:" in msg
    cfg2 = write(tmp_path / "c2.toml", good_text(api__api_key_file=str(key)))
    with pytest.raises(ConfigError, match=r"api\.api_key_file: .*(binary|UTF-8)"):
        load_config(str(cfg2))
    rc, err = cli("chat", "-m", "hi", "--config", str(cfg2))
    assert rc == 2 and "api.api_key_file" in err and len(err.strip().splitlines()) == 1


def test_api_key_never_raises_on_a_bad_key_file(tmp_path):
    cfg = parse_config(good_text(api__api_key_file=str(tmp_path)), "x.toml")  # a directory
    assert cfg.api_key() is None
    write(tmp_path / "k", b"\xff\xfe")
    cfg = parse_config(good_text(api__api_key_file=str(tmp_path / "k")), "x.toml")
    assert cfg.api_key() is None


PROFILE = (Path(__file__).resolve().parents[2] / "console" / "profiles" / "glm53-nvfp4-2x-gb300-vllm.toml").read_text()


def test_profile_errors_name_the_profile_file_its_line_and_the_field(tmp_path):
    prof = write(tmp_path / "mine.toml", PROFILE.replace("memory_total_mib = 256703", 'memory_total_mib = "lots"'))
    line = next(i for i, ln in enumerate(prof.read_text().splitlines(), 1) if ln.startswith("memory_total_mib"))
    cfg = write(tmp_path / "c.toml", good_text(profile="mine.toml"))
    with pytest.raises(ConfigError) as ei:
        load_config(str(cfg))
    msg = one_line_error(ei.value)
    assert msg.startswith(f"{prof}:{line}: gpu.memory_total_mib: must be integer"), msg

    write(prof, PROFILE.replace('engine = "vllm"', 'engine = "tgi"'))
    with pytest.raises(ConfigError, match=r"mine\.toml:\d+: engine: must be one of vllm, sglang"):
        load_config(str(cfg))
    write(prof, PROFILE.replace("[link]\n", "[link]\nmtu = nan\n", 1).replace("mtu = 9000\n", ""))
    with pytest.raises(ConfigError, match=r"mine\.toml:\d+: link\.mtu"):
        load_config(str(cfg))
    write(prof, PROFILE.replace("[gpu]\nname", "[gpu]\nnom"))
    with pytest.raises(ConfigError, match=r"mine\.toml:\d+: gpu\.name: required field is missing"):
        load_config(str(cfg))
    write(prof, PROFILE.encode() + b"\n# \xff\n")
    with pytest.raises(ConfigError, match=r"mine\.toml: cannot read profile: is not UTF-8"):
        load_config(str(cfg))
    write(prof, "a = " + "[" * 3000 + "]" * 3000)
    with pytest.raises(ConfigError, match=r"mine\.toml: invalid TOML: nested too deeply"):
        load_config(str(cfg))
    rc, err = cli("status", "--config", str(cfg))
    assert rc == 2 and "mine.toml" in err and len(err.strip().splitlines()) == 1


def test_unknown_builtin_profile_points_at_the_config_line():
    refuse(good_text(profile="nope"), "x.toml:1: profile: unknown profile 'nope'")
    refuse(good_text(profile="\x1b]0;t\x07"), "profile")


# ---------------------------------------------------------------- property tests

def check_accepted(cfg: Config) -> None:
    """What an accepted config guarantees to the code that builds command lines and messages."""
    import ipaddress

    for s in cfg.stations:
        assert STATION_NAME.fullmatch(s.name)
        assert check_host(s.host) is None
        assert CONTAINER_NAME.fullmatch(s.container)
        assert not (s.user or "").startswith("-")
        if s.rail_ip:
            ipaddress.ip_address(s.rail_ip)
        assert len(s.rail_netdev) <= 15 and not any(c in s.rail_netdev for c in "/: \t\n")
        assert s.port is None or 1 <= s.port <= 65535
    for t in (cfg.connect_timeout_s, cfg.command_timeout_s, cfg.api.timeout_s):
        assert math.isfinite(t) and t > 0


def parse_or_one_line(text: str) -> None:
    try:
        cfg = parse_config(text, "h.toml")
    except ConfigError as exc:
        one_line_error(exc)
        return
    check_accepted(cfg)


HOSTILE_TEXT = st.sampled_from(["", " ", "-", "-x", "--", "[/]", "[bold]", "\x1b]52;c;QQ==\x07", "\x00", "\x9b",
                                "\u202e", "\ud800", "a" * 300, "$(id)", "a b", "a/b", "a:b", "198.18.0.1",
                                "::1", "http://[::1", "http://127.0.0.1:99999", "nan", "A", "glm53"])
SCALARS = st.one_of(
    st.text(max_size=40), HOSTILE_TEXT, st.integers(min_value=-(2**63), max_value=2**63 - 1), st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0, -1, 1, 65535, 65536, 10**18]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=8)

FIELDS = ([f"stations__0__{k}" for k in ("name", "host", "rank", "user", "port", "rail_netdev", "rdma_device",
                                          "rail_ip", "container", "known_hosts", "identity_file", "local", "gpu",
                                          "env_file", "launch_script", "bogus")]
          + [f"api__{k}" for k in ("url", "api_key_env", "api_key_file", "timeout_s")]
          + [f"ui__{k}" for k in ("theme", "refresh_ms", "log_lines")]
          + ["profile", "simulated", "connect_timeout_s", "command_timeout_s", "overrides", "stations", "api",
             "launch_script",
             "overrides__extra_env", "overrides__secret_env", "overrides__image", "overrides__extra_args",
             "overrides__executor", "overrides__nccl_ib_gid_index"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FIELDS), VALUES)
def test_random_value_per_field_is_valid_or_one_line(field, value):
    try:
        text = good_text(**{field: value})
    except (TypeError, ValueError):  # tomli_w cannot write it (None, a lone surrogate key...)
        assume(False)
    parse_or_one_line(text)


TOML_DOCS = st.dictionaries(st.sampled_from(["profile", "stations", "api", "ui", "overrides", "x", "simulated"]),
                            VALUES, max_size=5)


@settings(max_examples=150, deadline=None)
@given(TOML_DOCS)
def test_random_toml_documents_are_valid_or_one_line(doc):
    try:
        text = tomli_w.dumps(doc)
    except (TypeError, ValueError):
        assume(False)
    parse_or_one_line(text)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400), st.sampled_from([b"", b"\n", b"[[stations]]\n", b'name = "A"\n']))
def test_random_bytes_are_valid_or_one_line(tmp_path_factory, data, prefix):
    path = tmp_path_factory.mktemp("b") / "c.toml"
    path.write_bytes(prefix + data)
    try:
        load_config(str(path))
    except ConfigError as exc:
        one_line_error(exc)


def test_directories_devices_fifos_as_named_files(tmp_path):
    """known_hosts that is a directory, a device or a FIFO: one line at load, never a hang."""
    fifo = tmp_path / "kh.fifo"
    os.mkfifo(fifo)
    for kh in (str(tmp_path), "/dev/zero", str(fifo)):
        cfg = write(tmp_path / "c.toml", good_text(stations__0__known_hosts=kh))
        with pytest.raises(ConfigError, match="known_hosts"):
            load_config(str(cfg))
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_the_default_known_hosts_and_identity_files_are_checked_too(tmp_path, monkeypatch):
    """A station without known_hosts uses ~/.ssh/known_hosts: a binary one is one line at load (it
    was a UnicodeDecodeError traceback inside the SSH library); so is a key file it cannot load."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    write(home / ".ssh" / "known_hosts", b"\x7fELF\x02\x01\x01\x00\xd0\xff")
    monkeypatch.setenv("HOME", str(home))
    cfg = write(tmp_path / "c.toml", good_text())
    with pytest.raises(ConfigError, match=r"stations\[0\]\.known_hosts: .*/\.ssh/known_hosts: is a binary file"):
        load_config(str(cfg))
    (home / ".ssh" / "known_hosts").write_text("")
    assert load_config(str(cfg)).stations[0].name == "A"
    for content in (b"\x7fELF\x00garbage", b"-----BEGIN OPENSSH PRIVATE KEY-----\nnope\n"):
        key = write(tmp_path / "id", content)
        cfg = write(tmp_path / "c.toml", good_text(stations__0__identity_file=str(key)))
        with pytest.raises(ConfigError, match=r"stations\[0\]\.identity_file: .*not a private key"):
            load_config(str(cfg))
        rc, err = cli("status", "--config", str(cfg))
        assert rc == 2 and len(err.strip().splitlines()) == 1
    import asyncssh

    key = tmp_path / "good_id"
    key.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
    cfg = write(tmp_path / "c.toml", good_text(stations__0__identity_file=str(key)))
    assert load_config(str(cfg)).stations[0].identity_file == str(key)


@pytest.mark.parametrize(("old", "new", "expect"), [
    ('image = "vllm/vllm-openai:v0.30.0-aarch64"', 'image = "-v/:/host"', r"image: must be a word not starting"),
    ('model_dir = "/models/GLM-5.3-NVFP4"', 'model_dir = "/models:/etc"', r"model_dir: must be an absolute path"),
    ('name = "glm53-nvfp4-2x-gb300-vllm"', 'name = "[/]"', r"name: must be 1-128"),
    ('rails = ["mlx5_0", "mlx5_1"]', 'rails = ["../x"]', r"link\.rails"),
    ('served_model_name = "glm-5.3"', 'served_model_name = "--trust-remote-code"', r"served_model_name"),
])
def test_profile_values_that_would_reach_a_command_line_are_checked(tmp_path, old, new, expect):
    assert old in PROFILE
    write(tmp_path / "p.toml", PROFILE.replace(old, new))
    cfg = write(tmp_path / "c.toml", good_text(profile="p.toml"))
    with pytest.raises(ConfigError, match=r"p\.toml:\d+: " + expect):
        load_config(str(cfg))


# ---------------------------------------------------------------- hostile config text: a BOM, unknown tables, key files


def test_a_byte_order_mark_is_accepted(tmp_path):
    """Before: ':1: Invalid statement' (Windows editors write a BOM)."""
    p = write(tmp_path / "bom.toml", "\ufeff" + good_text())
    cfg = load_config(str(p))
    assert cfg.profile.name == GOOD["profile"] and len(cfg.stations) == 2
    # line numbers still count from the first line
    bad = write(tmp_path / "bom2.toml", "\ufeff" + good_text(connect_timeout_s=-1.0))
    with pytest.raises(ConfigError) as ei:
        load_config(str(bad))
    line = next(i for i, ln in enumerate(bad.read_text().splitlines(), 1) if ln.startswith("connect_timeout_s"))
    assert f"bom2.toml:{line}: connect_timeout_s" in one_line_error(ei.value)


@pytest.mark.parametrize("header", ["[zzz]", "[[zzz]]", "[zzz.sub]"])
def test_an_unknown_table_has_its_line(header):
    text = good_text() + f"\n{header}\na = 1\n"
    line = text.splitlines().index(header) + 1
    msg = refuse(text, "zzz: unknown field")
    assert msg.startswith(f"x.toml:{line}: zzz"), msg


@pytest.mark.parametrize("make,words", [
    (lambda p: None, "file not found"),
    (lambda p: p.symlink_to(p), "leads nowhere"),
    (lambda p: p.symlink_to(p.parent / "gone"), "leads nowhere"),
    (lambda p: p.write_text(""), "is empty"),
    (lambda p: p.write_text("  \n\n"), "is empty"),
    (lambda p: p.write_text("a\nb\n"), "one line"),
    (lambda p: p.mkdir(), "directory"),
])
def test_an_api_key_file_that_gives_no_key_says_so(tmp_path, monkeypatch, make, words):
    """Before: a missing, looping or empty api_key_file silently meant "no key" (then 401s far away)."""
    monkeypatch.delenv("DGX_NO_SUCH_KEY_ENV", raising=False)
    key = tmp_path / "key"
    make(key)
    p = write(tmp_path / "c.toml", good_text(api__api_key_file=str(key)))
    with pytest.raises(ConfigError) as ei:
        load_config(str(p))
    msg = one_line_error(ei.value)
    assert "api.api_key_file" in msg and words in msg, msg


def test_an_api_key_file_is_not_needed_when_the_env_var_gives_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("DGX_KEY_FROM_ENV", "sk-1")
    p = write(tmp_path / "c.toml", good_text(api__api_key_file=str(tmp_path / "missing"),
                                             api__api_key_env="DGX_KEY_FROM_ENV"))
    assert load_config(str(p)).api_key() == "sk-1"
    (tmp_path / "k").write_text("sk-2\n")
    monkeypatch.delenv("DGX_KEY_FROM_ENV")
    p.write_text(good_text(api__api_key_file=str(tmp_path / "k"), api__api_key_env="DGX_KEY_FROM_ENV"))
    assert load_config(str(p)).api_key() == "sk-2"
