"""The dashboard's own CPU while nothing happens: two simulated stations serving, the TUI headless.

What a console costs on the operator's desk (or a shared jump host) all day. Each run is a fresh
interpreter that starts the TUI the way ``run_app`` does, against one simulator started here (its
own process, as the demo runs it), waits ``--settle`` seconds for the panes to fill, then counts
its own CPU seconds over ``--seconds`` (the simulator's are not counted) and how many of the
station panes' redraws were skipped as unchanged (``Steady.show``; "n/a" for a tree without it).

``--compare REF`` checks REF out in a temporary ``git worktree`` and runs both trees interleaved
(REF, this, this, REF, ...), so the ratio this/REF comes from one sitting on a shared machine.

    python bench/dashboard_cpu.py [--runs 3] [--seconds 30] [--compare REF]
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


def one(config: str, settle: float, seconds: float) -> None:
    """The TUI headless against ``config``: print its CPU seconds over ``seconds`` after ``settle``."""
    from console.config import load_config
    from console.ui.app import ConsoleApp

    counts = {"drawn": 0, "skipped": 0}
    try:
        from console.ui.widgets.steady import Steady

        shown = Steady.show

        def show(self, content) -> bool:  # type: ignore[no-untyped-def]
            drew = shown(self, content)
            counts["drawn" if drew else "skipped"] += 1
            return drew

        Steady.show = show  # type: ignore[method-assign]
    except ImportError:
        counts = {}
    app = ConsoleApp(load_config(config))

    async def measure() -> None:
        import asyncio

        await asyncio.sleep(settle)
        counts.update({k: 0 for k in counts})
        c0 = time.process_time()
        await asyncio.sleep(seconds)
        said = f"{counts['skipped']}/{counts['drawn'] + counts['skipped']}" if counts else "n/a"
        print(f"{time.process_time() - c0:.3f} {said}", flush=True)
        app.exit()

    app.call_later(lambda: app.run_worker(measure()))
    app.run(headless=True, size=(200, 50))


def _run(tree: Path, config: Path, settle: float, seconds: float) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, str(HERE / "bench" / "dashboard_cpu.py"), "--one", str(config),
                          "--settle", str(settle), "--seconds", str(seconds)],
                         cwd=tree, env=env, capture_output=True, text=True, timeout=settle + seconds + 60)
    words = out.stdout.split()
    if len(words) != 2:
        raise SystemExit(f"the child in {tree} said nothing (exit {out.returncode}): {out.stderr[-400:]}")
    return float(words[0]), words[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=15.0)
    ap.add_argument("--compare", metavar="REF", help="a git revision, run interleaved with this tree")
    ap.add_argument("--one", metavar="CONFIG", help="one run against CONFIG; prints CPU seconds")
    args = ap.parse_args()
    if args.one:
        one(args.one, args.settle, args.seconds)
        return
    with trees(args.compare) as where, demo_stations("dashboard_cpu_") as cfg:
        print(f"{_load()}; the TUI's CPU seconds over {args.seconds:.0f} s after {args.settle:.0f} s to settle "
              "(2 simulated stations serving), each run its own process")
        res: dict[str, list[tuple[float, str]]] = {k: [] for k in where}
        for _i, name in interleaved(list(where), args.runs):
            res[name].append(_run(where[name], cfg, args.settle, args.seconds))
        for name, vals in res.items():
            cpu = statistics.median(v[0] for v in vals)
            print(f"  {name:>16}: median {cpu:.2f} CPU-s ({100 * cpu / args.seconds:.1f} % of a core); "
                  f"runs {', '.join(f'{v[0]:.2f}' for v in vals)}; pane redraws skipped/asked: "
                  f"{', '.join(v[1] for v in vals)}")
        if len(where) == 2:
            (ref, this) = res.values()
            print(f"  this/ref pair by pair, median: "
                  f"{statistics.median(t[0] / r[0] for r, t in zip(ref, this, strict=True)):.2f}; {_load()}")


if __name__ == "__main__":
    main()
