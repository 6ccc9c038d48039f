"""The simulated stations behind a real SSH server (asyncssh, in-process) on 127.0.0.1.

Each station gets its own port and host key; command lines run under a real ``/bin/sh`` in the
station's own environment (shims first on PATH, its home and mounts: ``console.sim.station_shell``),
so the console's real SSH client path (strict known_hosts, channels, streams) and its real command
lines are what talk to it. The head also serves the simulated OpenAI API while its engine is
ready. ``station-unreachable`` makes a station's port accept TCP and never answer.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import getpass
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import asyncssh
from aiohttp import web

from console.config import save_config
from console.sim import api as sim_api
from console.sim import station_shell
from console.sim.engine import container_status, engine_phase, start_container, write_meminfo
from console.sim.launch import sim_overrides
from console.sim.proc_tasks import write_tasks
from console.sim.rails_fs import write_rails
from console.sim.shim import write_bin
from console.sim.shims._stationfs import populate as populate_station_fs
from console.sim.timelines import WEDGE_LOAD
from console.sim.world import World


class SimBackend:
    """What the simulated API needs to know about its station."""

    def __init__(self, world: World, station: str, api_key: str | None = None):
        self.world, self.station = world, station
        p = world.profile
        self.model = p.served_model_name
        self.engine = p.engine
        self.engine_version = p.engine_version
        self.max_model_len = int(p.serving.get("max_model_len") or p.serving.get("context_length") or 65536)
        self.max_num_seqs = int(p.serving.get("max_num_seqs") or p.serving.get("max_running_requests") or 16)
        self.api_key = api_key
        ref = {r.concurrency: r for r in p.reference_bench}
        self.tokens_per_s = ref[1].per_user_tok_s if 1 in ref else 50.0
        self._phase_cache: tuple[float, str] = (0.0, "down")
        self._stall_cache: tuple[float, bool] = (0.0, False)

    def phase(self) -> str:
        now = time.monotonic()
        if now - self._phase_cache[0] > 0.25:
            self._phase_cache = (now, engine_phase(self.world, self.station, self.world.state(self.station)))
        return self._phase_cache[1]

    def stalled(self) -> bool:
        """Some rank hangs in a collective (console/sim/hang_sim.py): the engine makes no step."""
        from console.sim.hang_sim import job

        now = time.monotonic()
        if now - self._stall_cache[0] > 1.0:
            self._stall_cache = (now, any(r.in_flight for r in job(self.world)))
        return self._stall_cache[1]

    def load(self) -> tuple[int, float, bool] | None:
        """The wedge fault: its background users (running, tokens generated so far, wedged
        now); None without the fault (only the API's own requests run)."""
        now = time.time()
        st = container_status(self.world, self.station, self.world.state(self.station), "glm53", now)
        tl = st.get("timeline")
        if st["state"] != "running" or tl is None or tl.ready_at is None:
            return None
        t0 = float(st["started_at"])
        if tl.wedge_at is None:
            return stall_cycle_load(self.world, self.tokens_per_s, now - t0 - tl.ready_at)
        served = max(0.0, min(now, t0 + tl.wedge_at) - (t0 + tl.ready_at))
        rate = WEDGE_LOAD * float(self.tokens_per_s) / (1.0 + 0.1 * (WEDGE_LOAD - 1))
        return WEDGE_LOAD, served * rate, now >= t0 + tl.wedge_at


def stall_cycle_load(world, tokens_per_s: float, elapsed: float) -> tuple[int, float, bool] | None:
    """The stall-cycle fault's users: WEDGE_LOAD requests whose tokens freeze now and then (never
    "wedged": each freeze heals); None without the fault."""
    from console.sim import launch
    from console.sim.stall_cycle import frozen

    if "stall-cycle" not in launch.all_faults(world) or elapsed < 0:
        return None
    rate = WEDGE_LOAD * float(tokens_per_s) / (1.0 + 0.1 * (WEDGE_LOAD - 1))
    return WEDGE_LOAD, (elapsed - frozen(elapsed)[0]) * rate, False


def _start_shim_server(root: Path) -> subprocess.Popen:
    """The world's fork server (``console.sim.shim_server``); until it listens (~0.3 s), each command
    starts its own interpreter. Its own session: a Ctrl+C meant for the simulator is not its."""
    tree = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (tree, os.environ.get("PYTHONPATH")) if p)}
    return subprocess.Popen([sys.executable, "-m", "console.sim.shim_server", str(root)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)


def _stop_shim_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _default_hangup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _hangup_as_sshd():
    """sshd starts a session's shell with SIGHUP at its default action, so a shell's ``trap ... HUP``
    works there. A simulator run under ``nohup`` (SIGHUP ignored, inherited through exec, and a shell
    cannot trap a signal ignored at its start) would let a hung tool outlive its channel where a real
    station ends it: then the child resets it. Otherwise no hook (the fast spawn path stays)."""
    return _default_hangup if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else None


@dataclass
class SimStationEndpoint:
    name: str
    port: int
    api_port: int | None


class _Silent(asyncio.Protocol):
    """Accepts the TCP connection and never says a word (a wedged or firewalled sshd)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport


class SimServer:
    def __init__(self, world: World, api_key: str | None = None):
        self.world = world
        self.root = world.root
        self.api_key = api_key
        self.endpoints: dict[str, SimStationEndpoint] = {}
        self._servers: list = []
        self._tasks: list[asyncio.Task] = []
        self._api_runners: dict[str, web.AppRunner] = {}
        self.sessions = 0  # command lines executed (for the remote-cost benchmark)
        self.command_log: collections.deque[tuple[str, str]] = collections.deque(maxlen=20_000)  # (station, line)
        self._children: set[int] = set()
        self._handlers: set[asyncio.Task] = set()
        self._lingering: set[asyncio.Task] = set()  # processes that outlived their channel (waits)
        self._mounts: dict[str, station_shell.Mounts] = {}
        self._held_ports: list[socket.socket] = []  # the API ports, held while not listening
        self._shim_server: subprocess.Popen | None = None  # forks the stations' commands

    @property
    def children(self) -> frozenset[int]:
        """The process ids of the command lines still running (a closed channel must end its own)."""
        return frozenset(self._children)

    # ---------------------------------------------------------------- keys

    def _keys(self) -> tuple[Path, Path]:
        keydir = self.root / "keys"
        keydir.mkdir(exist_ok=True)
        client = keydir / "client_ed25519"
        if not client.exists():
            key = asyncssh.generate_private_key("ssh-ed25519")
            key.write_private_key(str(client))
            key.write_public_key(str(client) + ".pub")
            client.chmod(0o600)
        auth = keydir / "authorized_keys"
        auth.write_text((keydir / "client_ed25519.pub").read_text())
        return client, auth

    def _host_key(self, name: str) -> asyncssh.SSHKey:
        path = self.root / "keys" / f"host_{name}_ed25519"
        if not path.exists():
            asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(path))
        return asyncssh.read_private_key(str(path))

    # ---------------------------------------------------------------- serving

    async def start(self, host: str = "127.0.0.1") -> None:
        write_bin(self.root / "bin", served=self.root)
        self._shim_server = _start_shim_server(self.root)
        populate_station_fs(self.world)
        unified = self.world.profile.gpu.unified_memory
        self._mounts = station_shell.read_all_mounts(self.root)
        for name in self.world.names:  # what /proc/meminfo holds from the first command on
            await asyncio.to_thread(write_meminfo, self.world, name, unified)
            await asyncio.to_thread(write_rails, self.world, name)  # and the rail sysfs
            await asyncio.to_thread(write_tasks, self.world, name)
        _client, auth = self._keys()
        known = []
        for name in self.world.names:
            if "station-unreachable" in self.world.faults(name):
                srv = await asyncio.get_running_loop().create_server(_Silent, host, 0)
                port = srv.sockets[0].getsockname()[1]
                self._servers.append(srv)
            else:
                hkey = self._host_key(name)
                srv = await asyncssh.listen(
                    host, 0, server_host_keys=[hkey], authorized_client_keys=str(auth),
                    process_factory=self._handler(name), line_editor=False, allow_scp=False,
                    keepalive_interval=10,
                )
                port = srv.sockets[0].getsockname()[1]
                self._servers.append(srv)
                known.append(f"[{host}]:{port} {hkey.export_public_key('openssh').decode().strip()}")
            api_port = None
            if self.world.names.index(name) == 0:
                api_port = await self._start_api(name, host)
                self.world.set_api_port(name, api_port)
            self.endpoints[name] = SimStationEndpoint(name, port, api_port)
        (self.root / "keys" / "known_hosts").write_text("\n".join(known) + "\n")
        self._tasks.append(asyncio.create_task(self._meminfo_loop()))

    async def _start_api(self, name: str, host: str) -> int:
        backend = SimBackend(self.world, name, self.api_key)
        app = sim_api.create_app(backend)
        # handler_cancellation: a client that goes away aborts its request, as vLLM does; a request held
        # by a wedged engine otherwise outlived its client and held the server's stop for 60 s
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        # The port is the simulator's from now on, though it listens only while the engine is ready
        # (vLLM binds late): a socket bound and never listening holds it, so no other process (another
        # test worker's server) is given it in between; connecting to it is refused until the site listens.
        hold = socket.socket()
        hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        hold.bind((host, 0))
        port = hold.getsockname()[1]
        self._held_ports.append(hold)
        self._api_runners[name] = runner
        self._tasks.append(asyncio.create_task(self._api_gate(runner, backend, host, port)))
        return port

    async def _api_gate(self, runner: web.AppRunner, backend: SimBackend, host: str, port: int) -> None:
        site: web.TCPSite | None = None
        said = False
        stays_open = "port-stays-open" in self.world.faults(backend.station)
        while True:
            phase = await asyncio.to_thread(backend.phase)
            if phase == "ready" and site is None:
                # SO_REUSEADDR on both: Linux lets a socket listen beside a bound, non-listening one
                site = web.TCPSite(runner, host, port, reuse_address=True)
                try:
                    await site.start()
                except OSError as e:  # never expected while the port is held; said once, tried again
                    if not said:
                        print(f"sim: the API of {backend.station} cannot listen on {host}:{port}: {e}",
                              file=sys.stderr)
                        said = True
                    site = None
            elif phase != "ready" and site is not None and not stays_open:
                await site.stop()
                site = None
            await asyncio.sleep(0.3)

    async def _meminfo_loop(self) -> None:
        unified = self.world.profile.gpu.unified_memory
        while True:
            await asyncio.sleep(1.0)
            for name in self.world.names:
                await asyncio.to_thread(write_meminfo, self.world, name, unified)
                await asyncio.to_thread(write_rails, self.world, name)  # the rail sysfs
                await asyncio.to_thread(write_tasks, self.world, name)  # the engine threads' /proc/PID/task

    def _handler(self, name: str):
        async def handle(process: asyncssh.SSHServerProcess) -> None:
            self.sessions += 1
            me = asyncio.current_task()
            if me is not None:
                self._handlers.add(me)
                me.add_done_callback(self._handlers.discard)
            command = process.command or "exec bash -l"
            self.command_log.append((name, command))  # as the console sent it: no secret in any line
            line, env = station_shell.prepare(command, self.root, name, os.environ, self._mounts)
            env["HOSTNAME"] = f"station-{name.lower()}"
            proc = await asyncio.create_subprocess_exec(
                "/bin/sh", "-c", line, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True,
                cwd=station_shell.session_dir(env), preexec_fn=_hangup_as_sshd(),
            )
            self._children.add(proc.pid)

            async def pump(src: asyncio.StreamReader, dst) -> None:
                while True:
                    data = await src.read(65536)
                    if not data:
                        break
                    try:
                        dst.write(data.decode(errors="replace"))
                    except (BrokenPipeError, asyncssh.Error, OSError):
                        break

            async def feed() -> None:
                try:
                    async for chunk in process.stdin:
                        proc.stdin.write(chunk.encode())
                    proc.stdin.close()
                except (asyncssh.Error, OSError, BrokenPipeError, ConnectionResetError):
                    pass

            pumps = [asyncio.create_task(pump(proc.stdout, process.stdout)),
                     asyncio.create_task(pump(proc.stderr, process.stderr)),
                     asyncio.create_task(feed())]
            closed = asyncio.create_task(process.channel.wait_closed())
            waiter = asyncio.create_task(proc.wait())
            await asyncio.wait({waiter, closed}, return_when=asyncio.FIRST_COMPLETED)
            if not waiter.done():  # the client went away: what sshd does, and no more
                await self._hang_up(proc, waiter, pumps, pty=process.get_terminal_type() is not None)
            await asyncio.gather(*pumps[:2], return_exceptions=True)
            pumps[2].cancel()
            closed.cancel()
            if waiter.done():
                self._children.discard(proc.pid)
            else:  # it ignored the hangup: it lingers on the station, as it would under sshd
                self._linger(proc.pid, waiter)
            if os.environ.get("DGX_SIM_DEBUG"):
                with open(os.environ["DGX_SIM_DEBUG"], "a") as dbg:
                    dbg.write(f"{time.time():.3f} {name} rc={proc.returncode} closed_first={not waiter.done() or closed.done()} {command[:90]}\n")
            with contextlib.suppress(Exception):
                process.exit(proc.returncode if proc.returncode is not None and proc.returncode >= 0 else 255)

        return handle

    async def _hang_up(self, proc: asyncio.subprocess.Process, waiter: asyncio.Task, pumps: list[asyncio.Task],
                       pty: bool) -> None:
        """sshd's part when a channel closes under a running command: with a PTY the terminal hangs
        up (SIGHUP to the process group); without one only the pipes close (a write then fails).
        A process that ignores both keeps running: that is what a real station does with it."""
        if pty:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGHUP)
        for p in pumps[:2]:
            p.cancel()
        transport = getattr(proc, "_transport", None)
        for fd in (0, 1, 2):
            pipe = transport.get_pipe_transport(fd) if transport is not None else None
            if pipe is not None:
                pipe.close()
        with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(waiter), 2)

    def _linger(self, pid: int, waiter: asyncio.Task) -> None:
        """Keep a process that outlived its channel counted (``children``) until it ends by itself or
        the simulator stops."""
        def gone(_t: asyncio.Task) -> None:
            self._children.discard(pid)

        waiter.add_done_callback(gone)
        self._lingering.add(waiter)
        waiter.add_done_callback(self._lingering.discard)

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for pid in list(self._children):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        for srv in self._servers:
            srv.close()
        # Let the sessions reap their killed processes, so no subprocess transport outlives the loop.
        if self._handlers:
            await asyncio.wait(list(self._handlers), timeout=3)
        if self._lingering:
            await asyncio.wait(list(self._lingering), timeout=3)
        for runner in self._api_runners.values():
            with contextlib.suppress(Exception):
                await runner.cleanup()
        for held in self._held_ports:
            held.close()
        if self._shim_server is not None:
            await asyncio.to_thread(_stop_shim_server, self._shim_server)
            self._shim_server = None

    # ---------------------------------------------------------------- config

    def config_dict(self, host: str = "127.0.0.1") -> dict:
        user = getpass.getuser()
        stations = []
        for rank, name in enumerate(self.world.names):
            st = self.world.state(name)
            ep = self.endpoints[name]
            stations.append({
                "name": name, "host": host, "port": ep.port, "rank": rank, "user": user,
                "rail_netdev": st["rail"]["netdev"], "rdma_device": st["rail"]["rdma"], "rail_ip": st["rail"]["ip"],
                "container": "glm53",
                "known_hosts": str(self.root / "keys" / "known_hosts"),
                "identity_file": str(self.root / "keys" / "client_ed25519"),
            })
        head_api = self.endpoints[self.world.names[0]].api_port
        out = {
            "profile": self.world.meta["profile"],
            "simulated": True,
            "connect_timeout_s": 3.0,
            "command_timeout_s": 15.0,
            "api": {"url": f"http://{host}:{head_api}"},
            "stations": stations,
        }
        # what the world's operator asked for (a fault's cause) and what the workbench faults stand for
        overrides = {**self.world.operator_overrides, **sim_overrides(self.world)}
        if overrides:
            out["overrides"] = overrides
        return out

    def write_config(self, path: str | os.PathLike) -> None:
        tmp = Path(str(path) + ".tmp")
        save_config(self.config_dict(), tmp)
        os.replace(tmp, path)


def start_service(world: World, gap_s: float = 2.0) -> None:
    """Bring the service up the way the launch order requires: workers first, then the head."""
    now = time.time()
    names = world.names
    for i, name in enumerate(reversed(names[1:])):
        start_container(world, name, at=now + i * 0.2)
    start_container(world, names[0], at=now + gap_s)


async def serve_forever(world: World, config_path: str | None, running: bool, api_key: str | None = None,
                        ready_file: str | None = None) -> None:
    server = SimServer(world, api_key=api_key)
    await server.start()
    if config_path:
        server.write_config(config_path)
    if running:
        start_service(world)
    if ready_file:
        Path(ready_file).write_text(str(os.getpid()))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    if ready_file:  # started by `demo`: end with the console even if it was killed without cleanup
        parent = os.getppid()

        async def watch_parent() -> None:
            while os.getppid() == parent:
                await asyncio.sleep(1.0)
            stop.set()

        server._tasks.append(asyncio.create_task(watch_parent()))  # cancelled by server.stop()
    print(f"simulated stations up ({', '.join(f'{e.name}:{e.port}' for e in server.endpoints.values())}); "
          f"config: {config_path or '-'}; Ctrl+C to stop", file=sys.stderr)
    try:
        await stop.wait()
    finally:
        await server.stop()
