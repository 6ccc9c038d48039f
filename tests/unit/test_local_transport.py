"""LocalTransport: the console on a station itself (subprocesses, no SSH)."""

import asyncio

import psutil

from console.config import Config, Station, load_profile
from console.remote.transport import CommandTimeout, LocalTransport
from console.station.messages import HostMemSample
from console.station.monitor import StationService
from tests.waiting import until

STATION = Station(name="local", host="localhost", rank=0, local=True)


async def test_run_and_exit_status_and_stdin():
    t = LocalTransport(STATION)
    res = await t.run("echo out; echo err >&2; exit 4")
    assert (res.exit_status, res.stdout, res.stderr) == (4, "out\n", "err\n")
    assert (await t.run("cat", input="x\n")).stdout == "x\n"


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_timeout_kills_the_process_group(tmp_path):
    t = LocalTransport(STATION, command_timeout=0.5)
    pidfile = tmp_path / "pid"
    try:
        await t.run(f"sleep 30 & echo $! > {pidfile}; wait")
        raise AssertionError("expected a timeout")
    except CommandTimeout as exc:
        assert "timed out" in str(exc)
    pid = int(pidfile.read_text())
    await until(lambda: gone(pid), what="the timed-out command's child to end", timeout=5)


async def test_a_cancelled_command_ends_its_process_group(tmp_path):
    """One cancellation rule: a cancelled local command ends its child (was: only on timeout)."""
    t = LocalTransport(STATION, command_timeout=60)
    pidfile = tmp_path / "pid"
    task = asyncio.create_task(t.run(f"sleep 30 & echo $! > {pidfile}; wait"))
    await until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the child", timeout=5)
    pid = int(pidfile.read_text())
    task.cancel()
    try:
        await task
        raise AssertionError("expected the cancel to propagate")
    except asyncio.CancelledError:
        pass
    # the group was sent SIGKILL before the cancel came back; the kernel ends the background child
    # when it next runs it (a moment on a loaded machine), never 30 s later
    await until(lambda: gone(pid), what="the cancelled command's child to end", timeout=5)


async def test_stream_lines_and_close_ends_the_process():
    t = LocalTransport(STATION)
    stream = t.stream("echo $$ ; i=0; while :; do echo line$i; i=$((i+1)); sleep 0.05; done")
    pid = int(await stream.__anext__())
    got = [await stream.__anext__() for _ in range(3)]
    assert got == ["line0", "line1", "line2"]
    await stream.aclose()
    await until(lambda: gone(pid), what="the stream's process to end", timeout=5)


async def test_local_station_host_memory_comes_from_psutil():
    cfg = Config(path=None, profile=load_profile("glm53-nvfp4-2x-gb300-vllm"), stations=(STATION,))
    got = []
    svc = StationService(cfg, STATION, got.append)
    task = asyncio.create_task(svc._meminfo_stream())
    await until(lambda: got, what="a host memory sample", timeout=5)
    task.cancel()
    (msg,) = [m for m in got if isinstance(m, HostMemSample)][:1]
    assert msg.memory.total_mib == psutil.virtual_memory().total // 2**20
    assert 0 < msg.memory.available_mib <= msg.memory.total_mib


async def test_a_line_over_16_mb_is_clipped_and_the_lines_after_it_arrive():
    """A 17 MB line stopped a local stream (``LimitOverrunError``, restarted every
    ~1.5 s, never past the line); now it comes out once, clipped with its mark, and the next lines follow."""
    from console.remote.lines import STREAM_LINE_MAX

    t = LocalTransport(STATION)
    big = 17 * 2**20
    cmd = (f"python3 -c \"import sys; sys.stdout.write('x' * {big} + '\\r\\n'); "
           "sys.stdout.write('after one\\nmodel \\u6a21\\u578b\\nlast, no newline')\"")
    lines = [line async for line in t.stream(cmd)]
    assert len(lines) == 4, [line[:40] for line in lines]
    assert lines[0] == "x" * STREAM_LINE_MAX + f"… [+{big - STREAM_LINE_MAX:,} chars]"
    assert lines[1:] == ["after one", "model 模型", "last, no newline"]


def test_a_console_killed_by_sighup_leaves_no_local_command(tmp_path):
    """A local station's long-lived command (journalctl -k -f in the TUI) runs in a session of its own;
    the console ended by SIGHUP (its terminal closed) ends it too."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "console_like.py"
    script.write_text(
        "import asyncio, sys\n"
        "from console.config import Station\n"
        "from console.remote.local import LocalTransport, install_reaper\n"
        "install_reaper()\n"
        "async def main():\n"
        "    t = LocalTransport(Station(name='local', host='localhost', rank=0, local=True))\n"
        "    async for line in t.stream('echo $$; exec sleep 300'):\n"
        "        print(line.strip(), flush=True)\n"
        "asyncio.run(main())\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=os.environ)
    child = int(proc.stdout.readline())
    os.kill(child, 0)  # the stand-in for journalctl runs
    proc.send_signal(signal.SIGHUP)
    assert proc.wait(30) == -signal.SIGHUP  # the console ends as SIGHUP ends it
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        subprocess.run(["kill", "-KILL", str(child)], check=False)
        raise AssertionError(f"pid {child} outlived the console")
