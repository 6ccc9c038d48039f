"""The demo's simulator (a child process) ends with its console, even after a SIGKILL."""

import os
import subprocess
import sys
import time

import psutil


def test_demo_simulator_ends_when_its_console_dies(tmp_path):
    console = subprocess.Popen([sys.executable, "-c", f"""
import subprocess, sys, time
p = subprocess.Popen([sys.executable, '-m', 'console', 'sim', '--write-config', r'{tmp_path}/c.toml',
                      '--root', r'{tmp_path}/w', '--ready-file', r'{tmp_path}/ready'],
                     start_new_session=True, stderr=subprocess.DEVNULL)
print(p.pid, flush=True)
time.sleep(120)
"""], stdout=subprocess.PIPE, text=True)
    sim_pid = int(console.stdout.readline())
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready").exists():
        assert time.monotonic() < deadline, "simulator did not start"
        time.sleep(0.1)
    console.kill()  # no cleanup, as when a terminal is closed under it
    console.wait()
    deadline = time.monotonic() + 20
    status = None
    while time.monotonic() < deadline:
        try:
            status = psutil.Process(sim_pid).status()
        except psutil.NoSuchProcess:
            status = "gone"
        if status in ("gone", psutil.STATUS_ZOMBIE):
            break
        time.sleep(0.1)
    else:
        os.kill(sim_pid, 9)
    assert status in ("gone", psutil.STATUS_ZOMBIE)
