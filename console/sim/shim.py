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
    """What a command knows: its world and its station. (A plain class: every command starts a fresh
    interpreter, and ``dataclasses`` costs ~9 ms to import.)"""

    def __init__(self, world: World, station: str) -> None:
        self.world, self.station = world, station
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


def write_bin(bin_dir: Path, python: str | None = None, exclude: Iterable[str] = (),
              only: Iterable[str] | None = None) -> None:
    """One wrapper per shim; ``exclude``/``only`` pick which (the lab keeps the real ip/ping/ssh/date)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    py = python or sys.executable
    skip, keep = set(exclude), (set(only) if only is not None else None)
    for name in shim_names():
        if name in skip or (keep is not None and name not in keep):
            continue
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\nexec {_start(py)} {name} "$@"\n')
        path.chmod(0o755)


def _start(py: str) -> str:
    """How a wrapper starts the shim. With this interpreter: without ``site`` (-S), the paths it would
    have set up named instead (this tree first, then the installed packages): ``site`` runs every
    ``.pth`` file, which took 20-45 ms of the ~70 a shim costs, and a hang capture starts ~25 shims a
    station. Another interpreter (the lab's) keeps ``-m``: its paths are not ours to know."""
    import shlex  # (here: a command's own start never needs it)

    if py != sys.executable:
        return f'"{py}" -m console.sim.shim'
    tree = str(Path(__file__).resolve().parents[2])
    paths = [tree, *(p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir())]
    code = (f"import sys; sys.path[1:1] = {paths!r}; del sys.argv[0]; "
            "from console.sim.shim import main; raise SystemExit(main())")
    return f'"{py}" -S -c {shlex.quote(code)} console.sim.shim'  # (its own word: tests find shims by it)


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
    ctx = ShimContext(World(root), station)
    try:
        return int(module.main(sys.argv[2:], ctx) or 0)
    except BrokenPipeError:
        return 141
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
