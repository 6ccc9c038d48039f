"""The simulated station's side of a session: its mounts bind real paths to its file tree the way a
bind mount would (whole path components only), its environment puts the shims first and its home
in the tree."""

from __future__ import annotations

import pytest

from console.remote import cmdlines
from console.sim import station_shell as ss

FS = "/tmp/w/stations/A/fs"
MOUNTS = ss.Mounts(f"{FS}/root", [("/proc/meminfo", f"{FS}/proc/meminfo"),
                                  ("/models/GLM", f"{FS}/models/GLM"),
                                  ("/models/GLM/shards", "/elsewhere/shards")])


@pytest.mark.parametrize("line,expected", [
    ("cat /proc/meminfo", f"cat {FS}/proc/meminfo"),
    ("while read l; do :; done < /proc/meminfo; echo", f"while read l; do :; done < {FS}/proc/meminfo; echo"),
    ("bash -c 'f=/proc/meminfo'", f"bash -c 'f={FS}/proc/meminfo'"),
    ("cat '/models/GLM/config.json'", f"cat '{FS}/models/GLM/config.json'"),
    ("cd /models/GLM && ls", f"cd {FS}/models/GLM && ls"),
    ("ls /models/GLM/shards/x", "ls /elsewhere/shards/x"),  # the longest bind wins
    ("cat /proc/meminfo2 /models/GLM-v2/config.json /x/proc/meminfo ~/proc/meminfo",
     "cat /proc/meminfo2 /models/GLM-v2/config.json /x/proc/meminfo ~/proc/meminfo"),  # not these paths
    ('awk 1 "/proc/$pid/status"', 'awk 1 "/proc/$pid/status"'),
])
def test_bind_replaces_whole_paths_only(line, expected):
    assert MOUNTS.bind(line) == expected


def test_a_command_passed_on_to_a_peer_reads_the_peer_tree():
    a, b = (ss.Mounts(f"/w/stations/{n}/fs/root", [("/proc/meminfo", f"/w/stations/{n}/fs/proc/meminfo")])
            for n in "AB")
    sent_by_a = a.bind("ssh 198.18.0.2 'cat /proc/meminfo'")  # A's shell passes its bound text on
    assert sent_by_a == "ssh 198.18.0.2 'cat /w/stations/A/fs/proc/meminfo'"
    line, _env = ss.prepare("cat /w/stations/A/fs/proc/meminfo", "/w", "B", {}, {"A": a, "B": b})
    assert line == "cat /w/stations/B/fs/proc/meminfo"


def test_the_console_station_stream_reads_the_station_tree():
    line = MOUNTS.bind(cmdlines.station_stream("glm53", 500, 2.0))
    assert f"done < {FS}/proc/meminfo;" in line and line.count("/proc/meminfo") == 1


def test_environment_and_mount_table(tmp_path):
    root = tmp_path / "world"
    (root / "stations" / "B").mkdir(parents=True)
    fs = root / "stations" / "B" / "fs"
    ss.write_mounts(root, "B", fs, "/home/op", ["/proc/meminfo", "/sys/class/infiniband"])
    line, env = ss.prepare("cat /proc/meminfo; ls /sys/class/infiniband", root, "B",
                           {"PATH": "/usr/bin:/bin", "HOME": "/home/op", "SSH_ORIGINAL_COMMAND": "x"})
    assert line == f"cat {fs}/proc/meminfo; ls {fs}/sys/class/infiniband"
    assert env["PATH"] == f"{root / 'bin'}:/usr/bin:/bin"
    assert env["HOME"] == f"{fs}/home/op"
    assert (env["DGX_SIM_ROOT"], env["DGX_SIM_STATION"]) == (str(root), "B")
    assert "SSH_ORIGINAL_COMMAND" not in env and env["PYTHONUSERBASE"]
    # PATH already starting with the shims (the lab's sshd SetEnv) is kept as it is
    assert ss.station_env(env, root, "B", ss.read_mounts(root, "B"))["PATH"] == env["PATH"]


def test_a_tree_at_a_path_the_shell_would_split_is_refused(tmp_path):
    with pytest.raises(ValueError, match="shell special"):
        ss.write_mounts(tmp_path, "A", tmp_path / "my stations" / "fs", "/root", ["/proc/meminfo"])
