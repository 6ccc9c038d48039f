"""Launch / stop / restart against the simulated stations through the real SSH client.

The transports are the real SSHTransport objects, wrapped only to record which command lines ran
where and in what order; the simulated docker really starts and stops containers and prints the
engines' real log lines, including the failures the faults inject.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shlex

import pytest

from console.config import ApiSettings
from console.remote.transport import SSHTransport
from console.service.actions import ActionOptions, CancelToken, run_action
from console.sim.engine import container_status, start_container


class Recording:
    """A real transport that also writes down every command line it is asked to run."""

    def __init__(self, inner: SSHTransport, log: list[tuple[str, str, str]]):
        self.inner, self.log, self.station = inner, log, inner.station

    async def run(self, command: str, timeout: float | None = None, input: str | None = None):
        self.log.append((self.station.name, "run", command))
        return await self.inner.run(command, timeout=timeout, input=input)

    def stream(self, command: str):
        self.log.append((self.station.name, "stream", command))
        return self.inner.stream(command)

    async def close(self) -> None:
        await self.inner.close()


def recorded(config, log, connect_s: float = 20.0):
    return {s.name: Recording(SSHTransport(s, connect_s, 60.0), log) for s in config.stations}


async def act(config, action: str, log=None, events=None, connect_s: float = 20.0, **kw):
    log = [] if log is None else log
    transports = recorded(config, log, connect_s)
    if action == "launch":
        kw.setdefault("skip_checks", True)
    try:
        return await run_action(config, action, ActionOptions(**kw), transports=transports, ready_timeout_s=60,
                                on_event=(events or []).append), log
    finally:
        for t in transports.values():
            await t.close()


def mutations(log) -> list[tuple[str, str]]:
    """(station, docker verb) of the commands that change a station, in order."""
    out = []
    for station, kind, cmd in log:
        words = shlex.split(cmd.split(" && exec ", 1)[-1] if cmd.startswith("IFS=") else cmd) if kind == "run" else []
        if len(words) > 1 and words[0] == "docker" and words[1] in ("run", "rm", "rename", "start", "stop"):
            out.append((station, words[1]))
    return out


def states(sim) -> dict[str, str]:
    return {n: container_status(sim.world, n, sim.world.state(n), "glm53")["state"] for n in sim.world.names}


async def test_launch_two_stations_worker_first_then_head(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01)
    res, log = await act(sim.config, "launch")
    assert res.result == "ok", res.summary
    assert res.transport == "gdrdma"
    assert mutations(log) == [("B", "rm"), ("B", "rename"), ("B", "run"), ("A", "rm"), ("A", "rename"), ("A", "run")]
    # the worker's engine process was seen up before the head was started
    b_started = next(i for i, s in enumerate(res.steps) if (s.station, s.action) == ("B", "started"))
    a_run = next(i for i, s in enumerate(res.steps) if (s.station, s.action) == ("A", "run"))
    assert b_started < a_run and res.steps[b_started].status == "ok"
    assert [(s.station, s.action, s.status) for s in res.steps[-5:]] == [
        ("A", "ready", "ok"), ("A", "health", "ok"), ("A", "first-token", "ok"), ("B", "transport", "ok"),
        ("A", "transport", "ok")]
    assert states(sim) == {"A": "running", "B": "running"}
    run_a = next(c for st, k, c in log if st == "A" and " run " in c)
    for flag in ("--node-rank 0", "--master-addr 198.18.0.1", "--gpus device=GPU-", "--network host"):
        assert flag in run_a
    assert "--headless" not in run_a and "--headless" in next(c for st, k, c in log if st == "B" and " run " in c)
    doc = res.to_json()
    assert set(doc) == {"steps", "result", "transport", "timeline"}
    assert set(doc["timeline"]) == {"A", "B"} and set(doc["timeline"]["A"][0]) == {"event", "at", "detail"}
    assert set(doc["steps"][0]) == {"station", "action", "status", "started_at", "finished_at", "detail"}
    json.dumps(doc)


async def test_four_stations_order_of_launch_stop_restart(sim_factory):
    sim = await sim_factory(n=4, time_scale=0.01)
    res, log = await act(sim.config, "launch")
    assert res.result == "ok", res.summary
    assert [m for m in mutations(log) if m[1] == "run"] == [("B", "run"), ("C", "run"), ("D", "run"), ("A", "run")]
    res, log = await act(sim.config, "stop")
    assert res.result == "ok"
    assert mutations(log) == [("A", "stop"), ("B", "stop"), ("C", "stop"), ("D", "stop")]
    assert set(states(sim).values()) == {"exited"}
    res, log = await act(sim.config, "restart")
    assert res.result == "ok", res.summary
    assert mutations(log) == [("B", "start"), ("C", "start"), ("D", "start"), ("A", "start")]
    assert res.transport == "gdrdma"
    # the restart followed only the new run's log (--since), so the old ready line did not count
    assert all("--since" in c for _st, k, c in log if k == "stream")


async def test_restart_of_a_running_service_stops_head_first_then_starts_workers_first(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01)
    assert (await act(sim.config, "launch"))[0].result == "ok"
    res, log = await act(sim.config, "restart")
    assert res.result == "ok", res.summary
    assert mutations(log) == [("A", "stop"), ("B", "stop"), ("B", "start"), ("A", "start")]


async def test_idempotent_stop_and_no_launch_over_a_running_service(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01)
    res, log = await act(sim.config, "stop")
    assert res.result == "ok" and res.summary == "already stopped; verified clean on A, B"
    assert mutations(log) == []
    assert (await act(sim.config, "launch"))[0].result == "ok"
    res, log = await act(sim.config, "launch")
    assert res.result == "failed" and mutations(log) == []
    assert res.summary.startswith("a healthy service is running on A and B; launch replaces it: add --replace")


async def test_worker_failing_to_start_means_the_head_is_never_started(sim_factory):
    sim = await sim_factory(n=3, time_scale=0.01)
    # A broken docker daemon on C: every `docker run` there fails the way the daemon reports it.
    shim = sim.world.root / "bin" / "docker"
    real = shim.read_text()
    shim.write_text(real.replace(
        "exec ", 'if [ "$DGX_SIM_STATION" = C ] && [ "$1" = run ]; then\n'
        '  echo "docker: Error response from daemon: failed to create task for container: OCI runtime create failed" >&2\n'
        '  exit 125\nfi\nexec ', 1))
    res, log = await act(sim.config, "launch")
    assert res.result == "failed"
    assert "docker run failed on C (exit 125)" in res.summary
    assert ("A", "run") not in mutations(log)
    assert mutations(log)[:5] == [("B", "rm"), ("B", "rename"), ("B", "run"), ("C", "rm"), ("C", "rename")]
    # what this run had started (B) was stopped again: nothing is left half-up
    assert mutations(log)[-1] == ("B", "stop")
    assert states(sim)["B"] == "exited" and states(sim)["A"] != "running"


async def test_cancel_mid_load_stops_what_started(sim_factory):
    """The operator's cancel (a hard one: the second Ctrl+C) ends the command in flight at once and
    is a stated result; what the run started is stopped."""
    sim = await sim_factory(n=2, time_scale=0.03)
    log: list = []
    events: list = []
    transports = recorded(sim.config, log)
    loading = asyncio.Event()
    cancel = CancelToken()

    def on_event(ev):
        events.append(ev)
        if ev.kind == "log" and ev.station == "A" and "Loading safetensors" in ev.text:
            loading.set()

    task = asyncio.create_task(run_action(sim.config, "launch", ActionOptions(skip_checks=True), transports=transports,
                                          ready_timeout_s=60, on_event=on_event, cancel=cancel))
    await asyncio.wait_for(loading.wait(), 60)
    cancel.request(hard=True)
    res = await task
    assert res.result == "cancelled"
    assert "nothing left running" in res.summary
    assert ("A", "ready", "cancelled") in [(s.station, s.action, s.status) for s in res.steps]
    assert mutations(log)[-2:] == [("A", "stop"), ("B", "stop")]
    assert states(sim) == {"A": "exited", "B": "exited"}


async def test_a_cancelled_task_still_stops_what_it_started_and_the_cancel_propagates(sim_factory):
    """The one cancellation rule: cancelling the action's task (the app quitting) is never swallowed
    into a result, and the clean-up runs first."""
    sim = await sim_factory(n=2, time_scale=0.03)
    log: list = []
    loading = asyncio.Event()

    def on_event(ev):
        if ev.kind == "log" and ev.station == "A" and "Loading safetensors" in ev.text:
            loading.set()

    task = asyncio.create_task(run_action(sim.config, "launch", ActionOptions(skip_checks=True),
                                          transports=recorded(sim.config, log), ready_timeout_s=60, on_event=on_event))
    await asyncio.wait_for(loading.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert mutations(log)[-2:] == [("A", "stop"), ("B", "stop")]
    assert states(sim) == {"A": "exited", "B": "exited"}


@pytest.mark.parametrize("fault, station, finding", [
    ("oom", "B", "cuda-oom"),
    ("kv-too-small", "A", "kv-cache-too-small"),
    ("worker-dies", "B", "worker-died"),
    ("nccl-timeout", "A", "nccl-timeout"),
])
async def test_fatal_line_aborts_the_launch_with_evidence(sim_factory, fault, station, finding):
    sim = await sim_factory(n=2, time_scale=0.01, faults=[fault])
    res, log = await act(sim.config, "launch", skip_fit=True)  # past the estimate: the log must catch it
    assert res.result == "failed"
    assert res.summary.startswith(f"{station}: {finding}: ")
    # the wait that saw it failed at once (B's start wait or A's ready wait, as the clock fell)
    failed = [s for s in res.steps if s.status == "failed"]
    assert len(failed) == 1 and failed[0].action in ("started", "ready")
    assert "timed out" not in failed[0].detail and finding in failed[0].detail
    assert res.evidence and res.evidence[-1][0] == station
    # stopped (or died): nothing half-up; a head the launch never started stays created (B's start wait saw
    # the crash at once now that a start and a death between two looks are both reported)
    got = states(sim)
    assert got["B"] == "exited" and got["A"] in ("exited", "created"), got
    assert got["A"] == "exited" or failed[0].action == "started"


async def test_keep_on_failure_leaves_the_survivors_running(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01, faults=["kv-too-small"])
    res, log = await act(sim.config, "launch", on_failure=False, skip_fit=True)
    assert res.result == "failed" and "left running: B, A" in res.summary
    assert ("B", "stop") not in mutations(log)
    assert states(sim)["B"] == "running"


async def test_socket_fallback_is_reported_and_the_service_left_up(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01, faults=["socket-fallback"])
    res, log = await act(sim.config, "launch")
    assert res.result == "failed" and res.transport == "socket"
    assert "TCP sockets" in res.summary
    by = {(s.station, s.action): s for s in res.steps}
    assert by[("B", "transport")].status == "failed" and by[("A", "transport")].status == "ok"
    assert by[("A", "health")].status == "ok"
    assert states(sim) == {"A": "running", "B": "running"}


async def test_sglang_profile_launch(sim_factory):
    sim = await sim_factory(n=2, profile="glm53-flash-nvfp4-2x-gb10-sglang", time_scale=0.01)
    res, log = await act(sim.config, "launch")
    assert res.result == "ok", res.summary
    assert res.transport == "rdma"  # GB10: RDMA without GPUDirect is the expected path
    run_b = next(c for st, k, c in log if st == "B" and " run " in c)
    assert "--dist-init-addr 198.18.0.1:20000" in run_b and "--node-rank 1" in run_b
    assert "-e SGLANG_HOST_IP=198.18.0.2" in run_b
    ready = next(s for s in res.steps if s.action == "ready")
    assert "fired up and ready to roll" in ready.detail


async def test_api_key_never_reaches_a_command_line(sim_factory, monkeypatch):
    secret = "sk-sim-4f1c2e9a"
    monkeypatch.setenv("DGX_TEST_API_KEY", secret)
    sim = await sim_factory(n=2, time_scale=0.01)
    cfg = dataclasses.replace(sim.config, api=ApiSettings(url=sim.config.api.url, api_key_env="DGX_TEST_API_KEY"))
    events: list = []
    res, log = await act(cfg, "launch", events=events)
    assert res.result == "ok", res.summary
    assert not any(secret in c for _s, _k, c in log)
    assert not any(secret in e.text for e in events)
    run_a = next(c for st, k, c in log if st == "A" and " run " in c)
    assert "-e VLLM_API_KEY " in run_a and "IFS= read -r VLLM_API_KEY" in run_a
    state_text = (sim.world.station_dir("A") / "state.json").read_text()
    assert secret not in state_text and "VLLM_API_KEY" in state_text


async def test_head_started_without_workers_fails_like_vllm(sim_factory):
    """The simulator's side of the order: a head alone waits for its workers, then dies."""
    sim = await sim_factory(n=2, time_scale=0.005)
    t = SSHTransport(sim.config.head, 5.0, 30.0)
    try:
        assert (await t.run("docker start glm53")).ok
        lines = [ln async for ln in t.stream("exec docker logs -f glm53 2>&1")]
    finally:
        await t.close()
    assert any("DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined." in ln
               for ln in lines)
    assert states(sim)["A"] == "exited"


