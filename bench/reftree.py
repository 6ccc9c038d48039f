"""What the ``--compare REF`` benchmarks share: REF checked out in a temporary ``git worktree``, runs of
both trees interleaved (REF, this, this, REF, ...: the machine's load moves both alike, so a ratio
comes from one sitting), and the machine's load printed beside every figure."""

from __future__ import annotations

import compileall
import contextlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def load() -> str:
    """The machine's load (the figures are only as good as it is quiet): ``uptime``'s averages."""
    try:
        with open("/proc/loadavg") as f:
            return "load " + " ".join(f.read().split()[:3])
    except OSError:
        return "load ?"


@contextlib.contextmanager
def trees(ref: str | None) -> Iterator[dict[str, Path]]:
    """``{"ref <sha>": path, "this": HERE}`` with REF checked out for the duration (``{"this": HERE}``
    without REF); the worktree is removed afterwards, whatever happened. Both trees are byte-compiled
    first: under PYTHONDONTWRITEBYTECODE (set on some machines, this one included) a fresh worktree has
    no ``.pyc`` and every run of it compiles the console from source, which made REF look ~0.2 s slower
    to its first frame and each simulated command ~0.1 s slower than it is."""
    if ref is None:
        _compiled(HERE)
        yield {"this": HERE}
        return
    tmp = Path(tempfile.mkdtemp(prefix="bench_ref_"))
    path = tmp / "tree"
    subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", "--quiet", str(path), ref], check=True)
    try:
        rev = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        _compiled(HERE)
        _compiled(path)
        yield {f"ref {rev}": path, "this": HERE}
    finally:
        subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(path)], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def _compiled(tree: Path) -> None:
    """The tree's modules compiled to ``.pyc`` (what a normal interpreter writes on first import)."""
    if sys.dont_write_bytecode:
        compileall.compile_dir(str(tree / "console"), quiet=2)


def interleaved(names: list[str], runs: int) -> Iterator[tuple[int, str]]:
    """(run index, tree name) in the order REF, this, this, REF, ...: neither tree always goes first."""
    for i in range(runs):
        for name in (names if i % 2 == 0 else list(reversed(names))):
            yield i, name


@contextlib.contextmanager
def demo_stations(prefix: str) -> Iterator[Path]:
    """Two simulated stations serving, started as ``dgx-console demo`` starts them (a process of their
    own, time scale 0.1), for as long as the block runs; yields the config file that points at them."""
    import argparse
    import sys

    sys.path.insert(0, str(HERE))
    from console.commands.demo import start_sim_process, stop_sim_process

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    sim = None
    try:
        ns = argparse.Namespace(stations=2, profile="glm53-nvfp4-2x-gb300-vllm", time_scale=0.1, fault=[],
                                api_key=None)
        sim, cfg = start_sim_process(ns, tmp)
        yield cfg
    finally:
        if sim is not None:
            stop_sim_process(sim)
        shutil.rmtree(tmp, ignore_errors=True)
