"""Parsers of the NCCL launch facts on the real formats: the NCCL a rank loaded (below), and the
launch hazards: ``systemd-analyze cat-config`` (systemd prints ``# PATH`` before each file, drop-ins
after the main file), ``loginctl show-user -p`` (KEY=value lines; ``Failed to get user: User ID N is
not logged in or lingering`` when logind does not know the user), and image references as docker
reads them."""

from __future__ import annotations

import pytest

from console.probes import launch_hazards as lh
from console.sim.shims.systemd_analyze import STOCK

DROPIN = "# /etc/systemd/logind.conf\n" + STOCK + """
# /etc/systemd/logind.conf.d/50-ipc.conf
[Login]
RemoveIPC=no
"""


def test_stock_logind_conf_means_the_builtin_yes():
    r = lh.parse_logind_remove_ipc("# /etc/systemd/logind.conf\n" + STOCK)
    assert r.enabled and "built-in default" in r.source


def test_a_drop_in_wins_and_is_named_with_its_line():
    r = lh.parse_logind_remove_ipc(DROPIN)
    assert not r.enabled and r.source == "/etc/systemd/logind.conf.d/50-ipc.conf:2 (RemoveIPC=no)"
    again = DROPIN + "\n# /etc/systemd/logind.conf.d/90-back.conf\n[Login]\nRemoveIPC=yes\n"
    assert lh.parse_logind_remove_ipc(again).enabled


def test_remove_ipc_outside_the_login_section_or_garbled_is_ignored():
    text = "# /etc/systemd/logind.conf\n[Other]\nRemoveIPC=no\n[Login]\nRemoveIPC=maybe\n"
    assert lh.parse_logind_remove_ipc(text).enabled


def test_loginctl_show_user_lines():
    u = lh.parse_loginctl_user("UID=1000\nName=nvidia\nLinger=no\n", "nvidia")
    assert u == lh.LoginUser("nvidia", 1000, False) and not u.system_user
    assert lh.parse_loginctl_user("UID=998\nName=svc\nLinger=no\n", "svc").system_user
    assert lh.parse_loginctl_user("Linger=yes\n", "x").linger is True
    assert lh.parse_loginctl_user("Failed to get user: User ID 1000 is not logged in or lingering\n", "x") is None


@pytest.mark.parametrize("image,tag,moving", [
    ("vllm/vllm-openai", "latest", True),
    ("vllm/vllm-openai:latest", "latest", True),
    ("localhost:5000/vllm", "latest", True),  # a registry port is not a tag
    ("lmsysorg/sglang:nightly", "nightly", True),
    ("vllm/vllm-openai:v0.30.0-aarch64", "v0.30.0-aarch64", False),
    ("vllm/vllm-openai@sha256:" + "a" * 64, None, False),
    ("vllm/vllm-openai:latest@sha256:" + "a" * 64, None, False),
])
def test_image_tags(image, tag, moving):
    assert lh.image_tag(image) == tag and lh.is_moving_tag(lh.image_tag(image)) is moving


# The NCCL a rank loaded, in the words the logs use, and the known-bad table
@pytest.mark.parametrize("line,want", [
    ("osprey1:1927386:1927386 [0] NCCL INFO NCCL version 2.20.5+cuda12.4", ("2.20.5", "NCCL 2.20.5+cuda12.4")),
    ("NCCL version 2.30.3+cuda13.0", ("2.30.3", "NCCL 2.30.3+cuda13.0")),  # NCCL_DEBUG=VERSION (user guide)
    ("INFO 08-31 09:50:46 pynccl.py:63] vLLM is using nccl==2.20.5", ("2.20.5", "vLLM is using nccl==2.20.5")),
    ("(Worker pid=844) INFO [pynccl.py:111] vLLM is using nccl==2.30.4", ("2.30.4", "vLLM is using nccl==2.30.4")),
    ("NCCL error: remote process exited or there was a network error, NCCL version 2.30.7",
     ("2.30.7", "NCCL 2.30.7")),
    ("NCCL_VERSION=2.28.3", None),  # an image's env is not what was loaded (vllm #46097)
])
def test_nccl_version_lines(line, want):
    from console.catalogue import nccl_version_of_text

    assert nccl_version_of_text(line) == want


@pytest.mark.parametrize("version,cite", [
    ("2.27.3", "marin-community/marin#8038"), ("2.28.9", "marin-community/marin#8038"),
    ("2.29.2", "pytorch/pytorch#174338"), ("2.30.4", "NVIDIA/nccl#2167"),
    ("2.29.3", None), ("2.30.3", None), ("2.30.7", None), ("garbage", None), (None, None),
])
def test_known_bad_nccl_builds(version, cite):
    from console.catalogue import KNOWN_BAD_NCCL, known_bad

    bad = known_bad(version)
    assert (bad.cite if bad else None) == cite
    assert all(k.links and all(u.startswith("https://github.com/") for u in k.links) for k in KNOWN_BAD_NCCL)