async def test_a_worker_started_while_the_head_waits_lets_the_head_come_up(sim_factory):
    """Within torch's rendezvous window a late worker still joins; the head then carries on."""
    sim = await sim_factory(n=2, time_scale=0.005)
    head, worker = SSHTransport(sim.config.head, 5.0, 30.0), SSHTransport(sim.config.station("B"), 5.0, 30.0)
    try:
        assert (await head.run("docker start glm53")).ok
        assert (await worker.run("docker start glm53")).ok  # after the head, well inside 600 s * scale
        lines = []
        async for ln in head.stream("exec docker logs -f glm53 2>&1"):
            lines.append(ln)
            if "Application startup complete." in ln:
                break
    finally:
        await head.close()
        await worker.close()
    assert not any("DistStoreError" in ln for ln in lines)
    assert states(sim) == {"A": "running", "B": "running"}


async def test_run_flags_are_honoured_by_the_simulated_engine(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01)
    cfg = dataclasses.replace(sim.config, overrides={"max_model_len": 65536})
    res, log = await act(cfg, "launch")
    assert res.result == "ok", res.summary
    t = SSHTransport(sim.config.head, 5.0, 30.0)
    try:
        out = (await t.run("docker logs glm53")).stdout
    finally:
        await t.close()
    assert "Using max model len 65536" in out and "Maximum concurrency for 65,536 tokens" in out


