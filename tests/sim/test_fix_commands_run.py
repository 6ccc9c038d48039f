"""Every fix command printed runs as printed: the station-reachable fix logs in
with the station's port (-p), user (-l), key (-i) and known_hosts, not ``ssh host:port true``
(which ssh reads as a host named "host:port")."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from console.station.checks.links import login_from_here
from tests.two_stations import two_station_toml

ROOT = Path(__file__).resolve().parents[2]


def backticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


@pytest.mark.skipif(not os.path.exists("/usr/bin/ssh"), reason="needs the OpenSSH client")
async def test_the_reachable_fix_logs_in_to_a_live_station_as_printed(sim_factory):
    h = await sim_factory(n=2)
    st = h.config.stations[0]
    line = login_from_here(st)
    argv = shlex.split(line)
    assert argv[argv.index("-p") + 1] == str(st.port) and argv[-2:] == [st.host, "true"]
    # the simulated station answers in this event loop: the ssh client runs beside it, never blocking it
    proc = await asyncio.create_subprocess_exec("/bin/sh", "-c", line, stdin=subprocess.DEVNULL,
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, (line, err.decode())


def test_check_prints_a_reachable_fix_that_parses_with_the_stations_port_user_and_key(tmp_path):
    key = tmp_path / "id ed25519"  # a space in the path: quoted in the printed line
    cfg = two_station_toml(host_a="127.0.0.1", host_b="127.0.0.1", rail=False, each="port = 9", only={
        "A": f'user = "ops"\nidentity_file = "{key}"\nknown_hosts = "{tmp_path / "kh"}"'})
    (tmp_path / "dgx-console.toml").write_text(cfg)
    res = subprocess.run([sys.executable, "-m", "console.cli", "check", "--json"], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    checks = json.loads(res.stdout)["checks"]
    fix = next(c["fix"] for c in checks if c["id"] == "station-reachable" and c["station"] == "A")
    (line,) = [c for c in backticked(fix) if c.startswith("ssh ")]
    argv = shlex.split(line)
    assert argv[0] == "ssh" and "127.0.0.1:9" not in line
    assert argv[argv.index("-p") + 1] == "9" and argv[argv.index("-l") + 1] == "ops"
    assert argv[argv.index("-i") + 1] == str(key)
    assert f"UserKnownHostsFile={tmp_path / 'kh'}" in argv and argv[-2:] == ["127.0.0.1", "true"]


@pytest.mark.parametrize("faults", [["mtu-mismatch", "link-down@B"], ["station-unreachable@B"]])
async def test_every_command_a_failing_check_prints_is_shell_that_parses(sim_factory, faults):
    """Every backticked command of every fix is one a shell reads as written (bash -n), and names
    no host:port as ssh's host."""
    from console.station.checks import run_checks

    h = await sim_factory(faults=faults)
    results = await run_checks(h.config)
    commands = [c for r in results if r.fix for c in backticked(r.fix)]
    assert commands, [(r.id, r.status) for r in results]
    for cmd in commands:
        res = subprocess.run(["bash", "-n", "-c", cmd], capture_output=True, text=True, timeout=10)
        assert res.returncode == 0, (cmd, res.stderr)
        if cmd.startswith("ssh "):
            assert not re.search(r"\s\S+:\d+\s", cmd), cmd
