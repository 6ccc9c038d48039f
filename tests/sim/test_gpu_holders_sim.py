"""``gpu-holders`` on the simulated pair: a process of another container, or one on the host, holding
the worker's GPU beside the running service is shown (pid, where, memory, command) as a warning —
never a failure, so ``check`` still passes on it — and the service's own engine is never named."""

from __future__ import annotations

from console.station.checks import overall, run_checks
from console.vocabulary import CheckStatus

OTHER = "0::/system.slice/docker-" + "ab12cd34ef56" * 5 + "abcd.scope"


async def test_a_foreign_holder_is_shown_not_fatal(sim_factory):
    h = await sim_factory(running=True)
    with h.world.edit("B") as st:
        g = next(g for g in st["gpus"] if g["serving"])
        g["held_mib"], g["held_cgroup"], g["held_args"] = 12000, OTHER, "python3 train.py --token=hunter2hunter2"
    res = {r.station: r for r in await run_checks(h.config, only=["gpu-holders"])}
    b, a = res["B"], res["A"]
    assert b.status == CheckStatus.WARN, (b.summary, b.evidence)
    assert "pid 4242 (container ab12cd34ef56 (not listed by docker ps), 12000 MiB" in b.summary
    assert "train.py" in b.summary and "glm53" in b.summary and "P" in b.fix and "hunter2" not in b.summary
    assert a.status == CheckStatus.PASS and "4242" not in a.summary
    assert overall(list(res.values())) == 0  # shown, not fatal: check exits 0 on it


async def test_a_leftover_on_the_host_is_named_as_such(sim_factory):
    h = await sim_factory(running=True)
    with h.world.edit("A") as st:
        next(g for g in st["gpus"] if g["serving"])["held_mib"] = 3000
    (r,) = [x for x in await run_checks(h.config, only=["gpu-holders"]) if x.station == "A"]
    assert r.status == CheckStatus.WARN and "(on the host, 3000 MiB" in r.summary
