"""The copy's pure parts and its command lines run by a real local bash: the manifest of a directory
with hostile names (quoted, never run), bad symlinks found, rsync's progress lines read, the two
sides' differences named, station paths checked."""

from __future__ import annotations

import hashlib
import os
import subprocess

import pytest

from console.errors import UsageError
from console.probes.copy_manifest import Manifest, differences, parse_manifest, parse_progress
from console.remote import cmdlines as rc
from console.service.copy import check_path


def _bash(cmd: str) -> str:
    return subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, check=True, timeout=30).stdout


def test_manifest_of_a_hostile_directory_is_quoted_and_complete(tmp_path):
    d = tmp_path / "ck $(touch pwned) 'x'"
    (d / "sub").mkdir(parents=True)
    (d / "a b.safetensors").write_bytes(b"x" * 1000)
    (d / "sub" / "c;d.json").write_text("{}")
    (d / "in").symlink_to("a b.safetensors")
    (d / "gone").symlink_to("nowhere")
    (d / "out").symlink_to("/etc/hostname")
    (d / "up").symlink_to("../")
    m = parse_manifest(_bash(rc.copy.manifest(str(d), True)))
    assert not (tmp_path / "pwned").exists() and not os.path.exists("pwned")
    assert m.present and m.sizes == {"a b.safetensors": 1000, "sub/c;d.json": 2}
    assert sorted(m.bad_links) == [("dangling", "gone"), ("escapes", "out"), ("escapes", "up")]
    assert m.hashes == {"a b.safetensors": hashlib.sha256(b"x" * 1000).hexdigest(),
                        "sub/c;d.json": hashlib.sha256(b"{}").hexdigest()}
    assert parse_manifest(_bash(rc.copy.manifest(str(tmp_path / "none"), False))).present is False


def test_differences_name_each_file():
    src = Manifest(sizes={"a": 1, "b": 2, "c": 3}, hashes={"a": "1" * 64, "b": "2" * 64, "c": "3" * 64})
    dst = Manifest(sizes={"a": 1, "b": 5, "d": 1}, hashes={"a": "9" * 64, "b": "2" * 64, "d": "0" * 64})
    assert differences(src, dst) == ["missing on the destination: c", "only on the destination: d",
                                     "sha256 differs: a", "size differs: b (2 vs 5 bytes)"]
    assert differences(src, Manifest(sizes=dict(src.sizes), hashes={"b": "2" * 64, "c": "3" * 64})) == [
        "sha256 not read: a"]  # a hash that was not read is never taken as equal


def test_rsync_progress2_lines():
    p = parse_progress("     41,418,752  69%    9.53MB/s    0:00:01 (xfr#1, to-chk=0/1)")
    assert p is not None and p.bytes_done == 41_418_752 and p.pct == 69 and p.eta == "0:00:01"
    assert p.rate_bytes_s == pytest.approx(9.53 * 1024**2)
    assert parse_progress("sending incremental file list") is None
    assert parse_progress("rsync error: some files could not be transferred (code 23)") is None


def test_rsync_push_goes_to_the_rail_address_with_every_word_quoted():
    cmd = rc.copy.rsync_push("/models/x y", "198.18.0.2", "~/ck'pt")
    assert "rsync -a --partial --append-verify" in cmd and "198.18.0.2:ck" in cmd
    assert "BatchMode=yes" in cmd and cmd.endswith("echo @@exit $?'")
    assert "--bwlimit=12207" in rc.copy.rsync_push("/a", "198.18.0.2", "/b", bwlimit_mbps=100)  # 100 Mb/s in KiB/s


@pytest.mark.parametrize("bad", ["relative", "/", "~", "/a/../etc", "~/x\ny", ""])
def test_station_paths_are_checked(bad):
    with pytest.raises(UsageError):
        check_path(bad, "PATH")


def test_good_station_paths_pass():
    assert check_path("/models/GLM-5.3/", "PATH") == "/models/GLM-5.3"
    assert check_path("~/ckpt", "PATH") == "~/ckpt"


def test_read_only_refuses_a_copy_before_reading_any_config(capsys):
    from console.cli import main

    assert main(["--read-only", "copy", "checkpoint", "/models/x", "--config", "/nonexistent.toml"]) == 2
    assert "read-only mode: copy writes to a station" in capsys.readouterr().err
