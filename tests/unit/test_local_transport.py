"""LocalTransport: the console on a station itself (subprocesses, no SSH)."""

import asyncio

import psutil

from console.config import Config, Station, load_profile
from console.remote.transport import CommandTimeout, LocalTransport
from console.station.messages import HostMemSample
from console.station.monitor import StationService

STATION = Station(name="local", host="localhost", rank=0, local=True)


async def test_run_and_exit_status_and_stdin():
    t = LocalTransport(STATION)
    res = await t.run("echo out; echo err >&2; exit 4")
    assert (res.exit_status, res.stdout, res.stderr) == (4, "out\n", "err\n")
    assert (await t.run("cat", input="x\n")).stdout == "x\n"


async def test_timeout_kills_the_process_group():
    t = LocalTransport(STATION, command_timeout=0.5)
    try:
        await t.run("sleep 30 & echo $! > /tmp/dgx-lt-pid; wait")
        raise AssertionError("expected a timeout")
    except CommandTimeout as exc:
        assert "timed out" in str(exc)
    pid = int(open("/tmp/dgx-lt-pid").read())
    await asyncio.sleep(0.2)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_a_cancelled_command_ends_its_process_group(tmp_path):
    """One cancellation rule: a cancelled local command ends its child (was: only on timeout)."""
    t = LocalTransport(STATION, command_timeout=60)
    pidfile = tmp_path / "pid"
    task = asyncio.create_task(t.run(f"sleep 30 & echo $! > {pidfile}; wait"))
    for _ in range(200):  # until the child is there
        if pidfile.exists() and pidfile.read_text().strip():
            break
        await asyncio.sleep(0.02)
    pid = int(pidfile.read_text())
    task.cancel()
    try:
        await task
        raise AssertionError("expected the cancel to propagate")
    except asyncio.CancelledError:
        pass
    gone = not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert gone, "the cancelled command's child outlived it"


async def test_stream_lines_and_close_ends_the_process():
    t = LocalTransport(STATION)
    stream = t.stream("echo $$ ; i=0; while :; do echo line$i; i=$((i+1)); sleep 0.05; done")
    pid = int(await stream.__anext__())
    got = [await stream.__anext__() for _ in range(3)]
    assert got == ["line0", "line1", "line2"]
    await stream.aclose()
    await asyncio.sleep(0.2)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_local_station_host_memory_comes_from_psutil():
    cfg = Config(path=None, profile=load_profile("glm53-nvfp4-2x-gb300-vllm"), stations=(STATION,))
    got = []
    svc = StationService(cfg, STATION, got.append)
    task = asyncio.create_task(svc._meminfo_stream())
    for _ in range(50):
        if got:
            break
        await asyncio.sleep(0.05)
    task.cancel()
    (msg,) = [m for m in got if isinstance(m, HostMemSample)][:1]
    assert msg.memory.total_mib == psutil.virtual_memory().total // 2**20
    assert 0 < msg.memory.available_mib <= msg.memory.total_mib