async def test_stop_with_an_unreachable_worker_still_stops_the_head_and_says_so(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01, faults=["station-unreachable@B"])
    start_container(sim.world, "A")
    res, log = await act(sim.config, "stop", connect_s=3.0)
    assert res.result == "failed"
    assert res.summary.startswith("could not reach B") and "(stopped: A)" in res.summary
    assert mutations(log) == [("A", "stop")]
    assert states(sim)["A"] == "exited"


async def test_partially_running_service_is_not_launched_over(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01)
    start_container(sim.world, "B")
    res, log = await act(sim.config, "launch")
    assert res.result == "failed" and res.summary.startswith("a service is partly running (on B)")
    assert "--replace" in res.summary and mutations(log) == []


async def test_ray_executor_launch_order_and_flags(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01)
    cfg = dataclasses.replace(sim.config, overrides={"executor": "ray"})
    res, log = await act(cfg, "launch")
    assert res.result == "ok", res.summary
    assert [m for m in mutations(log) if m[1] == "run"] == [("B", "run"), ("A", "run")]
    run_a = next(c for st, k, c in log if st == "A" and " run " in c)
    run_b = next(c for st, k, c in log if st == "B" and " run " in c)
    assert "--distributed-executor-backend ray" in run_a and "ray start --head" in run_a
    assert "ray start --block --address=198.18.0.1:6379" in run_b and "--headless" not in run_b
    started_b = next(s for s in res.steps if (s.station, s.action) == ("B", "started"))
    assert "joins the cluster once the head is up" in started_b.detail


async def test_a_relaunch_keeps_the_failed_run_and_its_log_as_prev(sim_factory):
    sim = await sim_factory(n=2, time_scale=0.01, faults=["kv-too-small"])
    assert (await act(sim.config, "launch", skip_fit=True))[0].result == "failed"
    res, log = await act(sim.config, "launch", skip_fit=True)
    assert res.result == "failed"
    t = SSHTransport(sim.config.head, 20.0, 60.0)
    try:
        prev = await t.run("docker logs glm53-prev")
        cur = await t.run("docker inspect --format '{{.State.Status}}' glm53-prev")
    finally:
        await t.close()
    assert "larger than the available KV cache memory" in prev.stdout
    assert cur.stdout.strip() == "exited"
