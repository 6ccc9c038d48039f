"""``status`` with station commands timing out leaves no task behind: it used to end,
about 1 run in 10 with a 0.05 s command timeout, with "unhandled exception during asyncio.run() shutdown"
(a read left running by a gather that had already returned on its sibling's timeout)."""

from __future__ import annotations

import asyncio
import logging

from console.cli import main
from console.config import parse_config
from console.remote.session import SessionRegistry
from console.station.status import collect_status


def short_timeouts(h, tmp_path, command_timeout_s: float = 0.05):
    text = h.config_path.read_text()
    text = "\n".join(f"command_timeout_s = {command_timeout_s}" if line.startswith("command_timeout_s") else line
                     for line in text.splitlines())
    path = tmp_path / "short.toml"
    path.write_text(text + "\n")
    return path, parse_config(text, str(path))

def status_rounds(config, rounds: int) -> list[str]:
    """``collect_status`` ``rounds`` times in a loop of its own (a thread: the simulated stations keep
    theirs, as when ``status`` runs as a process), over sessions kept open across rounds (nothing waits
    for a close); what each round left running in that loop."""
    async def go() -> list[str]:
        registry, left = SessionRegistry(config), []
        me = asyncio.current_task()
        try:
            for run in range(rounds):
                doc = await collect_status(config, transports=registry.transports())
                assert doc["stations"], doc
                left += [f"run {run}: {t.get_coro().__qualname__}" for t in asyncio.all_tasks() if t is not me]
        finally:
            await registry.close()
        return left

    return asyncio.run(go())


async def test_status_returns_with_no_station_read_left_behind(sim_factory, tmp_path):
    """Every read ``collect_status`` started is ended and awaited before it returns (one read timing out
    used to return at once and leave its siblings running, unowned)."""
    h = await sim_factory(running=True, time_scale=0.005)
    _path, config = short_timeouts(h, tmp_path)
    left = await asyncio.to_thread(status_rounds, config, 20)
    assert not left, left[:6]


async def test_status_runs_with_a_short_command_timeout_end_without_an_unhandled_exception(
        sim_factory, tmp_path, caplog, capsys):
    h = await sim_factory(running=True, time_scale=0.005)
    path, _config = short_timeouts(h, tmp_path)
    caplog.set_level(logging.ERROR, logger="asyncio")
    codes = []
    for _ in range(10):
        codes.append(await asyncio.to_thread(main, ["status", "--config", str(path)]))
    capsys.readouterr()
    unhandled = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    assert not unhandled, unhandled[:2]
    assert set(codes) <= {0, 1}, codes
