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


async def test_demo_ended_by_sigterm_stops_its_simulator_and_removes_its_directory(tmp_path):
    import pty

    main, sub = pty.openpty()  # the TUI needs a terminal
    env = {**os.environ, "TMPDIR": str(tmp_path), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "35"}
    demo = subprocess.Popen([sys.executable, "-m", "console", "demo"], stdin=sub, stdout=sub, stderr=sub,
                            env=env, start_new_session=True)
    os.close(sub)
    try:
        ready = await until(lambda: list(tmp_path.glob("dgx-demo-*/ready")), what="the demo's simulator", timeout=60)
        workdir = ready[0].parent
        sims = [p for p in psutil.process_iter(["cmdline"]) if str(workdir) in " ".join(p.info["cmdline"] or [])
                and "sim" in (p.info["cmdline"] or [])]
        assert sims, "the demo's simulator process"
        demo.terminate()
        rc = await asyncio.to_thread(demo.wait, 30)
        assert rc == 128 + 15
        assert not workdir.exists()
        await until(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in sims),
                    what="the simulator to end with the demo", timeout=20)
    finally:
        if demo.poll() is None:
            demo.kill()
        os.close(main)


async def test_a_closed_terminal_ends_the_busy_demo_through_its_teardown(tmp_path):
    # SIGHUP while the hang screen captures: the app exits through Textual's teardown (exit code 129) and
    # the simulator is stopped. (A SystemExit raised wherever the signal landed once left Textual's input
    # thread running and the process alive with no terminal; that depended on where the signal landed, seen
    # by hand after minutes of a wedged demo, and this test does not reproduce it every time.)
    import pty
    import threading

    main, sub = pty.openpty()
    env = {**os.environ, "TMPDIR": str(tmp_path), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "35"}
    demo = subprocess.Popen([sys.executable, "-m", "console", "demo", "--fault", "wedge", "--time-scale", "0.1"],
                            stdin=sub, stdout=sub, stderr=sub, env=env, start_new_session=True)
    os.close(sub)
    drawn = bytearray()

    def drain() -> None:  # a terminal reads what the app writes (a full pty would block its writer)
        while True:
            try:
                got = os.read(main, 65536)
            except OSError:
                return
            if not got:
                return
            drawn.extend(got[-4096:])

    threading.Thread(target=drain, daemon=True).start()
    try:
        ready = await until(lambda: list(tmp_path.glob("dgx-demo-*/ready")), what="the demo's simulator", timeout=60)
        workdir = ready[0].parent
        sims = [p for p in psutil.process_iter(["cmdline"]) if str(workdir) in " ".join(p.info["cmdline"] or [])
                and "sim" in (p.info["cmdline"] or [])]
        await until(lambda: b"live" in drawn, what="a live station on the screen", timeout=60)
        os.write(main, b"h")  # the hang screen: a capture starts at once
        await until(lambda: b"capturing" in drawn or b"captured" in drawn, what="the capture under way", timeout=30)
        demo.send_signal(1)  # SIGHUP: the terminal went away
        rc = await asyncio.to_thread(demo.wait, 40)
        assert rc == 128 + 1
        assert not workdir.exists()
        await until(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in sims),
                    what="the simulator to end with the demo", timeout=20)
    finally:
        if demo.poll() is None:
            demo.kill()
        os.close(main)
