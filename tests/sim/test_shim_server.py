"""The simulated stations' commands, forked by the world's shim server: what a station runs is still one
process per command with the command's output, input, exit status and signals; a command whose wrapper
is killed does not outlive it; with no server listening a command runs in its own interpreter."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess

import psutil
import pytest

from console.sim import station_shell
from console.sim.shim import shim_address, write_bin
from tests.sim.station_procs import hung_procs, set_hang
from tests.waiting import until

pytestmark = pytest.mark.sim


def _station(sim, command: str) -> subprocess.Popen:
    """One command started as station A's shell would (``exec``: the process is the command's)."""
    line, env = station_shell.prepare(command, sim.world.root, "A", os.environ)
    return subprocess.Popen(["/bin/sh", "-c", "exec " + line], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


async def _run(sim, command: str, input: str | None = None, path: str | None = None) -> subprocess.CompletedProcess:
    """A command line run to its end in station A's shell (``path``: a bin directory put first)."""
    line, env = station_shell.prepare(command, sim.world.root, "A", os.environ)
    if path:
        env["PATH"] = f"{path}{os.pathsep}{env['PATH']}"
    return await asyncio.to_thread(subprocess.run, ["/bin/sh", "-c", line], env=env, input=input,
                                   capture_output=True, text=True)


def _forks(sim) -> list[psutil.Process]:
    return psutil.Process(sim.server._shim_server.pid).children()


async def _serving(sim) -> None:
    def listening() -> bool:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(shim_address(sim.world.root))
            except OSError:
                return False
        return True

    await until(listening, what="the shim server listening", timeout=20)


async def test_a_served_command_has_its_output_input_and_exit_status(sim):
    await _serving(sim)
    listed = await _run(sim, "nvidia-smi -L; echo rc=$?")
    assert "GPU 0:" in listed.stdout and listed.stdout.rstrip().endswith("rc=0"), listed
    bad = await _run(sim, "nvidia-smi -q -d BOGUS")
    assert bad.returncode != 0 and bad.stdout + bad.stderr, bad
    # stdin reaches the command and what it starts (ssh runs the line on the peer)
    peer_ip = sim.world.state("B")["rail"]["ip"]
    piped = await _run(sim, f"ssh -o BatchMode=yes -- {peer_ip} 'cat; echo \"[$DGX_SIM_STATION]\"'",
                       input="hello from A\n")
    assert piped.returncode == 0 and piped.stdout == "hello from A\n[B]\n", piped


@contextlib.asynccontextmanager
async def _hung_smi(sim):
    """Station A's nvidia-smi hung (it ignores a hangup), once it is: its process and the server's forks."""
    await _serving(sim)
    set_hang(sim.world, "A", True)
    proc = _station(sim, "nvidia-smi -L")
    try:
        await until(lambda: hung_procs(sim.world, "A"), what="nvidia-smi hung", timeout=15)
        forked = _forks(sim)
        assert forked, "the command runs in a fork of the server"
        yield proc, forked
    finally:
        set_hang(sim.world, "A", False)
        if proc.poll() is None:
            proc.kill()
        proc.wait()


async def test_a_signal_to_the_command_reaches_it_and_the_command_ends_by_it(sim):
    async with _hung_smi(sim) as (proc, forked):
        assert hung_procs(sim.world, "A") == [proc.pid]  # what the command records of itself names its process
        proc.send_signal(signal.SIGHUP)  # ignored, as the real hung tool does
        await asyncio.sleep(0.5)
        assert proc.poll() is None and all(p.is_running() for p in forked)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 10) == -signal.SIGTERM
        await until(lambda: not _forks(sim), what="the fork ended with its command", timeout=10)


async def test_a_killed_command_leaves_nothing_running(sim):
    async with _hung_smi(sim) as (proc, forked):
        proc.kill()
        await asyncio.to_thread(proc.wait, 10)
        await until(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in forked),
                    what="the fork gone with its killed command", timeout=10)


async def test_a_stranger_on_the_socket_is_not_served(sim):
    await _serving(sim)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:  # no descriptors, no request
        s.connect(shim_address(sim.world.root))
        s.sendall(b"\x10\x00\x00\x00not a request at all")
        s.settimeout(10)
        assert s.recv(4) == b""  # closed without an answer
    after = await _run(sim, "nvidia-smi -L")
    assert after.returncode == 0 and "GPU 0:" in after.stdout  # and the server goes on serving


async def test_with_no_server_listening_a_command_runs_in_its_own_interpreter(sim, tmp_path):
    write_bin(tmp_path / "bin", served=tmp_path / "nowhere")  # an address nobody listens on
    done = await _run(sim, "nvidia-smi -L", path=str(tmp_path / "bin"))
    assert done.returncode == 0 and "GPU 0:" in done.stdout, done
    assert not _forks(sim)


async def test_a_stopped_command_stops_its_work_and_goes_on_with_it(sim):
    """A frozen process group on a station (SIGSTOP cannot be relayed): the command's output stops too."""
    await _serving(sim)
    proc = _station(sim, "nvidia-smi --query-gpu=index --format=csv,noheader -lms 50")
    os.set_blocking(proc.stdout.fileno(), False)

    def read() -> bytes:
        try:
            return proc.stdout.read() or b""
        except BlockingIOError:
            return b""

    try:
        await until(lambda: read(), what="samples flowing", timeout=15)
        proc.send_signal(signal.SIGSTOP)
        await until(lambda: all(p.status() == psutil.STATUS_STOPPED for p in _forks(sim)),
                    what="the fork stopped with its wrapper", timeout=10)
        read()
        await asyncio.sleep(0.5)  # nothing may come while it is stopped
        assert read() == b""
        proc.send_signal(signal.SIGCONT)
        await until(lambda: read(), what="samples again after SIGCONT", timeout=10)
    finally:
        proc.kill()
        proc.wait()
