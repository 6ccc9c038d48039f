"""``api-port`` on the simulated pair: a foreign server already on the head's API port refuses the launch
with one line naming the holder (the pid and process ss shows, or "a process this user cannot see"); the
service's own engine on the port is no holder; a worker's is shown, not fatal."""

from __future__ import annotations

from console.service.actions import run_action
from console.station.checks import overall, run_checks
from console.vocabulary import CheckStatus


def one(results, station):
    [r] = [r for r in results if r.id == "api-port" and r.station == station]
    return r


async def test_a_visible_foreign_server_on_the_head_port_fails_with_its_pid(sim_factory):
    h = await sim_factory(faults=["api-port-taken"])
    results = await run_checks(h.config, only=["api-port"])
    a, b = one(results, "A"), one(results, "B")
    assert a.status == CheckStatus.FAIL, (a.summary, a.evidence)
    assert "port 8000 is held by pid 4343 (python3, on the host" in a.summary
    assert "vllm.entrypoints.openai.api_server" in a.summary and "not this service's container glm53" in a.summary
    assert "ss -ltnpH 'sport = :8000'" in a.evidence and 'users:(("python3",pid=4343' in a.evidence
    assert b.status == CheckStatus.PASS and b.summary == "nothing listens on port 8000"
    assert overall(results) == 1


async def test_a_hidden_listener_while_the_container_is_down_is_someone_elses(sim_factory):
    h = await sim_factory(faults=["api-port-taken-hidden"])
    a = one(await run_checks(h.config, only=["api-port"]), "A")
    assert a.status == CheckStatus.FAIL
    assert "held by a process this user cannot see, not this service's container glm53" in a.summary


async def test_the_services_own_engine_is_no_holder(sim_factory):
    h = await sim_factory(running=True)
    from console.sim.engine import engine_phase
    from tests.waiting import until

    await until(lambda: engine_phase(h.world, "A", h.world.state("A")) == "ready", what="the head ready", timeout=30)
    a = one(await run_checks(h.config, only=["api-port"]), "A")
    assert a.status == CheckStatus.PASS, (a.summary, a.evidence)
    assert "while glm53 runs" in a.summary and "taken as glm53's engine" in a.summary


async def test_a_workers_foreign_listener_is_a_warning(sim_factory):
    h = await sim_factory(faults=["api-port-taken@B"])
    b = one(await run_checks(h.config, only=["api-port"]), "B")
    assert b.status == CheckStatus.WARN and "pid 4343" in b.summary and "worker serves no API" in b.summary


async def test_the_launch_is_refused_naming_the_holder(sim_factory):
    h = await sim_factory(faults=["api-port-taken"])
    result = await run_action(h.config, "launch")
    assert result.result != "ok"
    assert "preflight failed: api-port@A" in result.summary, result.summary
    assert any(st == "A" and line.startswith("api-port: port 8000 is held by pid 4343 (python3")
               for st, line in result.evidence), result.evidence
    assert h.world.state("A")["containers"]["glm53"]["runs"] == []  # nothing was started
