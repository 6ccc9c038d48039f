"""Seconds from starting the console to its first frame, two simulated stations configured.

The simulator is started once (its own process, as the demo runs it) and left running; each run
is a fresh interpreter that goes the TUI's way (``load_config``, the keymap check, ``ConsoleApp``)
headless and stops at the first frame handed to the terminal: what an operator waits for before the
screen shows anything. Timed by this process from the child's start (interpreter start-up and
imports included) to the child's line saying it painted (with the child's CPU seconds by then); the child then ends at once (``--one``
alone is what a whole-process timer can run).

``--compare REF`` checks REF out in a temporary ``git worktree`` and runs both trees interleaved
(REF, this, this, REF, ...), so the ratio this/REF comes from one sitting on a shared machine.

    python bench/first_frame.py [--runs 7] [--compare REF]
    python bench/first_frame.py --one CONFIG   # one run: prints the in-process seconds, exits
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from reftree import HERE, demo_stations, interleaved, trees
from reftree import load as _load


def one(config: str) -> None:
    """The TUI's start-up as ``run_app`` does it, headless; print and leave at the first frame."""
    t0 = time.perf_counter()
    from console.ui.app import ConsoleApp
    from console.ui.keymap import check_keymap

    try:  # the config's library checks after the first frame, as run_app does
        from console.commands._tui import load_for_tui
        from console.config import library_checks
    except ImportError:  # a --compare REF from before they were deferred: all of them at load
        from console.config import load_config

        cfg = load_config(config)
        check_keymap(cfg)
        app = ConsoleApp(cfg)
    else:
        cfg = load_for_tui(config)
        check_keymap(cfg)
        app = ConsoleApp(cfg, late_checks=lambda: library_checks(cfg))

    shown = app._display  # Textual hands every frame to the terminal here (a no-op when headless)

    def display(screen, renderable) -> None:
        shown(screen, renderable)
        if renderable is not None and not app._batch_count and app.is_running:  # the first frame out
            print(f"{time.perf_counter() - t0:.4f} {time.process_time():.4f}", flush=True)
            os._exit(0)  # the frame is what is timed: no shutdown in the figure

    app._display = display  # type: ignore[method-assign]
    app.run(headless=True, size=(200, 50))


def _run(tree: Path, config: Path) -> tuple[float, float]:
    """(seconds from spawning a child in ``tree`` to its first-frame line, the child's CPU seconds by
    then): the CPU figure is the one a loaded shared machine moves least."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(HERE / "bench" / "first_frame.py"), "--one", str(config)],
                            cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    took = time.perf_counter() - t0
    proc.wait(30)
    if len(line.split()) != 2:
        raise SystemExit(f"the child in {tree} painted no frame (exit {proc.returncode})")
    return took, float(line.split()[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--compare", metavar="REF", help="a git revision, run interleaved with this tree")
    ap.add_argument("--one", metavar="CONFIG", help="one run against CONFIG; prints seconds to the first frame")
    args = ap.parse_args()
    if args.one:
        one(args.one)
        return
    with trees(args.compare) as where, demo_stations("first_frame_") as cfg:
        print(f"{_load()}; seconds from spawn to the first frame (2 simulated stations), each run its own "
              "process")
        for name in where:  # warm-up: the page cache and .pyc files of both trees
            _run(where[name], cfg)
        res: dict[str, list[tuple[float, float]]] = {k: [] for k in where}
        for _i, name in interleaved(list(where), args.runs):
            res[name].append(_run(where[name], cfg))
        for name, vals in res.items():
            print(f"  {name:>16}: median {statistics.median(v[0] for v in vals):.3f} s, CPU "
                  f"{statistics.median(v[1] for v in vals):.3f} s  (runs: {', '.join(f'{v[0]:.3f}' for v in vals)})")
        if len(where) == 2:
            (ref, this) = res.values()
            walls = [t[0] / r[0] for r, t in zip(ref, this, strict=True)]
            cpus = [t[1] / r[1] for r, t in zip(ref, this, strict=True)]
            print(f"  this/ref pair by pair, median: wall {statistics.median(walls):.2f}, CPU "
                  f"{statistics.median(cpus):.2f}; {_load()}")


if __name__ == "__main__":
    main()
