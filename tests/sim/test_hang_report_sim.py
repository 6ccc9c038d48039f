"""``hang-report`` against the simulated stations (real SSH client, asyncssh server, shims printing
ncclras / py-spy --native / flight recorder dumps in their real formats): the verdict names the rank
behind for desync and the stuck collective for a hang; exit codes 0 / 1 / 2."""

from __future__ import annotations

import asyncio
import json
import tarfile
import time

from console.cli import main
from console.sim.engine import start_container
from console.sim.launch import launch_args
from console.sim.proc_tasks import write_tasks


def _args(h, name: str, flight_recorder: bool) -> list[str]:
    """The launch's ``docker run`` arguments; without the flight recorder's environment (an older
    launch, or ``[overrides] flight_recorder = 0``) when ``flight_recorder`` is false."""
    args = launch_args(h.world, name)
    if flight_recorder:
        assert any(a.startswith("TORCH_NCCL_TRACE_BUFFER_SIZE=") for a in args)  # the launch sets it
        return args
    out: list[str] = []
    for a in args:
        if a.startswith("TORCH_") and out and out[-1] == "-e":
            out.pop()
            continue
        out.append(a)
    return out


def started(h, ago: float, flight_recorder: bool = True) -> None:
    """Workers first, then the head, ``ago`` seconds in the past, as the console's launch runs them."""
    now = time.time() - ago - 0.5
    names = h.world.names
    for i, name in enumerate(reversed(names[1:])):
        start_container(h.world, name, at=now + i * 0.1, args=_args(h, name, flight_recorder))
    start_container(h.world, names[0], at=now + 0.3, args=_args(h, names[0], flight_recorder))
    for name in names:  # their /proc/PID/task now, as a real station's (the sim server's next write is up to 1 s away)
        write_tasks(h.world, name)


async def _cli(argv: list[str]) -> int:
    return await asyncio.to_thread(main, argv)


