"""The process list against the simulated stations (real SSH client, the station's shell and shims): the
oom rehearsal's leftover process is found with who runs it and its whole command line, ended from the
console (TERM, then KILL if needed), and then the launch goes through; --read-only refuses; the engine
(root's, in its container) is refused with the station's own words and what to do instead."""

from __future__ import annotations

import pytest

from console.remote.cmdlines.processes import process_details, signal_process
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
    assert held.started  # its start time: with the command line, who the pid is
    with pytest.raises(ReadOnlyError, match="read-only"):
        await end_process(sim.config, "B", held, read_only=True)
    assert HELD_PID in await read_processes(sim.config, "B", [HELD_PID])  # read-only sent nothing
    res = await end_process(sim.config, "B", held, grace_s=3.0)
    assert res.ended and res.words.startswith(f"pid {HELD_PID} on B ended by TERM after"), res
    assert res.steps[0].startswith(f"$ env kill -s TERM {HELD_PID} (identity checked) -> exit 0")
    assert await read_processes(sim.config, "B", [HELD_PID]) == {}
    again = await end_process(sim.config, "B", held, grace_s=1.0)
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
    res = await end_process(sim.config, "B", seen[pid], grace_s=1.0)
    assert not res.ended and res.words.startswith("TERM refused: kill: (2346) - Operation not permitted")
    assert "sudo kill -s TERM 2346" in res.words


async def test_a_pid_reused_after_the_dialog_opened_is_never_signalled(sim_factory):
    """The row was read, then the leftover exited and the kernel gave its pid to another process (a
    later start, another command line): TERM is refused with what runs there now, and it still runs."""
    sim = await sim_factory(n=2, time_scale=0.01, faults=["oom"])
    shown = (await read_processes(sim.config, "B", [HELD_PID]))[HELD_PID]
    with sim.world.edit("B") as st:  # the leftover exits; an unrelated process gets pid 4242
        for g in st["gpus"]:
            if g.get("held_pid"):
                g["held_started_at"], g["held_args"] = 1_796_000_600, "/usr/sbin/chronyd -F 1"
    res = await end_process(sim.config, "B", shown, grace_s=1.0)
    assert not res.ended and res.words.startswith(f"pid {HELD_PID} on B is no longer the process shown"), res
    assert "chronyd -F 1" in res.words and "not signalled" in res.words
    assert res.steps == ["TERM not sent: pid 4242 now names another process"]
    now = (await read_processes(sim.config, "B", [HELD_PID]))[HELD_PID]
    assert now.command == "/usr/sbin/chronyd -F 1"  # it still runs: nothing was sent to it


async def test_pid_1_the_console_itself_and_an_unread_row_are_refused_without_a_word_to_the_station(sim_factory):
    import dataclasses
    import os

    from console.service.processes import ProcessDetail
    sim = await sim_factory(n=2, time_scale=0.01, faults=["oom"])
    init = ProcessDetail(1, "root", 0.0, 10.0, None, "/sbin/init", "Sat Dec  5 10:00:00 2026")
    res = await end_process(sim.config, "B", init)
    assert not res.ended and "never signalled" in res.words and res.steps == []
    local = dataclasses.replace(sim.config.station("B"), local=True)
    cfg = dataclasses.replace(sim.config, stations=tuple(local if s.name == "B" else s for s in sim.config.stations))
    me = dataclasses.replace(init, pid=os.getpid(), command="python3 -m console")
    res = await end_process(cfg, "B", me)
    assert not res.ended and "this console itself" in res.words
    unread = ProcessDetail(HELD_PID, "ops", 0.4, 2000.0, None, "python3 x.py")  # who it is was not read
    res = await end_process(sim.config, "B", unread)
    assert not res.ended and "start time was not read" in res.words
    assert HELD_PID in await read_processes(sim.config, "B", [HELD_PID])


async def test_secrets_in_argv_are_masked_and_the_process_can_still_be_ended(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01, faults=["oom"])
    argv = ("python3 sweep.py --api-key sk-abcdefghijklmnopqrstu --hf-token hf_abcdefghijklmnop token=s3cr3tvalue "
            "-H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='")
    with sim.world.edit("B") as st:
        for g in st["gpus"]:
            if g.get("held_pid"):
                g["held_args"] = argv
    shown = (await read_processes(sim.config, "B", [HELD_PID]))[HELD_PID]
    for secret in ("abcdefghijklmnopqrstu", "hf_abcdefghijklmnop", "s3cr3tvalue", "dXNlcjpwYXNzd29yZA"):
        assert secret not in shown.command, shown.command
    assert shown.command.startswith("python3 sweep.py --api-key *** --hf-token ***")
    with sim.world.edit("B") as st:  # pid reuse by a process with a secret of its own: named, masked
        for g in st["gpus"]:
            if g.get("held_pid"):
                g["held_args"] = "other --password hunter22"
    res = await end_process(sim.config, "B", shown, grace_s=1.0)
    assert "no longer the process shown" in res.words and "hunter22" not in res.words and "--password ***" in res.words
    with sim.world.edit("B") as st:
        for g in st["gpus"]:
            if g.get("held_pid"):
                g["held_args"] = argv
    res = await end_process(sim.config, "B", shown, grace_s=3.0)  # the masked row still names the process
    assert res.ended and "ended by TERM" in res.words, res


def test_the_command_lines_quote_every_argument():
    assert process_details([4242, 17]) == (
        "LC_ALL=C ps -ww -o pid=,user:32=,pcpu=,rss=,cgroup:512=,lstart=,args= -p 4242,17; echo '--- containers'; "
        "docker ps --no-trunc --format '{{.ID}} {{.Names}}' 2>/dev/null; true")
    assert signal_process(4242, "KILL") == "env kill -s KILL 4242"
    with pytest.raises(ValueError):
        signal_process(1, "HUP")
    with pytest.raises(ValueError):
        signal_process("1; reboot", "TERM")  # type: ignore[arg-type]
