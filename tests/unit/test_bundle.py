"""``dgx-console bundle``: archive contents, redaction, unreachable stations, guarded checks."""

from __future__ import annotations

import json
import os
import stat
import sys
import tarfile
from pathlib import Path

import pytest

from console.cli import main
from tests.ports import refused_port

SECRET_TOKEN = "hf_abcdefghijklmnopqrstuvwxyz012345"
SECRET_KEY = "sk-live-0123456789abcdef"

STATION_LOG = "\n".join([
    "2026-11-30T14:05:20.000000001Z (APIServer pid=1) INFO 11-30 14:05:20 [utils.py:253] non-default args: "
    f"{{'model': '/models/GLM-5.3-NVFP4', 'api_key': ['{SECRET_KEY}'], 'tensor_parallel_size': 2}}",
    f"2026-11-30T14:05:20.100000001Z HF_TOKEN={SECRET_TOKEN} set for downloads",
    "2026-11-30T14:05:21.123456789Z station-b:391:512 [0] NCCL INFO Using network Socket",  # NCCL chose TCP
    f"2026-11-30T14:05:22.000000001Z INFO:     192.168.100.1:5000 - \"GET /v1/models\" Authorization: Bearer {SECRET_KEY}",
]) + "\n"


@pytest.fixture
def setup(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "docker.out").write_text(STATION_LOG)
    docker = bindir / "docker"
    docker.write_text(f"#!/bin/sh\ncat {tmp_path}/docker.out\n")
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    cfg = tmp_path / "dgx-console.toml"
    cfg.write_text(f"""
profile = "glm53-nvfp4-2x-gb300-vllm"
connect_timeout_s = 3
command_timeout_s = 5

[overrides]
HF_TOKEN = "{SECRET_TOKEN}"
VLLM_API_KEY = "{SECRET_KEY}"

[[stations]]
name = "station-b"
rank = 0
local = true

[[stations]]
name = "station-a"
rank = 1
host = "127.0.0.1"
port = {refused_port()}
known_hosts = "{tmp_path}/known_hosts"
""")
    return tmp_path, cfg


