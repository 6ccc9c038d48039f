"""Launch and stop through real OpenSSH sshd in network namespaces (the lab fixture of tests/lab).

The containers are the simulator's (docker shim behind the real sshd); the order of commands,
the log following over real SSH channels, and a dead sshd are real. /health is asked of the
simulated API on 127.0.0.1, which answers 503 until the head's engine is ready.
"""

from __future__ import annotations

import dataclasses
import shlex

from aiohttp import web

from console.config import ApiSettings
from console.remote.transport import SSHTransport
from console.service import actions as service_actions
from console.sim import api as sim_api
from console.sim.engine import container_status, start_container
from console.sim.server import SimBackend


class Recording:
    def __init__(self, inner: SSHTransport, log: list):
        self.inner, self.log, self.station = inner, log, inner.station

    async def run(self, command, timeout=None, input=None):
        self.log.append((self.station.name, command))
        return await self.inner.run(command, timeout=timeout, input=input)

    def stream(self, command):
        self.log.append((self.station.name, command))
        return self.inner.stream(command)

    async def close(self):
        await self.inner.close()


def mutations(log):
    out = []
    for station, cmd in log:
        words = shlex.split(cmd.split(" && exec ", 1)[-1] if cmd.startswith("IFS=") else cmd)
        if len(words) > 1 and words[0] == "docker" and words[1] in ("run", "rm", "rename", "start", "stop"):
            out.append((station, words[1]))
    return out


async def api_for(lab):
    """The head's simulated API on 127.0.0.1, listening only while A's engine is ready (vLLM binds
    its port late and closes it when it stops: the verified stop checks exactly that)."""
    import asyncio
    import socket

    backend = SimBackend(lab.world, "A")
    runner = web.AppRunner(sim_api.create_app(backend), access_log=None)
    await runner.setup()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def gate():
        site = None
        while True:
            ready = await asyncio.to_thread(backend.phase) == "ready"
            if ready and site is None:
                site = web.TCPSite(runner, "127.0.0.1", port, reuse_address=True)
                await site.start()
            elif not ready and site is not None:
                await site.stop()
                site = None
            await asyncio.sleep(0.2)

    task = asyncio.create_task(gate())

    class Served:
        async def cleanup(self):
            task.cancel()
            await runner.cleanup()

    return Served(), f"http://127.0.0.1:{port}"


async def run_action(cfg, action, log, **kw):
    transports = {s.name: Recording(SSHTransport(s, 5.0, 30.0), log) for s in cfg.stations}
    try:
        return await service_actions.run_action(cfg, action, service_actions.ActionOptions(**kw),
                                                transports=transports, ready_timeout_s=90)
    finally:
        for t in transports.values():
            await t.close()


def state(lab, name):
    return container_status(lab.world, name, lab.world.state(name), "glm53")["state"]


async def test_launch_stop_restart_through_real_sshd(lab):
    runner, url = await api_for(lab)
    try:
        cfg = dataclasses.replace(lab.config(), api=ApiSettings(url=url))
        log: list = []
        res = await run_action(cfg, "launch", log, skip_checks=True)
        assert res.result == "ok", (res.summary, res.evidence)
        assert res.transport == "gdrdma"
        assert mutations(log) == [("B", "rm"), ("B", "rename"), ("B", "run"), ("A", "rm"), ("A", "rename"),
                                  ("A", "run")]
        run_a = next(c for s, c in log if s == "A" and " run " in c)
        assert f"--master-addr {lab.rail['A']}" in run_a and f"VLLM_HOST_IP={lab.rail['A']}" in run_a
        assert state(lab, "A") == "running" and state(lab, "B") == "running"

        log.clear()
        res = await run_action(cfg, "stop", log)
        assert res.result == "ok"
        assert mutations(log) == [("A", "stop"), ("B", "stop")]
        assert state(lab, "A") == "exited" and state(lab, "B") == "exited"

        log.clear()
        res = await run_action(cfg, "restart", log)
        assert res.result == "ok", (res.summary, res.evidence)
        assert mutations(log) == [("B", "start"), ("A", "start")] and res.transport == "gdrdma"
        assert state(lab, "A") == "running" and state(lab, "B") == "running"
    finally:
        await runner.cleanup()


async def test_dead_sshd_on_the_worker_means_nothing_is_started(lab):
    lab.kill_sshd("B")
    log: list = []
    res = await run_action(lab.config(), "launch", log, skip_checks=True)
    assert res.result == "failed"
    assert "B: cannot connect to" in res.summary or "B: no answer from" in res.summary
    assert mutations(log) == []
    assert state(lab, "A") != "running"


async def test_stop_with_the_worker_sshd_dead_stops_the_head_and_names_the_worker(lab):
    start_container(lab.world, "B")
    start_container(lab.world, "A")
    lab.kill_sshd("B")
    log: list = []
    res = await run_action(lab.config(), "stop", log)
    assert res.result == "failed"
    assert res.summary.startswith("could not reach B") and "(stopped: A)" in res.summary
    assert mutations(log) == [("A", "stop")]
    assert state(lab, "A") == "exited"