async def test_desync_names_the_rank_behind(sim_factory, tmp_path, capsys):
    h = await sim_factory(faults=["desync"], time_scale=0.05)
    started(h, ago=30)  # ready after ~21 s, out of step 1.5 s later; A's watchdog at ~53 s
    out = tmp_path / "hang.tar.gz"
    rc = await _cli(["hang-report", "--config", str(h.config_path), str(out), "--json", "--interval", "1"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0, data
    assert data["verdict"].startswith("ranks out of step: A at op "), data["verdict"]
    assert "B at op" in data["verdict"] and "B 1 op behind" in data["findings"]["ras"]
    a, b = data["stations"]["A"], data["stations"]["B"]
    assert set(a) >= {"pyspy", "flight_recorder", "ras", "gpus", "kernel", "counters"}
    assert a["ras"]["status"] == "ok" and a["ras"]["format"] == "json" and len(a["ras"]["reads"]) == 2
    assert a["pyspy"]["status"] == "ok" and any(p["wait"]["kind"] == "collective" for p in a["pyspy"]["processes"])
    assert any("libnccl" in f for p in a["pyspy"]["processes"] for f in p["frames"])  # --native frames
    assert b["flight_recorder"]["status"] == "ok" and a["flight_recorder"]["dumps"][0]["last"]["state"] == "started"
    assert "B never entered it" in data["findings"]["flight_recorder"]
    assert len(a["gpus"]["samples"]) == 2 and a["counters"]["status"] == "ok"
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert any(n.endswith("stations/B/ras-2.txt") for n in names) and any(n.endswith("evidence.json") for n in names)
    # every engine thread's kernel-side state, per process, and the ranks RAS found behind
    assert any(n.endswith("stations/A/tasks.txt") for n in names)
    tasks = b["tasks"]
    assert tasks["status"] == "ok" and tasks["read_at"] > 0, tasks
    worker = next(p for p in tasks["processes"] if "Worker_TP1" in p["cmdline"])
    watchdog = next(t for t in worker["threads"] if t["comm"] == "pt_nccl_watchdg")
    assert watchdog["state"] == "S" and watchdog["wchan"] == "hrtimer_nanosleep" and watchdog["wait"] == "sleep"
    assert watchdog["stack"] and "hrtimer_nanosleep" in watchdog["stack"][0]
    assert worker["threads"][0]["state"] == "R" and worker["threads"][0]["wait"] == "running"  # spinning in the sync
    lag = data["stragglers"]
    assert lag["status"] == "ok" and lag["kind"] == "out-of-step" and lag["reads"] == "two-reads", lag
    assert lag["ranks"] == [{"rank": 1, "station": "B", "behind": 1}] and lag["age_s"] is not None


async def test_collective_hang_names_the_collective_and_the_counters(sim_factory, tmp_path, capsys):
    h = await sim_factory(faults=["collective-hang"], time_scale=0.05)
    started(h, ago=30, flight_recorder=False)
    rc = await _cli(["hang-report", "--config", str(h.config_path), str(tmp_path / "h.tgz"), "--json",
                     "--interval", "1"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert "stuck in all_reduce" in data["verdict"] and "frozen" in data["verdict"], data["verdict"]
    assert data["findings"]["ras"].startswith("RAS: every rank at AllReduce op")
    assert data["stations"]["A"]["flight_recorder"]["status"] == "not-enabled"
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" in data["stations"]["A"]["flight_recorder"]["note"]


async def test_exit_codes_nothing_to_capture_and_bad_input(sim_factory, tmp_path, capsys):
    h = await sim_factory()
    rc = await _cli(["hang-report", "--config", str(h.config_path), str(tmp_path / "x.tgz"), "--interval", "0.2"])
    err = capsys.readouterr().err
    assert rc == 1 and "nothing to capture: no engine container runs on any station" in err
    assert not (tmp_path / "x.tgz").exists()
    rc = await _cli(["hang-report", "--config", str(h.config_path), str(tmp_path / "no-such-dir" / "x.tgz")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "does not exist" in err[0]
    (tmp_path / "there.tgz").write_text("x")
    rc = await _cli(["hang-report", "--config", str(h.config_path), str(tmp_path / "there.tgz")])
    assert rc == 2 and "--force" in capsys.readouterr().err


async def test_nccl_timeout_stuck_in_the_first_collective_on_the_network_path(sim_factory, tmp_path, capsys):
    h = await sim_factory(faults=["nccl-timeout"], time_scale=0.05)
    started(h, ago=5)  # in the first collective since ~0.5 s; A's watchdog ~25 s away
    rc = await _cli(["hang-report", "--config", str(h.config_path), str(tmp_path / "t.tgz"), "--json",
                     "--interval", "1"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert "stuck in NCCL communicator setup" in data["verdict"] and "the network path" in data["verdict"], \
        data["verdict"]
    assert data["findings"]["ras"].startswith("RAS: every rank at AllReduce op 1, frozen")
    assert "local_ack_timeout_err" in data["findings"]["counters"]


async def test_a_wedge_after_serving_tells_one_story(sim_factory, tmp_path, capsys):
    """The wedge fault: served for a while, then every rank spins inside one all-reduce. RAS, the flight
    recorder, py-spy and the counters agree: the count where serving stopped (not the warm-up's), every
    worker in the collective, no RDMA traffic (the counters stood still with the tokens)."""
    h = await sim_factory(faults=["wedge"], time_scale=0.05)
    started(h, ago=50)  # ready after ~21 s, wedged ~15 s later (300 engine seconds of serving)
    rc = await _cli(["hang-report", "--config", str(h.config_path), str(tmp_path / "w.tgz"), "--json",
                     "--interval", "1"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert "stuck in all_reduce" in data["verdict"], data["verdict"]
    ras = data["findings"]["ras"]
    assert ras.startswith("RAS: every rank at AllReduce op") and "frozen" in ras and "op 1," not in ras, ras
    assert "traffic flows" not in data["findings"]["counters"], data["findings"]["counters"]
    a = data["stations"]["A"]
    assert any(p["wait"]["kind"] == "collective" for p in a["pyspy"]["processes"]), a["pyspy"]
    # the plain output: every station's threads and the stragglers, in the evidence screen's words
    rc = await _cli(["hang-report", "--config", str(h.config_path), str(tmp_path / "w2.tgz"), "--interval", "1"])
    text = capsys.readouterr().out
    assert rc == 0
    assert "  stragglers: none behind (RAS on " in text, text
    assert "  A threads: " in text and "  B threads: " in text and " threads, none in D" in text, text
    assert "  A requests: not read: this capture has no read of the engine's metrics" in text
    assert "B requests" not in text


async def test_doctor_and_hang_report_read_and_judge_the_same(sim_factory):
    """The doctor's hang rung takes the same capture and judgement as ``hang-report`` and ``h``: on a
    desync both name B as the rank not with the others, in the same verdict words."""
    from console.doctor import DoctorOptions, run_doctor
    from console.doctor.evidence import capture

    h = await sim_factory(faults=["desync"], time_scale=0.05)
    started(h, ago=30)
    ev = await capture(h.config, interval_s=1.0, deadline_s=60.0)
    rep = await run_doctor(h.config, rungs=["hang"], options=DoctorOptions(counter_interval_s=1.0))
    row = next(r for r in rep.of("hang") if r.summary.startswith("verdict: "))
    assert ev.kind == "out-of-step" and row.status == "fail", (ev.verdict, row)
    cause = "not with the others: B (the cause"
    assert cause in ev.verdict and cause in row.summary, (ev.verdict, row.summary)
    assert row.summary.split(" (")[0] == f"verdict: {ev.verdict}".split(" (")[0]
    assert row.next == ev.next_step and any(f.startswith("ras: ") and "B 1 op behind" in f for f in row.evidence)
