"""Entry point of the simulated station commands: ``python -m console.sim.shim NAME ARGS...``.

The sim writes one tiny ``sh`` wrapper per module in ``console/sim/shims/`` (``nvidia_smi.py`` ->
``nvidia-smi``) into a bin directory that the station's shell finds first on PATH. Each shim
module exposes ``main(argv: list[str], ctx: ShimContext) -> int`` and prints exactly what the real
tool prints (shared/reference/command-outputs.md).
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from console.sim.world import World


class ShimContext:
    """What a command knows: its world and its station. (A plain class: a command without the fork
    server (the lab, a world whose server is not listening yet) starts a fresh interpreter, and
    ``dataclasses`` costs ~9 ms to import.)"""

    def __init__(self, world: World, station: str, pid: int | None = None) -> None:
        self.world, self.station = world, station
        self.pid = os.getpid() if pid is None else pid  # the command's process as the station sees it
        self._parent = os.getppid()

    @property
    def state(self) -> dict:
        return self.world.state(self.station)

    @property
    def faults(self) -> list[str]:
        return self.world.faults(self.station)

    @property
    def profile(self):
        return self.world.profile

    def now(self) -> float:
        return time.time()

    def orphaned(self) -> bool:
        """The simulator that ran us is gone: a follow loop must end instead of lingering."""
        return os.getppid() != self._parent or not self.world.root.exists()


# Commands whose real names have underscores (the rest map ``nvidia_smi.py`` -> ``nvidia-smi``).
UNDERSCORE_NAMES = {"ib_write_bw", "ibv_devinfo", "show_gids", "ib_write_lat", "all_reduce_perf"}


def shim_names() -> list[str]:
    shim_dir = Path(__file__).parent / "shims"
    return sorted(p.stem if p.stem in UNDERSCORE_NAMES else p.stem.replace("_", "-")
                  for p in shim_dir.glob("*.py") if not p.name.startswith("_"))


def shim_address(root: str | os.PathLike) -> bytes:
    """The abstract socket where the world's fork server (``console.sim.shim_server``) listens."""
    import hashlib  # (here: a command's own start never needs it)

    return b"\0dgx-console-sim-shims:" + hashlib.sha256(os.fsencode(os.path.abspath(root))).hexdigest()[:32].encode()


def write_bin(bin_dir: Path, python: str | None = None, exclude: Iterable[str] = (),
              only: Iterable[str] | None = None, served: str | os.PathLike | None = None) -> None:
    """One wrapper per shim; ``exclude``/``only`` pick which (the lab keeps the real ip/ping/ssh/date).
    ``served``: the world whose fork server runs the commands (else each starts its own interpreter)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    py = python or sys.executable
    start = _start(py) if served is None or py != sys.executable else _served(py, shim_address(served))
    skip, keep = set(exclude), (set(only) if only is not None else None)
    for name in shim_names():
        if name in skip or (keep is not None and name not in keep):
            continue
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\nexec {start} {name} "$@"\n')
        path.chmod(0o755)


# The wrapper of a served command: a bare interpreter (~15 ms) that hands its stdio, pid, arguments,
# environment and directory to the fork server, passes on the signals it gets, and ends as the command
# ended. Nothing listening: the command runs in its own interpreter (FALLBACK). Builtin modules only.
CLIENT = """\
import os, sys, _socket, marshal, _signal
def take(n):
    got = b""
    while len(got) < n:
        more = s.recv(n - len(got))
        if not more:
            break
        got += more
    return got
try:
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    s.connect(ADDRESS)
    try:
        cwd = os.getcwdb()
    except OSError:
        cwd = b"/"
    body = marshal.dumps((os.getpid(), sys.argv[2:], dict(os.environb), cwd))
    body = len(body).to_bytes(4, "little") + body
    fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
    sent = s.sendmsg([body], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
    if sent < len(body):
        s.sendall(body[sent:])
    ack = take(4)
except OSError:
    ack = b""
if len(ack) < 4:
    os.execv(PYTHON, [PYTHON, "-S", "-c", FALLBACK, *sys.argv[1:]])
null = os.open("/dev/null", os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
def relay(sig, frame):
    try:
        s.send(bytes((sig,)))
    except OSError:
        pass
for sig in (_signal.SIGHUP, _signal.SIGINT, _signal.SIGQUIT, _signal.SIGTERM, _signal.SIGUSR1, _signal.SIGUSR2):
    _signal.signal(sig, relay)
status = take(4)
code = int.from_bytes(status, "little", signed=True) if len(status) == 4 else 255
if code < 0:
    _signal.signal(-code, _signal.SIG_DFL)
    os.kill(os.getpid(), -code)
    code = 128 - code
os._exit(code & 255)
"""


def _served(py: str, address: bytes) -> str:
    code = (CLIENT.replace("ADDRESS", repr(address)).replace("PYTHON", repr(py))
            .replace("FALLBACK", repr(_fallback_code())))
    return _bare(py, code)


def _bare(py: str, code: str) -> str:
    """``code`` run by ``py`` without ``site``, as a wrapper's command line."""
    import shlex  # (here: a command's own start never needs it)

    return f'"{py}" -S -c {shlex.quote(code)} console.sim.shim'  # (its own word: tests find shims by it)


def _fallback_code() -> str:
    tree = str(Path(__file__).resolve().parents[2])
    paths = [tree, *(p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir())]
    return (f"import sys; sys.path[1:1] = {paths!r}; del sys.argv[0]; "
            "from console.sim.shim import main; raise SystemExit(main())")


def _start(py: str) -> str:
    """How a wrapper starts the shim. With this interpreter: without ``site`` (-S), the paths it would
    have set up named instead (this tree first, then the installed packages): ``site`` runs every
    ``.pth`` file, which took 20-45 ms of the ~70 a shim costs, and a hang capture starts ~25 shims a
    station. Another interpreter (the lab's) keeps ``-m``: its paths are not ours to know."""
    if py != sys.executable:
        return f'"{py}" -m console.sim.shim'
    return _bare(py, _fallback_code())


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: python -m console.sim.shim NAME [ARGS...]", file=sys.stderr)
        return 2
    name = sys.argv[1]
    root = os.environ.get("DGX_SIM_ROOT")
    station = os.environ.get("DGX_SIM_STATION")
    if not root or not station:
        print(f"{name}: not running on a simulated station (DGX_SIM_ROOT/DGX_SIM_STATION unset)", file=sys.stderr)
        return 127
    module = importlib.import_module("console.sim.shims." + name.replace("-", "_"))
    return run_shim(module, sys.argv[2:], ShimContext(World(root), station))


def run_shim(module, argv: list[str], ctx: ShimContext) -> int:
    """Run one command's shim: its exit status, as the real tool's (a closed pipe: 141, Ctrl+C: 130)."""
    try:
        return int(module.main(argv, ctx) or 0)
    except BrokenPipeError:
        return 141
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
