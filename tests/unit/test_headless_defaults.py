"""Headless defaults: ``diagnose`` with a config reads every station (no ``--station`` repeated);
without a file or a config it says what it needs, in one line."""

from __future__ import annotations

import json
import os

# a real NCCL socket-fallback excerpt and a docker stand-in (pytest puts tests/unit on the path)
from test_diagnose_cli import WORKER_LOG, fake_docker

from console.cli import main


def test_diagnose_with_a_config_reads_every_station(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{fake_docker(tmp_path, WORKER_LOG)}{os.pathsep}{os.environ['PATH']}")
    cfg = tmp_path / "dgx-console.toml"
    cfg.write_text("""
profile = "glm53-nvfp4-2x-gb300-vllm"
connect_timeout_s = 3
command_timeout_s = 10

[[stations]]
name = "head"
rank = 0
local = true
container = "glm53"

[[stations]]
name = "worker"
rank = 1
local = true
container = "glm53-w"
""")
    rc = main(["diagnose", "--json", "--config", str(cfg), "--tail", "50"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert [s["source"] for s in data["sources"]] == ["head", "worker"]
    assert {f["station"] for f in data["findings"]} == {"head", "worker"}
    logs = [c for c in (tmp_path / "docker.args").read_text().splitlines() if c.startswith("logs")]
    assert sorted(c.split()[-1] for c in logs) == ["glm53", "glm53-w"]
    # the default config (./dgx-console.toml) counts too
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docker.args").unlink()
    assert main(["diagnose"]) == 1
    assert sum(c.startswith("logs") for c in (tmp_path / "docker.args").read_text().splitlines()) == 2


def test_diagnose_without_file_or_config_says_what_it_needs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert main(["diagnose"]) == 2
    err = capsys.readouterr().err
    assert "needs FILE..., - (stdin), or a config" in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------- image ID vs registry digest

# `docker image inspect --format '{{.Id}} {{json .RepoDigests}}'` as Docker prints it (the ID is
# the hash of the local config, the digest the hash of the registry manifest; docker/distribution#1662)
PULLED = ('sha256:4c68ea49fd2dbbffb1ea92bbdff339ee8f66c7d0ef654af4a19061110668f334 '
          '["vllm/vllm-openai@sha256:856e3d5f8d590edbafe2725619b0d32a041d7694f7baf17660aa6318c7bd8c4f"]\n')
BUILT_LOCALLY = "sha256:0b1e2c3d4e5f60718293a4b5c6d7e8f90112233445566778899aabbccddeeff00 []\n"
NULL_DIGESTS = "sha256:0b1e2c3d4e5f60718293a4b5c6d7e8f90112233445566778899aabbccddeeff00 null\r\n"


def test_image_identity_keeps_the_id_and_the_digest_apart():
    from console.probes.docker import parse_image_identity, short_digest

    i = parse_image_identity(PULLED)
    assert i.short_id == "sha256:4c68ea49fd2d"
    assert i.digest_for("vllm/vllm-openai:v0.30.0-aarch64").startswith("vllm/vllm-openai@sha256:856e3d5f")
    assert short_digest(i.repo_digests[0]) == "vllm/vllm-openai@sha256:856e3d5f8d59…"
    for text in (BUILT_LOCALLY, NULL_DIGESTS):
        local = parse_image_identity(text)
        assert local.repo_digests == () and local.digest_for("x:y") is None and local.short_id == "sha256:0b1e2c3d4e5f"
    assert parse_image_identity("  \n") is None


class _Run:
    """What CheckRun.run returns, for check_image's own logic (the transport is tested elsewhere)."""

    def __init__(self, outputs: dict[str, str]) -> None:
        from console.config import load_profile

        self.outputs = outputs
        self.profile = load_profile("glm53-nvfp4-2x-gb300-vllm")

    async def run(self, station: str, cmd: str):
        from console.remote.transport import CommandResult

        return CommandResult(0, self.outputs[station], "")


async def test_image_check_names_the_image_id_and_the_registry_digest():
    from console.config import Station
    from console.station.checks.software import check_image

    stations = [Station("A", "a", 0), Station("B", "b", 1)]
    same = await check_image(_Run({"A": PULLED, "B": PULLED}), stations)
    assert same.status == "pass"
    assert same.summary.endswith("same image ID sha256:4c68ea49fd2d everywhere "
                                 "(registry digest vllm/vllm-openai@sha256:856e3d5f8d59…)")
    differ = await check_image(_Run({"A": PULLED, "B": BUILT_LOCALLY}), stations)
    assert differ.status == "fail"
    assert differ.summary == ("image IDs differ: A sha256:4c68ea49fd2d (digest vllm/vllm-openai@sha256:856e3d5f8d59…), "
                              "B sha256:0b1e2c3d4e5f")
    assert "docker pull vllm/vllm-openai@sha256:856e3d5f8d590edb" in differ.fix


def test_status_prints_both_names_of_the_containers_image():
    from console.commands.status import image_line

    assert image_line({"image": "vllm/vllm-openai@sha256:856e3d5f", "image_id": PULLED.split()[0]}) == (
        "image vllm/vllm-openai@sha256:856e3d5f (registry digest), image ID sha256:4c68ea49fd2d")
    assert image_line({"image": "vllm/vllm-openai:v0.30.0-aarch64", "image_id": None}) == (
        "image vllm/vllm-openai:v0.30.0-aarch64 (tag)")
    assert image_line({"image": None, "image_id": None}) is None
