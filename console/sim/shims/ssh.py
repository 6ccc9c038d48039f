"""Simulated ``ssh`` from one station to another over the rail: BatchMode key login, as the same
user, running the command on the peer in the peer's own environment and mounts (as its sshd would:
``console.sim.station_shell``)."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys

from console.sim import station_shell
from console.sim.shims._net import rails, station_by_ip


def main(argv: list[str], ctx) -> int:
    i = 0
    target = None
    while i < len(argv):
        a = argv[i]
        if a in ("-o", "-p", "-i", "-l", "-F", "-J"):
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        target = a
        i += 1
        break
    if target is None:
        print("usage: ssh [-46AaCfGgKkMNnqsTtVvXxYy] destination [command [argument ...]]", file=sys.stderr)
        return 255
    user, _, host = target.rpartition("@")
    hit = station_by_ip(ctx.world, host)
    if hit is None:
        print(f"ssh: connect to host {host} port 22: Connection timed out", file=sys.stderr)
        return 255
    peer, peer_rail = hit
    mine = next((r for r in rails(ctx.world, ctx.station) if r.ip.rsplit(".", 1)[0] == host.rsplit(".", 1)[0]), None)
    if mine is None or not mine.up or not peer_rail.up:
        print(f"ssh: connect to host {host} port 22: No route to host", file=sys.stderr)
        return 255
    if "station-unreachable" in ctx.world.faults(peer):
        print(f"Connection timed out during banner exchange\nConnection to {host} port 22 timed out", file=sys.stderr)
        return 255
    if user and user != getpass.getuser():
        print(f"{user}@{host}: Permission denied (publickey).", file=sys.stderr)
        return 255
    command = " ".join(argv[i:]) or "true"
    line, env = station_shell.prepare(command, ctx.world.root, peer, os.environ)
    return subprocess.run(["/bin/sh", "-c", line], env=env, cwd=station_shell.session_dir(env)).returncode
