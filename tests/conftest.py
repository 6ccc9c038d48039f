"""Shared fixtures: simulated stations behind the in-process asyncssh server (the sim tier)."""

from __future__ import annotations

import compileall
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomli_w

import console
from console.config import Config, parse_config
from console.sim.server import SimServer, start_service
from console.sim.world import World

REQUIRE_ALL_TIERS = os.environ.get("DGX_CONSOLE_REQUIRE_ALL_TIERS") == "1"
SIM_TIER = Path(__file__).parent / "sim"


@dataclass
class SimHandle:
    world: World
    server: SimServer
    config: Config
    config_path: Path

    def start_service(self, gap_s: float = 0.2) -> None:
        start_service(self.world, gap_s=gap_s)


def pytest_configure(config) -> None:
    """Compile the package once per run where nothing else would (PYTHONDONTWRITEBYTECODE set): the
    simulated stations run one Python per command line (the shims) and some tests run the CLI as a
    process, and each of them compiled every console module it imported from source again. Under
    pytest-xdist the controller does it, before its workers start."""
    if sys.dont_write_bytecode and not hasattr(config, "workerinput"):
        compileall.compile_dir(os.path.dirname(console.__file__), quiet=2)


def pytest_collection_modifyitems(config, items) -> None:
    """The ``sim`` marker on every simulator-backed test: the sim tier's files and every test that
    asks for ``sim_factory`` (directly or through a fixture), wherever it lives, so that
    ``-m "not sim"`` is the quick tier's selection and no such test has to remember its marker."""
    for item in items:
        if "sim_factory" in getattr(item, "fixturenames", ()) or SIM_TIER in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.sim)


def _empty_tiers(config, nodeids) -> list[str]:
    """The tier directories named on the command line that no selected test lives in."""
    here = Path(__file__).parent
    named = sorted(t for a in config.args if (t := Path(a).resolve()).parent == here and t.is_dir())
    root = Path(str(config.rootpath))
    prefixes = {t: str(t.relative_to(root)) + "/" for t in named if t.is_relative_to(root)}
    return [str(t.relative_to(root)) for t, pre in prefixes.items() if not any(n.startswith(pre) for n in nodeids)]


def _note_empty_tiers(config, nodeids) -> None:
    if REQUIRE_ALL_TIERS and (empty := _empty_tiers(config, nodeids)):
        config.stash[_EMPTY_TIERS] = empty


_EMPTY_TIERS = pytest.StashKey[list]()


def pytest_collection_finish(session) -> None:
    """Under DGX_CONSOLE_REQUIRE_ALL_TIERS=1 (CI) every tier directory named on the command line must give
    a test after selection: scripts/test runs several tiers in one pytest, where an emptied tier (a
    ``-m`` or ``-k`` that deselects it) would vanish silently. Without xdist the session's items say it;
    under xdist the controller holds none, and reads what its workers collected (below). Either way the
    session ends with exit 4 and one line (``pytest_sessionfinish``)."""
    config = session.config
    if not hasattr(config, "workerinput") and not getattr(config.option, "numprocesses", None):
        _note_empty_tiers(config, [i.nodeid for i in session.items])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids) -> None:
    _note_empty_tiers(node.config, ids)


def pytest_sessionfinish(session, exitstatus) -> None:
    if empty := session.config.stash.get(_EMPTY_TIERS, None):
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(f"no test selected in {', '.join(empty)} (DGX_CONSOLE_REQUIRE_ALL_TIERS=1: "
                                "no tier may vanish)", red=True)
        session.exitstatus = pytest.ExitCode.USAGE_ERROR


def pytest_runtest_teardown(item, nextitem) -> None:
    """Textual's ``StylesCache.get_inner_outer`` is an ``lru_cache`` on a method (Textualize/textual#6665):
    it keeps up to 1,024 finished widgets' style caches, every rendered row in them, alive. In one app
    that is bounded; across the hundreds of apps a test worker runs it held ~7,000 rows (54,000 caches)
    after six tests, and each garbage collection walked them. Emptied after each test."""
    styles_cache = sys.modules.get("textual._styles_cache")
    if styles_cache is not None:
        styles_cache.StylesCache.get_inner_outer.cache_clear()


def _share_parsed_css() -> None:
    """Every app parses every widget's CSS again (its own ``Stylesheet``, its own parse cache): a test
    worker starts hundreds of apps with the same CSS and the same theme variables, and the parse was
    ~8 % of an app's start. Here one parse per (CSS, where it came from, scope, variables) serves every
    app of the worker; the rule sets a parse yields are read, not changed, by the apps that apply them
    (the snapshot tests would show a difference). Tests only: the console starts one app a process."""
    from textual.css.stylesheet import Stylesheet

    parse = Stylesheet._parse_rules
    shared: dict[tuple, list] = {}

    def _parse_rules(self, css, read_from, is_default_rules=False, tie_breaker=0, scope=""):
        key = (css, read_from, is_default_rules, tie_breaker, scope, frozenset(self._variables.items()))
        rules = shared.get(key)
        if rules is None:
            if len(shared) > 4096:  # (a test that feeds generated CSS: the cache stays bounded)
                shared.clear()
            rules = shared[key] = parse(self, css, read_from, is_default_rules, tie_breaker, scope)
        return rules

    Stylesheet._parse_rules = _parse_rules


_share_parsed_css()


@pytest.fixture(autouse=True)
def _private_data_dir(tmp_path_factory, monkeypatch):
    """Launch history and other XDG data go to a temporary directory, never the tester's home."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))  # the incident ledger


@pytest.fixture
async def sim_factory(tmp_path):
    """``await sim_factory(n=2, profile=..., faults=(), running=False, time_scale=0.005)``."""
    servers: list[SimServer] = []

    async def make(n: int = 2, profile: str = "glm53-nvfp4-2x-gb300-vllm", faults=(), running: bool = False,
                   time_scale: float = 0.005, api_key: str | None = None) -> SimHandle:
        root = tmp_path / f"world{len(servers)}"
        world = World.create(root, profile, n, list(faults), time_scale)
        server = SimServer(world, api_key=api_key)
        await server.start()
        servers.append(server)
        path = tmp_path / f"sim{len(servers)}.toml"
        data = server.config_dict()
        path.write_text(tomli_w.dumps(data))
        config = parse_config(path.read_text(), str(path))
        handle = SimHandle(world, server, config, path)
        if running:
            handle.start_service()
        return handle

    yield make
    for s in servers:
        await s.stop()


@pytest.fixture
async def sim(sim_factory) -> SimHandle:
    return await sim_factory()