def read_bundle(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_bundle_contents_redacted_and_unreachable_recorded(setup, capsys):
    tmp_path, cfg = setup
    out = tmp_path / "support.tar.gz"
    assert main(["bundle", "--config", str(cfg), str(out)]) == 0
    cap = capsys.readouterr()
    assert "unreachable: station-a" in cap.out and "station-a: unreachable" in cap.err
    files = read_bundle(out)
    assert {"manifest.json", "config.toml", "config.effective.toml", "checks.json", "findings.json",
            "logs/station-b.log", "logs/station-a.error.txt"} <= set(files)
    blob = b"".join(files.values())
    assert SECRET_TOKEN.encode() not in blob and SECRET_KEY.encode() not in blob
    assert b"hf_***" in files["logs/station-b.log"] or b"HF_TOKEN=***" in files["logs/station-b.log"]
    manifest = json.loads(files["manifest.json"])
    st = {s["name"]: s for s in manifest["stations"]}
    assert st["station-b"]["reachable"] and st["station-b"]["log_lines"] == 4
    assert not st["station-a"]["reachable"] and st["station-a"]["error"].startswith("unreachable")
    checks = json.loads(files["checks.json"])
    assert manifest["checks"]["included"] and checks["checks"]
    assert {"id", "station", "status", "summary"} <= set(checks["checks"][0])
    findings = json.loads(files["findings.json"])["findings"]
    assert any(f["id"] == "nccl-socket-fallback" and f["station"] == "station-b" for f in findings)
    log_ranks = [i for i, f in enumerate(findings) if f["id"] == "nccl-socket-fallback"]
    check_ranks = [i for i, f in enumerate(findings) if f["evidence"] and f["evidence"][0]["source"] == "check"
                   and f["severity"] == "error"]
    if check_ranks:  # failed link checks on this machine rank above the log finding
        assert min(check_ranks) < log_ranks[0]


def test_no_checks_and_guarded_import(setup, monkeypatch):
    tmp_path, cfg = setup
    out = tmp_path / "a.tar.gz"
    assert main(["bundle", "--config", str(cfg), "--no-checks", str(out)]) == 0
    assert json.loads(read_bundle(out)["checks.json"])["error"] == "checks skipped (--no-checks)"
    monkeypatch.setitem(sys.modules, "console.station.checks", None)  # the module is not importable
    out2 = tmp_path / "b.tar.gz"
    assert main(["bundle", "--config", str(cfg), "--tail", "10", str(out2)]) == 0
    files = read_bundle(out2)
    assert json.loads(files["checks.json"])["error"].startswith("checks not available")
    assert json.loads(files["manifest.json"])["tail"] == 10


@pytest.mark.parametrize("target,msg", [(".", "is a directory"), ("missing/dir/b.tar.gz", "does not exist")])
def test_bad_path_is_usage_error(setup, target, msg, capsys, monkeypatch):
    tmp_path, cfg = setup
    monkeypatch.chdir(tmp_path)
    assert main(["bundle", "--config", str(cfg), target]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------- writing safely (O_EXCL|O_NOFOLLOW)

def _no_stray_files(d: Path, allowed: set[str]) -> None:
    assert {p.name for p in d.iterdir()} <= allowed, sorted(p.name for p in d.iterdir())


def test_a_symlinked_target_is_refused_and_its_victim_untouched(setup, capsys):
    tmp_path, cfg = setup
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "out.tar.gz"
    link.symlink_to(victim)
    for extra in ([], ["--force"]):
        assert main(["bundle", "--config", str(cfg), "--no-checks", *extra, str(link)]) == 2
        err = capsys.readouterr().err
        assert "is a symlink" in err and len(err.strip().splitlines()) == 1
    assert victim.read_text() == "precious\n" and link.is_symlink()


def test_a_symlinked_part_file_is_never_written_through(setup, capsys):
    tmp_path, cfg = setup
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out.tar.gz"
    (tmp_path / "out.tar.gz.part").symlink_to(victim)  # the old fixed temp name, planted
    assert main(["bundle", "--config", str(cfg), "--no-checks", str(out)]) == 0
    assert victim.read_text() == "precious\n"
    assert tarfile.is_tarfile(out) and not out.is_symlink()
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.tar.gz.")]  # no temp file left


def test_fifo_device_and_directory_targets_are_refused(setup, capsys):
    tmp_path, cfg = setup
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    targets = {str(fifo): "is a FIFO", str(tmp_path): "is a directory"}
    if os.geteuid() == 0:  # a device node of our own (never /dev/null itself)
        dev = tmp_path / "null"
        os.mknod(dev, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        targets[str(dev)] = "is a device"
    for target, expect in targets.items():
        for extra in ([], ["--force"]):
            assert main(["bundle", "--config", str(cfg), "--no-checks", *extra, target]) == 2
            err = capsys.readouterr().err
            assert expect in err and len(err.strip().splitlines()) == 1, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    if "dev" in locals():
        assert stat.S_ISCHR(os.lstat(dev).st_mode)


def test_an_existing_file_needs_force(setup, capsys):
    tmp_path, cfg = setup
    out = tmp_path / "out.tar.gz"
    out.write_text("old\n")
    assert main(["bundle", "--config", str(cfg), "--no-checks", str(out)]) == 2
    assert "exists (use --force" in capsys.readouterr().err and out.read_text() == "old\n"
    assert main(["bundle", "--config", str(cfg), "--no-checks", "--force", str(out)]) == 0
    assert tarfile.is_tarfile(out)


def test_a_target_turned_into_a_symlink_while_collecting_is_not_followed(setup, monkeypatch, capsys):
    """The check before collecting is not the only one: the rename never writes through a link."""
    import console.commands.bundle as bundle

    tmp_path, cfg = setup
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "race.tar.gz"
    real = bundle.build_bundle

    def racing(*a, **kw):
        res = real(*a, **kw)
        out.symlink_to(victim)  # planted between the first check and the write
        return res

    monkeypatch.setattr(bundle, "build_bundle", racing)
    assert main(["bundle", "--config", str(cfg), "--no-checks", str(out)]) == 2
    assert "is a symlink" in capsys.readouterr().err
    assert victim.read_text() == "precious\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".race.tar.gz.")]


def test_extra_env_secrets_and_the_api_key_never_reach_the_bundle(setup, monkeypatch):
    tmp_path, cfg = setup
    monkeypatch.setenv("DGX_BUNDLE_KEY", "key-value-9f8e7d")
    text = cfg.read_text().replace("[overrides]\n", "[api]\napi_key_env = \"DGX_BUNDLE_KEY\"\n\n[overrides]\n"
                                   "secret_env = [\"ODD_NAME\"]\n")
    text += '\n[overrides.extra_env]\nMY_PASS = "pass-value-1234"\nODD_NAME = "odd-value-5678"\nPLAIN = "plain-1"\n'
    cfg.write_text(text)
    (tmp_path / "docker.out").write_text("log line with odd-value-5678 and key-value-9f8e7d in it\n")
    out = tmp_path / "s.tar.gz"
    assert main(["bundle", "--config", str(cfg), "--no-checks", str(out)]) == 0
    blob = b"".join(read_bundle(out).values())
    for secret in (b"pass-value-1234", b"odd-value-5678", b"key-value-9f8e7d", SECRET_TOKEN.encode()):
        assert secret not in blob, secret
    assert b"plain-1" in blob  # not a secret: kept
