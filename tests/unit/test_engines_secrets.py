"""Secrets by name only: [overrides.extra_env] values whose name looks secret (or is listed in
overrides.secret_env) and the API key reach the container as ``-e NAME`` with the value on the SSH
channel's stdin, never in an argv; previews show ``***``. SGLang's key goes through a 0600 YAML
``--config`` file written inside the container (SGLang has no env var for it)."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys

import pytest

from console.config import masked_overrides, parse_config, secret_values
from console.secrets import is_secret_name
from console.service import engines
from tests.two_stations import TWO_STATIONS

CONFIG = """
profile = "{profile}"
[api]
api_key_env = "DGX_SECRET_TEST_KEY"
[overrides]
secret_env = ["ODD_NAME"]
{extra}
[overrides.extra_env]
HF_TOKEN = "hf_tokenvalue123456"
MY_PASS = "passvalue"
AWS_SECRET_ACCESS_KEY = "awsvalue"
ODD_NAME = "oddvalue"
NCCL_IB_TC = "106"

""" + TWO_STATIONS
VLLM = "glm53-nvfp4-2x-gb300-vllm"
SGLANG = "glm53-flash-nvfp4-2x-gb10-sglang"
RT = engines.StationRuntime(("GPU-1111",), "repo/image@sha256:" + "ab" * 32)
VALUES = ("hf_tokenvalue123456", "passvalue", "awsvalue", "oddvalue")


def cfg(profile: str = VLLM, extra: str = ""):
    return parse_config(CONFIG.format(profile=profile, extra=extra))


@pytest.mark.parametrize("name,secret", [
    ("HF_TOKEN", True), ("OPENAI_API_KEY", True), ("DB_PASSWORD", True), ("MY_PASS", True),
    ("AWS_SECRET_ACCESS_KEY", True), ("GOOGLE_APPLICATION_CREDENTIALS", True), ("hf_token", True),
    ("NCCL_IB_TC", False), ("PASSTHROUGH_MODE", False), ("VLLM_HOST_IP", False),
])
def test_secret_name_patterns(name, secret):
    assert is_secret_name(name) is secret
    assert is_secret_name(name, ["NCCL_IB_TC", "PASSTHROUGH_MODE", "VLLM_HOST_IP"])


@pytest.mark.parametrize("profile", [VLLM, SGLANG])
@pytest.mark.parametrize("station", ["A", "B"])
def test_secret_values_never_in_the_argv_or_preview(profile, station):
    c = cfg(profile)
    spec = engines.build_launch(c, c.station(station), RT, api_key_set=True)
    line, preview = spec.command(), spec.preview()
    for v in VALUES:
        assert v not in line and v not in preview and not any(v in a for a in spec.argv)
    for name in ("HF_TOKEN", "MY_PASS", "AWS_SECRET_ACCESS_KEY", "ODD_NAME"):
        assert spec.argv[spec.argv.index(name) - 1] == "-e"  # by name: docker copies it from the env
        assert f"IFS= read -r {name} && export {name}" in line
        assert f"{name}=***" in preview
    assert "NCCL_IB_TC=106" in spec.argv  # not a secret: as before
    key_env = engines.API_KEY_ENV[c.profile.engine]
    assert (key_env in spec.secret_env) is (station == "A")
    stdin = engines.secret_input(c, spec, "the-api-key")
    assert stdin is not None and stdin.splitlines() == [
        "the-api-key" if n == key_env else dict(c.overrides["extra_env"])[n] for n in spec.secret_env]
    assert shlex.split(line.split(" && exec ", 1)[1]) == list(spec.argv)


def test_reads_and_exports_feed_docker_the_values(tmp_path):
    """Run the remote shell line for real, with a stand-in docker that prints the env it got."""
    c = cfg()
    spec = engines.build_launch(c, c.head, RT, api_key_set=True)
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\nfor n in HF_TOKEN MY_PASS AWS_SECRET_ACCESS_KEY ODD_NAME VLLM_API_KEY; do\n"
                    "  eval \"printf '%s=%s\\\\n' $n \\\"\\$$n\\\"\"\ndone\n")
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    out = subprocess.run(["/bin/sh", "-c", spec.command()], input=engines.secret_input(c, spec, "k-123"),
                         capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    got = dict(line.split("=", 1) for line in out.stdout.splitlines())
    assert got == {"HF_TOKEN": "hf_tokenvalue123456", "MY_PASS": "passvalue", "AWS_SECRET_ACCESS_KEY": "awsvalue",
                   "ODD_NAME": "oddvalue", "VLLM_API_KEY": "k-123"}


def test_sglang_api_key_goes_through_a_0600_config_file_not_argv(tmp_path, monkeypatch):
    """The container entrypoint for SGLang, run for real: a stand-in ``python3 -m sglang...`` records
    its argv and the --config file it is given."""
    key_file = tmp_path / "secrets.yaml"
    monkeypatch.setattr(engines, "SGLANG_KEY_FILE", str(key_file))
    c = cfg(SGLANG)
    spec = engines.build_launch(c, c.head, RT, api_key_set=True)
    argv = list(spec.argv)
    entry = argv[argv.index(RT.image) + 1:]  # what docker runs inside the container: sh -c SCRIPT CODE CMD...
    assert entry[0] == "-c" and "--api-key" not in " ".join(argv)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    py = bindir / "python3"  # "python3 -c CODE" runs the real interpreter; "python3 -m sglang..." records
    py.write_text(f"#!/bin/sh\nif [ \"$1\" = -c ]; then exec {sys.executable} \"$@\"; fi\n"
                  f"printf '%s\\n' \"$@\" > {tmp_path}/argv\nenv > {tmp_path}/env\n")
    py.chmod(0o755)
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "SGLANG_API_KEY": "sk-sglang-777"}
    out = subprocess.run(["/bin/sh", *entry], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    args = (tmp_path / "argv").read_text().splitlines()
    assert args[:2] == ["-m", "sglang.launch_server"] and args[-2:] == ["--config", str(key_file)]
    assert "sk-sglang-777" not in "\n".join(args)
    assert "sk-sglang-777" not in (tmp_path / "env").read_text()  # unset before exec
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert json.loads(key_file.read_text()) == {"api-key": "sk-sglang-777"}  # JSON is YAML: SGLang reads it


def test_secret_engine_flags_are_refused():
    c = cfg(VLLM, 'hf_token = "hf_abc"')
    with pytest.raises(engines.EngineConfigError, match="overrides.hf_token: a secret never goes on a command line"):
        engines.build_launch(c, c.head, RT)
    c = cfg(VLLM, 'extra_args = ["--api-key=abc"]')
    with pytest.raises(engines.EngineConfigError, match="--api-key carries a secret"):
        engines.build_launch(c, c.head, RT)


def test_masked_overrides_and_secret_values(monkeypatch):
    monkeypatch.setenv("DGX_SECRET_TEST_KEY", "the-api-key")
    c = cfg()
    m = masked_overrides(c)["extra_env"]
    assert m == {"HF_TOKEN": "***", "MY_PASS": "***", "AWS_SECRET_ACCESS_KEY": "***", "ODD_NAME": "***",
                 "NCCL_IB_TC": "106"}
    assert set(secret_values(c)) == set(VALUES) | {"the-api-key"}
    assert c.overrides["extra_env"]["HF_TOKEN"] == "hf_tokenvalue123456"  # the config itself keeps it


def test_a_multi_line_secret_is_refused():
    c = cfg()
    spec = engines.build_launch(c, c.head, RT, api_key_set=True)
    with pytest.raises(engines.EngineConfigError, match="one line"):
        engines.secret_input(c, spec, "a\nb")
    with pytest.raises(engines.EngineConfigError, match="configured but empty"):
        engines.secret_input(c, spec, None)
