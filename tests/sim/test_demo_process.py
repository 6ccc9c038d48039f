"""The demo's simulator (a child process) ends with its console, even after a SIGKILL."""

import asyncio
import os
import subprocess
import sys

import psutil

from tests.waiting import until


async def test_demo_simulator_ends_when_its_console_dies(tmp_path):
    console = subprocess.Popen([sys.executable, "-c", f"""
import subprocess, sys, time
p = subprocess.Popen([sys.executable, '-m', 'console', 'sim', '--write-config', r'{tmp_path}/c.toml',
                      '--root', r'{tmp_path}/w', '--ready-file', r'{tmp_path}/ready'],
                     start_new_session=True, stderr=subprocess.DEVNULL)
print(p.pid, flush=True)
time.sleep(120)
"""], stdout=subprocess.PIPE, text=True)
    sim_pid = int(await asyncio.to_thread(console.stdout.readline))
    await until(lambda: (tmp_path / "ready").exists(), what="the simulator to start", timeout=60)
    console.kill()  # no cleanup, as when a terminal is closed under it
    await asyncio.to_thread(console.wait)

    def status() -> str:
        try:
            return psutil.Process(sim_pid).status()
        except psutil.NoSuchProcess:
            return "gone"

    try:
        await until(lambda: status() in ("gone", psutil.STATUS_ZOMBIE),
                    what="the simulator to end with its console", timeout=20, detail=status)
    except AssertionError:
        os.kill(sim_pid, 9)
        raise
