"""Issue 21 item 8 against the simulated stations (real SSH client, the station's shell and shims): the
oom rehearsal's leftover process is found with who runs it and its whole command line, ended from the
console (TERM, then KILL if needed), and then the launch goes through; --read-only refuses; the engine
(root's, in its container) is refused with the station's own words and what to do instead."""

from __future__ import annotations

import pytest

from console.remote.cmdlines import process_details, signal_process
from console.service.actions import ServiceActions
from console.service.processes import end_process, read_processes
from console.service.steps import ReadOnlyError
from console.sim.world import HELD_PID
from tests.sim.test_actions import act
from tests.waiting import until


async def test_the_oom_leftover_is_found_ended_and_the_launch_goes_through(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01, faults=["oom"])
    got = await read_processes(sim.config, "B", [HELD_PID, 99999])
    held = got[HELD_PID]
    assert list(got) == [HELD_PID] and held.container is None and held.rss_mib > 1000
    assert held.command.startswith("python3 /home/ops/bench/fp8_matmul_sweep.py") and held.user
    with pytest.raises(ReadOnlyError, match="read-only"):
        await end_process(sim.config, "B", HELD_PID, read_only=True)
    assert HELD_PID in await read_processes(sim.config, "B", [HELD_PID])  # read-only sent nothing
    res = await end_process(sim.config, "B", HELD_PID, grace_s=3.0)
    assert res.ended and res.words.startswith(f"pid {HELD_PID} on B ended by TERM after"), res
    assert res.steps[0].startswith(f"$ env kill -s TERM {HELD_PID} -> exit 0")
    assert await read_processes(sim.config, "B", [HELD_PID]) == {}
    again = await end_process(sim.config, "B", HELD_PID, grace_s=1.0)
    assert again.ended and again.words == f"pid {HELD_PID} on B was already gone"
    svc = ServiceActions(sim.config)
    try:
        assert (await svc.estimate_fit()).ok  # the memory it held is free again
    finally:
        await svc.close()
    res, _ = await act(sim.config, "launch")
    assert res.result == "ok", res.summary


async def test_the_engine_is_refused_with_the_stations_words(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.005, running=True)
    pid = 2346  # B's engine (rank 1), once it holds GPU memory
    seen: dict = {}

    async def engine_listed() -> bool:
        seen.update(await read_processes(sim.config, "B", [pid]))
        return pid in seen
    await until(engine_listed, timeout=60, what="B's engine in ps")
    assert seen[pid].user == "root" and seen[pid].container == "glm53" and "vllm" in seen[pid].command
    res = await end_process(sim.config, "B", pid, grace_s=1.0)
    assert not res.ended and res.words.startswith("TERM refused: kill: (2346) - Operation not permitted")
    assert "sudo kill -s TERM 2346" in res.words


def test_the_command_lines_quote_every_argument():
    assert process_details([4242, 17]) == (
        "ps -ww -o pid=,user:32=,pcpu=,rss=,cgroup:512=,args= -p 4242,17; echo '--- containers'; "
        "docker ps --no-trunc --format '{{.ID}} {{.Names}}' 2>/dev/null; true")
    assert signal_process(4242, "KILL") == "env kill -s KILL 4242"
    with pytest.raises(ValueError):
        signal_process(1, "HUP")
    with pytest.raises(ValueError):
        signal_process("1; reboot", "TERM")  # type: ignore[arg-type]
